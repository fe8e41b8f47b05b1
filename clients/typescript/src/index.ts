/**
 * tasktable for Node: submit tasks, and run them in a worker through the pull protocol.
 *
 * ```ts
 * import { Client, Worker } from "tasktable";
 * const client = Client.fromEnv();
 * await new Worker(client, { resize: async (task) => ({ ok: task.payload.path }) }).run();
 * ```
 */
export { Client, leaseOf, PROTOCOL_VERSION } from "./client.js";
export type { AckResult, Claimed, ClaimOptions, LeaseCall, LeaseRef } from "./client.js";
export { ApiError, ConnectionFailed, Fail, LeaseGone, Snooze, TasktableError } from "./errors.js";
export { Task, Worker, aheadCount } from "./worker.js";
export type { Handler, WorkerOptions } from "./worker.js";
