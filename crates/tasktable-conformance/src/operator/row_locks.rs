//! Bulk changes beside rows a worker holds, on the backends with row locks: rows in states
//! the change does not apply to are never locked, and a row it applies to is waited for
//! while other writes in the queue go on.

use super::{claim_in, count, done, states_of};
use crate::pace::Paced;
use crate::pinned::{at, finish, submit_at, t0, update};
use crate::RowLocks;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

/// Generous: only a change that waits for a lock it should never take gets near it.
const HANG: Duration = Duration::from_secs(30);

pub async fn bulk_change_never_locks_rows_in_states_it_does_not_apply_to(db: &impl RowLocks) {
    let s = db.store().await;
    let (chunked, _) = db.store_with_bulk_chunk(4).await;
    let ids = submit_at(
        &*s,
        (0..10)
            .map(|i| NewTask::new("k", json!(i)).queue("q"))
            .collect(),
        t0(),
    )
    .await;
    let claimed = claim_in(&*s, "q", "k", 2).await;
    assert!(finish(&*s, claimed[1].lease(), done(), 1, at(6)).await);
    let q = Target::Filter(TaskFilter::default().queue("q"));

    // A worker's finish is in flight on the running task; a hold applies only to pending.
    let lock = db.lock_row(ids[0]).await;
    let held = tokio::time::timeout(HANG, update(&*chunked, q.clone(), Change::Hold))
        .await
        .expect("the hold waited for a running row, which it does not apply to")
        .unwrap();
    assert_eq!(held, 8);
    lock.release().await;

    // Something holds the succeeded task; a cancel never applies to it.
    let lock = db.lock_row(ids[1]).await;
    let cancelled = tokio::time::timeout(HANG, update(&*chunked, q, Change::Cancel))
        .await
        .expect("the cancel waited for a succeeded row, which it does not apply to")
        .unwrap();
    assert_eq!(cancelled, 9);
    lock.release().await;
    let states = states_of(&*s, &ids).await;
    assert_eq!(states[1], TaskState::Succeeded);
    assert_eq!(count(&states, TaskState::Cancelled), 9);
}

pub async fn bulk_change_waits_for_a_row_a_worker_holds_while_other_writes_proceed(
    db: &impl RowLocks,
) {
    let s = db.store().await;
    let (_, chunked) = db.store_with_bulk_chunk(3).await;
    let bulk = submit_at(
        &*s,
        (0..9)
            .map(|i| {
                NewTask::new("bulk", json!(i))
                    .queue("q")
                    .priority(if i == 7 { 5 } else { 0 })
            })
            .collect(),
        t0(),
    )
    .await;
    let work = submit_at(
        &*s,
        (0..2)
            .map(|i| NewTask::new("work", json!(i)).queue("q"))
            .collect(),
        t0(),
    )
    .await;
    let in_third_chunk = claim_in(&*s, "q", "bulk", 1).await.remove(0);
    assert_eq!(in_third_chunk.id, bulk[7]);
    let running = claim_in(&*s, "q", "work", 1).await.remove(0);

    // The second chunk (bulk[3..6]) meets a row a worker holds.
    let lock = db.lock_row(bulk[4]).await;
    let (paced, mut chunks) = Paced::new(chunked, 100);
    let change = tokio::spawn(async move {
        let filter = TaskFilter::default().queue("q").kind("bulk");
        update_in_chunks(
            &*paced,
            &filter,
            &Change::Cancel,
            &tasktable_core::Actor::rust(),
            Some(at(5)),
            3,
            "paced-cancel",
        )
        .await
    });
    assert_eq!(chunks.recv().await, Some(3), "the first chunk");

    // The second chunk cannot commit before the lock goes, so the third has not begun.
    assert!(finish(&*s, in_third_chunk.lease(), done(), 1, at(6)).await);
    assert!(finish(&*s, running.lease(), done(), 1, at(6)).await);
    assert_eq!(claim_in(&*s, "q", "work", 1).await[0].id, work[1]);
    lock.release().await;

    assert_eq!(
        change.await.unwrap().unwrap(),
        8,
        "the held row is waited for and changed; the finished one is not"
    );
    let states = states_of(&*s, &bulk).await;
    assert_eq!(states[4], TaskState::Cancelled);
    assert_eq!(states[7], TaskState::Succeeded);
    assert_eq!(count(&states, TaskState::Cancelled), 8);
}
