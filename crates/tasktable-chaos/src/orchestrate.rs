//! One chaos run from start to verdict: the database, the API and the workers; tasks
//! submitted while faults are injected on the seeded schedule; then every frozen worker
//! thawed, the queue drained, the processes stopped, and the evidence checked.

use crate::behaviour::{KIND, QUEUE};
use crate::check::HANGUP_WORKER;
use crate::check::{self, Disruption, Evidence, Limits};
use crate::database::{self, Database};
use crate::effects::Effects;
use crate::faults::Injector;
use crate::fleet::{Fleet, FleetConfig};
use crate::hangup::{self, Hangups};
use crate::options::{Break, RunArgs};
use crate::plan::{self, Faults};
use crate::processes::{Processes, Role};
use crate::report::Report;
use crate::sampler::{self, Samples};
use crate::submit::{self, Ledger};
use crate::{collect, journal};
use rand::rngs::StdRng;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

pub async fn run(args: &RunArgs, seed: u64) -> Result<Report, String> {
    let tasktable = args.tasktable_bin()?;
    let dir = database::run_dir("tasktable-chaos-")?;
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
            api_port: database::free_port()?,
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
    let hangup_stop = CancellationToken::new();
    let hangups = hang_up(&fleet, seed, args, &hangup_stop)?;
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
    hangup_stop.cancel();
    let hung_up = hangups.stop().await;

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
            lease_ms: args.lease.as_millis() as i64,
            reconnect_ms: 6000,
        }),
        drain_gave_up_after_ms: gave_up.then_some(args.drain_timeout.as_millis() as i64),
    };
    let verdicts = check::run_all(&evidence);
    let mut report = Report::new(
        args,
        seed,
        &evidence,
        verdicts,
        &injector,
        torn,
        drain_s,
        started.elapsed().as_secs_f64(),
    );
    report.hung_up = hung_up;
    if args.keep {
        eprintln!("kept the run's directory: {}", dir.keep().display());
    }
    Ok(report)
}

/// Starts the run's hang-up clients, in turn claims of the run's tasks (under the run's
/// lease) and submits to a queue of their own that nothing claims.
/// A claim the API carried out for a client that hung up gives its task back.
fn hang_up(
    fleet: &Fleet,
    seed: u64,
    args: &RunArgs,
    stop: &CancellationToken,
) -> Result<Hangups, String> {
    let addr: SocketAddr = fleet
        .base()
        .trim_start_matches("http://")
        .parse()
        .map_err(|e| format!("the API's address: {e}"))?;
    let lease_ms = args.lease.as_millis() as u64;
    let mut hangups = Hangups::default();
    for i in 0..args.hangups {
        let seed = seed.wrapping_add(7919 * (i as u64 + 1));
        if i % 2 == 0 {
            let body = json!({
                "queue": QUEUE, "kinds": [KIND], "worker_id": format!("{HANGUP_WORKER}{i}"),
                "worker_host": "chaos-hangup", "limit": 1, "lease_ms": lease_ms, "wait_ms": 0,
            });
            let next = move |_: &mut StdRng| hangup::post(addr, "/api/v1/claim", &body);
            hangups.spawn("claims", addr, seed, next, args.hangup_pause, stop);
        } else {
            let body = json!({"kind": "hangup", "queue": "hangup", "payload": {}});
            let next = move |_: &mut StdRng| hangup::post(addr, "/api/v1/tasks", &body);
            hangups.spawn("submits", addr, seed, next, args.hangup_pause, stop);
        }
    }
    Ok(hangups)
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
