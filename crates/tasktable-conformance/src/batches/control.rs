//! Operators' actions and edits, and retention.

use super::*;
use std::time::Duration;
use tasktable_core::batch::{BatchControl, BatchRefusal, BatchStatus};
use tasktable_core::TaskState;

fn refusal(r: StoreResult<Batch>) -> BatchRefusal {
    match r {
        Err(StoreError::BatchRefused { refusal, .. }) => refusal,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub async fn a_held_batch_waits_for_its_start_and_each_action_applies_where_it_may(
    db: &impl crate::Backend,
) {
    let s = db.store().await;
    let id = submit_one(&*s, batch(BatchSpec::items(10)).held(true)).await;
    assert_eq!(the_batch(&*s, id).await.status, BatchStatus::Waiting);
    assert!(
        claim(&*s, &["b"], 1, at(1)).await.is_empty(),
        "it waits for the business"
    );
    assert_eq!(
        refusal(act(&*s, id, BatchAction::Resume).await),
        BatchRefusal::NotResumable(TaskState::Held)
    );
    let started = act(&*s, id, BatchAction::Start).await.unwrap();
    assert_eq!(started.status, BatchStatus::Queued);
    assert_eq!(
        refusal(act(&*s, id, BatchAction::Start).await),
        BatchRefusal::NotWaiting
    );
    // A queued batch pauses and stops at once.
    assert_eq!(
        act(&*s, id, BatchAction::Pause).await.unwrap().status,
        BatchStatus::Paused
    );
    let stopped = act(&*s, id, BatchAction::Stop).await.unwrap();
    assert_eq!(
        (stopped.status, stopped.task.state, stopped.control),
        (
            BatchStatus::Stopped,
            TaskState::Cancelled,
            BatchControl::Stop
        )
    );
    assert_eq!(
        refusal(act(&*s, id, BatchAction::Pause).await),
        BatchRefusal::Ended(TaskState::Cancelled)
    );
    // A stopped batch can still go on from its offset.
    let resumed = act(&*s, id, BatchAction::Resume).await.unwrap();
    assert_eq!(
        (resumed.status, resumed.control),
        (BatchStatus::Queued, BatchControl::Run)
    );
    let t = claim_batch(&*s, 4).await;
    // A stop of a running batch waits for its runner, which a resume can still overtake.
    assert_eq!(
        act(&*s, id, BatchAction::Stop).await.unwrap().status,
        BatchStatus::Stopping
    );
    assert_eq!(
        act(&*s, id, BatchAction::Resume).await.unwrap().status,
        BatchStatus::Running
    );
    assert!(s
        .batch_save(save(&t, 1, 0, vec![]))
        .await
        .unwrap()
        .lease
        .is_held());
    // A task that is no batch is not found as one.
    let plain = submit_one(&*s, NewTask::new("b", json!({}))).await;
    assert!(matches!(
        act(&*s, plain, BatchAction::Pause).await,
        Err(StoreError::NotFound(_))
    ));
}

/// A batch that waits for the business's start [S2] stays waiting through a pause and a
/// resume, and through a stop and a resume: no claim takes it until `start`. A batch
/// submitted to run, paused or stopped before any runner had it, is due again at its
/// resume.
pub async fn a_waiting_batch_waits_through_pause_stop_and_resume_until_its_start(
    db: &impl crate::Backend,
) {
    let s = db.store().await;
    let id = submit_one(&*s, batch(BatchSpec::items(10)).held(true)).await;
    let waiting = |b: &Batch| (b.status, b.task.state, b.control);
    let still = (BatchStatus::Waiting, TaskState::Held, BatchControl::Run);
    let paused = act(&*s, id, BatchAction::Pause).await.unwrap();
    assert_eq!(
        waiting(&paused),
        (BatchStatus::Paused, TaskState::Held, BatchControl::Pause)
    );
    assert_eq!(
        waiting(&act(&*s, id, BatchAction::Resume).await.unwrap()),
        still,
        "resumed, it waits for its start again"
    );
    assert!(claim(&*s, &["b"], 1, at(100)).await.is_empty());
    assert_eq!(
        act(&*s, id, BatchAction::Stop).await.unwrap().status,
        BatchStatus::Stopped
    );
    assert_eq!(
        waiting(&act(&*s, id, BatchAction::Resume).await.unwrap()),
        still,
        "a stopped batch that never started waits again"
    );
    assert!(claim(&*s, &["b"], 1, at(100)).await.is_empty());
    let started = act(&*s, id, BatchAction::Start).await.unwrap();
    assert_eq!(started.status, BatchStatus::Queued);
    // Started by the business, then paused before any runner had it: a resume runs it.
    act(&*s, id, BatchAction::Pause).await.unwrap();
    assert_eq!(
        act(&*s, id, BatchAction::Resume).await.unwrap().status,
        BatchStatus::Queued
    );
    assert_eq!(claim_batch(&*s, 3).await.id, id);

    // Submitted to run (not held): paused or stopped before a claim, its resume runs it.
    let other = submit_one(&*s, batch(BatchSpec::items(10))).await;
    act(&*s, other, BatchAction::Stop).await.unwrap();
    let resumed = act(&*s, other, BatchAction::Resume).await.unwrap();
    assert_eq!(
        (resumed.status, resumed.task.state),
        (BatchStatus::Queued, TaskState::Pending)
    );
}

pub async fn the_budget_changes_any_time_and_the_data_only_while_waiting_or_serial(
    db: &impl crate::Backend,
) {
    let s = db.store().await;
    let edit = |id, error_budget, data| BatchUpdateParams {
        actor: tasktable_core::Actor::rust(),
        id,
        error_budget,
        data,
        now: Some(at(2)),
    };
    let parallel = submit_one(&*s, batch(BatchSpec::items(10).parallelism(4)).held(true)).await;
    let b = s
        .batch_update(edit(parallel, Some(7), Some(json!({"list": "v2"}))))
        .await
        .unwrap();
    assert_eq!((b.spec.error_budget, b.data_version), (7, 1));
    assert_eq!(b.task.payload, json!({"list": "v2"}));
    act(&*s, parallel, BatchAction::Start).await.unwrap();
    let t = claim_batch(&*s, 3).await;
    let refused = s
        .batch_update(edit(parallel, Some(9), Some(json!({"list": "v3"}))))
        .await;
    assert_eq!(refusal(refused), BatchRefusal::DataFixed);
    let b = the_batch(&*s, parallel).await;
    assert_eq!(
        (b.spec.error_budget, b.data_version, b.task.payload),
        (7, 1, json!({"list": "v2"})),
        "a refused edit changes nothing"
    );
    s.batch_update(edit(parallel, Some(9), None)).await.unwrap();
    let saved = s.batch_save(save(&t, 0, 0, vec![])).await.unwrap();
    assert_eq!(saved.error_budget, 9);
    assert_eq!(
        saved.data,
        Some((1, json!({"list": "v2"}))),
        "the runner held version 0"
    );
    // A serial batch takes new data while it runs; its runner reads it at its next save.
    let serial = submit_one(&*s, batch(BatchSpec::items(10).parallelism(1))).await;
    let t = claim_batch(&*s, 4).await;
    assert_eq!(t.id, serial);
    s.batch_update(edit(serial, None, Some(json!({"list": "live"}))))
        .await
        .unwrap();
    let saved = s.batch_save(save(&t, 0, 0, vec![])).await.unwrap();
    assert_eq!(saved.data, Some((1, json!({"list": "live"}))));
    let too_big = json!({"blob": "x".repeat(2 << 20)});
    assert!(s
        .batch_update(edit(serial, None, Some(too_big)))
        .await
        .is_err());
}

pub async fn retention_archives_a_batch_with_its_task(db: &impl crate::Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, batch(BatchSpec::items(3))).await;
    let t = claim_batch(&*s, 1).await;
    s.batch_save(save(&t, 3, 1, vec![failure(2, "bad")]))
        .await
        .unwrap();
    assert!(finish(&*s, t.lease(), ok(), t.attempt, at(3)).await);
    let purged = s
        .task_purge(PurgeParams {
            state: TaskState::Succeeded,
            older_than: Duration::from_secs(60),
            archive: true,
            limit: 10,
            dry_run: false,
            now: Some(at(3600)),
        })
        .await
        .unwrap();
    assert_eq!(purged.count, 1);
    assert!(s.batch_get(id).await.unwrap().is_none());
    assert!(s.batch_failures(id).await.unwrap().is_empty());
    assert!(s.task_get_archived(id).await.unwrap().is_some());
    assert!(s
        .batch_list(BatchListParams {
            limit: 10,
            before: None
        })
        .await
        .unwrap()
        .is_empty());
}
