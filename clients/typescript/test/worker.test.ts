// The TypeScript worker against a real `tasktable serve`: each test has its own server
// and database.
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, ChildProcess } from "node:child_process";
import { createInterface, Interface } from "node:readline";
import { once } from "node:events";
import { fileURLToPath } from "node:url";
import { Fail, Snooze, Task, Worker, WorkerOptions, Handler, ApiError, aheadCount } from "../src/index.js";
import { Server, TOKENS, eventually } from "./harness.js";

const FAST = { initial_ms: 0, multiplier: 1.0, max_ms: 0, jitter: 0.0 };
const quiet = { info() {}, warn() {}, error() {} };

async function withServer(body: (s: Server, start: (h: Record<string, Handler>, o?: WorkerOptions) => Worker) => Promise<void>) {
  const server = await Server.start();
  const running: [Worker, Promise<void>][] = [];
  const start = (handlers: Record<string, Handler>, options: WorkerOptions = {}) => {
    const worker = new Worker(server.client("worker"), handlers, { claimWaitMs: 2000, handleSignals: false, logger: quiet, ...options });
    running.push([worker, worker.run()]);
    return worker;
  };
  try {
    await body(server, start);
  } finally {
    for (const [worker, done] of running) {
      worker.stop();
      await done;
    }
    await server.close();
  }
}

async function finished(server: Server, ids: number[]) {
  const ops = server.client("operator");
  const tasks = await Promise.all(ids.map((id) => ops.get(id)));
  return tasks.every((t) => ["succeeded", "failed", "cancelled"].includes(t.state)) ? tasks : undefined;
}

test("drains tasks and records their results", () =>
  withServer(async (server, start) => {
    const ids = await server.client("operator").submitMany(Array.from({ length: 60 }, (_, n) => ({ kind: "double", payload: { n } })));
    start({ double: (task) => ({ doubled: task.payload.n * 2 }) }, { concurrency: 4 });
    const tasks = await eventually("every task finished", () => finished(server, ids));
    tasks.forEach((t, n) => {
      assert.equal(t.state, "succeeded");
      assert.deepEqual(t.result, { doubled: n * 2 });
      assert.equal(t.attempts.length, 1);
    });
  }));

test("heartbeats carry the kinds of its handlers", () =>
  withServer(async (server, start) => {
    const ops = server.client("operator");
    const other = await ops.submit("resize", {});
    const worker = start({ double: (task) => task.payload, add: (task) => task.payload });
    const shown = await eventually("the registry holds the worker", async () => {
      const listed = await ops.request<{ workers: { id: string; kinds: string[] | null }[] }>("GET", "/api/v1/workers");
      return listed.workers.find((w) => w.id === worker.workerId);
    });
    assert.deepEqual(shown.kinds, ["add", "double"]);
    // So a task of a kind no worker handles says so.
    assert.deepEqual((await ops.get(other)).waiting, [
      { reason: "no_worker_for_kind", text: 'no live worker handles kind "resize" in queue "default"' },
    ]);
  }));

test("a checkpoint reaches the next attempt under a newer fencing token", () =>
  withServer(async (server, start) => {
    const seen: [unknown, number][] = [];
    const resumable = async (task: Task) => {
      seen.push([task.checkpoint, task.fencingToken]);
      if (task.checkpoint === null) {
        await task.save({ step: 1 }, { pct: 50 });
        throw new Fail("try again", { retryAfterMs: 0 });
      }
      return { resumedFrom: task.checkpoint.step };
    };
    const id = await server.client("operator").submit("resumable", {}, { backoff: FAST });
    start({ resumable }, { concurrency: 1 });
    const [task] = await eventually("the task finished", () => finished(server, [id]));
    assert.equal(task.state, "succeeded");
    assert.deepEqual(task.result, { resumedFrom: 1 });
    assert.deepEqual(task.attempts.map((a: any) => a.outcome), ["error", "succeeded"]);
    assert.equal(seen[0][0], null);
    assert.deepEqual(seen[1][0], { step: 1 });
    assert.ok(seen[1][1] > seen[0][1], "the second claim's fencing token is newer");
  }));

test("log lines join the task's history", () =>
  withServer(async (server, start) => {
    const chatty = async (task: Task) => {
      await task.log("fetching", "parsing");
      return null;
    };
    const id = await server.client("operator").submit("chatty", {});
    start({ chatty }, { concurrency: 1 });
    const [task] = await eventually("the task finished", () => finished(server, [id]));
    const lines = task.timeline
      .filter((e: any) => e.event === "log")
      .map((e: any) => e.detail.line);
    assert.deepEqual(lines, ["fetching", "parsing"]);
  }));

test("each handler outcome is recorded", () =>
  withServer(async (server, start) => {
    const ops = server.client("operator");
    let snoozed = false;
    const ids = [
      await ops.submit("fail_for_good"),
      await ops.submit("snooze_once"),
      await ops.submit("crash", null, { max_attempts: 1 }),
    ];
    start({
      fail_for_good: () => { throw new Fail("not this one", { retryable: false }); },
      snooze_once: () => {
        if (!snoozed) { snoozed = true; throw new Snooze(0); }
        return "after the snooze";
      },
      crash: () => { throw new RangeError("out of range"); },
    });
    const [failed, snoozedTask, crashed] = await eventually("every task finished", () => finished(server, ids));
    assert.equal(failed.state, "failed");
    assert.equal(failed.last_error, "not this one");
    assert.deepEqual(snoozedTask.attempts.map((a: any) => a.outcome), ["snoozed", "succeeded"]);
    assert.equal(crashed.state, "failed");
    const [head, ...frames] = crashed.last_error.split("\n");
    assert.equal(head, "RangeError: out of range", "the first line says what was thrown");
    assert.ok(frames.length > 0 && frames.every((f: string) => /^\s+at /.test(f)), `the stack follows: ${crashed.last_error}`);
    assert.match(frames[0], /worker\.test\.js/, "the innermost frame is the handler's");
  }));

test("a stack is stored bounded", () =>
  withServer(async (server, start) => {
    const ops = server.client("operator");
    const id = await ops.submit("deep", null, { max_attempts: 1 });
    const deep = (n: number): never => {
      if (n === 0) throw new Error("at the bottom");
      return deep(n - 1);
    };
    start({ deep: () => { Error.stackTraceLimit = 1000; try { return deep(500); } finally { Error.stackTraceLimit = 10; } } });
    const [task] = await eventually("the task failed", () => finished(server, [id]));
    assert.ok(task.last_error.startsWith("Error: at the bottom\n    at "), task.last_error.slice(0, 200));
    assert.ok(task.last_error.length < 4096 + 200, "the stack is bounded");
  }));

test("results the server cannot take fail the task, saying why", () =>
  withServer(async (server, start) => {
    const ops = server.client("operator");
    const ids = [await ops.submit("not_json"), await ops.submit("too_large"), await ops.submit("fine")];
    start({
      not_json: () => ({ n: 10n }),
      too_large: () => "x".repeat(1_100_000),
      fine: () => "fine",
    }, { concurrency: 3 });
    const [notJson, tooLarge, fine] = await eventually("every task finished", () => finished(server, ids));
    assert.equal(notJson.state, "failed");
    assert.match(notJson.last_error, /not JSON/);
    assert.equal(tooLarge.state, "failed");
    assert.match(tooLarge.last_error, /payload_too_large/);
    assert.equal(fine.result, "fine");
  }));

test("survives a server restart", () =>
  withServer(async (server, start) => {
    start({ double: (task) => task.payload * 2 }, { concurrency: 2 });
    const first = await server.client("operator").submitMany(Array.from({ length: 10 }, (_, n) => ({ kind: "double", payload: n })));
    await eventually("the first tasks finished", () => finished(server, first));
    await server.restart();
    const second = await server.client("operator").submitMany(Array.from({ length: 10 }, (_, n) => ({ kind: "double", payload: n + 10 })));
    const tasks = await eventually("the tasks after the restart finished", () => finished(server, second), 90_000);
    assert.deepEqual(tasks.map((t) => t.result), Array.from({ length: 10 }, (_, n) => (n + 10) * 2));
  }));

test("a stale lease in a batch spoils nothing else", () =>
  withServer(async (server) => {
    const ops = server.client("operator");
    const ids = await ops.submitMany([0, 1, 2].map((n) => ({ kind: "k", payload: n })));
    const client = server.client("worker");
    const claimed = await client.claim(["k"], "ts-direct", { limit: 3 });
    assert.equal(claimed.length, 3);
    const lease = (i: number) => ({ task: claimed[i].id, token: claimed[i].token, credential: claimed[i].credential });
    const results = await client.acknowledge([
      { ...lease(0), op: "complete", result: 0 },
      { ...lease(1), credential: "0".repeat(32), op: "complete", result: 1 },
      { ...lease(2), op: "renew", lease_ms: 60_000 },
    ]);
    assert.deepEqual(results.map((r) => r.ok), [true, false, true]);
    assert.equal(results[1].error?.code, "lease_lost");
    const states = await Promise.all(ids.map(async (id) => (await ops.get(id)).state));
    assert.deepEqual(states, ["succeeded", "running", "running"]);
    await assert.rejects(client.acknowledge([{ ...lease(1), op: "finish" } as any]), (e: ApiError) => e.status === 422);
  }));

// A worker in a process of its own, for the tests that signal it.
function spawnWorker(server: Server, leaseMs: number, graceMs: number): { child: ChildProcess; lines: AsyncIterator<string> } {
  const script = fileURLToPath(new URL("./stoppable-worker.js", import.meta.url));
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, TASKTABLE_SERVER: server.url, TASKTABLE_TOKEN: TOKENS.worker, LEASE_MS: String(leaseMs), GRACE_MS: String(graceMs) },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const lines: Interface = createInterface({ input: child.stdout! });
  return { child, lines: lines[Symbol.asyncIterator]() };
}

async function nextLine(lines: AsyncIterator<string>): Promise<unknown> {
  const { value, done } = await lines.next();
  assert.ok(!done, "the worker process said nothing more");
  return JSON.parse(value);
}

async function stopWorker(child: ChildProcess): Promise<void> {
  const exited = once(child, "exit");
  child.kill("SIGTERM");
  const [code] = await exited;
  assert.equal(code, 0);
}

test("a lease lost to the rescuer aborts its handler's signal", () =>
  withServer(async (server) => {
    const ops = server.client("operator");
    const id = await ops.submit("wait_for_stop", null, { backoff: FAST });
    const { child, lines } = spawnWorker(server, 1000, 5000);
    try {
      assert.deepEqual(await nextLine(lines), { started: id });
      // Freeze the worker past its lease: the server's rescuer takes the task back.
      child.kill("SIGSTOP");
      try {
        await eventually("the rescuer took the task back", async () =>
          (await ops.get(id)).attempts.some((a: any) => a.outcome === "lease_expired"));
      } finally {
        child.kill("SIGCONT");
      }
      // Its next renewal is refused, and the handler's signal aborts. (Claims it had
      // waiting may have taken the task again meanwhile: each is a handler of its own.)
      let said = await nextLine(lines);
      while ((said as any).started === id) said = await nextLine(lines);
      assert.deepEqual(said, { stopped: id });
      await stopWorker(child);
    } finally {
      child.kill("SIGKILL");
    }
  }));

test("SIGTERM gives running tasks back without spending an attempt", () =>
  withServer(async (server) => {
    const ops = server.client("operator");
    const id = await ops.submit("wait_for_stop");
    const { child, lines } = spawnWorker(server, 30_000, 500);
    try {
      assert.deepEqual(await nextLine(lines), { started: id });
      await stopWorker(child);
    } finally {
      child.kill("SIGKILL");
    }
    const task = await ops.get(id);
    assert.equal(task.state, "pending");
    assert.deepEqual(task.attempts.map((a: any) => a.outcome), ["interrupted"]);
    assert.equal(task.attempt, 0, "an interrupted attempt is not spent");
  }));

test("as many tasks wait as the slots start within ten milliseconds", () => {
  assert.equal(aheadCount(10, undefined), 0, "none before a handler has run");
  assert.equal(aheadCount(10, 200), 0);
  assert.equal(aheadCount(1, 20), 0);
  assert.equal(aheadCount(10, 5), 20);
  assert.equal(aheadCount(10, 0.5), 200);
  assert.equal(aheadCount(2, 0.01), 160, "80 a slot");
  assert.equal(aheadCount(50, 0), 800, "800 in all");
});

test("short handlers are claimed ahead in large claims", () =>
  withServer(async (server) => {
    const ids = await server.client("operator").submitMany(Array.from({ length: 600 }, () => ({ kind: "noop", payload: null })));
    const worker = new Worker(server.client("worker"), { noop: () => null }, { concurrency: 2, claimWaitMs: 2000, handleSignals: false, logger: quiet });
    const sizes: number[] = [];
    const claim = worker.client.claim.bind(worker.client);
    worker.client.claim = async (...args: Parameters<typeof claim>) => {
      const got = await claim(...args);
      sizes.push(got.length);
      return got;
    };
    const done = worker.run();
    try {
      const tasks = await eventually("every task finished", () => finished(server, ids));
      assert.ok(tasks.every((t) => t.state === "succeeded" && t.attempts.length === 1));
      assert.equal(sizes[0], 2, "nothing is claimed ahead before a handler has run");
      // Ten times the concurrency at least: how far ahead follows the handlers' measured
      // time, which a loaded machine stretches, so the bound is far below the usual 160.
      assert.ok(Math.max(...sizes) > 20, `claims of short handlers carry many tasks: ${sizes}`);
    } finally {
      worker.stop();
      await done;
    }
  }));

test("tasks claimed ahead are given back unrun when the worker stops", () =>
  withServer(async (server, start) => {
    const ops = server.client("operator");
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    const started: number[] = [];
    const worker = start({ warm: () => null, block: async (task) => { started.push(task.id); await released; } }, { concurrency: 1, shutdownGraceMs: 10_000 });
    const warm = await ops.submit("warm", null);
    await eventually("the warm-up ran", async () => (await ops.get(warm)).state === "succeeded");
    const ids = await ops.submitMany(Array.from({ length: 30 }, (_, n) => ({ kind: "block", payload: n })));
    await eventually("one runs while the others wait", async () =>
      started.length === 1 && (await Promise.all(ids.map((id) => ops.get(id)))).every((t) => t.state === "running"));
    worker.stop();
    release();
    await eventually("every task left the worker", async () => {
      const tasks = await Promise.all(ids.map((id) => ops.get(id)));
      return tasks.every((t) => t.state !== "running") ? tasks : undefined;
    });
    const tasks = await Promise.all(ids.map((id) => ops.get(id)));
    assert.deepEqual(tasks.filter((t) => started.includes(t.id)).map((t) => t.state), ["succeeded"]);
    const waited = tasks.filter((t) => !started.includes(t.id));
    assert.equal(waited.length, 29);
    for (const t of waited) {
      assert.equal(t.state, "pending");
      assert.equal(t.attempt, 0, "a task given back unrun spends no attempt");
      assert.deepEqual(t.attempts.map((a: any) => a.outcome), ["interrupted"]);
    }
  }));

test("a task that waited too long for a slot is given back and run later", () =>
  withServer(async (server, start) => {
    const ops = server.client("operator");
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    start({ warm: () => null, slow: () => released }, { concurrency: 1 });
    const warm = await ops.submit("warm", null);
    await eventually("the warm-up ran", async () => (await ops.get(warm)).state === "succeeded");
    const ids = await ops.submitMany(Array.from({ length: 3 }, (_, n) => ({ kind: "slow", payload: n })));
    // The first holds the slot until a task waiting behind it has been given back.
    await eventually("a task waiting for the slot went back", async () =>
      (await Promise.all(ids.map((id) => ops.get(id)))).some((t) => t.attempts.some((a: any) => a.outcome === "interrupted")));
    release();
    const tasks = await eventually("every task finished", () => finished(server, ids));
    assert.deepEqual(tasks.map((t) => t.state), ["succeeded", "succeeded", "succeeded"]);
    const outcomes = tasks.map((t) => JSON.stringify(t.attempts.map((a: any) => a.outcome)));
    assert.ok(outcomes.includes(JSON.stringify(["interrupted", "succeeded"])), `a task claimed ahead that waited over a second went back: ${outcomes}`);
    assert.ok(tasks.every((t) => t.attempt === 1), "giving back spent no attempt");
  }));

test("tasks waiting behind a busy slot are given back after a second", () =>
  withServer(async (server, start) => {
    const ops = server.client("operator");
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    start({ warm: () => null, slow: () => released, fast: () => null }, { concurrency: 1 });
    const warm = await ops.submit("warm", null);
    await eventually("the warm-up ran", async () => (await ops.get(warm)).state === "succeeded");
    const slow = await ops.submit("slow", null);
    const fast = await ops.submitMany(Array.from({ length: 20 }, (_, n) => ({ kind: "fast", payload: n })));
    await eventually("the slow one runs with the fast ones claimed behind it", async () =>
      (await Promise.all([slow, ...fast].map((id) => ops.get(id)))).every((t) => t.state === "running"));
    // The slot stays busy: the ones waiting for it go back, for any worker to take.
    await eventually("the waiting tasks were given back", async () =>
      (await Promise.all(fast.map((id) => ops.get(id)))).every((t) => t.state === "pending"), 10_000);
    assert.equal((await ops.get(slow)).state, "running");
    release();
    const tasks = await eventually("every task finished", () => finished(server, [slow, ...fast]));
    assert.ok(tasks.every((t) => t.state === "succeeded"));
    for (const t of tasks.slice(1)) {
      // Given back once at least (a claim already in flight may take one again).
      const outcomes: string[] = t.attempts.map((a: any) => a.outcome);
      assert.equal(outcomes.at(-1), "succeeded");
      assert.ok(outcomes.length > 1 && outcomes.slice(0, -1).every((o) => o === "interrupted"), JSON.stringify(outcomes));
      assert.equal(t.attempt, 1, "giving back spent no attempt");
    }
  }));

test("a worker whose id another token owns stops, saying why", () =>
  withServer(async (server) => {
    const ops = server.client("operator");
    const ids = await ops.submitMany(Array.from({ length: 3 }, () => ({ kind: "noop", payload: null })));
    await server.client("admin").heartbeat("taken-id");
    const worker = new Worker(server.client("worker"), { noop: () => null }, { workerId: "taken-id", claimWaitMs: 2000, handleSignals: false, logger: quiet });
    await assert.rejects(worker.run(), (error: unknown) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.code, "worker_not_owned");
      return true;
    });
    const tasks = await Promise.all(ids.map((id) => ops.get(id)));
    assert.deepEqual(new Set(tasks.map((t) => t.state)), new Set(["pending"]));
  }));

test("a server that does not speak the worker's protocol stops it, saying why", () =>
  withServer(async (server) => {
    const ops = server.client("operator");
    const ids = await ops.submitMany(Array.from({ length: 5 }, () => ({ kind: "noop", payload: null })));
    const worker = new Worker(server.client("worker"), { noop: () => null }, { claimWaitMs: 2000, handleSignals: false, logger: quiet });
    // A package from the future: its heartbeats name a protocol the server never spoke.
    const beat = worker.client.heartbeat.bind(worker.client);
    worker.client.heartbeat = (id: string, facts: Record<string, unknown> = {}) => beat(id, { ...facts, protocol_version: 2 });
    await assert.rejects(worker.run(), (error: unknown) => {
      assert.ok(error instanceof ApiError);
      assert.equal(error.code, "protocol_unsupported");
      assert.match(error.message, /upgrade the server/);
      return true;
    });
    const tasks = await Promise.all(ids.map((id) => ops.get(id)));
    assert.deepEqual(new Set(tasks.map((t) => t.state)), new Set(["pending"]));
    assert.deepEqual(tasks.map((t) => t.attempts.length), [0, 0, 0, 0, 0], "nothing was claimed");
  }));

test("a server that allows smaller claims is asked for fewer", () =>
  withServer(async (server) => {
    const ids = await server.client("operator").submitMany(Array.from({ length: 300 }, () => ({ kind: "noop", payload: null })));
    // 410 slots ask for 410 tasks at once, more than the server's 400: refused, the worker
    // halves its claims (1000 -> 500 -> 250) until one is taken.
    const worker = new Worker(server.client("worker"), { noop: () => null }, { concurrency: 410, claimBatch: 1000, claimWaitMs: 2000, handleSignals: false, logger: quiet });
    const asked: number[] = [];
    const claim = worker.client.claim.bind(worker.client);
    worker.client.claim = async (...args: Parameters<typeof claim>) => {
      asked.push(args[2]?.limit ?? 1);
      return claim(...args);
    };
    const done = worker.run();
    try {
      const tasks = await eventually("every task finished", () => finished(server, ids));
      assert.ok(tasks.every((t) => t.state === "succeeded"));
      assert.deepEqual(asked.slice(0, 3), [410, 410, 250], `claims asked for: ${asked}`);
      assert.ok(asked.slice(2).every((n) => n <= 250), `claims asked for: ${asked}`);
    } finally {
      worker.stop();
      await done;
    }
  }));
