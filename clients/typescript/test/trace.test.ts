// The TypeScript package with OpenTelemetry installed, as an application sets it up (a
// tracer provider, a context manager): a submit inside a span sends its traceparent, and
// each attempt of the task runs in a span of that trace, current while the handler runs.
// A file of its own: the provider registered here is global to its process.
import { test } from "node:test";
import assert from "node:assert/strict";
import { context, trace, SpanKind, SpanStatusCode } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { BasicTracerProvider, InMemorySpanExporter, SimpleSpanProcessor } from "@opentelemetry/sdk-trace-base";
import { Task, Worker } from "../src/index.js";
import { Server, eventually } from "./harness.js";

const FAST = { initial_ms: 0, multiplier: 1.0, max_ms: 0, jitter: 0.0 };
const quiet = { info() {}, warn() {}, error() {} };

const exporter = new InMemorySpanExporter();
trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] }));
context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());

test("a submit in a span and the attempts of its task are one trace", async () => {
  const server = await Server.start();
  let worker: Worker | undefined;
  let running: Promise<void> | undefined;
  try {
    const ops = server.client("operator");
    const id = await trace.getTracer("app").startActiveSpan("enqueue", async (span) => {
      try {
        return await ops.submit("traced", null, { backoff: FAST });
      } finally {
        span.end();
      }
    });
    const enqueue = exporter.getFinishedSpans().find((s) => s.name === "enqueue")!.spanContext();
    // This server exports no traces: it stores the caller's traceparent as it came.
    assert.equal((await ops.get(id)).traceparent, `00-${enqueue.traceId}-${enqueue.spanId}-01`);

    const seenInHandler: string[] = [];
    const traced = (task: Task) => {
      seenInHandler.push(trace.getActiveSpan()?.spanContext().traceId ?? "none");
      if (task.attempt === 1) throw new Error("first attempt fails");
      return { attempt: task.attempt };
    };
    worker = new Worker(server.client("worker"), { traced }, { claimWaitMs: 500, handleSignals: false, logger: quiet });
    running = worker.run();
    await eventually("the task succeeded", async () => (await ops.get(id)).state === "succeeded");

    const runs = exporter.getFinishedSpans().filter((s) => s.name === "run traced");
    assert.equal(runs.length, 2);
    assert.deepEqual(seenInHandler, [enqueue.traceId, enqueue.traceId], "the attempt's span is current in the handler");
    for (const run of runs) {
      assert.equal(run.spanContext().traceId, enqueue.traceId);
      assert.equal(run.parentSpanContext?.spanId, enqueue.spanId);
      assert.equal(run.kind, SpanKind.CONSUMER);
      assert.equal(run.attributes["tasktable.task.id"], id);
      assert.equal(run.attributes["tasktable.task.queue"], "default");
    }
    const attempt = (n: number) => runs.find((r) => r.attributes["tasktable.task.attempt"] === n)!;
    assert.equal(attempt(1).attributes["tasktable.attempt.outcome"], "error");
    assert.equal(attempt(1).status.code, SpanStatusCode.ERROR);
    assert.equal(attempt(2).attributes["tasktable.attempt.outcome"], "succeeded");
    assert.notEqual(attempt(2).status.code, SpanStatusCode.ERROR);
  } finally {
    worker?.stop();
    await running;
    await server.close();
  }
});
