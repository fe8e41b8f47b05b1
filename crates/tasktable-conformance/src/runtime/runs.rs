//! Multi-run tasks with real workers: twenty workers of a group, five to a store, run a
//! task that wants six copies three at a time; the runs go to six distinct members,
//! never more than three at once, and none to a worker outside the group. A worker that
//! freezes loses its run to another, which resumes from its checkpoint, while the other
//! run goes on.

use super::{fast, get, start, submit, PATIENCE};
use crate::targets::groups;
use crate::Backend;
use serde_json::json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tasktable_core::runs::{RunState, Runs};
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_runtime::*;
use tokio::sync::{mpsc, Semaphore};

/// Counts the runs going, says who started, and holds each run until the test lets one
/// go.
struct Gated {
    name: String,
    going: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    started: mpsc::UnboundedSender<String>,
    gate: Arc<Semaphore>,
}

impl Handler for Gated {
    const KIND: &'static str = "copy";
    type Payload = serde_json::Value;
    type Output = String;
    async fn run(&self, _: TaskContext, _: serde_json::Value) -> Result<String, HandlerError> {
        let now = self.going.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let _ = self.started.send(self.name.clone());
        self.gate
            .acquire()
            .await
            .expect("the gate stays open")
            .forget();
        self.going.fetch_sub(1, Ordering::SeqCst);
        Ok(self.name.clone())
    }
}

pub async fn six_copies_run_on_six_members_of_the_group_never_more_than_three_at_once(
    db: &impl Backend,
) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("copy", json!(null))
            .target(groups(&["g"]))
            .runs(Runs::copies(6).at_once(3)),
    )
    .await;
    let going = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let mut stores = Vec::new();
    for _ in 0..5 {
        stores.push(db.store().await);
    }
    let mut running = Vec::new();
    let names: Vec<String> = (1..=20)
        .map(|i| format!("member-{i}"))
        .chain(["outsider-1".to_owned(), "outsider-2".to_owned()])
        .collect();
    for (i, name) in names.iter().enumerate() {
        let mut b = fast(stores[i % stores.len()].clone())
            .identity(WorkerIdentity::named(name.clone()))
            .concurrency(2)
            .register(Gated {
                name: name.clone(),
                going: going.clone(),
                peak: peak.clone(),
                started: started_tx.clone(),
                gate: gate.clone(),
            });
        if name.starts_with("member") {
            b = b.group("g");
        }
        let w = b.build().unwrap();
        let mut events = w.subscribe();
        let tx = done_tx.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                if let WorkerEvent::Finished {
                    task_id,
                    applied: true,
                    ..
                } = e
                {
                    let _ = tx.send(task_id);
                }
            }
        });
        running.push(start(w));
    }
    let mut ran = Vec::new();
    // Three start; each run let go makes room for one more, until six have started.
    for _ in 0..3 {
        ran.push(next_start(&mut started).await);
    }
    for _ in 3..6 {
        gate.add_permits(1);
        ran.push(next_start(&mut started).await);
    }
    gate.add_permits(3);
    let mut finished = 0;
    while finished < 6 {
        let task_id = tokio::time::timeout(PATIENCE, done.recv())
            .await
            .expect("every run ends")
            .expect("events");
        assert_eq!(task_id, id);
        finished += 1;
    }
    for w in running {
        w.shutdown().await;
    }
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "never more than three at once"
    );
    assert!(started.try_recv().is_err(), "no seventh run: {ran:?}");
    let distinct: HashSet<&String> = ran.iter().collect();
    assert_eq!(distinct.len(), 6, "six distinct workers: {ran:?}");
    assert!(ran.iter().all(|n| n.starts_with("member")), "{ran:?}");
    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    let runs = store.run_list(id).await.unwrap();
    assert_eq!(runs.len(), 6);
    assert!(runs
        .iter()
        .all(|r| r.state == RunState::Ended(AttemptOutcome::Succeeded)
            && r.result == Some(json!(r.worker_id))));
}

async fn next_start(started: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .expect("a run starts")
        .expect("handlers")
}

/// What one worker's copy of [`Copy`] does.
enum Role {
    /// Checkpoints 5, says so, then waits for the test before a late write.
    Frozen {
        checkpointed: mpsc::UnboundedSender<()>,
        go_on: Arc<tokio::sync::Notify>,
        late_write: mpsc::UnboundedSender<String>,
    },
    /// Says it started, then holds its run until the test lets it go.
    Steady {
        started: mpsc::UnboundedSender<()>,
        release: Arc<tokio::sync::Notify>,
    },
    /// Works from the checkpoint it was given to 10, checkpointing each step.
    Healthy,
}

struct Copy(Role);

impl Handler for Copy {
    const KIND: &'static str = "resumable-copy";
    type Payload = serde_json::Value;
    type Output = serde_json::Value;
    async fn run(
        &self,
        ctx: TaskContext,
        _: serde_json::Value,
    ) -> Result<serde_json::Value, HandlerError> {
        let start: u32 = ctx.checkpoint::<u32>()?.unwrap_or(0);
        match &self.0 {
            Role::Frozen {
                checkpointed,
                go_on,
                late_write,
            } => {
                ctx.save_checkpoint(&5u32).await?;
                checkpointed.send(()).unwrap();
                go_on.notified().await;
                let late = ctx.save_checkpoint(&99u32).await;
                late_write.send(format!("{late:?}")).unwrap();
                Ok(json!({"by": "frozen"}))
            }
            Role::Steady { started, release } => {
                started.send(()).unwrap();
                release.notified().await;
                Ok(json!({"by": "steady", "resumed_from": start}))
            }
            Role::Healthy => {
                for step in start..10 {
                    ctx.save_checkpoint(&(step + 1)).await?;
                }
                Ok(json!({"by": "healthy", "resumed_from": start}))
            }
        }
    }
}

pub async fn a_frozen_run_is_taken_over_from_its_checkpoint_while_the_other_run_goes_on(
    db: &impl Backend,
) {
    use crate::freeze::Freezable;
    use std::time::Duration;
    use tokio::sync::Notify;
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("resumable-copy", json!(null))
            .backoff(super::instant_retry())
            .runs(Runs::copies(2)),
    )
    .await;
    let frozen_store = Freezable::new(db.store().await);
    let (cp_tx, mut checkpointed) = mpsc::unbounded_channel();
    let (late_tx, mut late) = mpsc::unbounded_channel();
    let go_on = Arc::new(Notify::new());
    let frozen = fast(frozen_store.clone())
        .identity(WorkerIdentity::named("frozen"))
        .concurrency(1)
        .lease_for(Duration::from_secs(1))
        .register(Copy(Role::Frozen {
            checkpointed: cp_tx,
            go_on: go_on.clone(),
            late_write: late_tx,
        }))
        .build()
        .unwrap();
    let mut frozen_events = frozen.subscribe();
    let frozen = start(frozen);
    tokio::time::timeout(PATIENCE, checkpointed.recv())
        .await
        .expect("the first run checkpoints")
        .unwrap();
    frozen_store.freeze();

    let (started_tx, mut started) = mpsc::unbounded_channel();
    let release = Arc::new(Notify::new());
    let steady = fast(db.store().await)
        .identity(WorkerIdentity::named("steady"))
        .concurrency(1)
        .register(Copy(Role::Steady {
            started: started_tx,
            release: release.clone(),
        }))
        .build()
        .unwrap();
    let mut steady_events = steady.subscribe();
    let steady = start(steady);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .expect("the second run starts")
        .unwrap();

    let taker = fast(db.store().await)
        .identity(WorkerIdentity::named("taker"))
        .rescue_interval(Some(Duration::from_millis(100)))
        .register(Copy(Role::Healthy))
        .build()
        .unwrap();
    let mut taker_events = taker.subscribe();
    let taker = start(taker);
    super::wait_event(
        &mut taker_events,
        "the taker ends the third run",
        super::finished(id),
    )
    .await;
    let runs = store.run_list(id).await.unwrap();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!(runs[0].state, RunState::Ended(AttemptOutcome::LeaseExpired));
    assert_eq!(runs[1].state, RunState::Running, "the steady run goes on");
    assert_eq!(runs[2].worker_id, "taker");
    assert_eq!(runs[2].resumed_from, Some(1));
    assert_eq!(
        runs[2].result,
        Some(json!({"by": "healthy", "resumed_from": 5}))
    );
    assert_eq!(get(&*store, id).await.state, TaskState::Running);

    release.notify_one();
    super::wait_event(
        &mut steady_events,
        "the steady run ends",
        super::finished(id),
    )
    .await;
    assert_eq!(get(&*store, id).await.state, TaskState::Succeeded);

    frozen_store.thaw();
    super::wait_event(&mut frozen_events, "the frozen worker hears it lost its run", |e| {
        matches!(e, WorkerEvent::Stopped { task_id, reason: StopReason::LeaseLost } if *task_id == id)
    })
    .await;
    go_on.notify_one();
    let late = tokio::time::timeout(PATIENCE, late.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(late.contains("Stopped(LeaseLost)"), "{late}");
    for w in [frozen, steady, taker] {
        w.shutdown().await;
    }
    let runs = store.run_list(id).await.unwrap();
    assert_eq!(
        runs[0].checkpoint,
        Some(json!(5)),
        "the late write changed nothing"
    );
}
