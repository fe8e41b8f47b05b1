//! Many tasks through several workers: each task runs exactly once; a worker whose
//! completions stall holds no more leases than its running, recording and claimed-ahead
//! tasks; and tasks claimed ahead that a slow handler keeps waiting go back unspent.

use super::{fast, get, start, submit, submit_all, wait_event, PATIENCE};
use crate::freeze::Freezable;
use crate::Backend;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
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
/// within a bound: with the store's completions stalled, the tasks that start are its
/// concurrency twice plus its claim-ahead limit (running, and ended but not recorded:
/// the recording slots are one concurrency and the claim-ahead limit), and the leases it
/// holds add at most the tasks waiting for a slot. Once the completions go through, every
/// task runs exactly once.
pub async fn claims_run_ahead_of_a_stalled_completer_within_their_bound(db: &impl Backend) {
    const CONCURRENCY: usize = 3;
    let ahead = tasktable_runtime::ahead_limit(CONCURRENCY);
    let started = 2 * CONCURRENCY + ahead;
    // More tasks than the worker may start and hold, so the bound is what stops it.
    let n = 2 * (started + ahead);
    let submitter = db.store().await;
    let tasks = (0..n as u32)
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
            target: n,
            all_done: all_done.clone(),
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let w = start(worker);
    for i in 0..2 * CONCURRENCY {
        wait_event(&mut events, &format!("start {}", i + 1), |e| {
            matches!(e, WorkerEvent::Claimed { .. })
        })
        .await;
    }
    // Then count the starts until none comes for a second: twenty polls' worth of
    // chances to start more (a bounded wait is the only way to see that something does
    // not happen). How many tasks were claimed ahead depends on the handlers' measured
    // run time, so the count has a range.
    let mut starts = 2 * CONCURRENCY;
    while tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            if let Ok(WorkerEvent::Claimed { .. }) = events.recv().await {
                return;
            }
        }
    })
    .await
    .is_ok()
    {
        starts += 1;
        assert!(starts <= started, "started beyond the bound: {starts}");
    }
    let running = submitter
        .task_list(ListParams {
            filter: TaskFilter::default().state(TaskState::Running),
            after: None,
            // One more than the bound allows, so a page shows a breach of it.
            limit: (started + ahead + 1) as u32,
            light: false,
        })
        .await
        .unwrap();
    let held = running.tasks.len();
    assert!(
        (starts..=starts + ahead).contains(&held),
        "leases held while stalled: {held} after {starts} starts"
    );

    store.thaw();
    tokio::time::timeout(PATIENCE, all_done.notified())
        .await
        .expect("all ran once completions went through");
    w.shutdown().await;
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), n);
    assert!(runs.values().all(|r| *r == 1), "no task ran twice");
    let queues = submitter.queue_list().await.unwrap();
    assert_eq!(queues[0].counts, vec![(TaskState::Succeeded, n as u64)]);
}

/// Runs once and returns, or (kind `block`) waits until the test opens the gate.
struct Gated {
    runs: Arc<Mutex<HashMap<i64, u32>>>,
    gate: Arc<tokio::sync::Semaphore>,
}

impl Handler for Gated {
    const KIND: &'static str = "gated";
    type Payload = bool;
    type Output = ();
    async fn run(&self, ctx: TaskContext, block: bool) -> Result<(), HandlerError> {
        *self.runs.lock().unwrap().entry(ctx.task_id()).or_default() += 1;
        if block {
            let _ = self.gate.acquire().await;
        }
        Ok(())
    }
}

/// A worker with short handlers claims ahead of its free slots; when a handler turns out
/// slow, the tasks waiting behind it are given back within a second, their attempt not
/// spent, with a history entry that says they did not run; each then runs exactly once.
pub async fn tasks_claimed_ahead_behind_a_slow_handler_go_back_unspent(db: &impl Backend) {
    const AHEAD: usize = 4;
    let store = db.store().await;
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let gate = Arc::new(tokio::sync::Semaphore::new(0));
    let worker = fast(store.clone())
        .concurrency(1)
        .register(Gated {
            runs: runs.clone(),
            gate: gate.clone(),
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let w = start(worker);
    // Short runs first, so the worker knows its handlers are quick.
    for _ in 0..3 {
        let id = submit(&*store, NewTask::new("gated", json!(false))).await;
        wait_event(&mut events, "a quick task", super::finished(id)).await;
    }
    // One claim takes the slow task and those behind it: a submit of all five at once.
    let mut tasks = vec![NewTask::new("gated", json!(true)).priority(1)];
    tasks.extend((0..AHEAD).map(|_| NewTask::new("gated", json!(false))));
    let ids = submit_all(&*store, tasks).await;
    let (slow, behind) = (ids[0], &ids[1..]);
    wait_event(
        &mut events,
        "the slow task to start",
        |e| matches!(e, WorkerEvent::Claimed { task_id, .. } if *task_id == slow),
    )
    .await;
    // How many were claimed ahead depends on the quick tasks' measured run time; at
    // least one was (at concurrency 1 none is claimed ahead only when the mean run time
    // passes 10 ms, and a no-op handler's is far under it), and each is given back after
    // a second behind the slow one.
    let e = wait_event(&mut events, "a task given back", |e| {
        matches!(
            e,
            WorkerEvent::Finished {
                outcome: AttemptOutcome::Interrupted,
                ..
            }
        )
    })
    .await;
    let WorkerEvent::Finished {
        task_id, applied, ..
    } = e
    else {
        unreachable!()
    };
    assert!(behind.contains(&task_id), "only waiting tasks go back");
    assert!(applied);
    assert!(
        runs.lock().unwrap().keys().all(|id| !behind.contains(id)),
        "a task given back never ran"
    );
    gate.add_permits(1);
    for &id in &ids {
        loop {
            if get(&*store, id).await.state == TaskState::Succeeded {
                break;
            }
            wait_event(&mut events, "the rest to run", |e| {
                matches!(e, WorkerEvent::Finished { .. })
            })
            .await;
        }
    }
    w.shutdown().await;
    let runs = runs.lock().unwrap().clone();
    let mut went_back = 0;
    for &id in behind {
        assert_eq!(runs.get(&id), Some(&1), "task {id} ran once");
        assert_eq!(
            get(&*store, id).await.attempt,
            1,
            "the wait spent no attempt"
        );
        let history = store.attempt_list(id).await.unwrap();
        let (last, before) = history.split_last().unwrap();
        assert_eq!(last.outcome, AttemptOutcome::Succeeded);
        for a in before {
            assert_eq!(a.outcome, AttemptOutcome::Interrupted);
            assert_eq!(
                a.error.as_deref(),
                Some(tasktable_core::outcome::GIVEN_BACK)
            );
        }
        went_back += usize::from(!before.is_empty());
    }
    assert!(went_back >= 1);
}
