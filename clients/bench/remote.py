"""Remote workers against `tasktable serve` on PostgreSQL: drain rates of the client
packages' workers next to the in-process worker at the same concurrency, and what idle
long-poll claims cost the database.

    python3 clients/bench/remote.py --tasktable target/release/tasktable \\
        --bench target/release/tasktable-bench --postgres postgres://postgres@127.0.0.1:5432

Each measurement gets a fresh database. Prints a Markdown table and writes JSON to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import threading
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "clients" / "python" / "src"))

from tasktable import Client  # noqa: E402

# One token may hold 32 waiting claims: eight worker tokens hold the idle test's 200.
WORKER_TOKENS = [f"bench-worker-token-{i:02}" for i in range(8)]
TOKENS = ",".join([f"worker:{t}" for t in WORKER_TOKENS] + ["operator:bench-operator-token"])


def psql(url: str, sql: str, database: str = "postgres") -> str:
    return subprocess.run(
        ["psql", "-qAtX", f"{url}/{database}", "-c", sql], check=True, capture_output=True, text=True
    ).stdout.strip()


class Serve:
    def __init__(self, binary: str, url: str, name: str) -> None:
        psql(url, f"DROP DATABASE IF EXISTS {name}")
        psql(url, f"CREATE DATABASE {name}")
        self.url, self.name = url, name
        env = dict(os.environ, TASKTABLE_TOKENS=TOKENS, RUST_LOG="warn")
        self.process = subprocess.Popen(
            [binary, "serve", "--database-url", f"{url}/{name}", "--listen", "127.0.0.1:0", "--workers", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True,
        )
        line = self.process.stdout.readline().strip()
        self.base = line.split()[-1]
        threading.Thread(target=self.process.stdout.read, daemon=True).start()

    def client(self, token: str) -> Client:
        return Client(self.base, token, timeout=120)

    def commits(self) -> int:
        return int(psql(self.url, f"SELECT xact_commit FROM pg_stat_database WHERE datname = '{self.name}'"))

    def close(self) -> None:
        self.process.terminate()
        self.process.wait()
        psql(self.url, f"DROP DATABASE IF EXISTS {self.name} WITH (FORCE)")


def cpu_of(pids) -> dict:
    """CPU seconds so far of each of `pids` that is alive."""
    tick = os.sysconf("SC_CLK_TCK")
    seen = {}
    for pid in pids:
        try:
            stat = pathlib.Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rfind(")") + 2:].split()
        seen[pid] = (int(fields[11]) + int(fields[12])) / tick
    return seen


def postgres_pids() -> list:
    """Every process of the machine's PostgreSQL servers (the bench's database is one)."""
    out = []
    for proc in pathlib.Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and (proc / "comm").read_text().strip() == "postgres":
                out.append(int(proc.name))
        except OSError:
            pass
    return out


def since(before: dict, after: dict) -> float:
    """CPU used between two readings by the processes alive at the second."""
    return sum(t - before.get(pid, 0.0) for pid, t in after.items())


def submit(ops: Client, n: int) -> None:
    for start in range(0, n, 5000):
        ops.submit_many([{"kind": "noop", "payload": None} for _ in range(min(5000, n - start))])


def succeeded(ops: Client) -> int:
    queues = ops._http.request("GET", "/api/v1/queues")["queues"]
    return sum(q["counts"].get("succeeded", 0) for q in queues)


def drain(args, label: str, worker_cmd: list) -> dict:
    serve = Serve(args.tasktable, args.postgres, "tasktable_bench_remote")
    try:
        ops = serve.client("bench-operator-token")
        submit(ops, args.tasks)
        env = dict(os.environ, TASKTABLE_SERVER=serve.base, TASKTABLE_TOKEN=WORKER_TOKENS[0],
                   CONCURRENCY=str(args.concurrency), PYTHONPATH=str(ROOT / "clients" / "python" / "src"))
        serve_before, pg_before = cpu_of([serve.process.pid]), cpu_of(postgres_pids())
        started = time.monotonic()
        worker = subprocess.Popen(worker_cmd, env=env)
        # Looking costs a count by state over the table twenty times a second.
        while succeeded(ops) < args.tasks:
            time.sleep(0.05)
        elapsed = time.monotonic() - started
        worker_cpu = sum(cpu_of([worker.pid]).values())
        serve_cpu = since(serve_before, cpu_of([serve.process.pid]))
        pg_cpu = since(pg_before, cpu_of(postgres_pids()))
        worker.terminate()
        worker.wait(timeout=60)
        rate = args.tasks / elapsed
        per = lambda secs: round(secs * 1e6 / args.tasks, 1)  # noqa: E731
        result = {"tasks_per_s": round(rate), "worker_cpu_us_per_task": per(worker_cpu),
                  "serve_cpu_us_per_task": per(serve_cpu), "postgres_cpu_us_per_task": per(pg_cpu)}
        print(f"{label}: {args.tasks} tasks in {elapsed:.2f} s = {rate:.0f} tasks/s; CPU per task: worker "
              f"{result['worker_cpu_us_per_task']} us, serve {result['serve_cpu_us_per_task']} us, "
              f"PostgreSQL {result['postgres_cpu_us_per_task']} us", flush=True)
        return result
    finally:
        serve.close()


def in_process(args) -> float:
    out = pathlib.Path(args.out).with_suffix(".inprocess.json")
    env = dict(os.environ, TASKTABLE_TEST_POSTGRES_URL=f"{args.postgres}/postgres")
    subprocess.run([args.bench, "--backend", "postgres", "--only", "drain", "--drain-sizes", str(args.tasks),
                    "--drain-concurrency", str(args.concurrency), "--out", str(out)], check=True, env=env,
                   stdout=subprocess.DEVNULL)
    rows = json.loads(out.read_text())
    found = []

    def walk(o):
        if isinstance(o, dict):
            if "tasks_per_s" in o:
                found.append(o)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)

    walk(rows)
    rate = float(found[0]["tasks_per_s"])
    print(f"in-process: {rate:.0f} tasks/s", flush=True)
    return rate


def idle(args, binary: str, label: str) -> float:
    """Commits per second of the server's database while `args.idle` claims wait."""
    serve = Serve(binary, args.postgres, "tasktable_bench_idle")
    try:
        stop = threading.Event()

        def wait_forever(n: int) -> None:
            client = serve.client(WORKER_TOKENS[n % len(WORKER_TOKENS)])
            while not stop.is_set():
                client.claim(["noop"], f"idle-{n}", wait_ms=30_000)

        for n in range(args.idle):
            threading.Thread(target=wait_forever, args=(n,), daemon=True).start()
        time.sleep(3)
        before = serve.commits()
        time.sleep(args.idle_seconds)
        rate = (serve.commits() - before) / args.idle_seconds
        stop.set()
        print(f"idle ({label}): {args.idle} waiting claims cost {rate:.1f} commits/s", flush=True)
        return rate
    finally:
        serve.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tasktable", default=str(ROOT / "target" / "release" / "tasktable"))
    parser.add_argument("--baseline-tasktable", help="an older build, for the idle cost before")
    parser.add_argument("--bench", default=str(ROOT / "target" / "release" / "tasktable-bench"))
    parser.add_argument("--postgres", default="postgres://postgres@127.0.0.1:5432")
    parser.add_argument("--tasks", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=10)
    parser.add_argument("--idle", type=int, default=200)
    parser.add_argument("--idle-seconds", type=float, default=10)
    parser.add_argument("--out", default=str(ROOT / "target" / "bench" / "remote.json"))
    args = parser.parse_args()
    pathlib.Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    here = pathlib.Path(__file__).parent
    typescript = ROOT / "clients" / "typescript"
    if not (typescript / "dist" / "index.js").exists():
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=typescript, check=True)
    result = {"tasks": args.tasks, "concurrency": args.concurrency}
    result["in_process"] = in_process(args)
    result["python"] = drain(args, "python", [sys.executable, str(here / "noop_worker.py")])
    result["typescript"] = drain(args, "typescript", ["node", str(here / "noop_worker.mjs")])
    if args.idle:
        result["idle_commits_per_s"] = idle(args, args.tasktable, "this build")
    if args.idle and args.baseline_tasktable:
        result["idle_commits_per_s_baseline"] = idle(args, args.baseline_tasktable, "baseline")
    pathlib.Path(args.out).write_text(json.dumps(result, indent=2))
    print()
    print("| worker | tasks/s | x in-process | CPU per task: worker, serve, PostgreSQL (µs) |")
    print("|---|---|---|---|")
    print(f"| in-process | {result['in_process']:.0f} | 1.00 | - |")
    for name in ("python", "typescript"):
        r = result[name]
        print(f"| {name} | {r['tasks_per_s']} | {r['tasks_per_s'] / result['in_process']:.2f} | "
              f"{r['worker_cpu_us_per_task']}, {r['serve_cpu_us_per_task']}, {r['postgres_cpu_us_per_task']} |")


if __name__ == "__main__":
    main()
