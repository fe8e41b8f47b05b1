//! `tasktable-bench`: the benchmark of issue 6, plus the cost of statistics on large
//! tables and of a bulk cancel beside a working worker. One command per backend:
//!
//! ```sh
//! cargo run --release -p tasktable-bench -- --backend sqlite      # or postgres, mysql
//! cargo run --release -p tasktable-bench -- --backend postgres --quick
//! cargo run --release -p tasktable-bench -- --backend mysql --only stats
//! cargo run --release -p tasktable-bench -- --backend postgres --only bulk
//! cargo run --release -p tasktable-bench -- --backend postgres --only churn
//! ```
//!
//! Each scenario runs on a fresh database (a temporary SQLite file, a PostgreSQL
//! database made from the test template on `TASKTABLE_TEST_POSTGRES_URL`, or a migrated
//! MySQL/MariaDB database on `TASKTABLE_TEST_MYSQL_URL`; churn on PostgreSQL starts a
//! throwaway server of its own, for autovacuum), prints one line per
//! measurement, and the run is written as JSON to `target/bench/<backend>.json`
//! (`<backend>-quick.json` with `--quick`). Throughput is reported beside the machine's
//! commit ceiling measured in the same run, because shared machines drift between runs.
//! See docs/benchmarks.md.

mod batches;
mod bulk;
mod churn;
mod cpu;
mod db;
mod handlers;
mod report;
mod scenarios;

use clap::{Parser, Subcommand, ValueEnum};
use scenarios::Ctx;
use serde_json::json;
use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

/// The backends a run can measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
    /// MySQL 8 or MariaDB 10.6+, through `tasktable-mysql`.
    Mysql,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Sqlite => "sqlite",
            Backend::Postgres => "postgres",
            Backend::Mysql => "mysql",
        }
    }

    /// What this backend's run leaves out or measures differently, printed at the start
    /// and kept in the JSON.
    pub fn notes(self) -> Vec<&'static str> {
        match self {
            Backend::Sqlite | Backend::Postgres => Vec::new(),
            Backend::Mysql => vec![
                "no write counters: write transactions and WAL bytes per task are read from \
                 PostgreSQL's WAL position and xid counter, which MySQL/MariaDB lack",
                "latency: no NOTIFY; the worker hears of tasks submitted through its own store \
                 at once (in-process wake-ups) and of others' only by polling (1 s), shown as \
                 'polling only' with the producer on a store of its own",
            ],
        }
    }
}

/// The backend asked for on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum BackendArg {
    Sqlite,
    Postgres,
    /// MySQL or MariaDB (`TASKTABLE_TEST_MYSQL_URL`).
    #[value(alias = "mariadb")]
    Mysql,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Scenario {
    Drain,
    Memory,
    /// 1, 2 and 4 worker processes (concurrency 10 each) draining one database.
    Scale,
    Submit,
    Latency,
    Backlog,
    Leases,
    Stats,
    Bulk,
    Purge,
    /// A batch with a no-op item handler: items per second and the saves it costs.
    Batch,
    /// Long: a steady stream with retention on, and the tables' size as it goes (not in
    /// the default set; `--only churn`).
    Churn,
}

/// The sizes of a run: full by default, small with `--quick`.
#[derive(Debug, Clone)]
pub struct Scale {
    pub drain_sizes: Vec<u64>,
    pub drain_concurrency: Vec<usize>,
    pub ceiling_secs: f64,
    pub submit_calls: usize,
    pub bulk: usize,
    pub latency_secs: f64,
    pub backlogs: Vec<u64>,
    pub backlog_drain: u64,
    pub rss_tasks: u64,
    pub lease_tasks: u64,
    pub lease_for: Duration,
    pub lease_window: Duration,
    /// Finished tasks in the stats scenario's databases, smallest first.
    pub stats_sizes: Vec<u64>,
    /// Warm calls per figure in the stats scenario (the median is reported).
    pub stats_calls: usize,
    /// Scheduled tasks the bulk scenario cancels.
    pub bulk_cancel: u64,
    /// Finished tasks the purge scenario deletes.
    pub purge: u64,
    /// How long the churn scenario runs, and how often it samples the tables' size.
    pub churn: Duration,
    pub churn_sample: Duration,
    /// Items of the batch scenario's batches, one batch per size.
    pub batch_items: Vec<u64>,
}

impl Scale {
    fn full() -> Self {
        Scale {
            drain_sizes: vec![20_000, 100_000],
            drain_concurrency: vec![10, 50],
            ceiling_secs: 3.0,
            submit_calls: 4000,
            bulk: 20_000,
            latency_secs: 10.0,
            backlogs: vec![10_000, 1_000_000],
            backlog_drain: 10_000,
            rss_tasks: 20_000,
            lease_tasks: 1000,
            lease_for: Duration::from_secs(30),
            lease_window: Duration::from_secs(21),
            stats_sizes: vec![10_000, 1_000_000],
            stats_calls: 20,
            bulk_cancel: 100_000,
            purge: 1_000_000,
            churn: Duration::from_secs(20 * 60),
            churn_sample: Duration::from_secs(20),
            batch_items: vec![1_000_000, 10_000_000],
        }
    }

    fn quick() -> Self {
        Scale {
            drain_sizes: vec![2_000, 5_000],
            drain_concurrency: vec![10, 50],
            ceiling_secs: 1.0,
            submit_calls: 400,
            bulk: 20_000,
            latency_secs: 2.0,
            backlogs: vec![5_000, 100_000],
            backlog_drain: 3_000,
            rss_tasks: 3_000,
            lease_tasks: 1000,
            lease_for: Duration::from_secs(3),
            lease_window: Duration::from_secs(3),
            stats_sizes: vec![10_000, 100_000],
            stats_calls: 20,
            bulk_cancel: 20_000,
            purge: 50_000,
            churn: Duration::from_secs(3 * 60),
            churn_sample: Duration::from_secs(10),
            batch_items: vec![100_000, 1_000_000],
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "tasktable-bench",
    about = "Benchmarks tasktable: drain, memory, scale, submit, latency, backlog, leases, stats, bulk, purge, batch, churn"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Command>,
    /// The database to measure.
    #[arg(long, value_enum, default_value = "sqlite")]
    backend: BackendArg,
    /// Small sizes, for a smoke run of a minute or two.
    #[arg(long)]
    quick: bool,
    /// Run only these scenarios (comma-separated); all by default.
    #[arg(long, value_enum, value_delimiter = ',')]
    only: Vec<Scenario>,
    /// Do not run ANALYZE after pre-filling through the submit path (PostgreSQL then
    /// plans the claim without statistics unless autovacuum has analyzed the table). The
    /// bulk fills of the backlog and stats scenarios always analyze.
    #[arg(long)]
    no_analyze: bool,
    /// Override the drain sizes (comma-separated task counts).
    #[arg(long, value_delimiter = ',')]
    drain_sizes: Vec<u64>,
    /// Override the drain concurrencies (comma-separated).
    #[arg(long, value_delimiter = ',')]
    drain_concurrency: Vec<usize>,
    /// How long the churn scenario runs, in minutes (20 by default, 3 with `--quick`).
    #[arg(long)]
    churn_minutes: Option<u64>,
    /// Rows per transaction of the bulk scenario's cancel (the stores' default otherwise).
    #[arg(long)]
    bulk_chunk: Option<u32>,
    /// Where to write the JSON; default target/bench/<backend>[-quick].json.
    #[arg(long)]
    out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// (internal) A worker process for the memory and lease scenarios; runs until killed.
    #[command(hide = true)]
    Child {
        #[arg(long)]
        url: String,
        #[arg(long)]
        kind: String,
        #[arg(long)]
        concurrency: usize,
        /// 0: the default lease.
        #[arg(long, default_value_t = 0)]
        lease_ms: u64,
    },
    /// (internal) Measure the commit ceiling of a PostgreSQL or MySQL database (its URL)
    /// as every scenario does, and print it in commits per second; for `bench/peers`.
    #[command(hide = true)]
    Ceiling {
        #[arg(long)]
        url: String,
        #[arg(long, default_value_t = 3.0)]
        secs: f64,
    },
}

async fn child(url: String, kind: String, concurrency: usize, lease_ms: u64) {
    let store = tasktable::connect(&url).await.expect("connect");
    let mut builder = tasktable::Worker::builder(store).concurrency(concurrency);
    if lease_ms > 0 {
        builder = builder.lease_for(Duration::from_millis(lease_ms));
    }
    builder = match kind.as_str() {
        "long" => builder.register(handlers::Long),
        _ => builder.register(handlers::Noop::default()),
    };
    builder
        .build()
        .expect("worker")
        .run(std::future::pending())
        .await;
}

#[tokio::main]
async fn main() {
    // Logs as tasktable's processes write them, and traces when OTEL_ asks for them (the
    // cost of tracing is measured with this).
    let _telemetry = tasktable_telemetry::Telemetry::init(
        "error",
        tasktable_telemetry::LogFormat::Text,
        Some(&tokio::runtime::Handle::current()),
    )
    .expect("telemetry");
    let cli = Cli::parse();
    match cli.command {
        Some(Command::Child {
            url,
            kind,
            concurrency,
            lease_ms,
        }) => return child(url, kind, concurrency, lease_ms).await,
        Some(Command::Ceiling { url, secs }) => {
            let ceiling = db::ceiling_of(&url, secs).await;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{ceiling:.0}");
            return;
        }
        None => {}
    }
    let backend = match cli.backend {
        BackendArg::Sqlite => Backend::Sqlite,
        BackendArg::Postgres => Backend::Postgres,
        BackendArg::Mysql => Backend::Mysql,
    };
    let scenarios = if cli.only.is_empty() {
        vec![
            Scenario::Drain,
            Scenario::Memory,
            Scenario::Scale,
            Scenario::Submit,
            Scenario::Latency,
            Scenario::Backlog,
            Scenario::Leases,
            Scenario::Stats,
            Scenario::Bulk,
            Scenario::Purge,
            // Last: it installs a metrics recorder, which the others run without.
            Scenario::Batch,
        ]
    } else {
        cli.only.clone()
    };
    let load_before = report::loadavg();
    let started = chrono::Utc::now();
    eprintln!(
        "tasktable-bench: {} {}, load average {load_before}",
        backend.name(),
        if cli.quick { "quick" } else { "full" }
    );
    for note in backend.notes() {
        eprintln!("note ({}): {note}", backend.name());
    }
    let mut ctx = Ctx {
        backend,
        scale: if cli.quick {
            Scale::quick()
        } else {
            Scale::full()
        },
        report: report::Report::default(),
        analyze: !cli.no_analyze,
        best_drain: None,
        bulk_chunk: cli.bulk_chunk,
    };
    if !cli.drain_sizes.is_empty() {
        ctx.scale.drain_sizes = cli.drain_sizes.clone();
    }
    if let Some(m) = cli.churn_minutes {
        ctx.scale.churn = Duration::from_secs(m.max(1) * 60);
    }
    if !cli.drain_concurrency.is_empty() {
        ctx.scale.drain_concurrency = cli.drain_concurrency.clone();
    }
    for s in scenarios {
        let result = match s {
            Scenario::Drain => scenarios::drain(&mut ctx).await,
            Scenario::Memory => scenarios::memory(&mut ctx).await,
            Scenario::Scale => scenarios::scale(&mut ctx).await,
            Scenario::Submit => scenarios::submit(&mut ctx).await,
            Scenario::Latency => scenarios::latency(&mut ctx).await,
            Scenario::Backlog => scenarios::backlog(&mut ctx).await,
            Scenario::Leases => scenarios::leases(&mut ctx).await,
            Scenario::Stats => scenarios::stats(&mut ctx).await,
            Scenario::Bulk => bulk::bulk(&mut ctx, bulk::Operation::Cancel).await,
            Scenario::Purge => bulk::bulk(&mut ctx, bulk::Operation::Purge).await,
            Scenario::Churn => churn::churn(&mut ctx).await,
            Scenario::Batch => batches::batch(&mut ctx).await,
        };
        if let Err(e) = result {
            eprintln!("scenario {s:?} failed: {e}");
            std::process::exit(1);
        }
    }
    let header = json!({
        "backend": backend.name(),
        "mode": if cli.quick { "quick" } else { "full" },
        "started_at": started.to_rfc3339(),
        "finished_at": chrono::Utc::now().to_rfc3339(),
        "loadavg_before": load_before,
        "loadavg_after": report::loadavg(),
        "machine": report::machine(),
        "notes": backend.notes(),
        "git_commit": std::process::Command::new("git")
            .args(["rev-parse", "--short", "HEAD"])
            .output()
            .ok()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned()),
    });
    let out = cli.out.unwrap_or_else(|| {
        PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/bench")).join(format!(
            "{}{}.json",
            backend.name(),
            if cli.quick { "-quick" } else { "" }
        ))
    });
    if let Some(dir) = out.parent() {
        let _ = std::fs::create_dir_all(dir);
    }
    let body = serde_json::to_string_pretty(&ctx.report.to_json(header)).expect("json");
    match std::fs::write(&out, body) {
        Ok(()) => eprintln!("wrote {}", out.display()),
        Err(e) => eprintln!("cannot write {}: {e}", out.display()),
    }
}
