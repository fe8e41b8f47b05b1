import { ApiError, ConnectionFailed } from "./errors.js";
import { currentTraceparent } from "./trace.js";

/** A task claimed under a lease (the claim's answer, as docs/api.md describes it). */
export interface Claimed {
  id: number;
  kind: string;
  queue: string;
  payload: unknown;
  /** What an earlier attempt saved, to resume from. */
  checkpoint: unknown;
  attempt: number;
  max_attempts: number;
  /** The fencing token: grows by one on every claim of the task. */
  token: number;
  /** The claim's secret; send it back with every lease call. */
  credential: string;
  /** The run of a multi-run task; null for a task that runs once. */
  run: number | null;
  lease_expires_at: string | null;
  deadline_at: string | null;
  /** The W3C traceparent of whoever submitted the task (null when the submit had none): the
   * worker runs the attempt in a span of that trace when OpenTelemetry is installed. */
  traceparent?: string | null;
}

/** The fields that name a lease in a lease call. */
export interface LeaseRef {
  task: number;
  token: number;
  credential: string;
  run?: number;
}

export type LeaseCall = LeaseRef &
  (
    | { op: "renew"; lease_ms?: number }
    | { op: "checkpoint"; checkpoint?: unknown; progress?: unknown }
    | { op: "complete"; result?: unknown }
    | { op: "fail"; error: string; retryable?: boolean; retry_after_ms?: number }
    | { op: "snooze"; delay_ms?: number }
    | { op: "release" }
    | { op: "log"; lines: string[] }
  );

/** One lease call's answer in a batched acknowledgement. */
export interface AckResult {
  task: number;
  run: number | null;
  ok: boolean;
  error?: { code: string; message: string };
  lease_expires_at?: string;
}

export interface ClaimOptions {
  queue?: string;
  limit?: number;
  leaseMs?: number;
  waitMs?: number;
  groups?: string[];
  workerHost?: string;
}

/** The lease of a claimed task, as lease calls name it. */
export function leaseOf(t: Claimed): LeaseRef {
  const lease: LeaseRef = { task: t.id, token: t.token, credential: t.credential };
  if (t.run !== null) lease.run = t.run;
  return lease;
}

/** Where `Client.fromEnv` looks without TASKTABLE_SERVER, as the CLI does. */
export const DEFAULT_SERVER = "http://127.0.0.1:8080";

/** The version of the pull protocol this package speaks, sent with every heartbeat; the
 * server answers with the versions it speaks (docs/api.md, "Registering a pull worker"). */
export const PROTOCOL_VERSION = 1;

/** A tasktable server at `baseUrl` (`http://host:port`), called with `token`. */
export class Client {
  private readonly base: string;
  private readonly headers: Record<string, string>;

  constructor(baseUrl: string, token?: string) {
    this.base = baseUrl.replace(/\/+$/, "");
    this.headers = { "content-type": "application/json", accept: "application/json" };
    if (token) this.headers.authorization = `Bearer ${token}`;
  }

  /** The server and token the `tasktable` CLI uses: TASKTABLE_SERVER (by default
   * http://127.0.0.1:8080) and TASKTABLE_TOKEN (none when unset, for a server without
   * tokens). */
  static fromEnv(): Client {
    return new Client(process.env.TASKTABLE_SERVER || DEFAULT_SERVER, process.env.TASKTABLE_TOKEN || undefined);
  }

  /** The decoded JSON answer; throws ApiError for an error answer, ConnectionFailed when
   * the server cannot be reached. */
  async request<T>(method: string, path: string, body?: unknown, extra?: Record<string, string>): Promise<T> {
    // Outside the try: a value that is not JSON is the caller's error, not the network's.
    const data = body === undefined ? undefined : JSON.stringify(body);
    const headers = extra ? { ...this.headers, ...extra } : this.headers;
    let response: Response;
    try {
      response = await fetch(this.base + path, { method, headers, body: data });
    } catch (error) {
      throw new ConnectionFailed(`${method} ${path}: ${(error as Error).message}`, { cause: error });
    }
    let text: string;
    try {
      text = await response.text();
    } catch (error) {
      throw new ConnectionFailed(`${method} ${path}: ${(error as Error).message}`, { cause: error });
    }
    let answer: any;
    try {
      answer = text ? JSON.parse(text) : undefined;
    } catch {
      // Not tasktable's answer: a proxy's error page, say.
      throw new ApiError(response.ok ? 502 : response.status, "bad_response", text.slice(0, 200));
    }
    if (!response.ok) {
      const detail = answer?.error ?? {};
      throw new ApiError(response.status, detail.code ?? "unknown", detail.message ?? text);
    }
    return answer as T;
  }

  /** Submits one task; resolves to its id. `options` are the other fields of POST /api/v1/tasks.
   * With OpenTelemetry installed, the task continues the active span's trace. */
  async submit(kind: string, payload: unknown = null, options: Record<string, unknown> = {}): Promise<number> {
    const body = { kind, payload, ...options };
    const answer = await this.request<{ id: number }>("POST", "/api/v1/tasks", body, await traceHeaders());
    return answer.id;
  }

  /** Submits up to 10,000 tasks in one transaction; resolves to their ids in order. With
   * OpenTelemetry installed, the tasks continue the active span's trace. */
  async submitMany(tasks: Record<string, unknown>[]): Promise<number[]> {
    const answer = await this.request<{ tasks: { id: number }[] }>(
      "POST",
      "/api/v1/tasks/batch",
      { tasks },
      await traceHeaders(),
    );
    return answer.tasks.map((t) => t.id);
  }

  /** The task as GET /api/v1/tasks/{id} shows it, with its `attempts`, `runs`, `timeline`
   * and, while it is pending, `waiting` (why: each a `reason` code and its `text`) beside
   * its own fields. */
  async get(id: number): Promise<Record<string, any>> {
    const shown = await this.request<{
      task: Record<string, any>;
      attempts: unknown[];
      runs?: unknown[];
      timeline?: unknown[];
      waiting?: { reason: string; text: string }[];
    }>("GET", `/api/v1/tasks/${id}`);
    return {
      ...shown.task,
      attempts: shown.attempts,
      runs: shown.runs ?? [],
      timeline: shown.timeline ?? [],
      waiting: shown.waiting ?? [],
    };
  }

  /** Claims up to `limit` due tasks of `kinds`, waiting up to `waitMs` for one. */
  async claim(kinds: string[], workerId: string, options: ClaimOptions = {}): Promise<Claimed[]> {
    const body: Record<string, unknown> = {
      queue: options.queue ?? "default",
      kinds,
      worker_id: workerId,
      limit: options.limit ?? 1,
      lease_ms: options.leaseMs ?? 30_000,
      wait_ms: options.waitMs ?? 0,
      groups: options.groups ?? [],
    };
    if (options.workerHost) body.worker_host = options.workerHost;
    const answer = await this.request<{ tasks: Claimed[] }>("POST", "/api/v1/claim", body);
    return answer.tasks;
  }

  /** Carries out many lease calls in one request (POST /api/v1/leases); each is fenced and
   * answered on its own, in order. */
  async acknowledge(calls: LeaseCall[]): Promise<AckResult[]> {
    const answer = await this.request<{ results: AckResult[] }>("POST", "/api/v1/leases", { leases: calls });
    return answer.results;
  }

  /** Registers or beats; resolves to whether an operator asked this worker to drain.
   * Says which pull protocol this package speaks (`PROTOCOL_VERSION`): a server that does
   * not speak it refuses the beat with an `ApiError` of code `protocol_unsupported`. */
  async heartbeat(workerId: string, facts: Record<string, unknown> = {}): Promise<boolean> {
    const answer = await this.request<{ draining: boolean }>("POST", "/api/v1/heartbeat", {
      worker_id: workerId,
      protocol_version: PROTOCOL_VERSION,
      ...facts,
    });
    return answer.draining;
  }

  async leave(workerId: string): Promise<void> {
    await this.request("POST", "/api/v1/leave", { worker_id: workerId });
  }
}

/** The active span's `traceparent` header, when OpenTelemetry is installed and a span is
 * active. */
async function traceHeaders(): Promise<Record<string, string> | undefined> {
  const traceparent = await currentTraceparent();
  return traceparent ? { traceparent } : undefined;
}
