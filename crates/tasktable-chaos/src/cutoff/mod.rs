//! `tasktable-chaos cut-off`: an answer of 2xx means the write is committed, even when
//! other clients hang up mid-request and the database ends sessions idle in a
//! transaction.
//!
//! `tasktable serve --workers 0` runs on a database of the run's own with open multi-run
//! tasks (whose claims write in a transaction of several statements). Meanwhile:
//!
//! - hang-up clients send pull claims of those runs, and submits, and reset each
//!   connection 0-4 ms after sending it ([`crate::hangup`]);
//! - one submitter sends single tasks one at a time and keeps every id answered `201`;
//! - one finisher claims those tasks and completes each, keeping every completion
//!   answered `200`, and notes any task it is handed again after that;
//! - on PostgreSQL and MariaDB, the reaper ends every session of tasktable idle inside a
//!   transaction every 50 ms ([`crate::reaper`]).
//!
//! Then the finisher goes on until every task has ended (lease, rescue and retry
//! included; a minute at most), and the run checks that every task answered `201` is in
//! the table, every task answered completed is `succeeded` by that very attempt and was
//! never handed out again, and no task was left open (an API that stopped answering).

mod clients;

use crate::database::{self, Backend, Database};
use crate::fleet::{Fleet, FleetConfig};
use crate::processes::Processes;
use crate::reaper::Reaper;
use clap::Args;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tasktable::{Store, TaskState};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The finisher's lease: a completion the database lost comes back once it runs out and
/// the API's rescuer (every 5 s) retries the task.
const LEASE: Duration = Duration::from_secs(2);

#[derive(Args, Debug, Clone)]
pub struct CutoffArgs {
    #[arg(long, value_enum, default_value = "postgres")]
    pub backend: Backend,
    /// How long clients hang up; the drain comes after.
    #[arg(long, default_value = "30s", value_parser = crate::options::parse_duration)]
    pub duration: Duration,
    /// Seed of the hang-up clients' waits; random (and printed) by default.
    #[arg(long)]
    pub seed: Option<u64>,
    /// How often sessions idle in a transaction are ended (0s: never).
    #[arg(long, default_value = "50ms", value_parser = crate::options::parse_duration)]
    pub reap_every: Duration,
    /// Longest pause of a hang-up client between two requests.
    #[arg(long, default_value = "10ms", value_parser = crate::options::parse_duration)]
    pub hangup_pause: Duration,
    /// Clients that send claims and hang up.
    #[arg(long, default_value_t = 4)]
    pub claim_hangups: usize,
    /// Clients that send submits and hang up.
    #[arg(long, default_value_t = 1)]
    pub submit_hangups: usize,
    /// The `tasktable` binary that serves the API; by default the one beside this one.
    #[arg(long)]
    pub tasktable_bin: Option<PathBuf>,
    /// Keep the run's directory (database, logs) and print where it is.
    #[arg(long)]
    pub keep: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// What one acknowledged write came to, when it did not hold.
#[derive(Debug, Serialize)]
pub struct Violation {
    pub task: i64,
    pub what: String,
}

#[derive(Debug, Serialize)]
pub struct CutoffReport {
    pub backend: Backend,
    pub seed: u64,
    pub seconds: u64,
    /// Requests sent and cut off, by what they asked.
    pub hung_up: BTreeMap<&'static str, u64>,
    /// Sessions the reaper ended.
    pub sessions_ended: u64,
    pub submits_acknowledged: u64,
    pub submits_failed: u64,
    pub completions_acknowledged: u64,
    pub completions_failed: u64,
    /// Warnings of a `BEGIN` inside a transaction already open, in the API's log.
    pub nested_begin_warnings: u64,
    /// Tasks answered 201 that are not in the table.
    pub lost_submits: Vec<Violation>,
    /// Tasks answered completed that ran again, did not end `succeeded` by that attempt,
    /// or were handed out again.
    pub undone_completions: Vec<Violation>,
    /// Single tasks still pending or running a minute after the clients stopped, with
    /// the finisher claiming all the while: the API stopped serving them.
    pub never_ended: u64,
    pub passed: bool,
}

impl CutoffReport {
    pub fn text(&self) -> String {
        let mut out = format!(
            "cut-off on {:?} (seed {}), {} s: hung up {:?}; {} sessions ended\n\
             submits: {} acknowledged, {} failed; completions: {} acknowledged, {} failed\n\
             nested BEGIN warnings in the API's log: {}\n",
            self.backend,
            self.seed,
            self.seconds,
            self.hung_up,
            self.sessions_ended,
            self.submits_acknowledged,
            self.submits_failed,
            self.completions_acknowledged,
            self.completions_failed,
            self.nested_begin_warnings,
        );
        for (name, list) in [
            ("acknowledged submits lost", &self.lost_submits),
            ("acknowledged completions undone", &self.undone_completions),
        ] {
            out.push_str(&format!("{name}: {}\n", list.len()));
            for v in list.iter().take(20) {
                out.push_str(&format!("  task {}: {}\n", v.task, v.what));
            }
        }
        out.push_str(&format!(
            "tasks that never ended: {}\n{}",
            self.never_ended,
            if self.passed { "PASSED" } else { "FAILED" }
        ));
        out
    }
}

pub async fn run(args: &CutoffArgs, seed: u64) -> Result<CutoffReport, String> {
    let tasktable = crate::options::tasktable_bin(args.tasktable_bin.as_ref())?;
    let dir = database::run_dir("tasktable-cutoff-")?;
    let logs = dir.path().join("logs");
    std::fs::create_dir(&logs).map_err(|e| e.to_string())?;
    eprintln!(
        "tasktable-chaos cut-off: {:?}, seed {seed}, {} s, in {}",
        args.backend,
        args.duration.as_secs(),
        dir.path().display()
    );
    let db = Database::start(args.backend, dir.path()).await?;
    let store = tasktable::connect(db.url())
        .await
        .map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| e.to_string())?;
    let fleet = Fleet::new(
        FleetConfig {
            tasktable,
            url: db.url().to_owned(),
            api_port: database::free_port()?,
            journals: dir.path().to_owned(),
            lease: LEASE,
            rescue: None,
            concurrency: 1,
            unfenced_effects: false,
        },
        Processes::new(&logs),
    );
    let api = fleet.start_api().await?;
    let base = fleet.base();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    clients::open_runs(&http, &base).await?;

    let stop = CancellationToken::new();
    let ended = Arc::new(AtomicU64::new(0));
    let reaper = match Reaper::connect(db.url()).await.map_err(|e| e.to_string())? {
        Some(r) if !args.reap_every.is_zero() => Some(tokio::spawn(r.run(
            args.reap_every,
            ended.clone(),
            stop.clone(),
        ))),
        _ => None,
    };
    let addr = format!("127.0.0.1:{}", base.rsplit(':').next().unwrap_or_default())
        .parse()
        .map_err(|e| format!("{e}"))?;
    let hangups = clients::hang_up(addr, seed, args, &stop);
    let ledger = clients::Ledger::default();
    let submitter = tokio::spawn(clients::submit(
        http.clone(),
        base.clone(),
        ledger.clone(),
        stop.clone(),
    ));
    let finished = CancellationToken::new();
    let finisher = tokio::spawn(clients::finish(
        http.clone(),
        base.clone(),
        ledger.clone(),
        finished.clone(),
    ));

    let started = Instant::now();
    tokio::time::sleep(args.duration).await;
    stop.cancel();
    let hung_up = hangups.stop().await;
    submitter.await.map_err(|e| e.to_string())?;
    if let Some(r) = reaper {
        r.await.map_err(|e| e.to_string())?;
    }
    // Every acknowledged task ends: a completion the database lost comes back to the
    // finisher after its lease and the API's rescue; the rest are done by then.
    let never_ended = clients::drain(store.as_ref(), Duration::from_secs(60)).await?;
    finished.cancel();
    finisher.await.map_err(|e| e.to_string())?;

    let lost_submits = lost_submits(store.as_ref(), &ledger).await?;
    let undone_completions = undone_completions(store.as_ref(), &ledger).await?;
    let log = std::fs::read_to_string(fleet.procs.log_path(&api)).unwrap_or_default();
    let nested_begin_warnings = log
        .lines()
        .filter(|l| l.contains("already a transaction in progress"))
        .count() as u64;
    fleet.procs.kill(&api).await;
    if args.keep {
        eprintln!("kept {}", dir.keep().display());
    }
    let counts = ledger.counts();
    let passed = lost_submits.is_empty() && undone_completions.is_empty() && never_ended == 0;
    Ok(CutoffReport {
        backend: args.backend,
        seed,
        seconds: started.elapsed().as_secs(),
        hung_up,
        sessions_ended: ended.load(Ordering::Relaxed),
        submits_acknowledged: counts.submitted,
        submits_failed: counts.submit_failed,
        completions_acknowledged: counts.completed,
        completions_failed: counts.complete_failed,
        nested_begin_warnings,
        lost_submits,
        undone_completions,
        never_ended,
        passed,
    })
}

async fn lost_submits(
    store: &dyn Store,
    ledger: &clients::Ledger,
) -> Result<Vec<Violation>, String> {
    let mut lost = Vec::new();
    for id in ledger.submitted() {
        if store
            .task_get(id)
            .await
            .map_err(|e| e.to_string())?
            .is_none()
        {
            lost.push(Violation {
                task: id,
                what: "answered 201, not in tasktable_tasks".into(),
            });
        }
    }
    Ok(lost)
}

async fn undone_completions(
    store: &dyn Store,
    ledger: &clients::Ledger,
) -> Result<Vec<Violation>, String> {
    let mut undone: Vec<Violation> = ledger
        .handed_again()
        .into_iter()
        .map(|(task, attempt)| Violation {
            task,
            what: format!("answered completed in attempt {attempt}, then claimed again"),
        })
        .collect();
    for (id, attempt) in ledger.completed() {
        let Some(task) = store.task_get(id).await.map_err(|e| e.to_string())? else {
            undone.push(Violation {
                task: id,
                what: format!("answered completed in attempt {attempt}, not in tasktable_tasks"),
            });
            continue;
        };
        let attempts = store.attempt_list(id).await.map_err(|e| e.to_string())?;
        let last = attempts.last();
        let by_that_attempt = last.is_some_and(|a| {
            a.attempt == attempt && a.outcome == tasktable::AttemptOutcome::Succeeded
        });
        if task.state != TaskState::Succeeded || !by_that_attempt {
            undone.push(Violation {
                task: id,
                what: format!(
                    "answered completed in attempt {attempt}; now {:?} after {} attempts, the last {:?}",
                    task.state,
                    attempts.len(),
                    last.map(|a| (a.attempt, a.outcome)),
                ),
            });
        }
    }
    undone.sort_by_key(|v| v.task);
    undone.dedup_by_key(|v| v.task);
    Ok(undone)
}
