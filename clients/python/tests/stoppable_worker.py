"""A worker whose handler runs until it is told to stop, saying so on stdout as JSON lines:
{"started": id} when a task starts, {"stopped": id} when its stop event is set."""

import json
import logging
import os

from tasktable import Client, Worker


def wait_for_stop(task):
    print(json.dumps({"started": task.id}), flush=True)
    if task.stopped.wait(timeout=120):
        print(json.dumps({"stopped": task.id}), flush=True)
    return None


logging.basicConfig(level=logging.WARNING)
client = Client.from_env()
Worker(
    client, {"wait_for_stop": wait_for_stop}, concurrency=2, lease_ms=int(os.environ["LEASE_MS"]),
    claim_wait_ms=1000, shutdown_grace=float(os.environ["GRACE"]),
).run()
