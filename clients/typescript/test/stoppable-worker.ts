// A worker whose handler runs until its signal is aborted, saying so on stdout as JSON
// lines: {"started": id} when a task starts, {"stopped": id} when the signal aborts.
import { Client, Worker } from "../src/index.js";

const client = Client.fromEnv();
const worker = new Worker(
  client,
  {
    wait_for_stop: (task) =>
      new Promise((resolve) => {
        console.log(JSON.stringify({ started: task.id }));
        task.signal.addEventListener("abort", () => {
          console.log(JSON.stringify({ stopped: task.id }));
          resolve(null);
        });
      }),
  },
  {
    concurrency: 2,
    leaseMs: Number(process.env.LEASE_MS),
    claimWaitMs: 1000,
    shutdownGraceMs: Number(process.env.GRACE_MS),
    logger: { info() {}, warn() {}, error: console.error },
  },
);
await worker.run();
