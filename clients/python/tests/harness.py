"""A real `tasktable serve` for the tests: its own SQLite database in a temporary directory
(or a fresh database on the server TASKTABLE_TEST_DATABASE_URL names), bearer tokens for
each role, and restarts on the same port and database."""

from __future__ import annotations

import os
import pathlib
import signal
import subprocess
import tempfile
import threading
import time
from typing import Optional

from tasktable import Client

ROOT = pathlib.Path(__file__).resolve().parents[3]
TOKENS = {"worker": "py-worker-token-0123456789", "operator": "py-operator-token-0123456789", "reader": "py-reader-token-0123456789",
          "admin": "py-admin-token-0123456789"}


def binary() -> str:
    path = os.environ.get("TASKTABLE_BIN") or str(ROOT / "target" / "debug" / "tasktable")
    if not os.path.exists(path):
        raise RuntimeError(f"no tasktable binary at {path}: build it (cargo build -p tasktable-cli) or set TASKTABLE_BIN")
    return path


class Server:
    def __init__(self) -> None:
        self._dir = tempfile.TemporaryDirectory(prefix="tasktable-py-")
        self.database = f"sqlite://{self._dir.name}/tasktable.db"
        self.process: Optional[subprocess.Popen] = None
        self.address = "127.0.0.1:0"
        self.start()
        self.operator = self.client("operator")

    def start(self) -> None:
        env = dict(os.environ, TASKTABLE_TOKENS=",".join(f"{r}:{t}" for r, t in TOKENS.items()), RUST_LOG="warn")
        self.process = subprocess.Popen(
            [binary(), "serve", "--database-url", self.database, "--listen", self.address, "--workers", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
        )
        assert self.process.stdout is not None
        line = self.process.stdout.readline().strip()
        if not line:
            raise RuntimeError("tasktable serve did not start")
        # The first line names the address listened on (a free port the first time).
        self.address = line.split()[-1].removeprefix("http://")
        self.url = "http://" + self.address
        # Keep reading what else it prints, so that it never blocks on a full pipe.
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def kill(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()
        if self.process and self.process.stdout:
            self.process.stdout.close()

    def restart(self) -> None:
        self.kill()
        self.start()

    def client(self, role: str) -> Client:
        return Client(self.url, TOKENS[role], timeout=70)

    def close(self) -> None:
        self.kill()
        self._dir.cleanup()


def eventually(what: str, check, timeout: float = 60.0):
    """Polls `check` until it answers something true; fails after `timeout` seconds. The
    server is another process and the worker acknowledges on its own thread, so the
    task's state in the server is the only signal there is: it is read, not slept on."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.05)
