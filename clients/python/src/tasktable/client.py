"""The tasktable REST API and pull protocol, one call per method."""

from __future__ import annotations

import os

from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence

from . import _trace
from ._http import Transport


@dataclass(frozen=True)
class Claimed:
    """A task claimed under a lease: what the handler reads, and what every lease call
    sends back (`token`, `credential`, `run`)."""

    id: int
    kind: str
    queue: str
    payload: Any
    checkpoint: Any
    attempt: int
    max_attempts: int
    #: The fencing token: grows by one on every claim of the task.
    token: int
    credential: str
    #: The run of a multi-run task; None for a task that runs once.
    run: Optional[int]
    lease_expires_at: Optional[str]
    deadline_at: Optional[str]
    #: The W3C traceparent of whoever submitted the task (None when the submit had none):
    #: the worker runs the attempt in a span of that trace when OpenTelemetry is installed.
    traceparent: Optional[str] = None

    @classmethod
    def from_json(cls, t: Dict[str, Any]) -> "Claimed":
        return cls(
            id=t["id"], kind=t["kind"], queue=t["queue"], payload=t.get("payload"),
            checkpoint=t.get("checkpoint"), attempt=t["attempt"], max_attempts=t["max_attempts"],
            token=t["token"], credential=t["credential"], run=t.get("run"),
            lease_expires_at=t.get("lease_expires_at"), deadline_at=t.get("deadline_at"),
            traceparent=t.get("traceparent"),
        )

    def lease(self) -> Dict[str, Any]:
        """The fields that name this lease in a lease call."""
        lease: Dict[str, Any] = {"task": self.id, "token": self.token, "credential": self.credential}
        if self.run is not None:
            lease["run"] = self.run
        return lease


@dataclass(frozen=True)
class AckResult:
    """One lease call's answer in a batched acknowledgement."""

    task: int
    run: Optional[int]
    ok: bool
    #: The error code when not ok (`lease_lost`, `task_cancelled`, ...).
    code: Optional[str] = None
    message: Optional[str] = None
    lease_expires_at: Optional[str] = None


#: Where `Client.from_env` looks without TASKTABLE_SERVER, as the CLI does.
DEFAULT_SERVER = "http://127.0.0.1:8080"

#: The version of the pull protocol this package speaks, sent with every heartbeat; the
#: server answers with the versions it speaks (docs/api.md, "Registering a pull worker").
PROTOCOL_VERSION = 1


class Client:
    """A tasktable server at `base_url` (`http://host:port`), called with `token`.

    Thread-safe: each thread keeps its own kept-alive connection."""

    def __init__(self, base_url: str, token: Optional[str] = None, timeout: float = 30.0) -> None:
        self._http = Transport(base_url, token, timeout)

    @classmethod
    def from_env(cls, timeout: float = 30.0) -> "Client":
        """The server and token the `tasktable` CLI uses: TASKTABLE_SERVER (by default
        http://127.0.0.1:8080) and TASKTABLE_TOKEN (none when unset, for a server without
        tokens)."""
        server = os.environ.get("TASKTABLE_SERVER") or DEFAULT_SERVER
        return cls(server, os.environ.get("TASKTABLE_TOKEN") or None, timeout)

    # Submitting and reading tasks (roles operator and reader).

    def submit(self, kind: str, payload: Any = None, **options: Any) -> int:
        """Submits one task; answers its id. `options` are the fields of POST /api/v1/tasks
        (queue, priority, run_at, delay_ms, max_attempts, idempotency_key, ...). With
        OpenTelemetry installed, the task continues the current span's trace."""
        body = {"kind": kind, "payload": payload, **options}
        return self._http.request("POST", "/api/v1/tasks", body, headers=_trace_headers())["id"]

    def submit_many(self, tasks: Sequence[Dict[str, Any]]) -> List[int]:
        """Submits up to 10,000 tasks in one transaction; answers their ids in order.
        With OpenTelemetry installed, the tasks continue the current span's trace."""
        answer = self._http.request(
            "POST", "/api/v1/tasks/batch", {"tasks": list(tasks)}, headers=_trace_headers()
        )
        return [t["id"] for t in answer["tasks"]]

    def get(self, task_id: int) -> Dict[str, Any]:
        """The task as GET /api/v1/tasks/{id} shows it, with its `attempts`, `runs`,
        `timeline` (its history: submit, claims, attempts' ends, operators' changes, log
        lines) and, while it is pending, `waiting` (why: each a `reason` code and its
        `text`) beside its own fields."""
        shown = self._http.request("GET", f"/api/v1/tasks/{task_id}")
        return {
            **shown["task"],
            "attempts": shown["attempts"],
            "runs": shown.get("runs", []),
            "timeline": shown.get("timeline", []),
            "waiting": shown.get("waiting", []),
        }

    def cancel(self, task_id: int) -> Dict[str, Any]:
        return self._http.request("POST", f"/api/v1/tasks/{task_id}/cancel", {})

    # The pull protocol (role worker).

    def claim(
        self,
        kinds: Sequence[str],
        worker_id: str,
        *,
        queue: str = "default",
        limit: int = 1,
        lease_ms: int = 30_000,
        wait_ms: int = 0,
        groups: Sequence[str] = (),
        worker_host: Optional[str] = None,
    ) -> List[Claimed]:
        """Claims up to `limit` due tasks, waiting up to `wait_ms` for one."""
        body: Dict[str, Any] = {
            "queue": queue, "kinds": list(kinds), "worker_id": worker_id, "limit": limit,
            "lease_ms": lease_ms, "wait_ms": wait_ms, "groups": list(groups),
        }
        if worker_host:
            body["worker_host"] = worker_host
        answer = self._http.request("POST", "/api/v1/claim", body, timeout=wait_ms / 1000 + 30)
        return [Claimed.from_json(t) for t in answer["tasks"]]

    def acknowledge(self, calls: Sequence[Dict[str, Any]]) -> List[AckResult]:
        """Carries out many lease calls in one request (POST /api/v1/leases): each call is
        `{task, token, credential, run?, op, ...}` with `op` one of renew, checkpoint,
        complete, fail, snooze, release. Each is fenced and answered on its own."""
        answer = self._http.request("POST", "/api/v1/leases", {"leases": list(calls)})
        return [
            AckResult(
                task=r["task"], run=r.get("run"), ok=r["ok"],
                code=(r.get("error") or {}).get("code"), message=(r.get("error") or {}).get("message"),
                lease_expires_at=r.get("lease_expires_at"),
            )
            for r in answer["results"]
        ]

    def heartbeat(self, worker_id: str, **facts: Any) -> bool:
        """Registers or beats; answers whether an operator asked this worker to drain.

        Says which pull protocol this package speaks (PROTOCOL_VERSION): a server that
        does not speak it refuses the beat with ApiError code "protocol_unsupported"."""
        body = {"worker_id": worker_id, "protocol_version": PROTOCOL_VERSION, **facts}
        return self._http.request("POST", "/api/v1/heartbeat", body)["draining"]

    def leave(self, worker_id: str) -> None:
        self._http.request("POST", "/api/v1/leave", {"worker_id": worker_id})


def _trace_headers() -> Optional[Dict[str, str]]:
    """The current span's `traceparent` header, when OpenTelemetry is installed and a span
    is current."""
    traceparent = _trace.current_traceparent()
    return {"traceparent": traceparent} if traceparent else None
