import { hostname } from "node:os";
import { randomUUID } from "node:crypto";
import { Claimed, Client, LeaseCall, leaseOf } from "./client.js";
import { ApiError, Fail, LEASE_GONE, LeaseGone, Snooze } from "./errors.js";
import { inAttemptSpan, openTelemetry } from "./trace.js";

/** What a handler is given: the task, its lease's fencing token, a way to save where it
 * got to, and a signal aborted when the lease is gone or the worker shuts down. */
export class Task {
  private readonly controller = new AbortController();

  constructor(
    readonly claimed: Claimed,
    private readonly client: Client,
  ) {}

  get id(): number { return this.claimed.id; }
  get kind(): string { return this.claimed.kind; }
  get payload(): any { return this.claimed.payload; }
  get attempt(): number { return this.claimed.attempt; }
  get run(): number | null { return this.claimed.run; }
  /** What an earlier attempt saved with `save`, to resume from (null at first). */
  get checkpoint(): any { return this.claimed.checkpoint; }
  /** Grows on every claim of the task: pass it to systems you write to, so that they can
   * refuse a write from an older attempt. */
  get fencingToken(): number { return this.claimed.token; }
  /** Aborted when the lease is gone (expired and rescued, cancelled, retargeted), or when
   * a shutdown's grace ran out and the task was given back: stop, the result will not be
   * recorded. */
  get signal(): AbortSignal { return this.controller.signal; }

  /** @internal */
  stop(reason: string): void {
    this.controller.abort(new Error(reason));
  }

  /** Saves a checkpoint (given to the next attempt) and/or progress under the lease;
   * rejects with LeaseGone if the lease is no longer this worker's. */
  async save(checkpoint?: unknown, progress?: unknown): Promise<void> {
    const call: LeaseCall = { ...leaseOf(this.claimed), op: "checkpoint" };
    if (checkpoint !== undefined) call.checkpoint = checkpoint;
    if (progress !== undefined) call.progress = progress;
    await this.write(call);
  }

  /** Appends lines to the task's log, shown in its history (the API's timeline, the
   * dashboard, `tasktable show`), under the lease: each kept up to 1 KiB, 1,000 a task;
   * rejects with LeaseGone if the lease is no longer this worker's. */
  async log(...lines: string[]): Promise<void> {
    for (let start = 0; start < lines.length; start += 100) {
      await this.write({
        ...leaseOf(this.claimed),
        op: "log",
        lines: lines.slice(start, start + 100).map(String),
      });
    }
  }

  private async write(call: LeaseCall): Promise<void> {
    const [result] = await this.client.acknowledge([call]);
    if (!result.ok) {
      const { code, message } = result.error ?? { code: "unknown", message: "" };
      if (LEASE_GONE.has(code)) {
        this.stop(code);
        throw new LeaseGone(this.id, code, message);
      }
      throw new ApiError(422, code, message);
    }
  }
}

/** A handler resolves to the task's result (any JSON value), or throws Fail or Snooze, or
 * any other error (a retryable failure). */
export type Handler = (task: Task) => unknown | Promise<unknown>;

export interface WorkerOptions {
  queue?: string;
  /** Handlers running at once (10). */
  concurrency?: number;
  leaseMs?: number;
  workerId?: string;
  groups?: string[];
  /** How long a claim waits for work (10 s). */
  claimWaitMs?: number;
  /** Most tasks one claim asks for (400; a server that allows fewer is asked for fewer). */
  claimBatch?: number;
  /** Most acknowledgements per request (800), and how long the first waits for others (5 ms). */
  ackBatch?: number;
  ackDelayMs?: number;
  /** How long running handlers get to finish at shutdown before their tasks are given back (15 s). */
  shutdownGraceMs?: number;
  beatEveryMs?: number;
  /** Where the worker says what it does; console by default. */
  logger?: Pick<Console, "info" | "warn" | "error">;
  /** Shut down on SIGTERM and SIGINT (true). */
  handleSignals?: boolean;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** The longest delay the server takes (10 years), in milliseconds. */
const MAX_DELAY_MS = 315_360_000_000;
/** Acknowledgements are sent in requests of at most this many bytes of JSON. */
const MAX_ACK_BYTES = 4 << 20;
/** How long a shutdown keeps trying to send what is left to acknowledge. */
const FINAL_FLUSH_MS = 30_000;

/** How long the last task claimed ahead should wait for a slot, at the handlers' mean. */
const AHEAD_WAIT_MS = 10;
/** Most tasks claimed ahead per slot, and in all. */
const AHEAD_PER_SLOT = 80;
const AHEAD_MAX = 800;
/** A task that waited longer than this for a slot is given back unrun (a quarter of its
 * attempt's timeout when that is shorter), and how often waiting tasks are looked at. */
const AHEAD_PATIENCE_MS = 1_000;
const PATIENCE_CHECK_MS = 250;

/** How long a claimed task may wait for a slot: a second, or a quarter of its attempt's
 * timeout when that is shorter (as the Rust worker allows). */
function patienceOf(c: Claimed, leaseMs: number): number {
  if (!c.deadline_at || !c.lease_expires_at) return AHEAD_PATIENCE_MS;
  const timeout = Date.parse(c.deadline_at) - Date.parse(c.lease_expires_at) + leaseMs;
  if (Number.isNaN(timeout)) return AHEAD_PATIENCE_MS;
  return Math.max(0, Math.min(AHEAD_PATIENCE_MS, timeout / 4));
}

/** How many tasks may wait for a slot: as many as `concurrency` slots start within 10 ms
 * at the handlers' mean run time, at most 80 a slot and 800; none before a handler ran. */
export function aheadCount(concurrency: number, meanRunMs: number | undefined): number {
  if (meanRunMs === undefined) return 0;
  const fit = Math.floor((AHEAD_WAIT_MS * concurrency) / Math.max(meanRunMs, 0.001));
  return Math.min(fit, AHEAD_PER_SLOT * concurrency, AHEAD_MAX);
}

/** Most characters of a handler's stack stored with its error (its innermost frames). */
const MAX_STACK = 4096;

/** What is stored of an error a handler threw: its name and message on the first line (what
 * listings show and `--error` searches), then its stack, cut to its innermost frames. */
export function errorText(error: unknown): string {
  if (!(error instanceof Error)) return String(error).trim() || "failed";
  const head = `${error.name}: ${error.message}`.trim();
  let frames = (error.stack ?? "").split("\n").filter((line) => /^\s+at /.test(line)).join("\n");
  if (frames.length > MAX_STACK) frames = frames.slice(0, MAX_STACK) + "\n    ...";
  return frames ? `${head}\n${frames}` : head;
}

/** A delay as the server takes it: whole milliseconds, 0 to 10 years. */
function millis(ms: number): number {
  if (Number.isNaN(ms)) return 0;
  return Math.round(Math.min(Math.max(ms, 0), MAX_DELAY_MS));
}

/** Runs handlers (task kind -> function) for the tasks of a queue. `run()` resolves once
 * `stop()` was called (or SIGTERM/SIGINT arrived) and the worker shut down: it claims
 * nothing more, gives running handlers `shutdownGraceMs` to finish (their results are
 * recorded), then aborts the signals of those still running and gives their tasks back
 * without spending an attempt. A shutdown takes at most about `shutdownGraceMs` plus
 * `claimWaitMs` (a claim in flight is waited for, and what it brings is given back).
 *
 * Claiming ahead, as the Rust worker does: while the handlers' recent mean run time is
 * short, the worker holds more tasks than it runs at once, so that one claim and one
 * acknowledgement carry hundreds of tasks. As many wait as the slots start within 10 ms at
 * that mean (none before a handler has run, at most 80 per slot and 800 in all); their
 * leases are renewed like running ones. A task that waited longer than a second anyway,
 * or that has not started when the worker stops, is given back unrun without spending its
 * attempt, and the worker claims nothing ahead until short runs are seen again. */
/** Heartbeat refusals that no retry mends: the worker stops with them. */
const FATAL_BEAT_CODES = ["protocol_unsupported", "worker_not_owned", "too_many_workers", "forbidden"];

export class Worker {
  readonly workerId: string;
  private readonly o: Required<Omit<WorkerOptions, "workerId" | "logger">>;
  private readonly log: Pick<Console, "info" | "warn" | "error">;
  private readonly held = new Map<string, Task>();
  private readonly running = new Set<Promise<void>>();
  /** Tasks claimed ahead, waiting for a slot, with when they were claimed and how long
   * they may wait. */
  private waiting: { task: Task; at: number; patience: number }[] = [];
  /** The handlers' moving mean run time (each run weighs an eighth). */
  private meanRunMs: number | undefined;
  private claimBatch: number;
  private acks: LeaseCall[] = [];
  private ackBytes = 0;
  private stoppedAt = 0;
  private ackTimer: NodeJS.Timeout | undefined;
  private sending: Promise<void> = Promise.resolve();
  private stopping = false;
  private draining = false;
  /** Why the worker stopped on its own; run() rejects with it once it has shut down. */
  private fatal: ApiError | undefined;
  private wakeStop!: () => void;
  private readonly stopped = new Promise<void>((resolve) => (this.wakeStop = resolve));
  private slotFreed: (() => void) | undefined;
  /** `@opentelemetry/api` when the application has it, looked for once by run(). */
  private otel: Awaited<ReturnType<typeof openTelemetry>> = null;

  constructor(
    readonly client: Client,
    readonly handlers: Record<string, Handler>,
    options: WorkerOptions = {},
  ) {
    if (Object.keys(handlers).length === 0) throw new Error("handlers must name at least one task kind");
    this.workerId = options.workerId ?? `ts-${hostname()}-${process.pid}-${randomUUID().slice(0, 6)}`;
    this.log = options.logger ?? console;
    this.o = {
      queue: options.queue ?? "default",
      concurrency: options.concurrency ?? 10,
      leaseMs: options.leaseMs ?? 30_000,
      groups: options.groups ?? [],
      claimWaitMs: options.claimWaitMs ?? 10_000,
      claimBatch: options.claimBatch ?? 400,
      ackBatch: options.ackBatch ?? 800,
      ackDelayMs: options.ackDelayMs ?? 5,
      shutdownGraceMs: options.shutdownGraceMs ?? 15_000,
      beatEveryMs: options.beatEveryMs ?? 5_000,
      handleSignals: options.handleSignals ?? true,
    };
    if (this.o.concurrency < 1) throw new Error("concurrency must be at least 1");
    if (this.o.claimBatch < 1) throw new Error("claimBatch must be at least 1");
    this.claimBatch = this.o.claimBatch;
  }

  /** Asks `run` to shut down gracefully; returns at once. */
  stop(): void {
    if (!this.stopping) this.stoppedAt = Date.now();
    this.stopping = true;
    this.wakeStop();
    this.slotFreed?.();
  }

  async run(): Promise<void> {
    const onSignal = () => this.stop();
    if (this.o.handleSignals) {
      process.once("SIGTERM", onSignal);
      process.once("SIGINT", onSignal);
    }
    this.otel = await openTelemetry();
    this.log.info(`worker ${this.workerId} takes ${Object.keys(this.handlers).join(", ")} from queue ${this.o.queue}, ${this.o.concurrency} at once`);
    // One beat before any claim: a server that does not speak this package's protocol
    // refuses it, and the worker stops having claimed nothing.
    const starting = await this.beat(true);
    if (this.fatal) {
      if (this.o.handleSignals) {
        process.off("SIGTERM", onSignal);
        process.off("SIGINT", onSignal);
      }
      throw this.fatal;
    }
    const keeper = this.keepLeases(starting);
    // While every slot is busy, tasks that waited past their patience are given back.
    const patience = setInterval(() => this.giveBackStale(), PATIENCE_CHECK_MS);
    patience.unref();
    const claimer = this.claimLoop();
    await this.stopped;
    clearInterval(patience);
    // Tasks claimed ahead and not started stay held: they are given back below, with
    // the running ones, once the claim in flight has returned and cannot take them again.
    this.waiting = [];
    // Running handlers get their grace, then what is still held is given back.
    let graceTimer: NodeJS.Timeout | undefined;
    const grace = new Promise<void>((resolve) => (graceTimer = setTimeout(resolve, this.o.shutdownGraceMs)));
    await Promise.race([Promise.all(this.running), grace]);
    clearTimeout(graceTimer);
    // A claim in flight gives back what it gets; waiting for it before giving back the
    // tasks still running keeps it from taking them again.
    await claimer;
    const left = [...this.held.values()];
    this.held.clear();
    for (const task of left) {
      task.stop("the worker is shutting down");
      this.enqueue({ ...leaseOf(task.claimed), op: "release" });
    }
    await this.flush();
    await keeper;
    try {
      await this.client.leave(this.workerId);
    } catch (error) {
      this.log.warn(`leave: ${(error as Error).message}`);
    }
    if (this.o.handleSignals) {
      process.off("SIGTERM", onSignal);
      process.off("SIGINT", onSignal);
    }
    if (this.fatal) throw this.fatal;
  }

  private async claimLoop(): Promise<void> {
    let pause = 100;
    while (!this.stopping) {
      const want = this.draining ? 0 : this.want();
      if (want <= 0) {
        await new Promise<void>((resolve) => {
          this.slotFreed = resolve;
          if (this.draining) setTimeout(resolve, 1000);
        });
        continue;
      }
      let claimed: Claimed[];
      try {
        claimed = await this.client.claim(Object.keys(this.handlers), this.workerId, {
          queue: this.o.queue,
          limit: want,
          leaseMs: this.o.leaseMs,
          waitMs: this.o.claimWaitMs,
          groups: this.o.groups,
          workerHost: hostname(),
        });
        pause = 100;
      } catch (error) {
        if (error instanceof ApiError && error.status === 422 && /limit/.test(error.message) && this.claimBatch > 1) {
          // A server that allows smaller claims than ours: ask it for fewer.
          this.claimBatch = Math.max(1, Math.floor(this.claimBatch / 2));
          this.log.warn(`the server refused a claim of ${want}; claiming at most ${this.claimBatch}`);
          continue;
        }
        this.log.warn(`claim failed, trying again in ${pause} ms: ${(error as Error).message}`);
        await Promise.race([sleep(pause), this.stopped]);
        pause = Math.min(pause * 2, 5_000);
        continue;
      }
      const now = performance.now();
      for (const c of claimed) {
        if (this.stopping) {
          // Claimed while shutting down: give it straight back.
          this.enqueue({ ...leaseOf(c), op: "release" });
          continue;
        }
        const task = new Task(c, this.client);
        this.held.set(key(c), task);
        this.waiting.push({ task, at: now, patience: patienceOf(c, this.o.leaseMs) });
      }
      this.startWaiting();
    }
  }

  /** How many tasks to claim now: up to the free slots plus the tasks that may wait, at
   * most a claim's worth; while every slot is busy, only once half a claim's worth is
   * missing, so that short handlers do not bring claims of one. */
  private want(): number {
    const outstanding = this.running.size + this.waiting.length;
    const target = this.o.concurrency + aheadCount(this.o.concurrency, this.meanRunMs);
    const room = Math.min(target - outstanding, this.claimBatch);
    if (room <= 0) return 0;
    if (outstanding >= this.o.concurrency && room < Math.floor(Math.min(this.claimBatch, target) / 2)) return 0;
    return room;
  }

  /** Starts waiting tasks in free slots; gives back those that waited too long. */
  private startWaiting(): void {
    while (!this.stopping && this.waiting.length > 0 && this.running.size < this.o.concurrency) {
      const { task, at, patience } = this.waiting.shift()!;
      // Its lease was lost while it waited (the lease keeper let go of it): not run.
      if (!this.held.has(key(task.claimed))) continue;
      const waited = performance.now() - at;
      if (waited > patience) {
        // After such a wait, nothing is claimed ahead until short runs are seen again.
        this.meanRunMs = Math.max(this.meanRunMs ?? 0, waited);
        if (this.held.delete(key(task.claimed))) this.enqueue({ ...leaseOf(task.claimed), op: "release" });
        continue;
      }
      const running: Promise<void> = this.runOne(task).finally(() => {
        this.running.delete(running);
        this.startWaiting();
        this.slotFreed?.();
      });
      this.running.add(running);
    }
  }

  /** Gives back the waiting tasks past their patience (all slots are busy, or they would
   * have started); after such a wait, nothing is claimed ahead until short runs are seen. */
  private giveBackStale(): void {
    if (this.stopping) return;
    const now = performance.now();
    const stale = this.waiting.filter((w) => now - w.at > w.patience);
    if (stale.length === 0) return;
    this.waiting = this.waiting.filter((w) => now - w.at <= w.patience);
    this.meanRunMs = Math.max(this.meanRunMs ?? 0, ...stale.map((w) => now - w.at));
    for (const { task } of stale) {
      if (this.held.delete(key(task.claimed))) this.enqueue({ ...leaseOf(task.claimed), op: "release" });
    }
    this.slotFreed?.();
  }

  private async runOne(task: Task): Promise<void> {
    const started = performance.now();
    const call = await this.outcome(task);
    const ran = performance.now() - started;
    this.meanRunMs = this.meanRunMs === undefined ? ran : this.meanRunMs + (ran - this.meanRunMs) / 8;
    if (this.held.delete(key(task.claimed))) {
      this.enqueue({ ...leaseOf(task.claimed), ...call } as LeaseCall);
    }
  }

  private outcome(task: Task): Promise<Record<string, unknown>> {
    return inAttemptSpan(this.otel, task.claimed, () => this.handled(task));
  }

  private async handled(task: Task): Promise<Record<string, unknown>> {
    const handler = this.handlers[task.kind];
    let result: unknown;
    try {
      result = await handler(task);
    } catch (error) {
      if (error instanceof Snooze) return { op: "snooze", delay_ms: millis(error.delayMs) };
      if (error instanceof Fail) {
        const retryable = error.options.retryable ?? true;
        const call: Record<string, unknown> = { op: "fail", error: error.message.trim() || "failed", retryable };
        if (retryable && error.options.retryAfterMs !== undefined) call.retry_after_ms = millis(error.options.retryAfterMs);
        return call;
      }
      if (error instanceof LeaseGone) return { op: "release" };
      const message = error instanceof Error ? `${error.name}: ${error.message}` : String(error);
      this.log.error(`task ${task.id} (${task.kind}) failed: ${message}`);
      return { op: "fail", error: errorText(error) };
    }
    try {
      JSON.stringify(result);
    } catch (error) {
      return { op: "fail", error: `the handler's result is not JSON: ${(error as Error).message}`, retryable: false };
    }
    return { op: "complete", result: result === undefined ? null : result };
  }

  private enqueue(call: LeaseCall): void {
    this.acks.push(call);
    this.ackBytes += JSON.stringify(call).length;
    if (this.acks.length >= this.o.ackBatch || this.ackBytes >= MAX_ACK_BYTES) {
      void this.flush();
    } else if (this.ackTimer === undefined) {
      this.ackTimer = setTimeout(() => void this.flush(), this.o.ackDelayMs);
    }
  }

  /** Sends the acknowledgements waiting, one request at a time. */
  private flush(): Promise<void> {
    clearTimeout(this.ackTimer);
    this.ackTimer = undefined;
    const batch = this.acks;
    this.acks = [];
    this.ackBytes = 0;
    if (batch.length === 0) return this.sending;
    this.sending = this.sending.then(() => this.send(batch));
    return this.sending;
  }

  /** Sends `batch`, retrying while the server cannot be reached (during a shutdown, for
   * at most FINAL_FLUSH_MS). A request the server refuses is split until the call it
   * refuses stands alone; that call's task is then failed with the server's reason, so
   * that no attempt waits for its lease to run out. */
  private async send(batch: LeaseCall[]): Promise<void> {
    let pause = 100;
    for (;;) {
      try {
        const results = await this.client.acknowledge(batch);
        for (const [i, r] of results.entries()) {
          if (r.ok) continue;
          const { code, message } = r.error ?? { code: "unknown", message: "" };
          if (code === "payload_too_large" || code === "invalid_input") {
            await this.refused(batch[i], new ApiError(422, code, message));
          } else {
            this.log.info(`task ${r.task}: ${code}: ${message}`);
          }
        }
        return;
      } catch (error) {
        if (error instanceof ApiError && error.status < 500) {
          if (batch.length > 1) {
            const half = Math.floor(batch.length / 2);
            await this.send(batch.slice(0, half));
            await this.send(batch.slice(half));
          } else {
            await this.refused(batch[0], error);
          }
          return;
        }
        if (this.stopping && Date.now() - this.stoppedAt > FINAL_FLUSH_MS) {
          this.log.error(`giving up on ${batch.length} acknowledgements while shutting down: ${(error as Error).message}`);
          return;
        }
        this.log.warn(`acknowledging ${batch.length} tasks failed, trying again in ${pause} ms: ${(error as Error).message}`);
        await sleep(pause);
        pause = Math.min(pause * 2, 5_000);
      }
    }
  }

  private async refused(call: LeaseCall, error: ApiError): Promise<void> {
    this.log.error(`task ${call.task}: the server refused ${call.op}: ${error.message}`);
    if (call.op !== "complete" && call.op !== "snooze" && call.op !== "fail") return;
    const { task, token, credential, run } = call;
    const reason = `the server refused the worker's ${call.op}: ${error.code}: ${error.message}`.slice(0, 4000);
    try {
      await this.client.acknowledge([{ task, token, credential, run, op: "fail", error: reason, retryable: false }]);
    } catch (again) {
      this.log.error(`task ${call.task}: failing it was refused too: ${(again as Error).message}`);
    }
  }

  /** Renews every held lease in one request per third of the lease, and beats the
   * registry; ends once shutting down with nothing held. */
  /** `starting`: run()'s first beat could not be delivered and is tried again at once. */
  private async keepLeases(starting: boolean): Promise<void> {
    const every = Math.max(this.o.leaseMs / 3, 200);
    let nextBeat = starting ? 0 : Date.now() + this.o.beatEveryMs;
    while (!(this.stopping && this.held.size === 0)) {
      if (Date.now() >= nextBeat) {
        starting = await this.beat(starting);
        nextBeat = Date.now() + this.o.beatEveryMs;
      }
      await this.renew();
      await Promise.race([sleep(Math.min(every, this.o.beatEveryMs)), this.stopping ? sleep(every) : this.stopped]);
    }
  }

  private async beat(starting: boolean): Promise<boolean> {
    try {
      const draining = await this.client.heartbeat(this.workerId, {
        host: hostname(),
        version: "tasktable-typescript 0.1.0",
        groups: this.o.groups,
        queues: [this.o.queue],
        capacity: this.o.concurrency,
        starting,
        // The kinds it has handlers for, so a task no worker handles can say so.
        kinds: Object.keys(this.handlers).sort(),
      });
      if (draining && !this.draining) this.log.info(`worker ${this.workerId} is draining: claiming nothing new`);
      this.draining = draining;
      if (!draining) this.slotFreed?.();
      return false;
    } catch (error) {
      if (error instanceof ApiError && FATAL_BEAT_CODES.includes(error.code)) {
        // A server that does not speak this worker's protocol, or a token that may not
        // run it as it is (its id another token's, its token's workers all live, queues
        // or groups its token may not take): stop, and let run() reject with why.
        this.log.error(`worker ${this.workerId}: ${error.message}`);
        this.fatal = error;
        this.stop();
      }
      return starting;
    }
  }

  private async renew(): Promise<void> {
    const held = [...this.held.values()];
    for (let start = 0; start < held.length; start += 1000) {
      const chunk = held.slice(start, start + 1000);
      let results;
      try {
        results = await this.client.acknowledge(
          chunk.map((t) => ({ ...leaseOf(t.claimed), op: "renew", lease_ms: this.o.leaseMs }) as LeaseCall),
        );
      } catch (error) {
        this.log.warn(`renewing ${chunk.length} leases failed: ${(error as Error).message}`);
        return;
      }
      chunk.forEach((task, i) => {
        const r = results[i];
        if (r && !r.ok) {
          this.log.warn(`task ${task.id}: lease gone (${r.error?.code}); stopping its handler`);
          this.held.delete(key(task.claimed));
          task.stop(r.error?.code ?? "lease gone");
        }
      });
    }
  }
}

/** A claim: the task, its run and the claim's fencing token (a task claimed again is
 * another claim, whose handler must not stand in for the first one's). */
function key(c: Claimed): string {
  return `${c.id}/${c.run ?? ""}/${c.token}`;
}
