//! Many tasks through several workers: each task runs exactly once, and a worker whose
//! completions stall claims no more than one concurrency ahead of them.

use super::{fast, start, wait_event, PATIENCE};
use crate::freeze::Freezable;
use crate::Backend;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::{NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::Notify;

struct Count {
    runs: Arc<Mutex<HashMap<i64, u32>>>,
    total: Arc<AtomicUsize>,
    target: usize,
    all_done: Arc<Notify>,
}

impl Handler for Count {
    const KIND: &'static str = "count";
    type Payload = u32;
    type Output = ();
    async fn run(&self, ctx: TaskContext, _n: u32) -> Result<(), HandlerError> {
        *self.runs.lock().unwrap().entry(ctx.task_id()).or_default() += 1;
        if self.total.fetch_add(1, Ordering::SeqCst) + 1 == self.target {
            self.all_done.notify_one();
        }
        Ok(())
    }
}

pub async fn four_workers_run_each_of_2000_tasks_exactly_once(db: &impl Backend) {
    const N: usize = 2000;
    let submitter = db.store().await;
    for chunk in (0..N as u32).collect::<Vec<_>>().chunks(500) {
        let tasks = chunk
            .iter()
            .map(|i| NewTask::new("count", json!(i)))
            .collect();
        submitter
            .task_submit(SubmitParams { tasks, now: None })
            .await
            .unwrap();
    }
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let total = Arc::new(AtomicUsize::new(0));
    let all_done = Arc::new(Notify::new());
    let mut workers = Vec::new();
    for w in 0..4 {
        let handler = Count {
            runs: runs.clone(),
            total: total.clone(),
            target: N,
            all_done: all_done.clone(),
        };
        let worker = fast(db.store().await)
            .identity(WorkerIdentity::named(format!("drain-{w}")))
            .concurrency(8)
            .register(handler)
            .build()
            .unwrap();
        workers.push(start(worker));
    }
    tokio::time::timeout(PATIENCE * 2, all_done.notified())
        .await
        .expect("all tasks ran");
    for w in workers {
        w.shutdown().await;
    }
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), N, "every task ran");
    assert!(
        runs.values().all(|n| *n == 1),
        "no task ran twice: {:?}",
        runs.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let queues = submitter.queue_list().await.unwrap();
    assert_eq!(queues[0].counts, vec![(TaskState::Succeeded, N as u64)]);
    let mut by_worker: HashMap<String, usize> = HashMap::new();
    let mut after = None;
    loop {
        let page = submitter
            .task_list(ListParams {
                filter: TaskFilter::default(),
                after,
                limit: MAX_PAGE_SIZE,
                light: false,
            })
            .await
            .unwrap();
        for t in &page.tasks {
            assert_eq!(t.attempt, 1);
            *by_worker.entry(t.worker_id.clone().unwrap()).or_default() += 1;
        }
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(by_worker.values().sum::<usize>(), N);
}

/// A worker claims its next tasks while the ends of the last ones are being written, but
/// never more than one concurrency ahead: with the store's completions stalled, it holds
/// at most twice its concurrency in leases, and once they go through every task runs
/// exactly once.
pub async fn claims_run_ahead_of_a_stalled_completer_by_one_concurrency_at_most(db: &impl Backend) {
    const N: usize = 20;
    const CONCURRENCY: usize = 3;
    let submitter = db.store().await;
    let tasks = (0..N as u32)
        .map(|i| NewTask::new("count", json!(i)))
        .collect();
    submitter
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap();
    let store = Freezable::new(db.store().await);
    store.freeze_finishes();
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let all_done = Arc::new(Notify::new());
    let worker = fast(store.clone())
        .concurrency(CONCURRENCY)
        .register(Count {
            runs: runs.clone(),
            total: Arc::new(AtomicUsize::new(0)),
            target: N,
            all_done: all_done.clone(),
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let w = start(worker);
    for n in 0..2 * CONCURRENCY {
        wait_event(&mut events, &format!("claim {}", n + 1), |e| {
            matches!(e, WorkerEvent::Claimed { .. })
        })
        .await;
    }
    // Twenty polls' worth of chances to claim more; a bounded wait is the only way to
    // see that something does not happen.
    let more = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            if let Ok(WorkerEvent::Claimed { .. }) = events.recv().await {
                return;
            }
        }
    })
    .await;
    assert!(more.is_err(), "claimed beyond twice the concurrency");
    let running = submitter
        .task_list(ListParams {
            filter: TaskFilter::default().state(TaskState::Running),
            after: None,
            limit: 100,
            light: false,
        })
        .await
        .unwrap();
    assert_eq!(
        running.tasks.len(),
        2 * CONCURRENCY,
        "leases held while stalled"
    );

    store.thaw();
    tokio::time::timeout(PATIENCE, all_done.notified())
        .await
        .expect("all ran once completions went through");
    w.shutdown().await;
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), N);
    assert!(runs.values().all(|n| *n == 1), "no task ran twice");
    let queues = submitter.queue_list().await.unwrap();
    assert_eq!(queues[0].counts, vec![(TaskState::Succeeded, N as u64)]);
}
