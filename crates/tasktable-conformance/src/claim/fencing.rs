//! Fencing by token: a worker whose lease was taken back and given to another changes
//! nothing with it, checkpoints and progress go through only under the current lease, and
//! a worker learns of an operator's cancel from its next renewal, its result dropped.

use crate::pinned::{at, claim, finish, get, ok, rescue_all, submit_one, update, LEASE};
use crate::Backend;
use serde_json::json;
use std::sync::Arc;
use tasktable_core::{AttemptOutcome, Lease, NewTask, TaskState};
use tasktable_store::*;

pub async fn stale_token_writes_change_nothing(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let first = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    // The first lease expires and the task is claimed again.
    rescue_all(&*s, at(31)).await;
    let second = claim(&*s, &["k"], 1, at(40)).await.remove(0);
    assert_ne!(first.lease_token, second.lease_token);
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![first.lease(), second.lease()],
            lease_for: LEASE,
            now: Some(at(41)),
        })
        .await
        .unwrap();
    assert_eq!(renewed[0], LeaseStatus::Lost);
    assert_eq!(
        renewed[1],
        LeaseStatus::Held {
            expires_at: Some(at(71))
        }
    );
    let cp = s
        .task_checkpoint(CheckpointParams {
            lease: first.lease(),
            checkpoint: Some(json!({"i": 99})),
            progress: None,
        })
        .await
        .unwrap();
    assert_eq!(cp, LeaseStatus::Lost);
    assert!(
        !finish(&*s, first.lease(), ok(), 1, at(42)).await,
        "a stale complete is refused"
    );
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Running);
    assert_eq!(t.checkpoint, None);
    assert_eq!(t.lease_token, second.lease_token);
    assert!(finish(&*s, second.lease(), ok(), 2, at(43)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Succeeded);
}

pub async fn checkpoint_and_progress_are_fenced(db: &impl Backend) {
    let s: Arc<dyn Store> = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    let held = s
        .task_checkpoint(CheckpointParams {
            lease: t.lease(),
            checkpoint: Some(json!({"offset": 10})),
            progress: Some(json!({"pct": 10})),
        })
        .await
        .unwrap();
    assert!(held.is_held());
    s.task_checkpoint(CheckpointParams {
        lease: t.lease(),
        checkpoint: None,
        progress: Some(json!({"pct": 20})),
    })
    .await
    .unwrap();
    let t2 = get(&*s, id).await;
    assert_eq!(
        t2.checkpoint,
        Some(json!({"offset": 10})),
        "progress alone keeps the checkpoint"
    );
    assert_eq!(t2.progress, Some(json!({"pct": 20})));
    let forged = Lease {
        token: t.lease_token + 1,
        ..t.lease()
    };
    let status = s
        .task_checkpoint(CheckpointParams {
            lease: forged,
            checkpoint: Some(json!(0)),
            progress: None,
        })
        .await
        .unwrap();
    assert_eq!(status, LeaseStatus::Lost);
    let big = json!("x".repeat(DEFAULT_MAX_PAYLOAD_BYTES + 1));
    let err = s
        .task_checkpoint(CheckpointParams {
            lease: t.lease(),
            checkpoint: Some(big),
            progress: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err}");
    assert_eq!(get(&*s, id).await.checkpoint, Some(json!({"offset": 10})));
}

pub async fn cancel_of_a_running_task_is_seen_by_its_worker(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    assert_eq!(
        update(&*s, Target::Id(id), Change::Cancel).await.unwrap(),
        1
    );
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![t.lease()],
            lease_for: LEASE,
            now: Some(at(6)),
        })
        .await
        .unwrap();
    assert_eq!(renewed, vec![LeaseStatus::Cancelled]);
    assert!(
        !finish(&*s, t.lease(), ok(), 1, at(7)).await,
        "the cancelled worker's result is dropped"
    );
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Cancelled);
    assert_eq!(t.result, None);
    let history = s.attempt_list(id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].outcome, AttemptOutcome::Cancelled);
    assert_eq!(history[0].worker_id.as_deref(), Some("w1"));
}
