/** Anything the client could not do. */
export class TasktableError extends Error {
  override name = "TasktableError";
}

/** The server could not be reached, or the connection broke mid-call. */
export class ConnectionFailed extends TasktableError {
  override name = "ConnectionFailed";
}

/** The server answered with an error: its HTTP status, and the stable `code` and the
 * `message` of docs/api.md. */
export class ApiError extends TasktableError {
  override name = "ApiError";
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
  ) {
    super(`${status} ${code}: ${message}`);
  }
}

/** The codes that say a lease is no longer the caller's: stop working on the task. */
export const LEASE_GONE = new Set(["lease_lost", "task_cancelled", "task_retargeted"]);

/** The task's lease is no longer this worker's: what the handler does now is not recorded. */
export class LeaseGone extends TasktableError {
  override name = "LeaseGone";
  constructor(
    readonly taskId: number,
    readonly code: string,
    message: string,
  ) {
    super(`task ${taskId}: ${code}: ${message}`);
  }
}

/** Throw from a handler to fail the attempt. Retryable (the default): the task runs again
 * after its backoff, or after `retryAfterMs`; otherwise it fails at once. */
export class Fail extends Error {
  override name = "Fail";
  constructor(
    message: string,
    readonly options: { retryable?: boolean; retryAfterMs?: number } = {},
  ) {
    super(message);
  }
}

/** Throw from a handler to run the task again after `delayMs`, without spending an attempt. */
export class Snooze extends Error {
  override name = "Snooze";
  constructor(readonly delayMs: number) {
    super(`snooze for ${delayMs} ms`);
  }
}
