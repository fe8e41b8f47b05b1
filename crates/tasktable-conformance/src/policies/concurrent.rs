//! Limits under many concurrent claimers, each a store with its own connections, on the
//! database's clock: afterwards, the tasks' own start and finish times show that no
//! instant had more running than the queue allows or its kind limit, and that no
//! stretch of time saw more starts than the rate's burst and pace.

use super::set;
use crate::pinned::*;
use crate::Backend;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::policy::{QueuePolicy, Rate};
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

const TASKS: usize = 48;
const CLAIMERS: usize = 6;
const MAX_RUNNING: usize = 3;
const PER_SECOND: f64 = 40.0;
const BURST: u32 = 4;

async fn work(s: Arc<dyn Store>, worker: String, done: Arc<AtomicUsize>) {
    while done.load(Ordering::SeqCst) < TASKS {
        let tasks = s
            .task_claim(ClaimParams {
                worker_id: worker.clone(),
                now: None,
                ..claim_params("default", &["a", "b"], 2, t0())
            })
            .await
            .expect("claim");
        if tasks.is_empty() {
            // Nothing signals a freed slot or a new token to another store: poll, as
            // workers do.
            tokio::time::sleep(Duration::from_millis(3)).await;
            continue;
        }
        // Hold the tasks a moment, so that claims overlap them.
        tokio::time::sleep(Duration::from_millis(4)).await;
        complete(&*s, &tasks).await;
        done.fetch_add(tasks.len(), Ordering::SeqCst);
    }
}

/// Submits on the database's clock (these cases run on it, not on a pinned one).
async fn submit_now(s: &dyn Store, tasks: Vec<NewTask>) -> Vec<i64> {
    s.task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap()
        .iter()
        .map(|t| t.id)
        .collect()
}

/// Completes `tasks`, each under its own lease, on the database's clock.
async fn complete(s: &dyn Store, tasks: &[tasktable_core::Task]) {
    let items = tasks
        .iter()
        .map(|t| FinishItem {
            lease: t.lease(),
            plan: FinishPlan::for_handler(ok(), t.attempt, &no_jitter(), 0.5),
        })
        .collect();
    let applied = s
        .task_finish(FinishParams {
            items,
            only_if_expired: false,
            now: None,
        })
        .await
        .expect("finish");
    assert!(applied.iter().all(|a| *a), "every lease held");
}

pub async fn limits_and_rates_hold_under_many_concurrent_claimers(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..TASKS)
        .map(|i| NewTask::new(if i % 3 == 0 { "b" } else { "a" }, json!(null)))
        .collect();
    let ids = submit_now(&*s, tasks).await;
    set(
        &*s,
        "default",
        QueuePolicy {
            max_running: Some(MAX_RUNNING as u32),
            kind_max_running: BTreeMap::from([("b".to_owned(), 1)]),
            rate: Some(Rate::per_second(PER_SECOND).with_burst(BURST)),
            ..QueuePolicy::default()
        },
    )
    .await;
    let done = Arc::new(AtomicUsize::new(0));
    let mut claimers = Vec::new();
    for i in 0..CLAIMERS {
        let store = db.store().await;
        claimers.push(tokio::spawn(work(store, format!("w{i}"), done.clone())));
    }
    for c in claimers {
        c.await.expect("claimer");
    }
    let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>, bool)> = Vec::new();
    for id in ids {
        let t = get(&*s, id).await;
        assert_eq!((t.state, t.attempt), (TaskState::Succeeded, 1), "task {id}");
        let span = (t.started_at.unwrap(), t.finished_at.unwrap(), t.kind == "b");
        spans.push(span);
    }
    // At every start, count what had started and not yet finished (a finish at the same
    // instant came first: the claim read it as finished).
    for (start, _, _) in &spans {
        let running: Vec<_> = spans
            .iter()
            .filter(|(s, f, _)| s <= start && f > start)
            .collect();
        assert!(
            running.len() <= MAX_RUNNING,
            "{} running at {start}",
            running.len()
        );
        let b = running.iter().filter(|(_, _, b)| *b).count();
        assert!(b <= 1, "{b} of kind b running at {start}");
    }
    let mut starts: Vec<DateTime<Utc>> = spans.iter().map(|s| s.0).collect();
    starts.sort();
    for i in 0..starts.len() {
        for j in i..starts.len() {
            let w = (starts[j] - starts[i]).num_microseconds().unwrap() as f64 / 1e6;
            let bound = f64::from(BURST) + w * PER_SECOND;
            assert!(
                (j - i + 1) as f64 <= bound + 1e-9,
                "{} starts within {w}s",
                j - i + 1
            );
        }
    }
}

/// One worker claiming from several connections at once (a pull worker with parallel
/// claims, say) under `one_per_worker`: it never holds two of the queue's tasks, and
/// another worker's task runs beside its own.
pub async fn one_per_worker_holds_under_concurrent_claims_of_one_worker(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..16).map(|_| NewTask::new("a", json!(null))).collect();
    let ids = submit_now(&*s, tasks).await;
    set(
        &*s,
        "default",
        QueuePolicy {
            one_per_worker: true,
            ..QueuePolicy::default()
        },
    )
    .await;
    let done = Arc::new(AtomicUsize::new(0));
    let mut claimers = Vec::new();
    for i in 0..4 {
        let store = db.store().await;
        // Two connections for each of two workers.
        let worker = format!("w{}", i % 2);
        claimers.push(tokio::spawn(solo(store, worker, 16, done.clone())));
    }
    for c in claimers {
        c.await.expect("claimer");
    }
    let mut spans: Vec<(DateTime<Utc>, DateTime<Utc>, String)> = Vec::new();
    for id in ids {
        let t = get(&*s, id).await;
        assert_eq!(t.state, TaskState::Succeeded, "task {id}");
        spans.push((
            t.started_at.unwrap(),
            t.finished_at.unwrap(),
            t.worker_id.unwrap(),
        ));
    }
    for (start, _, worker) in &spans {
        let held = spans
            .iter()
            .filter(|(s, f, w)| w == worker && s <= start && f > start)
            .count();
        assert_eq!(held, 1, "{worker} held {held} at {start}");
    }
    let workers: std::collections::HashSet<&str> =
        spans.iter().map(|(_, _, w)| w.as_str()).collect();
    assert_eq!(workers.len(), 2, "both workers ran tasks");
}

async fn solo(s: Arc<dyn Store>, worker: String, total: usize, done: Arc<AtomicUsize>) {
    while done.load(Ordering::SeqCst) < total {
        let tasks = s
            .task_claim(ClaimParams {
                worker_id: worker.clone(),
                now: None,
                ..claim_params("default", &["a"], 4, t0())
            })
            .await
            .expect("claim");
        assert!(
            tasks.len() <= 1,
            "{worker} was handed {} at once",
            tasks.len()
        );
        let Some(t) = tasks.first() else {
            tokio::time::sleep(Duration::from_millis(2)).await;
            continue;
        };
        // Held a moment, so that this worker's other connections claim meanwhile.
        tokio::time::sleep(Duration::from_millis(3)).await;
        complete(&*s, std::slice::from_ref(t)).await;
        done.fetch_add(1, Ordering::SeqCst);
    }
}
