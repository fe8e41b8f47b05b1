//! Attempts that do not end on their own: a timeout ends them and counts them, a lease
//! that runs out is rescued with the attempt counted, and a graceful shutdown gives the
//! attempt back.

use super::{fast, finished, get, instant_retry, outcomes, start, submit, wait_event, PATIENCE};
use crate::freeze::Freezable;
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_runtime::*;
use tokio::sync::mpsc;

/// Never finishes on its own; optionally saves a checkpoint first and says so.
struct Hang {
    started: mpsc::UnboundedSender<i64>,
}

impl Handler for Hang {
    const KIND: &'static str = "hang";
    type Payload = serde_json::Value;
    type Output = ();
    async fn run(&self, ctx: TaskContext, payload: serde_json::Value) -> Result<(), HandlerError> {
        if let Some(cp) = payload.get("checkpoint") {
            ctx.save_checkpoint(cp).await?;
        }
        let _ = self.started.send(ctx.task_id());
        std::future::pending::<()>().await;
        Ok(())
    }
}

pub async fn timeouts_count_attempts_and_end_failed(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("hang", json!({}))
            .timeout(Duration::from_millis(200))
            .max_attempts(2)
            .backoff(instant_retry()),
    )
    .await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let w = fast(db.store().await)
        .register(Hang { started: tx })
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    for attempt in 1..=2 {
        let e = wait_event(&mut events, "a timed-out attempt", finished(id)).await;
        assert_eq!(
            e,
            WorkerEvent::Finished {
                task_id: id,
                outcome: AttemptOutcome::TimedOut,
                applied: true
            },
            "attempt {attempt}"
        );
    }
    w.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(
        (t.state, t.attempt),
        (TaskState::Failed, 2),
        "never an endless loop"
    );
    assert_eq!(t.last_error.as_deref(), Some("timed out after 200 ms"));
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::TimedOut, AttemptOutcome::TimedOut]
    );
}

pub async fn lease_expiry_is_rescued_with_the_attempt_counted(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("hang", json!({}))
            .backoff(instant_retry())
            .max_attempts(1),
    )
    .await;
    let frozen = Freezable::new(db.store().await);
    let (tx, mut started) = mpsc::unbounded_channel();
    let w = fast(frozen.clone())
        .lease_for(Duration::from_millis(600))
        .register(Hang { started: tx })
        .build()
        .unwrap();
    let w = start(w);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap()
        .unwrap();
    frozen.freeze();
    let rescuer = Rescuer::new(store.clone(), RescuerConfig::default());
    // Rescue at the database time just past the lease, rather than waiting for it. A
    // renewal already in flight when the worker froze may still move the lease once, so
    // read it again until the rescue takes the task.
    let mut rescued = 0;
    let mut after_expiry = None;
    while rescued == 0 {
        let expiry = get(&*store, id).await.lease_expires_at.expect("leased");
        let now = expiry + chrono::Duration::milliseconds(1);
        after_expiry = Some(now);
        rescued = rescuer.run_once(Some(now)).await.unwrap();
    }
    assert_eq!(
        rescuer.run_once(after_expiry).await.unwrap(),
        0,
        "a second rescuer finds nothing"
    );
    frozen.thaw();
    w.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(
        (t.state, t.attempt),
        (TaskState::Failed, 1),
        "the only attempt was spent on the expired lease"
    );
    assert_eq!(t.last_error.as_deref(), Some("lease expired"));
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::LeaseExpired]
    );
}

pub async fn graceful_shutdown_releases_without_spending_an_attempt(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("hang", json!({"checkpoint": {"row": 42}})),
    )
    .await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let w = fast(db.store().await)
        .shutdown_grace(Duration::from_millis(100))
        .register(Hang { started: tx })
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap()
        .unwrap();
    w.shutdown().await;
    let e = wait_event(&mut events, "the release", finished(id)).await;
    assert_eq!(
        e,
        WorkerEvent::Finished {
            task_id: id,
            outcome: AttemptOutcome::Interrupted,
            applied: true
        }
    );
    let t = get(&*store, id).await;
    assert_eq!(
        (t.state, t.attempt),
        (TaskState::Pending, 0),
        "no attempt spent"
    );
    assert_eq!(t.checkpoint, Some(json!({"row": 42})), "checkpoint kept");
    assert!(
        t.run_at <= store.db_now().await.unwrap(),
        "due again at once"
    );
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::Interrupted]
    );
}
