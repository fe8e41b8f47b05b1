"""The Python package's worker with a no-op handler, for clients/bench/remote.py."""

import logging
import os

from tasktable import Client, Worker

logging.basicConfig(level=logging.WARNING)
client = Client.from_env()
Worker(client, {"noop": lambda task: None}, concurrency=int(os.environ["CONCURRENCY"]), shutdown_grace=1).run()
