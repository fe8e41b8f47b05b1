"""tasktable for Python: submit tasks, and run them in a worker through the pull protocol.

    from tasktable import Client, Worker

    client = Client("http://127.0.0.1:8080", token="...")
    Worker(client, {"resize": lambda task: {"ok": task.payload["path"]}}).run()
"""

from .client import PROTOCOL_VERSION, AckResult, Claimed, Client
from .errors import ApiError, ConnectionFailed, Fail, LeaseGone, Snooze, TasktableError
from .worker import Handler, Task, Worker

__all__ = [
    "AckResult", "ApiError", "Claimed", "Client", "ConnectionFailed", "Fail", "Handler",
    "LeaseGone", "PROTOCOL_VERSION", "Snooze", "Task", "TasktableError", "Worker",
]
__version__ = "0.1.0"
