// pg-boss with the throughput settings its docs give: workers that fetch 1,000 jobs at a
// time and poll every 0.5 s, one worker (a call of work()) per unit of concurrency.
import * as pgBoss from "pg-boss";
import { parseArgs, readyThenGo, drained, report, installedVersion } from "./common.mjs";

const { url, tasks, concurrency } = parseArgs();
const version = installedVersion("pg-boss");
const PgBoss = pgBoss.PgBoss ?? pgBoss.default;
const queue = "noop";

const boss = new PgBoss({ connectionString: url });
boss.on("error", (error) => console.error(error));
await boss.start();
await boss.createQueue(queue);
for (let start = 0; start < tasks; start += 5000) {
  const n = Math.min(5000, tasks - start);
  const jobs = Array.from({ length: n }, () => ({ name: queue, data: {} }));
  // pg-boss 11 and later take the queue's name first.
  await (Number(version.split(".")[0]) >= 11 ? boss.insert(queue, jobs) : boss.insert(jobs));
}

await readyThenGo();
let handled = 0;
const cpuBefore = process.cpuUsage();
const started = process.hrtime.bigint();
for (let i = 0; i < concurrency; i++) {
  await boss.work(queue, { batchSize: 1000, pollingIntervalSeconds: 0.5 }, async (jobs) => {
    handled += jobs.length;
  });
}
await drained(
  url,
  () => handled,
  tasks,
  `SELECT count(*) AS n FROM pgboss.job WHERE name = '${queue}' AND state <> 'completed'`,
);
report("pg-boss", version, tasks, concurrency, started, cpuBefore);
await boss.stop({ graceful: false, wait: false });
process.exit(0);
