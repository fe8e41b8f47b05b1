// What both peers' drivers share: the command line, the handshake with run.py (a line
// "ready" once the jobs are in, then "go" on stdin starts the clock), the count of handled
// jobs, and the one line of JSON a drain ends with.
import { readFileSync } from "node:fs";
import { createInterface } from "node:readline";
import pg from "pg";

export function parseArgs() {
  const [url, tasks, concurrency] = process.argv.slice(2);
  if (!url || !tasks || !concurrency) {
    console.error("usage: <driver>.mjs DATABASE_URL TASKS CONCURRENCY");
    process.exit(2);
  }
  return { url, tasks: Number(tasks), concurrency: Number(concurrency) };
}

// Says the jobs are in and waits for run.py to start the clock.
export async function readyThenGo() {
  console.log("ready");
  const lines = createInterface({ input: process.stdin });
  for await (const line of lines) {
    if (line.trim() === "go") {
      lines.close();
      return;
    }
  }
  throw new Error("stdin closed before go");
}

// Resolves when every handled job's completion is committed: `remaining` counts the jobs
// the database still holds as not done, asked only once the handlers have seen them all.
export async function drained(url, handled, tasks, remaining) {
  while (handled() < tasks) await new Promise((r) => setTimeout(r, 2));
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    for (;;) {
      const { rows } = await client.query(remaining);
      if (Number(rows[0].n) === 0) return;
      await new Promise((r) => setTimeout(r, 2));
    }
  } finally {
    await client.end();
  }
}

export function report(name, version, tasks, concurrency, started, cpuBefore) {
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = process.cpuUsage(cpuBefore);
  console.log(
    JSON.stringify({
      system: name,
      version,
      tasks,
      concurrency,
      secs,
      tasks_per_sec: tasks / secs,
      worker_cpu_us_per_task: (cpu.user + cpu.system) / tasks,
    }),
  );
}

// The version of a package installed beside this script (newer packages do not export
// their package.json).
export function installedVersion(name) {
  const file = new URL(`./node_modules/${name}/package.json`, import.meta.url);
  return JSON.parse(readFileSync(file, "utf8")).version;
}
