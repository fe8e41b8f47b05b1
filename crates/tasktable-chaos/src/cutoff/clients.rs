//! The clients of a cut-off run: those that hang up, the submitter and the finisher, and
//! the ledger of what the API acknowledged to the last two.

use super::{CutoffArgs, LEASE};
use crate::hangup::{self, Hangups};
use rand::rngs::StdRng;
use rand::Rng;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable::store::CountParams;
use tasktable::{Store, TaskFilter, TaskState};
use tokio_util::sync::CancellationToken;

/// Open multi-run tasks kept for the hang-up claims to take runs of.
const OPEN_RUNS: usize = 20;
/// Worker ids the hang-up claims take turns with (a worker runs one run of a task at a
/// time, so each claim names one of many).
const CUT_WORKERS: u32 = 64;

/// Submits the multi-run tasks whose runs the hang-up claims take: each wants as many runs
/// as a task may, at once, from any worker again and again, and outlasts every run the
/// rescuer ends when a lease nobody heard of runs out.
pub async fn open_runs(http: &reqwest::Client, base: &str) -> Result<(), String> {
    for n in 0..OPEN_RUNS {
        let body = json!({
            "kind": "multi", "queue": "runs", "payload": {"n": n},
            "copies": 10_000, "at_once": 10_000, "repeat": true,
            "max_attempts": 10_000, "max_failed_runs": 10_000,
        });
        let answer = http
            .post(format!("{base}/api/v1/tasks"))
            .json(&body)
            .send()
            .await
            .map_err(|e| e.to_string())?;
        if answer.status() != reqwest::StatusCode::CREATED {
            let status = answer.status();
            let text = answer.text().await.unwrap_or_default();
            return Err(format!("a multi-run task was refused ({status}): {text}"));
        }
    }
    Ok(())
}

/// Starts the hang-up clients of a cut-off run: claims of runs, and submits.
pub fn hang_up(
    addr: SocketAddr,
    seed: u64,
    args: &CutoffArgs,
    stop: &CancellationToken,
) -> Hangups {
    let mut hangups = Hangups::default();
    for i in 0..args.claim_hangups {
        let next = move |rng: &mut StdRng| {
            let worker = rng.random_range(0..CUT_WORKERS);
            hangup::post(addr, "/api/v1/claim", &claim_body(worker))
        };
        let seed = seed + i as u64;
        hangups.spawn("claims", addr, seed, next, args.hangup_pause, stop);
    }
    for i in 0..args.submit_hangups {
        let body = json!({"kind": "cut", "queue": "cut", "payload": {}});
        let next = move |_: &mut StdRng| hangup::post(addr, "/api/v1/tasks", &body);
        let seed = seed + 1000 + i as u64;
        hangups.spawn("submits", addr, seed, next, args.hangup_pause, stop);
    }
    hangups
}

/// A claim of one run of the open multi-run tasks, under a one-second lease.
fn claim_body(worker: u32) -> Value {
    json!({
        "queue": "runs", "kinds": ["multi"], "worker_id": format!("cut-{worker}"),
        "worker_host": "cut-off", "limit": 1, "lease_ms": 1000, "wait_ms": 0,
    })
}

#[derive(Debug, Default)]
struct Book {
    submitted: Vec<i64>,
    submit_failed: u64,
    /// Task id -> the attempt whose completion was acknowledged.
    completed: HashMap<i64, u32>,
    complete_failed: u64,
    /// (task, attempt acknowledged completed) of tasks handed out again afterwards.
    handed_again: Vec<(i64, u32)>,
}

#[derive(Debug, Clone, Default)]
pub struct Ledger(Arc<Mutex<Book>>);

#[derive(Debug)]
pub struct Counts {
    pub submitted: u64,
    pub submit_failed: u64,
    pub completed: u64,
    pub complete_failed: u64,
}

impl Ledger {
    fn book(&self) -> std::sync::MutexGuard<'_, Book> {
        self.0.lock().expect("ledger")
    }

    pub fn submitted(&self) -> Vec<i64> {
        self.book().submitted.clone()
    }

    pub fn completed(&self) -> Vec<(i64, u32)> {
        let mut all: Vec<(i64, u32)> = self
            .book()
            .completed
            .iter()
            .map(|(k, v)| (*k, *v))
            .collect();
        all.sort_unstable();
        all
    }

    pub fn handed_again(&self) -> Vec<(i64, u32)> {
        self.book().handed_again.clone()
    }

    pub fn counts(&self) -> Counts {
        let b = self.book();
        Counts {
            submitted: b.submitted.len() as u64,
            submit_failed: b.submit_failed,
            completed: b.completed.len() as u64,
            complete_failed: b.complete_failed,
        }
    }
}

/// Submits single tasks one at a time until `stop`, keeping each id answered 201.
pub async fn submit(http: reqwest::Client, base: String, ledger: Ledger, stop: CancellationToken) {
    let mut n: u64 = 0;
    while !stop.is_cancelled() {
        n += 1;
        let body = json!({"kind": "single", "queue": "single", "payload": {"n": n}});
        let sent = http
            .post(format!("{base}/api/v1/tasks"))
            .json(&body)
            .send()
            .await;
        let id = match sent {
            Ok(answer) if answer.status() == reqwest::StatusCode::CREATED => answer
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["id"].as_i64()),
            _ => None,
        };
        match id {
            Some(id) => ledger.book().submitted.push(id),
            None => ledger.book().submit_failed += 1,
        }
    }
}

/// Claims the single tasks and completes each, until `stop`; keeps each completion
/// answered 200, and each task handed out after its completion was.
pub async fn finish(http: reqwest::Client, base: String, ledger: Ledger, stop: CancellationToken) {
    let claim = json!({
        "queue": "single", "kinds": ["single"], "worker_id": "finisher",
        "worker_host": "cut-off", "limit": 20, "lease_ms": LEASE.as_millis() as u64,
        "wait_ms": 200,
    });
    while !stop.is_cancelled() {
        let sent = http
            .post(format!("{base}/api/v1/claim"))
            .json(&claim)
            .send()
            .await;
        let tasks = match sent {
            Ok(answer) if answer.status().is_success() => answer
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["tasks"].as_array().cloned())
                .unwrap_or_default(),
            _ => Vec::new(),
        };
        let completes = tasks
            .into_iter()
            .map(|task| complete(&http, &base, &ledger, task));
        futures::future::join_all(completes).await;
    }
}

async fn complete(http: &reqwest::Client, base: &str, ledger: &Ledger, task: Value) {
    let (Some(id), Some(attempt)) = (task["id"].as_i64(), task["attempt"].as_u64()) else {
        return;
    };
    let done = ledger.book().completed.get(&id).copied();
    if let Some(done) = done {
        ledger.book().handed_again.push((id, done));
    }
    let body = json!({"token": task["token"], "credential": task["credential"], "result": {}});
    let sent = http
        .post(format!("{base}/api/v1/leases/{id}/complete"))
        .json(&body)
        .send()
        .await;
    match sent {
        Ok(answer) if answer.status().is_success() => {
            ledger.book().completed.insert(id, attempt as u32);
        }
        _ => ledger.book().complete_failed += 1,
    }
}

/// Waits until no single task is pending or running, for at most `patience`; how many
/// still are then.
pub async fn drain(store: &dyn Store, patience: Duration) -> Result<u64, String> {
    let until = tokio::time::Instant::now() + patience;
    let open = TaskFilter::default()
        .queue("single")
        .state(TaskState::Pending)
        .state(TaskState::Running);
    loop {
        let left = store
            .task_count(CountParams {
                filter: open.clone(),
                cap: 1_000_000,
            })
            .await
            .map_err(|e| e.to_string())?;
        if left == 0 || tokio::time::Instant::now() >= until {
            return Ok(left);
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
