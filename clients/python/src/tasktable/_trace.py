"""OpenTelemetry, when the application has it installed: a submit sends the current
span's `traceparent`, and each attempt runs in a span that continues the trace its task
was submitted in (the `traceparent` the claim carries). Without the `opentelemetry`
package nothing here does anything: the import is tried once, and each call is a check
of one module variable.

The spans are made through the global tracer provider, which the application sets up
(an SDK, an exporter); with the API alone they are the API's no-op spans.
"""

from __future__ import annotations

import contextlib
from typing import Any, Dict, Iterator, Optional

try:  # pragma: no cover - which branch runs depends on the environment
    from opentelemetry import trace as _trace
    from opentelemetry.trace import SpanKind, Status, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    _PROPAGATOR: Any = TraceContextTextMapPropagator()
except ImportError:  # pragma: no cover
    _trace = None  # type: ignore[assignment]

#: The outcome each lease call reports, as the attempt history names it.
_OUTCOMES = {"complete": "succeeded", "snooze": "snoozed", "release": "interrupted"}


def enabled() -> bool:
    """Whether the `opentelemetry` package is installed."""
    return _trace is not None


def current_traceparent() -> Optional[str]:
    """The current span's `traceparent`, or None (no OpenTelemetry, no valid span)."""
    if _trace is None:
        return None
    carrier: Dict[str, str] = {}
    _PROPAGATOR.inject(carrier)
    return carrier.get("traceparent")


@contextlib.contextmanager
def attempt(claimed: Any) -> Iterator[Any]:
    """The span of one attempt of `claimed`, current while the handler runs: a child of
    the submitter's span when the claim carries a `traceparent`. Yields None without
    OpenTelemetry."""
    if _trace is None:
        yield None
        return
    parent = None
    if claimed.traceparent:
        parent = _PROPAGATOR.extract({"traceparent": claimed.traceparent})
    attributes = {
        "messaging.system": "tasktable",
        "messaging.operation.type": "process",
        "messaging.destination.name": claimed.queue,
        "tasktable.task.id": claimed.id,
        "tasktable.task.kind": claimed.kind,
        "tasktable.task.queue": claimed.queue,
        "tasktable.task.attempt": claimed.attempt,
    }
    if claimed.run is not None:
        attributes["tasktable.task.run"] = claimed.run
    tracer = _trace.get_tracer("tasktable")
    with tracer.start_as_current_span(
        f"run {claimed.kind}", context=parent, kind=SpanKind.CONSUMER, attributes=attributes,
        record_exception=False, set_status_on_exception=False,
    ) as span:
        yield span


def ended(span: Any, call: Dict[str, Any]) -> None:
    """Records on `span` how the attempt ended, from the lease call that reports it:
    its outcome, and the error status with the error's first line for a failure."""
    if span is None:
        return
    op = call.get("op")
    if op == "fail":
        outcome = "error" if call.get("retryable", True) else "failed"
        span.set_status(Status(StatusCode.ERROR, str(call.get("error", "")).split("\n", 1)[0]))
    else:
        outcome = _OUTCOMES.get(str(op), str(op))
    span.set_attribute("tasktable.attempt.outcome", outcome)
