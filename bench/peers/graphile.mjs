// graphile-worker with the throughput settings its release notes recommend: a local queue
// of concurrency + 1 jobs and completions batched for 25 ms.
import { run, makeWorkerUtils, Logger } from "graphile-worker";
import { parseArgs, readyThenGo, drained, report, installedVersion } from "./common.mjs";

const { url, tasks, concurrency } = parseArgs();
const version = installedVersion("graphile-worker");

// Its log goes to stderr, errors only: stdout is the handshake with run.py.
const logger = new Logger(() => (level, message) => {
  if (level === "error") console.error(message);
});
const utils = await makeWorkerUtils({ connectionString: url, logger });
await utils.migrate();
for (let start = 0; start < tasks; start += 5000) {
  const n = Math.min(5000, tasks - start);
  await utils.addJobs(Array.from({ length: n }, () => ({ identifier: "noop", payload: {} })));
}
await utils.release();

await readyThenGo();
let handled = 0;
const cpuBefore = process.cpuUsage();
const started = process.hrtime.bigint();
const runner = await run({
  connectionString: url,
  concurrency,
  noHandleSignals: true,
  logger,
  taskList: {
    noop: async () => {
      handled += 1;
    },
  },
  preset: {
    worker: {
      localQueue: { size: concurrency + 1 },
      completeJobBatchDelay: 25,
      failJobBatchDelay: 25,
    },
  },
});
await drained(url, () => handled, tasks, "SELECT count(*) AS n FROM graphile_worker._private_jobs");
report("graphile-worker", version, tasks, concurrency, started, cpuBefore);
await runner.stop();
process.exit(0);
