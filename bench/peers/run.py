"""tasktable's drain beside its peers' on one throwaway PostgreSQL, in one interleaved run.

    python3 bench/peers/run.py                 # builds tasktable-bench, 3 rounds of 100,000 tasks
    python3 bench/peers/run.py --latest        # the peers' latest versions too
    python3 bench/peers/run.py --rounds 1 --tasks 20000 --concurrency 10

What it does, and why (docs/benchmarks.md, "Peers"):
- Installs the peers from the npm registry into bench/peers/node_modules at the versions
  package.json pins (and, with --latest, the newest ones into target/bench/peers-latest).
- Starts a PostgreSQL server of its own (initdb in a temporary directory, a free port,
  the server's default settings), so no other database's work lands in its counters.
- Each round runs, for each concurrency, every system in turn on a fresh database:
  tasktable (`tasktable-bench --only drain`, the worker's defaults), graphile-worker
  (local queue of concurrency + 1, completions batched for 25 ms) and pg-boss (batches of
  1,000, polling every 0.5 s). Every drain has the commit ceiling measured just before and
  after it (8 connections, one-row UPDATEs; `tasktable-bench ceiling`), the CPU of the
  worker process and of the server's processes, and the WAL written.
- Prints one Markdown table of medians (and ranges) over the rounds and writes the JSON of
  every drain to --out.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parents[1]
LATEST = {"graphile-worker": "latest", "pg-boss": "latest", "pg": "latest"}


def log(*parts) -> None:
    print(*parts, file=sys.stderr, flush=True)


def npm_install(directory: pathlib.Path) -> None:
    log(f"peers: npm install in {directory}")
    verb = "ci" if (directory / "package-lock.json").exists() else "install"
    subprocess.run(["npm", verb, "--no-audit", "--no-fund", "--loglevel=error"], cwd=directory, check=True)


def latest_dir() -> pathlib.Path:
    directory = ROOT / "target" / "bench" / "peers-latest"
    directory.mkdir(parents=True, exist_ok=True)
    package = json.loads((HERE / "package.json").read_text())
    package["dependencies"] = LATEST
    (directory / "package.json").write_text(json.dumps(package, indent=2))
    (directory / "package-lock.json").unlink(missing_ok=True)  # the newest, every run
    for script in HERE.glob("*.mjs"):
        shutil.copy(script, directory / script.name)
    return directory


class Server:
    """A throwaway PostgreSQL: its own data directory and port, default settings."""

    def __init__(self) -> None:
        bins = sorted(pathlib.Path("/usr/lib/postgresql").glob("*/bin"))
        if not bins:
            sys.exit("peers: no PostgreSQL server binaries under /usr/lib/postgresql")
        self.bin = bins[-1]
        self.dir = pathlib.Path(tempfile.mkdtemp(prefix="tasktable-peers-"))
        self.as_user = []
        if os.geteuid() == 0:  # initdb refuses root: run the server as postgres
            shutil.chown(self.dir, "postgres")
            self.as_user = ["runuser", "-u", "postgres", "--"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        data = self.dir / "data"
        self.data = data
        self._run([self.bin / "initdb", "-D", data, "-A", "trust", "-U", "postgres"])
        opts = f"-p {self.port} -k {self.dir} -c listen_addresses=127.0.0.1"
        self._run([self.bin / "pg_ctl", "-D", data, "-o", opts, "-l", self.dir / "log", "-w", "start"])
        self.url = f"postgres://postgres@127.0.0.1:{self.port}"
        version = self.sql("postgres", "SHOW server_version")
        log(f"peers: PostgreSQL {version} on port {self.port} ({self.dir})")
        self.version = version

    def _run(self, argv) -> None:
        subprocess.run(self.as_user + [str(a) for a in argv], check=True, stdout=subprocess.DEVNULL)

    def sql(self, database: str, statement: str) -> str:
        out = subprocess.run(
            ["psql", "-qAtX", f"{self.url}/{database}", "-c", statement],
            check=True, capture_output=True, text=True,
        )
        return out.stdout.strip()

    def fresh(self, name: str) -> str:
        self.sql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        self.sql("postgres", f"CREATE DATABASE {name}")
        return f"{self.url}/{name}"

    def drop(self, name: str) -> None:
        self.sql("postgres", f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")

    def wal(self) -> int:
        return int(self.sql("postgres", "SELECT pg_current_wal_lsn() - '0/0'"))

    def cpu(self) -> dict:
        """CPU seconds so far of each process of this server (postmaster and backends)."""
        postmaster = int((self.data / "postmaster.pid").read_text().split()[0])
        tick = os.sysconf("SC_CLK_TCK")
        seen = {}
        for proc in pathlib.Path("/proc").iterdir():
            if not proc.name.isdigit():
                continue
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rfind(")") + 2:].split()
            pid, ppid = int(proc.name), int(fields[1])
            if pid == postmaster or ppid == postmaster:
                seen[pid] = (int(fields[11]) + int(fields[12])) / tick
        return seen

    @staticmethod
    def cpu_since(before: dict, after: dict) -> float:
        """CPU used between two readings by the processes alive at the second: a backend
        that exited meanwhile (an autovacuum worker, say) is left out, not subtracted."""
        return sum(t - before.get(pid, 0.0) for pid, t in after.items())

    def close(self) -> None:
        subprocess.run(self.as_user + [str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "stop"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        shutil.rmtree(self.dir, ignore_errors=True)


def ceiling(bench: str, url: str, secs: float) -> float:
    out = subprocess.run([bench, "ceiling", "--url", url, "--secs", str(secs)], check=True,
                         capture_output=True, text=True)
    return float(out.stdout.strip())


def run_tasktable(args, server: Server) -> dict:
    out = pathlib.Path(tempfile.mkstemp(suffix=".json")[1])
    env = dict(os.environ, TASKTABLE_TEST_POSTGRES_URL=f"{server.url}/postgres")
    subprocess.run(
        [args.bench, "--backend", "postgres", "--only", "drain", "--drain-sizes", str(args.tasks),
         "--drain-concurrency", str(args.c), "--out", str(out)],
        check=True, env=env, stdout=subprocess.DEVNULL,
    )
    (row,) = [r for r in json.loads(out.read_text())["results"] if r["scenario"] == "1 drain"]
    out.unlink()
    return {
        "system": "tasktable",
        "version": subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                                  capture_output=True, text=True).stdout.strip(),
        "tasks_per_sec": row["tasks_per_s"],
        "ceiling": row["ceiling_commits_per_s"],
        "worker_cpu_us_per_task": row.get("bench_cpu_us_per_task"),
        "server_cpu_us_per_task": row.get("server_cpu_us_per_task"),
        "wal_bytes_per_task": row.get("wal_bytes_per_task"),
    }


def run_peer(args, server: Server, directory: pathlib.Path, script: str) -> dict:
    name = "peers_drain"
    url = server.fresh(name)
    child = subprocess.Popen(
        ["node", str(directory / script), url, str(args.tasks), str(args.c)],
        cwd=directory, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )
    try:
        if child.stdout.readline().strip() != "ready":
            sys.exit(f"peers: {script} failed before its jobs were in")
        subprocess.run(["psql", "-qAtX", url, "-c", "ANALYZE"], check=True)
        before_ceiling = ceiling(args.bench, url, args.ceiling_secs)
        wal, cpu = server.wal(), server.cpu()
        child.stdin.write("go\n")
        child.stdin.flush()
        line = child.stdout.readline()
        server_cpu = server.cpu_since(cpu, server.cpu())
        wal = server.wal() - wal
        if child.wait() != 0 or not line.startswith("{"):
            sys.exit(f"peers: {script} exited with {child.returncode}: {line!r}")
        result = json.loads(line)
        after_ceiling = ceiling(args.bench, url, args.ceiling_secs)
    finally:
        child.kill()
        server.drop(name)
    return {
        "system": result["system"],
        "version": result["version"],
        "tasks_per_sec": round(result["tasks_per_sec"]),
        "ceiling": round((before_ceiling + after_ceiling) / 2),
        "worker_cpu_us_per_task": round(result["worker_cpu_us_per_task"], 1),
        "server_cpu_us_per_task": round(server_cpu * 1e6 / args.tasks, 1),
        "wal_bytes_per_task": round(wal / args.tasks),
    }


def spread(values) -> str:
    values = [v for v in values if v is not None]
    if not values:
        return "-"
    med = statistics.median(values)
    fmt = (lambda v: f"{v:,.0f}") if med >= 100 else (lambda v: f"{v:.2f}" if med < 10 else f"{v:.1f}")
    return fmt(med) if len(values) == 1 else f"{fmt(med)} ({fmt(min(values))}-{fmt(max(values))})"


def table(rows: list) -> str:
    lines = [
        "| system | concurrency | tasks/s | x ceiling | CPU per task (µs): worker + server, medians | WAL per task (B) |",
        "|---|---|---|---|---|---|",
    ]
    keys = []
    for r in rows:
        key = (r["system"], r["version"], r["concurrency"])
        if key not in keys:
            keys.append(key)
    for system, version, c in sorted(keys, key=lambda k: (k[2], keys.index(k))):
        runs = [r for r in rows if (r["system"], r["version"], r["concurrency"]) == (system, version, c)]
        ratio = [r["tasks_per_sec"] / r["ceiling"] for r in runs]
        cpu = [(r["worker_cpu_us_per_task"] or 0) + (r["server_cpu_us_per_task"] or 0) for r in runs]
        worker = statistics.median([r["worker_cpu_us_per_task"] or 0 for r in runs])
        server = statistics.median([r["server_cpu_us_per_task"] or 0 for r in runs])
        lines.append(
            f"| {system} {version} | {c} | {spread([r['tasks_per_sec'] for r in runs])} | {spread(ratio)} "
            f"| {spread(cpu)}: {worker:.1f} + {server:.1f} | {spread([r['wal_bytes_per_task'] for r in runs])} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bench", help="a tasktable-bench binary (built in release by default)")
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--concurrency", default="10,50")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--ceiling-secs", type=float, default=3.0)
    parser.add_argument("--latest", action="store_true", help="also run the peers' newest versions")
    parser.add_argument("--only", default="tasktable,graphile,pgboss")
    parser.add_argument("--out", default=str(ROOT / "target" / "bench" / "peers.json"))
    parser.add_argument("--table", metavar="JSON", help="print the table of an earlier run's JSON and stop")
    args = parser.parse_args()
    if args.table:
        print(table(json.loads(pathlib.Path(args.table).read_text())["drains"]))
        return
    if not args.bench:
        subprocess.run(["cargo", "build", "--release", "-q", "-p", "tasktable-bench"], cwd=ROOT, check=True)
        args.bench = str(ROOT / "target" / "release" / "tasktable-bench")
    only = args.only.split(",")
    dirs = [HERE]
    npm_install(HERE)
    if args.latest:
        dirs.append(latest_dir())
        npm_install(dirs[-1])
    server = Server()
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    rows = []
    try:
        for round_no in range(1, args.rounds + 1):
            for c in [int(x) for x in args.concurrency.split(",")]:
                args.c = c
                runs = []
                if "tasktable" in only:
                    runs.append(lambda: run_tasktable(args, server))
                for d in dirs:
                    if "graphile" in only:
                        runs.append(lambda d=d: run_peer(args, server, d, "graphile.mjs"))
                    if "pgboss" in only:
                        runs.append(lambda d=d: run_peer(args, server, d, "pgboss.mjs"))
                for run in runs:
                    row = dict(run(), concurrency=c, round=round_no, tasks=args.tasks)
                    log(f"peers: round {round_no}: {json.dumps(row)}")
                    rows.append(row)
    finally:
        server.close()
    cpu = subprocess.run(["sh", "-c", "grep -m1 'model name' /proc/cpuinfo | cut -d: -f2"],
                         capture_output=True, text=True).stdout.strip()
    header = {
        "machine": f"{os.cpu_count()} CPUs, {cpu}",
        "postgres": server.version,
        "tasks": args.tasks,
        "rounds": args.rounds,
        "started": started,
    }
    out = pathlib.Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"run": header, "drains": rows}, indent=2))
    print(f"{header['machine']}; PostgreSQL {server.version}, default settings; {args.tasks:,} no-op tasks; "
          f"medians (ranges) of {args.rounds} interleaved rounds; JSON in {out}\n")
    print(table(rows))


if __name__ == "__main__":
    main()
