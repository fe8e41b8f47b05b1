"""The errors the client raises."""

from __future__ import annotations


class TasktableError(Exception):
    """Anything the client could not do."""


class ConnectionFailed(TasktableError):
    """The server could not be reached (or the connection broke mid-call)."""


class ApiError(TasktableError):
    """The server answered with an error: its HTTP status, and the stable `code` and the
    `message` of docs/api.md."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{status} {code}: {message}")
        self.status = status
        self.code = code
        self.message = message

    @property
    def lease_gone(self) -> bool:
        """The lease is no longer the caller's: stop working on the task."""
        return self.code in ("lease_lost", "task_cancelled", "task_retargeted")


class Fail(Exception):
    """Raise from a handler to fail the attempt with `message`. With `retryable` (the
    default) the task runs again after its backoff, or after `retry_after` seconds; without
    it, the task fails at once."""

    def __init__(self, message: str, retryable: bool = True, retry_after: "float | None" = None) -> None:
        super().__init__(message)
        self.message = message
        self.retryable = retryable
        self.retry_after = retry_after


class Snooze(Exception):
    """Raise from a handler to run the task again after `delay` seconds, without spending
    an attempt."""

    def __init__(self, delay: float) -> None:
        super().__init__(f"snooze for {delay} s")
        self.delay = delay


class LeaseGone(TasktableError):
    """The task's lease is no longer this worker's (`code`: lease_lost, task_cancelled or
    task_retargeted): whatever the handler does now will not be recorded."""

    def __init__(self, task_id: int, code: str, message: str) -> None:
        super().__init__(f"task {task_id}: {code}: {message}")
        self.task_id = task_id
        self.code = code
