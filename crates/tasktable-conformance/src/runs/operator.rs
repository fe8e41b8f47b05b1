//! Operators' changes to a multi-run task reach its runs.

use super::*;
use crate::Backend;
use tasktable_core::runs::{RunCounts, RunState};
use tasktable_core::{AttemptOutcome, Change, TaskState};

pub async fn a_cancel_ends_every_run_going_and_their_workers_hear_it(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(3))).await;
    let a = one_run(&*s, "a", id, 1).await;
    let b = one_run(&*s, "b", id, 1).await;
    update(&*s, tasktable_store::Target::Id(id), Change::Cancel)
        .await
        .unwrap();
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Cancelled);
    assert_eq!(t.run_counts.unwrap().active, 0);
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![a.lease()],
            lease_for: LEASE,
            now: Some(at(6)),
        })
        .await
        .unwrap();
    assert_eq!(renewed, [LeaseStatus::Cancelled]);
    let saved = s
        .task_checkpoint(CheckpointParams {
            lease: b.lease(),
            checkpoint: Some(json!(1)),
            progress: None,
        })
        .await
        .unwrap();
    assert_eq!(saved, LeaseStatus::Cancelled);
    assert!(!finish(&*s, b.lease(), ok(), b.attempt, at(6)).await);
    assert!(runs_of(&*s, id)
        .await
        .iter()
        .all(|r| r.state == RunState::Ended(AttemptOutcome::Cancelled)));
    assert_eq!(s.attempt_list(id).await.unwrap().len(), 2);
    // A retry opens it again; runs are numbered on from where they were.
    update(&*s, tasktable_store::Target::Id(id), Change::Retry)
        .await
        .unwrap();
    assert_eq!(get(&*s, id).await.state, TaskState::Pending);
    let again = one_run(&*s, "a", id, 6).await;
    assert_eq!(again.run, Some(3));
}

pub async fn a_retry_of_a_failed_task_clears_its_failed_runs_and_keeps_its_successes(
    db: &impl Backend,
) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(2).max_failed(0))).await;
    let a = one_run(&*s, "a", id, 1).await;
    let b = one_run(&*s, "b", id, 1).await;
    assert!(finish(&*s, a.lease(), ok(), a.attempt, at(2)).await);
    assert!(finish(&*s, b.lease(), error(), b.attempt, at(2)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Failed);
    update(&*s, tasktable_store::Target::Id(id), Change::Retry)
        .await
        .unwrap();
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Pending);
    assert_eq!(
        t.run_counts,
        Some(RunCounts {
            active: 0,
            succeeded: 1,
            failed: 0
        })
    );
    // a's success stands, so a gets no second run; b may try again.
    assert!(claim_as(&*s, "a", &[], 6).await.is_empty());
    let c = one_run(&*s, "b", id, 6).await;
    assert!(finish(&*s, c.lease(), ok(), c.attempt, at(7)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Succeeded);
}

pub async fn a_new_target_applies_to_runs_not_yet_started(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(3))).await;
    let a = one_run(&*s, "a", id, 1).await;
    update(
        &*s,
        tasktable_store::Target::Id(id),
        Change::SetTarget {
            target: group("gpu"),
        },
    )
    .await
    .unwrap();
    let t = get(&*s, id).await;
    assert_eq!(t.target, group("gpu"));
    assert_eq!(t.state, TaskState::Running, "the run going keeps going");
    assert!(claim_as(&*s, "b", &[], 6).await.is_empty());
    let mut got = claim_as(&*s, "c", &["gpu"], 6).await;
    assert_eq!(got.pop().map(|t| t.run), Some(Some(2)));
    assert!(finish(&*s, a.lease(), ok(), a.attempt, at(7)).await);
}

pub async fn a_repeated_submit_rearms_a_multi_run_task_only_when_asked(db: &impl Backend) {
    use tasktable_core::runs::Rearm;
    let s = db.store().await;
    let task = || multi(Runs::copies(2).max_failed(0)).idempotency_key("sync-1");
    let id = submit_one(&*s, task()).await;
    let a = one_run(&*s, "a", id, 1).await;
    let b = one_run(&*s, "b", id, 1).await;
    assert!(finish(&*s, a.lease(), ok(), a.attempt, at(2)).await);
    assert!(finish(&*s, b.lease(), error(), b.attempt, at(2)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Failed);
    // Without rearm a repeat returns the task as it is.
    assert_eq!(submit_one(&*s, task()).await, id);
    assert_eq!(get(&*s, id).await.state, TaskState::Failed);
    // Failed runs forgiven: it opens again, a's success standing.
    assert_eq!(submit_one(&*s, task().rearm(Rearm::Failed)).await, id);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Pending);
    assert_eq!(
        t.run_counts,
        Some(RunCounts {
            active: 0,
            succeeded: 1,
            failed: 0
        })
    );
    assert!(claim_as(&*s, "a", &[], 3).await.is_empty());
    let c = one_run(&*s, "c", id, 3).await;
    // Start over while c runs: c's run is cancelled and every worker may run it again.
    assert_eq!(submit_one(&*s, task().rearm(Rearm::All)).await, id);
    let t = get(&*s, id).await;
    assert_eq!(
        (t.state, t.run_counts),
        (TaskState::Pending, Some(RunCounts::default()))
    );
    assert!(!finish(&*s, c.lease(), ok(), c.attempt, at(4)).await);
    let again = one_run(&*s, "a", id, 4).await;
    assert!(again.run > c.run, "run numbers go on");
    // A held task stays held.
    let held = || multi(Runs::copies(2)).idempotency_key("held-1").held(true);
    let held_id = submit_one(&*s, held()).await;
    assert_eq!(submit_one(&*s, held().rearm(Rearm::All)).await, held_id);
    assert_eq!(get(&*s, held_id).await.state, TaskState::Held);
    // A task that runs once is left alone by a rearm.
    let once = submit_one(
        &*s,
        NewTask::new("k", json!(null)).idempotency_key("once-1"),
    )
    .await;
    let repeat = multi(Runs::copies(2))
        .idempotency_key("once-1")
        .rearm(Rearm::All);
    assert_eq!(submit_one(&*s, repeat).await, once);
    let t = get(&*s, once).await;
    assert_eq!((t.state, t.runs), (TaskState::Pending, None));
    // rearm without copies or without an idempotency key is refused.
    for bad in [
        NewTask::new("k", json!(null))
            .idempotency_key("x")
            .rearm(Rearm::All),
        multi(Runs::copies(2)).rearm(Rearm::Failed),
    ] {
        let err = s
            .task_submit(SubmitParams {
                tasks: vec![bad],
                now: Some(at(5)),
            })
            .await;
        assert!(
            matches!(err, Err(StoreError::InvalidTask { .. })),
            "{err:?}"
        );
    }
}
