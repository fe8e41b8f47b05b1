"""The Python package's worker with OpenTelemetry installed, as an application sets it up:
an SDK tracer provider exporting over OTLP/HTTP (protobuf) to OTEL_EXPORTER_OTLP_ENDPOINT.
Inside a span of its own ("enqueue") it submits one task of kind "traced", then runs a
worker until that task has succeeded (its handler fails the first attempt, so the trace
holds two attempts), and prints the trace's id and the enqueue span's id as JSON."""

import json
import os
import threading

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor

from tasktable import Client, Worker

provider = TracerProvider(resource=Resource.create({"service.name": "python-app"}))
provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter()))
trace.set_tracer_provider(provider)

client = Client.from_env()
with trace.get_tracer("app").start_as_current_span("enqueue") as enqueue:
    task_id = client.submit("traced", {"n": 1}, backoff={"initial_ms": 0, "multiplier": 1.0, "max_ms": 0, "jitter": 0.0})
    context = enqueue.get_span_context()

done = threading.Event()


def traced(task):
    if task.attempt == 1:
        raise RuntimeError("first attempt fails")
    done.set()
    return {"attempt": task.attempt}


worker = Worker(client, {"traced": traced}, concurrency=1, claim_wait_ms=500, shutdown_grace=5)
thread = threading.Thread(target=worker.run)
thread.start()
if not done.wait(timeout=60):
    raise SystemExit("the task did not succeed within 60 s")
worker.stop()
thread.join()
provider.shutdown()
print(json.dumps({
    "task": task_id,
    "trace_id": format(context.trace_id, "032x"),
    "enqueue_span": format(context.span_id, "016x"),
}))
