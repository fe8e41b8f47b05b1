//! Traces across processes: the spans of tasktable's own work (a submit, an attempt) and
//! the `traceparent` that joins them ([`tasktable_core::trace`]).
//!
//! Every span here has the target [`TARGET`]. A process that exports traces enables that
//! target in its OpenTelemetry layer (`tasktable-telemetry` does); one that does not
//! leaves it disabled, and then each span here is a disabled span: no allocation, no
//! field formatted, nothing stored with the task. Whether a span is kept, and where it
//! goes, is the subscriber's business; this module only names the spans, their
//! attributes and their parents.

use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt, TraceFlags, TraceId, TraceState};
use opentelemetry::Context;
pub use tasktable_core::trace::TraceParent;
use tasktable_core::{AttemptOutcome, Task};
use tracing::Span;
use tracing_opentelemetry::OpenTelemetrySpanExt;

/// The target of tasktable's spans; enable it (at INFO) where traces are exported.
pub const TARGET: &str = "tasktable::trace";

/// The `traceparent` of `span`, when it belongs to an OpenTelemetry trace.
pub fn traceparent_of(span: &Span) -> Option<TraceParent> {
    if span.is_disabled() {
        return None;
    }
    let cx = span.context();
    let otel = cx.span();
    let sc = otel.span_context();
    if !sc.is_valid() {
        return None;
    }
    TraceParent::from_parts(
        &sc.trace_id().to_string(),
        &sc.span_id().to_string(),
        sc.trace_flags().to_u8(),
    )
}

/// The `traceparent` of the caller's current span: what a submit from Rust records, so
/// the task's attempts continue the caller's trace. `None` when no OpenTelemetry layer
/// follows the current span (or there is none).
pub fn current_traceparent() -> Option<TraceParent> {
    traceparent_of(&Span::current())
}

/// Makes `span` a child of the remote span `parent`. Call it before the span is first
/// entered; a disabled span stays as it is.
pub fn continue_trace(span: &Span, parent: &TraceParent) {
    if span.is_disabled() {
        return;
    }
    let (Ok(trace_id), Ok(span_id)) = (
        TraceId::from_hex(parent.trace_id()),
        SpanId::from_hex(parent.parent_id()),
    ) else {
        return;
    };
    let remote = SpanContext::new(
        trace_id,
        span_id,
        TraceFlags::new(parent.flags()),
        true,
        TraceState::default(),
    );
    // Refused only when the span has no OpenTelemetry layer or has started: then it
    // stays in a trace of its own, which is all that can be done.
    let _ = span.set_parent(Context::new().with_remote_span_context(remote));
}

/// The span of one attempt of `task`, from its claim until its end is recorded: a child
/// of the span that submitted the task, with the task's id, kind, queue and attempt as
/// attributes (the outcome is added by [`attempt_ended`]).
pub fn attempt_span(task: &Task) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "tasktable.attempt",
        otel.name = %format_args!("run {}", task.kind),
        otel.kind = "consumer",
        otel.status_code = tracing::field::Empty,
        messaging.system = "tasktable",
        messaging.operation.type = "process",
        messaging.destination.name = %task.queue,
        tasktable.task.id = task.id,
        tasktable.task.kind = %task.kind,
        tasktable.task.queue = %task.queue,
        tasktable.task.attempt = i64::from(task.attempt),
        tasktable.task.run = task.run.map(i64::from),
        tasktable.attempt.outcome = tracing::field::Empty,
    );
    if let Some(parent) = &task.traceparent {
        continue_trace(&span, parent);
    }
    span
}

/// Records how the attempt of `span` ended: its outcome as an attribute, and the error
/// status for the outcomes that get a log line ([`crate::attempt_log::logs`]: errors,
/// permanent failures, timeouts, lost leases).
pub fn attempt_ended(span: &Span, outcome: AttemptOutcome) {
    if span.is_disabled() {
        return;
    }
    span.record("tasktable.attempt.outcome", outcome.as_str());
    if crate::attempt_log::logs(outcome) {
        span.record("otel.status_code", "error");
    }
}

/// Records how the submit of `span` ended: the task it made, or how many tasks (ids are
/// attributes of single submits only), or the error status when it was refused.
pub fn submit_ended(span: &Span, submitted: Result<&[i64], ()>) {
    if span.is_disabled() {
        return;
    }
    match submitted {
        Ok([id]) => {
            span.record("tasktable.task.id", *id);
        }
        Ok(ids) => {
            span.record("tasktable.tasks", ids.len() as i64);
        }
        Err(()) => {
            span.record("otel.status_code", "error");
        }
    }
}

/// The span of a submit received by the API: a child of the caller's span when its
/// request carried a `traceparent`, named after the kind when the request submits one.
pub fn submit_span(kind: Option<&str>, caller: Option<&TraceParent>) -> Span {
    let span = tracing::info_span!(
        target: TARGET,
        "tasktable.submit",
        otel.name = %match kind {
            Some(kind) => format!("submit {kind}"),
            None => "submit".to_owned(),
        },
        otel.kind = "producer",
        otel.status_code = tracing::field::Empty,
        messaging.system = "tasktable",
        messaging.operation.type = "send",
        tasktable.task.kind = kind,
        tasktable.task.id = tracing::field::Empty,
        tasktable.tasks = tracing::field::Empty,
    );
    if let Some(parent) = caller {
        continue_trace(&span, parent);
    }
    span
}
