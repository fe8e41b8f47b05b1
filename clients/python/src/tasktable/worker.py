"""A worker that runs handlers for tasks it claims through the pull protocol.

Threads, each with one job: the claimer long-polls for as many tasks as there are free
slots, and more while handlers are short (below); a pool of `concurrency` threads runs
handlers; the acknowledger sends the ends of attempts in batches (one request for many
tasks); the lease keeper renews every held lease in one request per third of the lease,
and beats the worker registry. A lease the server refuses sets the task's `stopped` event,
which a long handler should watch.

Claiming ahead, as the Rust worker does: while the handlers' recent mean run time is
short, the claimer holds more tasks than there are slots, so that one claim and one
acknowledgement carry hundreds of tasks. As many wait as the slots start within 10 ms at
that mean (none before a handler has run, at most 80 per slot and 800 in all); their
leases are renewed like running ones. A task that waited longer than a second for a slot
anyway, or that the worker has not started when it stops, is given back unrun, without
spending its attempt, and the worker claims nothing ahead until short runs are seen again.
"""

from __future__ import annotations

import collections
import json
import logging
import math
import os
import queue as queues
import signal
import socket
import threading
import time
import traceback
import uuid
from datetime import datetime
from typing import Any, Callable, Deque, Dict, List, Mapping, Optional, Sequence, Tuple

from . import _trace
from .client import Claimed, Client
from .errors import ApiError, Fail, LeaseGone, Snooze, TasktableError

log = logging.getLogger("tasktable.worker")

#: A handler takes the task and returns its result (any JSON value), or raises Fail or
#: Snooze, or any other exception (a retryable failure).
Handler = Callable[["Task"], Any]

#: A claim: the task, its run, and the claim's fencing token (a task claimed again is
#: another claim, whose handler must not stand in for the first one's).
_Key = Tuple[int, Optional[int], int]

#: The longest delay the server takes (10 years), in milliseconds.
_MAX_DELAY_MS = 315_360_000_000
#: Acknowledgements are sent in requests of at most this many bytes of JSON.
_MAX_ACK_BYTES = 4 << 20
#: How long the last task claimed ahead should wait for a slot, at the handlers' mean.
_AHEAD_WAIT = 0.010
#: Most tasks claimed ahead per slot, and in all.
_AHEAD_PER_SLOT, _AHEAD_MAX = 80, 800
#: A task that waited longer than this for a slot is given back unrun (a quarter of its
#: attempt's timeout when that is shorter), and how often waiting tasks are looked at.
_AHEAD_PATIENCE = 1.0
_PATIENCE_CHECK = 0.25


#: Most characters of a handler's traceback stored with its error (its innermost frames).
_MAX_TRACEBACK = 4096


def error_text(error: BaseException) -> str:
    """What is stored of an exception a handler raised: its type and message on the first
    line (what listings show and `--error` searches), then its traceback, cut to the frames
    nearest the raise."""
    head = f"{type(error).__name__}: {error}".strip()
    frames = "".join(traceback.format_tb(error.__traceback__)).rstrip()
    if len(frames) > _MAX_TRACEBACK:
        frames = "  ...\n" + frames[-_MAX_TRACEBACK:]
    return f"{head}\nTraceback (most recent call last):\n{frames}" if frames else head


def _patience(c: Claimed, lease_ms: int) -> float:
    """How long the claimed task may wait for a slot: a second, or a quarter of its
    attempt's timeout when that is shorter (as the Rust worker allows)."""
    if not (c.deadline_at and c.lease_expires_at):
        return _AHEAD_PATIENCE
    try:
        deadline = datetime.fromisoformat(c.deadline_at.replace("Z", "+00:00"))
        lease_end = datetime.fromisoformat(c.lease_expires_at.replace("Z", "+00:00"))
    except ValueError:
        return _AHEAD_PATIENCE
    timeout = (deadline - lease_end).total_seconds() + lease_ms / 1000
    return max(0.0, min(_AHEAD_PATIENCE, timeout / 4))


def ahead_count(concurrency: int, mean_run: Optional[float]) -> int:
    """How many tasks may wait for a slot: as many as `concurrency` slots start within
    10 ms at the handlers' mean run time (seconds), at most 80 a slot and 800; none before
    a handler has run."""
    if mean_run is None:
        return 0
    fit = int(_AHEAD_WAIT * concurrency / max(mean_run, 1e-6))
    return min(fit, _AHEAD_PER_SLOT * concurrency, _AHEAD_MAX)


def _millis(seconds: float) -> int:
    """A delay in seconds as the server takes it: whole milliseconds, 0 to 10 years."""
    if math.isnan(seconds):
        return 0
    return int(min(max(seconds * 1000, 0), _MAX_DELAY_MS))


def _key(c: Claimed) -> _Key:
    return (c.id, c.run, c.token)


#: Heartbeat refusals that no retry mends: the worker stops with them.
_FATAL_BEAT_CODES = ("protocol_unsupported", "worker_not_owned", "too_many_workers", "forbidden")

class Task:
    """What a handler is given: the task, its lease's fencing token, and a way to save
    where it got to."""

    def __init__(self, claimed: Claimed, client: Client, patience: float = _AHEAD_PATIENCE) -> None:
        self._claimed = claimed
        self._claimed_at = time.monotonic()
        self._patience = patience
        self._client = client
        #: Set when the lease is gone (expired and rescued, cancelled, retargeted), or when
        #: a shutdown's grace ran out and the task was given back: stop, the result will
        #: not be recorded.
        self.stopped = threading.Event()

    id = property(lambda self: self._claimed.id)
    kind = property(lambda self: self._claimed.kind)
    queue = property(lambda self: self._claimed.queue)
    payload = property(lambda self: self._claimed.payload)
    attempt = property(lambda self: self._claimed.attempt)
    max_attempts = property(lambda self: self._claimed.max_attempts)
    run = property(lambda self: self._claimed.run)

    @property
    def checkpoint(self) -> Any:
        """What an earlier attempt saved with `save`, to resume from (None at first)."""
        return self._claimed.checkpoint

    @property
    def fencing_token(self) -> int:
        """Grows on every claim of the task: pass it to systems you write to, so they can
        refuse a write from an older attempt (docs/api.md, "Fencing your own side effects")."""
        return self._claimed.token

    def save(self, checkpoint: Any = None, progress: Any = None) -> None:
        """Saves a checkpoint (given to the next attempt) and/or progress, under the lease.
        Raises LeaseGone if the lease is no longer this worker's."""
        call: Dict[str, Any] = {**self._claimed.lease(), "op": "checkpoint"}
        if checkpoint is not None:
            call["checkpoint"] = checkpoint
        if progress is not None:
            call["progress"] = progress
        self._write(call)

    def log(self, *lines: str) -> None:
        """Appends lines to the task's log, shown in its history (the API's timeline, the
        dashboard, `tasktable show`), under the lease: each kept up to 1 KiB, 1,000 a
        task. Raises LeaseGone if the lease is no longer this worker's."""
        for start in range(0, len(lines), 100):
            call: Dict[str, Any] = {
                **self._claimed.lease(),
                "op": "log",
                "lines": [str(line) for line in lines[start : start + 100]],
            }
            self._write(call)

    def _write(self, call: Dict[str, Any]) -> None:
        (result,) = self._client.acknowledge([call])
        if not result.ok:
            if result.code in ("lease_lost", "task_cancelled", "task_retargeted"):
                self.stopped.set()
                raise LeaseGone(self.id, result.code or "", result.message or "")
            raise ApiError(422, result.code or "unknown", result.message or "")


class Worker:
    """Runs `handlers` (task kind -> function) for tasks of `queue`.

    `run()` blocks until `stop()` is called or the process gets SIGTERM or SIGINT (when
    `run` is called on the main thread); then it claims nothing more, gives running
    handlers `shutdown_grace` seconds to finish (their results are recorded), then sets
    the stop signal of those still running and gives their tasks back without spending an
    attempt. A shutdown takes at most about `shutdown_grace` plus `claim_wait_ms` (a claim
    in flight is waited for, and what it brings is given back)."""

    def __init__(
        self,
        client: Client,
        handlers: Mapping[str, Handler],
        *,
        queue: str = "default",
        concurrency: int = 10,
        lease_ms: int = 30_000,
        worker_id: Optional[str] = None,
        groups: Sequence[str] = (),
        claim_wait_ms: int = 10_000,
        claim_batch: int = 400,
        ack_batch: int = 800,
        ack_delay: float = 0.005,
        shutdown_grace: float = 15.0,
        beat_every: float = 5.0,
    ) -> None:
        if not handlers:
            raise ValueError("handlers must name at least one task kind")
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.client = client
        self.handlers = dict(handlers)
        self.queue = queue
        self.concurrency = concurrency
        self.lease_ms = lease_ms
        self.worker_id = worker_id or f"py-{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.groups = list(groups)
        self.claim_wait_ms = claim_wait_ms
        self.claim_batch = claim_batch
        self.ack_batch = ack_batch
        self.ack_delay = ack_delay
        self.shutdown_grace = shutdown_grace
        self.beat_every = beat_every
        #: Tasks claimed and not yet ended (running, or waiting for a handler thread),
        #: and the handlers' moving mean run time in seconds (each run weighs an eighth).
        self._outstanding = 0
        self._mean_run: Optional[float] = None
        self._idle = threading.Condition()
        self._held: Dict[_Key, Task] = {}
        self._lock = threading.Lock()
        self._acks: "queues.Queue[Optional[Tuple[Dict[str, Any], int]]]" = queues.Queue()
        #: Tasks claimed and not started, oldest first; handler threads take from it.
        self._waiting: Deque[Task] = collections.deque()
        self._closed = False
        self._stopping = threading.Event()
        self._draining = threading.Event()
        self._threads: List[threading.Thread] = []
        #: Why the worker stopped on its own, raised by run() once it has shut down.
        self._fatal: Optional[TasktableError] = None
        #: Whether the beat run() sends first still has to announce the start.
        self._first_beat_pending = True

    # Lifecycle.

    def run(self) -> None:
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: self.stop())
        log.info("worker %s takes %s from queue %s, %d at once", self.worker_id,
                 ", ".join(self.handlers), self.queue, self.concurrency)
        # One beat before any claim: a server that does not speak this package's protocol
        # refuses it, and the worker stops having claimed nothing.
        self._first_beat_pending = self._beat(True)
        if self._fatal is not None:
            raise self._fatal
        # Handlers run on daemon threads: one that ignores its stop signal cannot keep the
        # process alive after its task was given back.
        for n in range(self.concurrency):
            self._spawn(f"tasktable-handler-{n}", self._handler_loop)
        acker = self._spawn("tasktable-acks", self._acknowledge_loop)
        self._spawn("tasktable-patience", self._patience_loop)
        keeper = self._spawn("tasktable-leases", self._keep_leases)
        claimer = self._spawn("tasktable-claims", self._claim_loop)
        self._stopping.wait()
        self._shut_down(claimer, keeper, acker)
        if self._fatal is not None:
            raise self._fatal

    def stop(self) -> None:
        """Asks `run` to shut down gracefully; returns at once."""
        self._stopping.set()

    def _spawn(self, name: str, target: Callable[[], None]) -> threading.Thread:
        thread = threading.Thread(target=target, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)
        return thread

    def _shut_down(self, claimer: threading.Thread, keeper: threading.Thread, acker: threading.Thread) -> None:
        log.info("worker %s shutting down", self.worker_id)
        deadline = time.monotonic() + self.shutdown_grace
        with self._idle:
            # Not started: they stay held, and are given back below once the claim in
            # flight has returned, so that it cannot take them again.
            self._outstanding -= len(self._waiting)
            self._waiting.clear()
            while self._outstanding and time.monotonic() < deadline:
                self._idle.wait(timeout=deadline - time.monotonic())
        # A claim in flight gives back what it gets (see _claim_loop). Waiting for it
        # before giving back the tasks still running keeps it from taking them again.
        # As long as the claim's own HTTP timeout (Client.claim), so that what it brings
        # is given back through the acknowledger, which is still running.
        claimer.join(timeout=self.claim_wait_ms / 1000 + 35)
        with self._lock:
            left = list(self._held.values())
            self._held.clear()
        for task in left:
            task.stopped.set()
            self._ack({**task._claimed.lease(), "op": "release"})
        if left:
            log.info("released %d tasks still running or not yet started", len(left))
        self._acks.put(None)
        acker.join(timeout=30)
        keeper.join(timeout=self.beat_every + 5)
        with self._idle:
            self._closed = True
            self._idle.notify_all()
        try:
            self.client.leave(self.worker_id)
        except TasktableError as error:
            log.debug("leave: %s", error)

    # Claiming and running.

    def _claim_loop(self) -> None:
        pause = 0.1
        while not self._stopping.is_set():
            if self._draining.is_set():
                self._stopping.wait(1.0)
                continue
            with self._idle:
                want = self._want()
                if not want:
                    self._idle.wait(timeout=0.5)
                    continue
                self._outstanding += want
            try:
                claimed = self.client.claim(
                    list(self.handlers), self.worker_id, queue=self.queue, limit=want,
                    lease_ms=self.lease_ms, wait_ms=self.claim_wait_ms, groups=self.groups,
                    worker_host=socket.gethostname(),
                )
                pause = 0.1
            except ApiError as error:
                self._ended(want)
                if error.status == 422 and "limit" in error.message and self.claim_batch > 1:
                    # A server that allows smaller claims than ours: ask it for fewer.
                    self.claim_batch = max(1, self.claim_batch // 2)
                    log.warning("the server refused a claim of %d; claiming at most %d", want, self.claim_batch)
                    continue
                log.warning("claim failed, trying again in %.1f s: %s", pause, error)
                self._stopping.wait(pause)
                pause = min(pause * 2, 5.0)
                continue
            except Exception as error:  # noqa: BLE001 - the loop must outlive any failure
                self._ended(want)
                log.warning("claim failed, trying again in %.1f s: %s", pause, error)
                self._stopping.wait(pause)
                pause = min(pause * 2, 5.0)
                continue
            self._ended(want - len(claimed))
            tasks = []
            for c in claimed:
                task = Task(c, self.client, _patience(c, self.lease_ms))
                if self._stopping.is_set():
                    # Claimed while shutting down: give it straight back.
                    self._ack({**c.lease(), "op": "release"})
                    self._ended(1)
                    continue
                with self._lock:
                    self._held[_key(c)] = task
                tasks.append(task)
            with self._idle:
                self._waiting.extend(tasks)
                self._idle.notify_all()

    def _want(self) -> int:
        """How many tasks to claim now (called holding `_idle`): up to the slots plus the
        tasks that may wait, at most `claim_batch`; while slots are busy, only once half a
        claim's worth is missing, so that short handlers do not bring claims of one."""
        target = self.concurrency + ahead_count(self.concurrency, self._mean_run)
        room = min(target - self._outstanding, self.claim_batch)
        if room <= 0:
            return 0
        if self._outstanding >= self.concurrency and room < min(self.claim_batch, target) // 2:
            return 0
        return room

    def _ended(self, n: int) -> None:
        """`n` tasks claimed (or asked for) are no longer outstanding."""
        if n:
            with self._idle:
                self._outstanding -= n
                self._idle.notify_all()

    def _handler_loop(self) -> None:
        while True:
            with self._idle:
                while not self._waiting and not self._closed:
                    self._idle.wait()
                if not self._waiting:
                    return
                task = self._waiting.popleft()
            self._run_one(task)

    def _patience_loop(self) -> None:
        """Gives back the tasks that waited longer than their patience for a slot, while
        every slot is busy (a slot that frees takes the oldest first)."""
        while not self._stopping.wait(_PATIENCE_CHECK):
            now = time.monotonic()
            with self._idle:
                stale = [t for t in self._waiting if now - t._claimed_at > t._patience]
                if not stale:
                    continue
                for t in stale:
                    self._waiting.remove(t)
                # After such a wait, nothing is claimed ahead until short runs are seen.
                waited = max(now - t._claimed_at for t in stale)
                self._mean_run = max(self._mean_run or 0.0, waited)
            for t in stale:
                with self._lock:
                    still_held = self._held.pop(_key(t._claimed), None) is not None
                if still_held:
                    self._ack({**t._claimed.lease(), "op": "release"})
                self._ended(1)

    def _run_one(self, task: Task) -> None:
        try:
            waited = time.monotonic() - task._claimed_at
            if self._stopping.is_set():
                # Not started before the worker stopped: _shut_down gives it back once the
                # claim in flight has returned, so that the claim cannot take it again.
                return
            with self._lock:
                held = _key(task._claimed) in self._held
            if not held:
                # Its lease was lost while it waited (the lease keeper let go of it).
                return
            if waited > task._patience:
                # Claimed ahead and not started in time: given back unrun, and nothing is
                # claimed ahead until short runs are seen again.
                with self._idle:
                    self._mean_run = max(self._mean_run or 0.0, waited)
                call: Dict[str, Any] = {"op": "release"}
            else:
                started = time.monotonic()
                try:
                    call = self._outcome(task)
                except BaseException as error:  # noqa: BLE001 - SystemExit raised by a handler, say
                    log.error("task %s (%s) ended with %r", task.id, task.kind, error)
                    call = {"op": "fail", "error": f"{type(error).__name__}: {error}"}
                ran = time.monotonic() - started
                with self._idle:
                    mean = self._mean_run
                    self._mean_run = ran if mean is None else mean + (ran - mean) / 8
            with self._lock:
                still_held = self._held.pop(_key(task._claimed), None) is not None
            if still_held:
                self._ack({**task._claimed.lease(), **call})
        finally:
            self._ended(1)

    def _outcome(self, task: Task) -> Dict[str, Any]:
        with _trace.attempt(task._claimed) as span:
            call = self._handled(task)
            _trace.ended(span, call)
            return call

    def _handled(self, task: Task) -> Dict[str, Any]:
        handler = self.handlers[task.kind]
        try:
            result = handler(task)
        except Snooze as s:
            return {"op": "snooze", "delay_ms": _millis(s.delay)}
        except Fail as f:
            call: Dict[str, Any] = {"op": "fail", "error": f.message.strip() or "failed", "retryable": f.retryable}
            if f.retry_after is not None and f.retryable:
                call["retry_after_ms"] = _millis(f.retry_after)
            return call
        except LeaseGone as gone:
            log.info("%s", gone)
            return {"op": "release"}
        except Exception as error:  # noqa: BLE001 - any handler error is a retryable failure
            log.exception("task %s (%s) failed", task.id, task.kind)
            return {"op": "fail", "error": error_text(error)}
        try:
            json.dumps(result, allow_nan=False)
        except (TypeError, ValueError) as error:
            return {"op": "fail", "error": f"the handler's result is not JSON: {error}", "retryable": False}
        return {"op": "complete", "result": result}

    # Acknowledging in batches.

    def _ack(self, call: Dict[str, Any]) -> None:
        self._acks.put((call, len(json.dumps(call))))

    def _acknowledge_loop(self) -> None:
        done = False
        while not done:
            first = self._acks.get()
            if first is None:
                return
            batch, size = [first[0]], first[1]
            deadline = time.monotonic() + self.ack_delay
            while len(batch) < self.ack_batch and size < _MAX_ACK_BYTES:
                try:
                    item = self._acks.get(timeout=max(0.0, deadline - time.monotonic()))
                except queues.Empty:
                    break
                if item is None:
                    done = True
                    break
                batch.append(item[0])
                size += item[1]
            self._send(batch)

    def _send(self, batch: List[Dict[str, Any]]) -> None:
        """Sends `batch`, retrying while the server cannot be reached. A request the
        server refuses is split until the call it refuses stands alone; that call's task
        is then failed with the server's reason, so that no attempt waits for its lease
        to run out."""
        pause = 0.1
        while True:
            try:
                results = self.client.acknowledge(batch)
                break
            except ApiError as error:
                if error.status >= 500:
                    log.warning("acknowledging %d tasks failed, trying again in %.1f s: %s", len(batch), pause, error)
                elif len(batch) > 1:
                    half = len(batch) // 2
                    self._send(batch[:half])
                    self._send(batch[half:])
                    return
                else:
                    self._refused(batch[0], error)
                    return
            except Exception as error:  # noqa: BLE001 - the server is away; keep the calls
                log.warning("acknowledging %d tasks failed, trying again in %.1f s: %s", len(batch), pause, error)
            if self._stopping.is_set() and pause >= 5.0:
                log.error("giving up on %d acknowledgements while shutting down", len(batch))
                return
            time.sleep(pause)
            pause = min(pause * 2, 5.0)
        for call, result in zip(batch, results):
            if result.ok:
                continue
            if result.code in ("payload_too_large", "invalid_input"):
                self._refused(call, ApiError(422, result.code, result.message or ""))
            else:
                log.info("task %s: %s: %s", result.task, result.code, result.message)

    def _refused(self, call: Dict[str, Any], error: ApiError) -> None:
        log.error("task %s: the server refused %s: %s", call.get("task"), call.get("op"), error)
        if call.get("op") in ("complete", "snooze", "fail"):
            lease = {k: call[k] for k in ("task", "token", "credential", "run") if k in call}
            reason = f"the server refused the worker's {call['op']}: {error.code}: {error.message}"
            try:
                self.client.acknowledge([{**lease, "op": "fail", "error": reason[:4000], "retryable": False}])
            except Exception as again:  # noqa: BLE001
                log.error("task %s: failing it was refused too: %s", call.get("task"), again)

    # Leases and the registry.

    def _keep_leases(self) -> None:
        every = max(self.lease_ms / 3000, 0.2)
        # run() beat once already; a beat it could not deliver is tried again at once.
        starting = self._first_beat_pending
        next_beat = 0.0 if starting else time.monotonic() + self.beat_every
        while not (self._stopping.is_set() and not self._held_now()):
            now = time.monotonic()
            if now >= next_beat:
                starting = self._beat(starting)
                next_beat = now + self.beat_every
            self._renew()
            if self._stopping.wait(min(every, self.beat_every)):
                # Shutting down: keep renewing what is still held until it is released.
                time.sleep(min(every, 1.0))

    def _held_now(self) -> List[Task]:
        with self._lock:
            return list(self._held.values())

    def _beat(self, starting: bool) -> bool:
        try:
            draining = self.client.heartbeat(
                self.worker_id, host=socket.gethostname(), version="tasktable-python 0.1.0",
                groups=self.groups, queues=[self.queue], capacity=self.concurrency, starting=starting,
                # The kinds it has handlers for, so a task no worker handles can say so.
                kinds=sorted(self.handlers),
            )
        except ApiError as error:
            if error.code in _FATAL_BEAT_CODES:
                # A server that does not speak this worker's protocol, or a token that may
                # not run it as it is (its id another token's, its token's workers all
                # live, queues or groups its token may not take): stop, and let run()
                # raise why.
                log.error("worker %s: %s", self.worker_id, error.message)
                self._fatal = error
                self.stop()
            else:
                log.debug("heartbeat: %s", error)
            return starting
        except TasktableError as error:
            log.debug("heartbeat: %s", error)
            return starting
        if draining and not self._draining.is_set():
            log.info("worker %s is draining: claiming nothing new", self.worker_id)
        (self._draining.set if draining else self._draining.clear)()
        return False

    def _renew(self) -> None:
        held = self._held_now()
        for start in range(0, len(held), 1000):
            chunk = held[start:start + 1000]
            calls = [{**t._claimed.lease(), "op": "renew", "lease_ms": self.lease_ms} for t in chunk]
            try:
                results = self.client.acknowledge(calls)
            except Exception as error:  # noqa: BLE001 - the keeper must outlive any failure
                log.warning("renewing %d leases failed: %s", len(calls), error)
                return
            for task, result in zip(chunk, results):
                if not result.ok:
                    log.warning("task %s: lease gone (%s); stopping its handler", task.id, result.code)
                    with self._lock:
                        self._held.pop(_key(task._claimed), None)
                    task.stopped.set()
