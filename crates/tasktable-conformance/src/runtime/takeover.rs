//! A worker that stalls loses its task to another: the task resumes from the stalled
//! worker's checkpoint and the stalled worker's late writes are refused; a task claimed
//! again keeps its new lease while the old attempt's end is refused.

use super::{fast, finished, get, instant_retry, outcomes, start, submit, wait_event, PATIENCE};
use crate::freeze::Freezable;
use crate::Backend;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::{AttemptOutcome, Backoff, NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::{mpsc, Notify};

#[derive(Deserialize)]
struct Job {
    steps: u32,
}

/// Works through `steps`, checkpointing each. The "frozen" worker's copy stops after the
/// first checkpoint and waits for the test; the healthy one runs to the end.
struct Resumable {
    frozen_role: Option<FrozenRole>,
}

struct FrozenRole {
    checkpointed: mpsc::UnboundedSender<()>,
    go_on: Arc<Notify>,
    late_write: mpsc::UnboundedSender<String>,
}

impl Handler for Resumable {
    const KIND: &'static str = "resumable";
    type Payload = Job;
    type Output = serde_json::Value;
    async fn run(&self, ctx: TaskContext, job: Job) -> Result<serde_json::Value, HandlerError> {
        let start: u32 = ctx.checkpoint::<u32>()?.unwrap_or(0);
        if let Some(role) = &self.frozen_role {
            ctx.save_checkpoint(&5u32).await?;
            role.checkpointed.send(()).unwrap();
            role.go_on.notified().await;
            let late = ctx.save_checkpoint(&99u32).await;
            role.late_write.send(format!("{late:?}")).unwrap();
            return Ok(json!({"resumed_from": start, "by": "frozen"}));
        }
        for step in start..job.steps {
            ctx.save_checkpoint(&(step + 1)).await?;
        }
        Ok(json!({"resumed_from": start, "by": "healthy"}))
    }
}

pub async fn frozen_worker_loses_its_task_to_one_that_resumes_from_the_checkpoint(
    db: &impl Backend,
) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("resumable", json!({"steps": 10})).backoff(instant_retry()),
    )
    .await;

    let frozen_store = Freezable::new(db.store().await);
    let (cp_tx, mut cp_rx) = mpsc::unbounded_channel();
    let (late_tx, mut late_rx) = mpsc::unbounded_channel();
    let go_on = Arc::new(Notify::new());
    let role = FrozenRole {
        checkpointed: cp_tx,
        go_on: go_on.clone(),
        late_write: late_tx,
    };
    let a = fast(frozen_store.clone())
        .identity(WorkerIdentity::named("frozen"))
        .lease_for(Duration::from_secs(1))
        .register(Resumable {
            frozen_role: Some(role),
        })
        .build()
        .unwrap();
    let mut a_events = a.subscribe();
    let a = start(a);
    tokio::time::timeout(PATIENCE, cp_rx.recv())
        .await
        .expect("first checkpoint")
        .unwrap();
    frozen_store.freeze();

    let b = fast(db.store().await)
        .identity(WorkerIdentity::named("healthy"))
        .rescue_interval(Some(Duration::from_millis(100)))
        .register(Resumable { frozen_role: None })
        .build()
        .unwrap();
    let mut b_events = b.subscribe();
    let b = start(b);
    let done = wait_event(&mut b_events, "the healthy worker to finish", finished(id)).await;
    assert_eq!(
        done,
        WorkerEvent::Finished {
            task_id: id,
            outcome: AttemptOutcome::Succeeded,
            applied: true
        }
    );

    frozen_store.thaw();
    wait_event(&mut a_events, "the frozen worker to learn it lost the lease", |e| {
        matches!(e, WorkerEvent::Stopped { task_id, reason: StopReason::LeaseLost } if *task_id == id)
    })
    .await;
    go_on.notify_one();
    let late = tokio::time::timeout(PATIENCE, late_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        late.contains("Stopped(LeaseLost)"),
        "the late checkpoint is refused: {late}"
    );
    a.shutdown().await;
    b.shutdown().await;

    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(
        t.result,
        Some(json!({"resumed_from": 5, "by": "healthy"})),
        "resumed from the frozen worker's checkpoint"
    );
    assert_eq!(
        t.checkpoint,
        Some(json!(10)),
        "the late checkpoint changed nothing"
    );
    assert_eq!(t.attempt, 2);
    let history = store.attempt_list(id).await.unwrap();
    let summary: Vec<_> = history
        .iter()
        .map(|a| (a.worker_id.clone().unwrap(), a.outcome))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("frozen".to_string(), AttemptOutcome::LeaseExpired),
            ("healthy".to_string(), AttemptOutcome::Succeeded)
        ]
    );
    // The frozen worker's complete, had it sent one, is refused too (its credential is
    // not known here; `stale_token_writes_change_nothing` fences a full stale lease).
    let stale = tasktable_core::Lease {
        task_id: id,
        token: 1,
        credential: None,
        run: None,
    };
    let plan = tasktable_core::outcome::FinishPlan::for_handler(
        tasktable_core::HandlerOutcome::Succeeded {
            result: Some(json!("stale")),
        },
        1,
        &Backoff::default(),
        0.5,
    );
    let applied = store
        .task_finish(FinishParams {
            items: vec![FinishItem { lease: stale, plan }],
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(applied, vec![false]);
    assert_eq!(get(&*store, id).await.result, t.result);
}

/// Says when each attempt starts and returns only when the test lets that attempt go.
struct Gated {
    started: mpsc::UnboundedSender<u32>,
    go: Arc<Mutex<HashMap<u32, Arc<Notify>>>>,
}

impl Gated {
    fn gate(&self, attempt: u32) -> Arc<Notify> {
        self.go.lock().unwrap().entry(attempt).or_default().clone()
    }
}

impl Handler for Gated {
    const KIND: &'static str = "gated";
    type Payload = ();
    type Output = ();
    async fn run(&self, ctx: TaskContext, _: ()) -> Result<(), HandlerError> {
        let gate = self.gate(ctx.attempt());
        self.started.send(ctx.attempt()).unwrap();
        gate.notified().await;
        Ok(())
    }
}

/// A worker cut off from its database while an attempt ends loses that lease; once the
/// database is back it may claim the same task again before the old attempt's end has
/// been written (and refused). Dropping the old attempt must not drop the new one's
/// lease: the new attempt is renewed for as long as it runs, and succeeds.
pub async fn a_task_claimed_again_keeps_its_new_lease_while_the_old_attempt_ends(
    db: &impl Backend,
) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("gated", json!(null)).backoff(instant_retry()),
    )
    .await;
    let lease = Duration::from_millis(600);
    let frozen = Freezable::new(db.store().await);
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let handler = Gated {
        started: started_tx,
        go: Arc::default(),
    };
    let gates = handler.go.clone();
    let gate = |attempt| gates.lock().unwrap().entry(attempt).or_default().clone();
    let w = fast(frozen.clone())
        .lease_for(lease)
        .register(handler)
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    let first = tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap();
    assert_eq!(first, Some(1));

    // The database goes away; attempt 1 returns and its end waits to be written.
    frozen.freeze();
    gate(1).notify_one();
    let rescuer = Rescuer::new(store.clone(), RescuerConfig::default());
    let mut rescued = 0;
    while rescued == 0 {
        let expiry = get(&*store, id).await.lease_expires_at.expect("leased");
        rescued = rescuer
            .run_once(Some(expiry + chrono::Duration::milliseconds(1)))
            .await
            .unwrap();
    }

    // The database is back for claims and renewals; the same worker takes the task again
    // while attempt 1's end is still on its way.
    frozen.thaw_all_but_finishes();
    let second = tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap();
    assert_eq!(second, Some(2));
    let claimed_until = get(&*store, id).await.lease_expires_at.expect("leased");
    frozen.thaw();
    let old_end = wait_event(&mut events, "attempt 1's end to be refused", finished(id)).await;
    assert!(
        matches!(old_end, WorkerEvent::Finished { applied: false, .. }),
        "{old_end:?}"
    );

    // Attempt 2's lease is renewed past the end its claim gave it, so a rescue at that
    // end finds nothing to take back.
    wait_event(
        &mut events,
        "attempt 2's lease renewed past its claim's",
        |e| {
            matches!(e, WorkerEvent::Renewed { task_id, attempt: 2, expires_at: Some(until) }
            if *task_id == id && *until > claimed_until)
        },
    )
    .await;
    assert_eq!(
        rescuer
            .run_once(Some(claimed_until + chrono::Duration::milliseconds(1)))
            .await
            .unwrap(),
        0,
        "attempt 2's lease ran out"
    );
    gate(2).notify_one();
    let new_end = wait_event(&mut events, "attempt 2's end", finished(id)).await;
    assert_eq!(
        new_end,
        WorkerEvent::Finished {
            task_id: id,
            outcome: AttemptOutcome::Succeeded,
            applied: true
        }
    );
    w.shutdown().await;
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::LeaseExpired, AttemptOutcome::Succeeded]
    );
}
