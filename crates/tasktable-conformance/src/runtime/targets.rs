//! Targets with real workers, each on a store (and pool) of its own: targeted tasks run
//! only on the workers they allow; a new target stops a running handler that it leaves
//! out, which is told why, and the task runs elsewhere without the attempt counted; a
//! retry with an affinity runs on the worker of its first attempt, or elsewhere once that
//! worker is gone.

use super::{fast, get, outcomes, start, submit, PATIENCE};
use crate::targets::{groups, workers};
use crate::Backend;
use serde_json::json;
use std::collections::HashMap;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, Change, NewTask, Target, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::mpsc;

/// Answers with the name of the worker that ran it.
struct Placed(&'static str);

impl Handler for Placed {
    const KIND: &'static str = "placed";
    type Payload = serde_json::Value;
    type Output = String;
    async fn run(&self, _: TaskContext, _: serde_json::Value) -> Result<String, HandlerError> {
        Ok(self.0.to_owned())
    }
}

/// Runs until told to stop, and says why it was.
struct Holds {
    started: mpsc::UnboundedSender<i64>,
    stopped: mpsc::UnboundedSender<StopReason>,
}

impl Handler for Holds {
    const KIND: &'static str = "placed";
    type Payload = serde_json::Value;
    type Output = String;
    async fn run(&self, ctx: TaskContext, _: serde_json::Value) -> Result<String, HandlerError> {
        let _ = self.started.send(ctx.task_id());
        let reason = ctx.stopped().await;
        let _ = self.stopped.send(reason);
        Ok("holder".to_owned())
    }
}

pub async fn targeted_tasks_run_only_on_the_workers_they_allow(db: &impl Backend) {
    let store = db.store().await;
    let plan: Vec<(Target, &[&str])> = vec![
        (workers(&["a"]), &["a"]),
        (groups(&["gpu"]), &["b", "c"]),
        (groups(&["eu"]), &["c"]),
        (workers(&["a", "c"]), &["a", "c"]),
        (Target::Any, &["a", "b", "c"]),
    ];
    let mut ids: HashMap<i64, &[&str]> = HashMap::new();
    for (target, allowed) in &plan {
        for i in 0..10 {
            let id = submit(
                &*store,
                NewTask::new("placed", json!(i)).target(target.clone()),
            )
            .await;
            ids.insert(id, allowed);
        }
    }
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let mut running = Vec::new();
    for (name, worker_groups) in [
        ("a", &[][..]),
        ("b", &["gpu"][..]),
        ("c", &["gpu", "eu"][..]),
    ] {
        let mut b = fast(db.store().await)
            .identity(WorkerIdentity::named(name))
            .concurrency(4)
            .register(Placed(name));
        for g in worker_groups {
            b = b.group(*g);
        }
        let w = b.build().unwrap();
        let mut events = w.subscribe();
        let tx = done_tx.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                if let WorkerEvent::Finished { task_id, .. } = e {
                    let _ = tx.send(task_id);
                }
            }
        });
        running.push(start(w));
    }
    let mut finished = 0;
    while finished < ids.len() {
        tokio::time::timeout(PATIENCE, done.recv())
            .await
            .expect("every task runs")
            .expect("events");
        finished += 1;
    }
    for w in running {
        w.shutdown().await;
    }
    for (id, allowed) in &ids {
        let t = get(&*store, *id).await;
        assert_eq!(t.state, TaskState::Succeeded, "task {id}");
        let ran_on = t
            .result
            .as_ref()
            .and_then(|r| r.as_str())
            .unwrap()
            .to_owned();
        assert!(
            allowed.contains(&ran_on.as_str()),
            "task {id} aimed at {} ran on {ran_on}",
            t.target
        );
    }
}

pub async fn a_new_target_stops_the_running_handler_without_spending_an_attempt(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("placed", json!(null)).target(workers(&["a"])),
    )
    .await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (stopped_tx, mut stopped) = mpsc::unbounded_channel();
    let a = fast(db.store().await)
        .identity(WorkerIdentity::named("a"))
        .lease_for(Duration::from_millis(600))
        .register(Holds {
            started: started_tx,
            stopped: stopped_tx,
        })
        .build()
        .unwrap();
    let a = start(a);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap()
        .unwrap();
    let changed = store
        .task_update(UpdateParams {
            actor: tasktable_core::Actor::rust(),
            target: tasktable_store::Target::Id(id),
            change: Change::SetTarget {
                target: workers(&["b"]),
            },
            now: None,
            action: None,
        })
        .await
        .unwrap();
    assert_eq!(changed, 1);
    // b is not running yet, so nobody has claimed the task again when a's lease keeper
    // next writes: a hears why.
    let reason = tokio::time::timeout(PATIENCE, stopped.recv())
        .await
        .expect("handler signalled")
        .unwrap();
    assert_eq!(reason, StopReason::Retargeted);
    let t = get(&*store, id).await;
    assert_eq!((t.state, t.attempt), (TaskState::Pending, 0));

    let b = fast(db.store().await)
        .identity(WorkerIdentity::named("b"))
        .register(Placed("b"))
        .build()
        .unwrap();
    let mut events = b.subscribe();
    let b = start(b);
    super::wait_event(&mut events, "b finishes the task", super::finished(id)).await;
    b.shutdown().await;
    a.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(t.result, Some(json!("b")));
    assert_eq!(t.attempt, 1, "the attempt a lost was given back");
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::Retargeted, AttemptOutcome::Succeeded]
    );
}

/// Fails its first attempt; then answers with the name of the worker that ran it.
struct FailsFirst(&'static str);

impl Handler for FailsFirst {
    const KIND: &'static str = "sticky";
    type Payload = serde_json::Value;
    type Output = String;
    async fn run(&self, ctx: TaskContext, _: serde_json::Value) -> Result<String, HandlerError> {
        if ctx.attempt() == 1 {
            return Err(HandlerError::retry("the first attempt fails"));
        }
        Ok(self.0.to_owned())
    }
}

fn sticky(i: usize, backoff: Duration) -> NewTask {
    NewTask::new("sticky", json!(i))
        .backoff(tasktable_core::Backoff {
            initial: backoff,
            multiplier: 1.0,
            max: backoff,
            jitter: 0.0,
        })
        .affinity(Duration::from_secs(3600))
}

/// Waits for `n` tasks to succeed, by the events of `workers`.
fn successes(workers: &[&Worker]) -> mpsc::UnboundedReceiver<i64> {
    let (tx, rx) = mpsc::unbounded_channel();
    for w in workers {
        let mut events = w.subscribe();
        let tx = tx.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                if let WorkerEvent::Finished {
                    task_id,
                    outcome: AttemptOutcome::Succeeded,
                    ..
                } = e
                {
                    let _ = tx.send(task_id);
                }
            }
        });
    }
    rx
}

async fn wait_for(rx: &mut mpsc::UnboundedReceiver<i64>, n: usize) {
    for _ in 0..n {
        tokio::time::timeout(PATIENCE, rx.recv())
            .await
            .expect("every task succeeds")
            .expect("events");
    }
}

pub async fn a_retry_runs_again_on_the_worker_that_ran_it(db: &impl Backend) {
    let store = db.store().await;
    let mut ids = Vec::new();
    for i in 0..12 {
        ids.push(submit(&*store, sticky(i, Duration::from_millis(20))).await);
    }
    let mut built = Vec::new();
    for name in ["a", "b", "c"] {
        built.push(
            fast(db.store().await)
                .identity(WorkerIdentity::named(name))
                .concurrency(2)
                .register(FailsFirst(name))
                .build()
                .unwrap(),
        );
    }
    let mut done = successes(&built.iter().collect::<Vec<_>>());
    let running: Vec<_> = built.into_iter().map(start).collect();
    wait_for(&mut done, ids.len()).await;
    for w in running {
        w.shutdown().await;
    }
    for id in ids {
        let attempts = store.attempt_list(id).await.unwrap();
        assert_eq!(attempts.len(), 2, "task {id}");
        assert_eq!(
            attempts[0].worker_id, attempts[1].worker_id,
            "task {id}: its retry ran on the worker of its first attempt"
        );
        let t = get(&*store, id).await;
        assert_eq!(t.result, Some(json!(attempts[1].worker_id)));
        assert_eq!(t.affinity_until, None);
    }
}

pub async fn a_retry_goes_elsewhere_once_its_worker_is_gone(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(&*store, sticky(0, Duration::from_millis(500))).await;
    let a = fast(db.store().await)
        .identity(WorkerIdentity::named("a"))
        .register(FailsFirst("a"))
        .build()
        .unwrap();
    let mut events = a.subscribe();
    let a = start(a);
    super::wait_event(
        &mut events,
        "the first attempt fails",
        |e| matches!(e, WorkerEvent::Finished { task_id, .. } if *task_id == id),
    )
    .await;
    // `a` leaves (the registry marks it gone) before its retry is due.
    a.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(t.worker_id.as_deref(), Some("a"));
    assert!(t.affinity_until.is_some(), "the retry waits for a");
    let b = fast(db.store().await)
        .identity(WorkerIdentity::named("b"))
        .rescue_interval(Some(Duration::from_millis(50)))
        .register(FailsFirst("b"))
        .build()
        .unwrap();
    let mut done = successes(&[&b]);
    let b = start(b);
    wait_for(&mut done, 1).await;
    b.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(
        (t.state, t.result),
        (TaskState::Succeeded, Some(json!("b")))
    );
}
