//! Rescue: a lease that ran out is taken back with its attempt counted, a lease renewed
//! after the rescuer listed it is left alone, and a task's timeout caps its lease.

use crate::pinned::{at, claim, get, no_jitter, rescue_all, submit_one, LEASE};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_store::*;

pub async fn rescue_takes_back_expired_leases_and_counts_the_attempt(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0))
            .max_attempts(2)
            .backoff(no_jitter()),
    )
    .await;
    claim(&*s, &["k"], 1, at(0)).await;
    assert!(s
        .task_list_expired(ExpiredParams {
            limit: 10,
            now: Some(at(29))
        })
        .await
        .unwrap()
        .is_empty());
    assert_eq!(rescue_all(&*s, at(30)).await, vec![true]);
    let t = get(&*s, id).await;
    assert_eq!((t.state, t.attempt), (TaskState::Pending, 1));
    assert_eq!(t.run_at, at(40));
    assert_eq!(t.last_error.as_deref(), Some("lease expired"));
    claim(&*s, &["k"], 1, at(40)).await;
    assert_eq!(rescue_all(&*s, at(70)).await, vec![true]);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Failed, "the last attempt expired too");
    let outcomes: Vec<_> = s
        .attempt_list(id)
        .await
        .unwrap()
        .iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(
        outcomes,
        vec![AttemptOutcome::LeaseExpired, AttemptOutcome::LeaseExpired]
    );
}

pub async fn rescue_leaves_a_renewed_lease_alone(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    let expired = s
        .task_list_expired(ExpiredParams {
            limit: 10,
            now: Some(at(31)),
        })
        .await
        .unwrap();
    assert_eq!(expired.len(), 1);
    // The worker renews after the rescuer listed the task but before it acted.
    s.task_renew(RenewParams {
        leases: vec![t.lease()],
        lease_for: LEASE,
        now: Some(at(31)),
    })
    .await
    .unwrap();
    let items = vec![FinishItem {
        lease: t.lease(),
        plan: FinishPlan::lease_expired(1, &no_jitter(), 0.5),
    }];
    let applied = s
        .task_finish(FinishParams {
            items,
            only_if_expired: true,
            now: Some(at(31)),
        })
        .await
        .unwrap();
    assert_eq!(applied, vec![false]);
    assert_eq!(get(&*s, id).await.state, TaskState::Running);
}

pub async fn timeout_caps_the_lease_at_the_deadline(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0)).timeout(Duration::from_secs(45)),
    )
    .await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    assert_eq!(t.deadline_at, Some(at(45)));
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![t.lease()],
            lease_for: LEASE,
            now: Some(at(20)),
        })
        .await
        .unwrap();
    assert_eq!(
        renewed,
        vec![LeaseStatus::Held {
            expires_at: Some(at(45))
        }],
        "renewal stops at the deadline"
    );
    let expired = s
        .task_list_expired(ExpiredParams {
            limit: 10,
            now: Some(at(45)),
        })
        .await
        .unwrap();
    assert_eq!(expired.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
    let short = submit_one(
        &*s,
        NewTask::new("k", json!(0)).timeout(Duration::from_millis(1500)),
    )
    .await;
    let t = claim(&*s, &["k"], 1, at(50)).await.remove(0);
    assert_eq!(t.id, short);
    assert_eq!(
        t.lease_expires_at,
        Some(at(50) + chrono::Duration::milliseconds(1500))
    );
}
