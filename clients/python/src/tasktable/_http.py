"""JSON over HTTP with one kept-alive connection per thread, using only the standard library."""

from __future__ import annotations

import http.client
import json
import threading
import urllib.parse
from typing import Any, Dict, Optional

from .errors import ApiError, ConnectionFailed


class Transport:
    """Sends JSON requests to one tasktable server. Safe to share between threads: each
    thread keeps its own connection, opened again after a failure."""

    def __init__(self, base_url: str, token: Optional[str], timeout: float) -> None:
        parsed = urllib.parse.urlsplit(base_url)
        if parsed.scheme not in ("http", "https") or not parsed.hostname:
            raise ValueError(f"base_url must be http(s)://host[:port], not {base_url!r}")
        self._https = parsed.scheme == "https"
        self._host = parsed.hostname
        self._port = parsed.port
        self._prefix = parsed.path.rstrip("/")
        self._headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if token:
            self._headers["Authorization"] = "Bearer " + token
        self._timeout = timeout
        self._local = threading.local()

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            conn = cls(self._host, self._port, timeout=timeout)
            self._local.conn = conn
        conn.timeout = timeout
        if conn.sock is not None:
            conn.sock.settimeout(timeout)
        return conn

    def _drop(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
        self._local.conn = None

    def request(
        self, method: str, path: str, body: Any = None, timeout: Optional[float] = None,
        headers: Optional[Dict[str, str]] = None,
    ) -> Any:
        """The decoded JSON answer; raises ApiError for an error answer and
        ConnectionFailed when the server cannot be reached."""
        # allow_nan=False: NaN and infinities are not JSON, and the server refuses them.
        data = None if body is None else json.dumps(body, allow_nan=False).encode()
        wait = self._timeout if timeout is None else timeout
        # A kept-alive connection the server closed fails on first use: try once more.
        for attempt in (1, 2):
            conn = self._connection(wait)
            try:
                sent = self._headers if not headers else {**self._headers, **headers}
                conn.request(method, self._prefix + path, body=data, headers=sent)
                response = conn.getresponse()
                raw = response.read()
                status = response.status
                break
            except (OSError, http.client.HTTPException) as error:
                self._drop()
                if attempt == 2 or not _stale_connection(error):
                    raise ConnectionFailed(f"{method} {path}: {error}") from error
        try:
            answer = json.loads(raw) if raw else None
        except ValueError:
            # Not tasktable's answer: a proxy's error page, say.
            raise ApiError(status if status >= 400 else 502, "bad_response",
                           raw[:200].decode(errors="replace")) from None
        if status >= 400:
            detail = (answer or {}).get("error", {}) if isinstance(answer, dict) else {}
            raise ApiError(status, detail.get("code", "unknown"), detail.get("message", raw.decode(errors="replace")))
        return answer


def _stale_connection(error: BaseException) -> bool:
    return isinstance(
        error,
        (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, http.client.CannotSendRequest),
    )
