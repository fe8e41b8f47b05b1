//! The runner's save: progress and failed items under the batch's lease.

use super::*;
use tasktable_core::batch::{BatchControl, BatchStatus, FAILURES_KEPT};
use tasktable_core::{AttemptOutcome, HandlerOutcome, TaskState};

pub async fn a_save_keeps_progress_renews_the_lease_and_answers_control(db: &impl crate::Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, batch(BatchSpec::items(1000).rate(50).error_budget(5))).await;
    let fresh = the_batch(&*s, id).await;
    assert_eq!(
        (fresh.status, fresh.low_water, fresh.end, fresh.errors),
        (BatchStatus::Queued, 0, Some(1000), 0)
    );
    assert_eq!(
        fresh.spec.window,
        Some(500),
        "ten times the rate, stored resolved"
    );
    assert_eq!(fresh.task.payload, json!({"list": "s3://bucket/users"}));
    let t = claim_batch(&*s, 1).await;
    assert_eq!(the_batch(&*s, id).await.status, BatchStatus::Running);
    let saved = s
        .batch_save(save(&t, 40, 1, vec![failure(7, "no such user")]))
        .await
        .unwrap();
    assert!(saved.lease.is_held(), "{saved:?}");
    assert_eq!(
        (saved.control, saved.error_budget, saved.data),
        (BatchControl::Run, 5, None)
    );
    let b = the_batch(&*s, id).await;
    assert_eq!((b.low_water, b.errors), (40, 1));
    assert_eq!(b.items_per_second, Some(1234.5));
    assert_eq!(b.saved_at, Some(at(2)));
    assert_eq!(
        get(&*s, id).await.lease_expires_at,
        Some(at(32)),
        "the save renewed the lease"
    );
    let kept = s.batch_failures(id).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(
        (kept[0].item, kept[0].error.as_str(), kept[0].tries),
        (7, "no such user", 3)
    );
    // An item saved again (a takeover repeated it) keeps its latest error.
    s.batch_save(save(&t, 41, 1, vec![failure(7, "gone")]))
        .await
        .unwrap();
    assert_eq!(s.batch_failures(id).await.unwrap()[0].error, "gone");
}

pub async fn a_save_under_a_stale_or_forged_lease_changes_nothing(db: &impl crate::Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, batch(BatchSpec::items(100))).await;
    let t = claim_batch(&*s, 1).await;
    s.batch_save(save(&t, 10, 0, vec![])).await.unwrap();
    let mut stale = t.clone();
    stale.lease_token -= 1;
    let mut forged = t.clone();
    forged.lease_credential = Some("00000000000000000000000000000000".parse().unwrap());
    for bad in [&stale, &forged] {
        let saved = s
            .batch_save(save(bad, 99, 9, vec![failure(1, "x")]))
            .await
            .unwrap();
        assert_eq!(saved.lease, LeaseStatus::Lost);
    }
    let b = the_batch(&*s, id).await;
    assert_eq!((b.low_water, b.errors), (10, 0), "nothing changed");
    assert!(s.batch_failures(id).await.unwrap().is_empty());
    // Once the task has ended, its former runner's save changes nothing either.
    assert!(
        finish(
            &*s,
            t.lease(),
            HandlerOutcome::Succeeded { result: None },
            1,
            at(3)
        )
        .await
    );
    let late = s.batch_save(save(&t, 50, 0, vec![])).await.unwrap();
    assert_eq!(late.lease, LeaseStatus::Lost);
    assert_eq!(the_batch(&*s, id).await.low_water, 10);
    assert!(s.batch_get(999_999).await.unwrap().is_none());
}

pub async fn failed_items_are_kept_up_to_the_cap(db: &impl crate::Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, batch(BatchSpec::items(5000).error_budget(5000))).await;
    let t = claim_batch(&*s, 1).await;
    let many: Vec<ItemFailure> = (0..FAILURES_KEPT + 10).map(|i| failure(i, "bad")).collect();
    s.batch_save(save(&t, 2000, FAILURES_KEPT + 10, many))
        .await
        .unwrap();
    s.batch_save(save(
        &t,
        2001,
        FAILURES_KEPT + 11,
        vec![failure(4000, "late")],
    ))
    .await
    .unwrap();
    let kept = s.batch_failures(id).await.unwrap();
    assert_eq!(kept.len() as u64, FAILURES_KEPT);
    assert_eq!(kept.last().map(|f| f.item), Some(FAILURES_KEPT - 1));
    assert_eq!(
        the_batch(&*s, id).await.errors,
        FAILURES_KEPT + 11,
        "all are counted"
    );
}

pub async fn a_paused_runner_gives_its_batch_back_held_without_spending_an_attempt(
    db: &impl crate::Backend,
) {
    let s = db.store().await;
    let id = submit_one(&*s, batch(BatchSpec::items(100))).await;
    let t = claim_batch(&*s, 1).await;
    s.batch_save(save(&t, 30, 0, vec![])).await.unwrap();
    let pausing = act(&*s, id, BatchAction::Pause).await.unwrap();
    assert_eq!(pausing.status, BatchStatus::Pausing);
    let saved = s.batch_save(save(&t, 35, 0, vec![])).await.unwrap();
    assert_eq!(saved.control, BatchControl::Pause, "the runner hears it");
    let hold = HandlerOutcome::Hold {
        reason: "paused".into(),
    };
    assert!(finish(&*s, t.lease(), hold, t.attempt, at(4)).await);
    let paused = the_batch(&*s, id).await;
    assert_eq!(
        (
            paused.status,
            paused.task.state,
            paused.task.attempt,
            paused.low_water
        ),
        (BatchStatus::Paused, TaskState::Held, 0, 35)
    );
    assert_eq!(paused.task.finished_at, None, "held is not finished");
    let history = s.attempt_list(id).await.unwrap();
    assert_eq!(history[0].outcome, AttemptOutcome::Paused);
    assert!(claim(&*s, &["b"], 1, at(5)).await.is_empty(), "held waits");
    assert_eq!(
        act(&*s, id, BatchAction::Resume).await.unwrap().status,
        BatchStatus::Queued
    );
    let again = claim_batch(&*s, 6).await;
    assert_eq!(
        the_batch(&*s, again.id).await.low_water,
        35,
        "it goes on from the mark"
    );
}
