// The TypeScript package's worker with a no-op handler, for clients/bench/remote.py.
import { Client, Worker } from "../typescript/dist/index.js";

const client = Client.fromEnv();
const quiet = { info() {}, warn() {}, error: console.error };
await new Worker(client, { noop: () => null }, { concurrency: Number(process.env.CONCURRENCY), shutdownGraceMs: 1000, logger: quiet }).run();
