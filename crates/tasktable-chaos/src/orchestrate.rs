//! One chaos run from start to verdict: the database, the API and the workers; tasks
//! submitted while faults are injected on the seeded schedule; then every frozen worker
//! thawed, the queue drained, the processes stopped, and the evidence checked.

use crate::behaviour::Behaviour;
use crate::check::{self, Disruption, Evidence, Limits};
use crate::database::{Backend, Database};
use crate::effects::Effects;
use crate::faults::Injector;
use crate::fleet::{Fleet, FleetConfig};
use crate::plan::{self, FaultKind, Faults};
use crate::processes::{Processes, Role};
use crate::report::Report;
use crate::sampler::{self, Samples};
use crate::submit::{self, Ledger};
use crate::{collect, journal};
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// A mechanism to switch off on purpose, to show that the checks see what it prevents.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Break {
    /// In-process workers write their effects without the fencing test; only freezes of
    /// in-process workers are injected. `no_stale_write_accepted` must fail.
    UnfencedEffects,
    /// In-process workers run no rescuer (the API's runs every 5 s); only kills are
    /// injected. `nothing_stuck` must fail.
    NoRescue,
}

#[derive(Args, Debug, Clone)]
pub struct RunArgs {
    #[arg(long, value_enum, default_value = "sqlite")]
    pub backend: Backend,
    /// How long faults are injected (tasks are submitted over the first 80 % of it);
    /// the drain comes after.
    #[arg(long, default_value = "60s", value_parser = parse_duration)]
    pub duration: Duration,
    /// Seed of the task mix and the fault schedule; random (and printed) by default.
    #[arg(long)]
    pub seed: Option<u64>,
    #[arg(long, default_value_t = 3000)]
    pub tasks: usize,
    /// In-process worker processes.
    #[arg(long, default_value_t = 3)]
    pub workers: usize,
    #[arg(long, default_value_t = 2)]
    pub pull_workers: usize,
    /// Tasks an in-process worker runs at once (pull workers run half as many).
    #[arg(long, default_value_t = 8)]
    pub concurrency: usize,
    #[arg(long, default_value = "2s", value_parser = parse_duration)]
    pub lease: Duration,
    /// How often each in-process worker's rescuer scans.
    #[arg(long, default_value = "1s", value_parser = parse_duration)]
    pub rescue_interval: Duration,
    /// Mean time between faults.
    #[arg(long, default_value = "3s", value_parser = parse_duration)]
    pub fault_every: Duration,
    #[arg(long, default_value = "120s", value_parser = parse_duration)]
    pub drain_timeout: Duration,
    /// The `tasktable` binary that serves the API; by default the one beside this one.
    #[arg(long)]
    pub tasktable_bin: Option<PathBuf>,
    /// Keep the run's directory (database, journals, logs) and print where it is.
    #[arg(long)]
    pub keep: bool,
    /// Switch a mechanism off to see a check fire (repeatable).
    #[arg(long = "break", value_enum)]
    pub breaks: Vec<Break>,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// `500ms`, `30s`, `2m`, `1h`.
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let split = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let n: u64 = number.parse().map_err(|_| {
        format!("{text:?}: a duration is a whole number and a unit, like 500ms, 30s, 2m")
    })?;
    match unit {
        "ms" => Ok(Duration::from_millis(n)),
        "s" => Ok(Duration::from_secs(n)),
        "m" => Ok(Duration::from_secs(n * 60)),
        "h" => Ok(Duration::from_secs(n * 3600)),
        _ => Err(format!("{text:?}: the unit must be ms, s, m or h")),
    }
}

impl RunArgs {
    fn fault_kinds(&self) -> Vec<FaultKind> {
        if self.breaks.contains(&Break::UnfencedEffects) {
            return vec![FaultKind::FreezeWorker];
        }
        if self.breaks.contains(&Break::NoRescue) {
            return vec![FaultKind::KillWorker];
        }
        let mut kinds = vec![
            FaultKind::KillWorker,
            FaultKind::KillPullWorker,
            FaultKind::FreezeWorker,
            FaultKind::StopWorker,
            FaultKind::KillApi,
        ];
        if self.backend != Backend::Sqlite {
            kinds.push(FaultKind::RestartDatabase);
        }
        kinds
    }

    fn tasktable_bin(&self) -> Result<PathBuf, String> {
        if let Some(bin) = &self.tasktable_bin {
            return Ok(bin.clone());
        }
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let bin = me.with_file_name("tasktable");
        if bin.is_file() {
            Ok(bin)
        } else {
            Err(format!(
                "{} not found: build it (cargo build -p tasktable-cli) or pass --tasktable-bin",
                bin.display()
            ))
        }
    }
}

pub async fn run(args: &RunArgs, seed: u64) -> Result<Report, String> {
    let tasktable = args.tasktable_bin()?;
    if args.workers == 0 {
        return Err("a run needs at least one in-process worker (--workers)".into());
    }
    let dir = tempfile::Builder::new()
        .prefix("tasktable-chaos-")
        .tempdir()
        .map_err(|e| e.to_string())?;
    // A PostgreSQL server runs as its own user and must reach its directory inside.
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .map_err(|e| e.to_string())?;
    let (journals, logs) = (dir.path().join("journal"), dir.path().join("logs"));
    for d in [&journals, &logs] {
        std::fs::create_dir(d).map_err(|e| e.to_string())?;
    }
    eprintln!(
        "tasktable-chaos: {:?}, seed {seed}, {} tasks, {} s of faults, in {}",
        args.backend,
        args.tasks,
        args.duration.as_secs(),
        dir.path().display()
    );
    let mut db = Database::start(args.backend, dir.path()).await?;
    let store = tasktable::connect(db.url())
        .await
        .map_err(|e| e.to_string())?;
    store.migrate().await.map_err(|e| e.to_string())?;
    let effects = Effects::connect(db.url(), Duration::from_secs(10))
        .await
        .map_err(|e| e.to_string())?;
    effects.create_tables().await.map_err(|e| e.to_string())?;
    // The sampler's heartbeat gives up on SQLite's write lock after a second.
    let heartbeat = Effects::connect(db.url(), Duration::from_secs(1))
        .await
        .map_err(|e| e.to_string())?;

    let rescue = (!args.breaks.contains(&Break::NoRescue)).then_some(args.rescue_interval);
    let fleet = Arc::new(Fleet::new(
        FleetConfig {
            tasktable,
            url: db.url().to_owned(),
            api_port: crate::database::free_port()?,
            journals: journals.clone(),
            lease: args.lease,
            rescue,
            concurrency: args.concurrency,
            unfenced_effects: args.breaks.contains(&Break::UnfencedEffects),
        },
        Processes::new(&logs),
    ));
    fleet.start_api().await?;
    for _ in 0..args.workers {
        fleet.start_worker()?;
    }
    for _ in 0..args.pull_workers {
        fleet.start_pull_worker()?;
    }

    let started = Instant::now();
    let specs = plan::tasks(seed, args.tasks);
    let ledger: Ledger = Arc::new(Mutex::new(vec![None; specs.len()]));
    let stop = CancellationToken::new();
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(|e| e.to_string())?;
    let submitter = tokio::spawn(submit::submit_all(
        http,
        fleet.base(),
        seed,
        specs.clone(),
        args.duration.mul_f64(0.8),
        ledger.clone(),
        stop.clone(),
    ));
    let samples = Samples::default();
    let sampler = tokio::spawn(sampler::run(
        store.clone(),
        heartbeat,
        Duration::from_secs(1),
        samples.clone(),
        stop.clone(),
    ));
    let mut injector = Injector {
        fleet: fleet.clone(),
        faults: Faults::new(seed, args.fault_kinds(), args.fault_every),
        lease: args.lease,
        rescue: args.rescue_interval,
        started,
        freeze_in_process_only: args.breaks.contains(&Break::UnfencedEffects),
        injected: Vec::new(),
        outages: Vec::new(),
    };

    let window_end = started + args.duration;
    let mut next = started + injector.faults.gap();
    while next < window_end {
        tokio::time::sleep_until(next).await;
        no_process_died(&fleet)?;
        let kind = injector.faults.next_kind();
        injector.inject(kind, &mut db).await?;
        next = Instant::now() + injector.faults.gap();
    }
    // A worker frozen late in the window thaws on its own timer during the drain.
    tokio::time::sleep_until(window_end).await;

    let drain_started = Instant::now();
    let drain_end = drain_started + args.drain_timeout;
    match tokio::time::timeout_at(drain_end, submitter).await {
        Ok(Ok(submitted)) => submitted?,
        Ok(Err(e)) => return Err(format!("the submitter failed: {e}")),
        Err(_) => stop.cancel(),
    }
    let gave_up = drain(store.as_ref(), &fleet, drain_end).await?;
    let drain_s = drain_started.elapsed().as_secs_f64();
    stop.cancel();
    let _ = sampler.await;
    fleet.procs.thaw_all();
    for role in [Role::InProcess, Role::Pull, Role::Api] {
        fleet
            .procs
            .terminate_role(role, Duration::from_secs(10))
            .await;
    }

    let (journal, torn) = journal::read_dir(&journals).map_err(|e| e.to_string())?;
    let ledger = ledger.lock().expect("ledger").clone();
    let evidence = Evidence {
        seed,
        specs: specs.clone(),
        ledger,
        tasks: collect::tasks(store.as_ref())
            .await
            .map_err(|e| e.to_string())?,
        pull_workers: journal
            .iter()
            .filter(|e| e.worker.starts_with("pull-"))
            .map(|e| e.worker.clone())
            .collect(),
        journal,
        effects: effects.read_all().await.map_err(|e| e.to_string())?,
        samples: samples.lock().expect("samples").clone(),
        outages: injector.outages.clone(),
        disruptions: injector
            .injected
            .iter()
            .map(|i| Disruption {
                kind: i.kind,
                target: i.target.clone(),
                from_ms: i.from_ms,
                to_ms: i.to_ms,
            })
            .collect(),
        limits: Some(Limits {
            stuck_after_ms: (args.rescue_interval + Duration::from_secs(2)).as_millis() as i64,
            clock_slack_ms: 1000,
            lease_ms: args.lease.as_millis() as i64,
        }),
        drain_gave_up_after_ms: gave_up.then_some(args.drain_timeout.as_millis() as i64),
    };
    let verdicts = check::run_all(&evidence);
    let report = Report::new(
        args,
        seed,
        &evidence,
        verdicts,
        &injector,
        torn,
        drain_s,
        started.elapsed().as_secs_f64(),
    );
    if args.keep {
        eprintln!("kept the run's directory: {}", dir.keep().display());
    }
    Ok(report)
}

/// Waits until every worker has thawed (so a frozen worker's late writes are part of
/// the run) and every task is finished, or `until`; `Ok(true)` when it gave up. The
/// database sends no signal when the last task finishes, so this polls (bounded).
async fn drain(
    store: &dyn tasktable::Store,
    fleet: &Fleet,
    until: Instant,
) -> Result<bool, String> {
    loop {
        no_process_died(fleet)?;
        if !fleet.procs.any_frozen() && matches!(collect::unfinished(store).await, Ok(0)) {
            return Ok(false);
        }
        if Instant::now() >= until {
            return Ok(true);
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A worker or the API that exits on its own has failed; the run cannot be trusted.
fn no_process_died(fleet: &Fleet) -> Result<(), String> {
    let exited = fleet.procs.exited_on_their_own();
    if exited.is_empty() {
        return Ok(());
    }
    let logs: Vec<String> = exited
        .iter()
        .map(|e| {
            let id = e.split(' ').next().unwrap_or_default();
            let log = std::fs::read_to_string(fleet.procs.log_path(id)).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(10).collect();
            format!(
                "{e}:\n  {}",
                tail.into_iter().rev().collect::<Vec<_>>().join("\n  ")
            )
        })
        .collect();
    Err(format!(
        "processes exited on their own:\n{}",
        logs.join("\n")
    ))
}

/// Names the behaviours of a run, for the summary.
pub fn behaviour_counts(specs: &[Behaviour]) -> std::collections::BTreeMap<&'static str, usize> {
    let mut counts = std::collections::BTreeMap::new();
    for s in specs {
        *counts.entry(s.name()).or_default() += 1;
    }
    counts
}
