/**
 * OpenTelemetry, when the application has `@opentelemetry/api` installed: a submit sends
 * the active span's `traceparent`, and each attempt runs in a span that continues the trace
 * its task was submitted in (the `traceparent` its claim carries). Without the package
 * nothing here does anything: it is looked for once, and each call then checks one
 * variable. Spans go through the global tracer provider the application registers; with
 * the API alone they are its no-op spans.
 */

/** The parts of `@opentelemetry/api` used here (it is not a dependency of this package). */
interface SpanContext {
  traceId: string;
  spanId: string;
  traceFlags: number;
  isRemote?: boolean;
}
interface Span {
  spanContext(): SpanContext;
  setAttribute(key: string, value: string | number): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  end(): void;
}
interface OtelApi {
  context: { active(): unknown; with<T>(context: unknown, fn: () => T): T };
  trace: {
    getActiveSpan(): Span | undefined;
    getTracer(name: string): {
      startSpan(name: string, options: { kind: number; attributes: Record<string, string | number> }, context: unknown): Span;
    };
    isSpanContextValid(context: SpanContext): boolean;
    setSpan(context: unknown, span: Span): unknown;
    setSpanContext(context: unknown, spanContext: SpanContext): unknown;
  };
  SpanKind: { CONSUMER: number };
  SpanStatusCode: { ERROR: number };
}

// A variable, so that the compiler does not look for the package.
const PACKAGE = "@opentelemetry/api";
let api: OtelApi | null | undefined;

/** `@opentelemetry/api`, or null when it is not installed; looked for once. */
export async function openTelemetry(): Promise<OtelApi | null> {
  if (api === undefined) {
    try {
      api = (await import(PACKAGE)) as OtelApi;
    } catch {
      api = null;
    }
  }
  return api;
}

const TRACEPARENT = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/;

/** The active span's `traceparent`, or undefined (no OpenTelemetry, no valid span). */
export async function currentTraceparent(): Promise<string | undefined> {
  const otel = await openTelemetry();
  const span = otel?.trace.getActiveSpan();
  if (!otel || !span) return undefined;
  const sc = span.spanContext();
  if (!otel.trace.isSpanContextValid(sc)) return undefined;
  return `00-${sc.traceId}-${sc.spanId}-${(sc.traceFlags & 0xff).toString(16).padStart(2, "0")}`;
}

/** What an attempt's span needs of its claim. */
export interface Traced {
  id: number;
  kind: string;
  queue: string;
  attempt: number;
  run: number | null;
  traceparent?: string | null;
}

/** The outcome each lease call reports, as the attempt history names it. */
const OUTCOMES: Record<string, string> = { complete: "succeeded", snooze: "snoozed", release: "interrupted" };

/**
 * Runs `handle` in the span of one attempt of `claimed` (a child of the submitter's span
 * when the claim carries a `traceparent`), and records on it how the attempt ended from the
 * lease call `handle` resolves to. Without OpenTelemetry, just `handle()`.
 */
export async function inAttemptSpan(
  otel: OtelApi | null,
  claimed: Traced,
  handle: () => Promise<Record<string, unknown>>,
): Promise<Record<string, unknown>> {
  if (!otel) return handle();
  let parent = otel.context.active();
  const caller = claimed.traceparent ? TRACEPARENT.exec(claimed.traceparent) : null;
  if (caller) {
    parent = otel.trace.setSpanContext(parent, {
      traceId: caller[1],
      spanId: caller[2],
      traceFlags: parseInt(caller[3], 16),
      isRemote: true,
    });
  }
  const attributes: Record<string, string | number> = {
    "messaging.system": "tasktable",
    "messaging.operation.type": "process",
    "messaging.destination.name": claimed.queue,
    "tasktable.task.id": claimed.id,
    "tasktable.task.kind": claimed.kind,
    "tasktable.task.queue": claimed.queue,
    "tasktable.task.attempt": claimed.attempt,
  };
  if (claimed.run !== null) attributes["tasktable.task.run"] = claimed.run;
  const span = otel.trace
    .getTracer("tasktable")
    .startSpan(`run ${claimed.kind}`, { kind: otel.SpanKind.CONSUMER, attributes }, parent);
  try {
    const call = await otel.context.with(otel.trace.setSpan(parent, span), handle);
    const op = String(call.op);
    if (op === "fail") {
      span.setAttribute("tasktable.attempt.outcome", call.retryable === false ? "failed" : "error");
      span.setStatus({ code: otel.SpanStatusCode.ERROR, message: String(call.error ?? "").split("\n", 1)[0] });
    } else {
      span.setAttribute("tasktable.attempt.outcome", OUTCOMES[op] ?? op);
    }
    return call;
  } finally {
    span.end();
  }
}
