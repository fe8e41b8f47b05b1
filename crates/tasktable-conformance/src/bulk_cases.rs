//! Bulk operator changes run in short chunks: every row the change applies to is changed
//! and counted whatever the chunk size, rows in other states are never locked, and claims
//! and finishes in the same queue go on while a change is between chunks or waits for a
//! row inside one.

use crate::cases::{at, claim_params, finish, get, submit_at, t0, update};
use crate::pace::Paced;
use crate::{Backend, RowLocks};
use serde_json::json;
use std::time::Duration;
use tasktable_core::{HandlerOutcome, NewTask, Task, TaskId, TaskState};
use tasktable_store::*;

fn done() -> HandlerOutcome {
    HandlerOutcome::Succeeded { result: None }
}

async fn claim_in(s: &dyn Store, queue: &str, kind: &str, limit: u32) -> Vec<Task> {
    s.task_claim(claim_params(queue, &[kind], limit, at(6)))
        .await
        .expect("claim")
}

async fn states_of(s: &dyn Store, ids: &[TaskId]) -> Vec<TaskState> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(get(s, *id).await.state);
    }
    out
}

fn count(states: &[TaskState], state: TaskState) -> usize {
    states.iter().filter(|s| **s == state).count()
}

/// Generous: only a change that waits for a lock it should never take gets near it.
const HANG: Duration = Duration::from_secs(30);

pub async fn bulk_change_over_many_chunks_changes_every_row_it_applies_to(db: &impl Backend) {
    let (s, _) = db.store_with_bulk_chunk(7).await;
    let tasks = (0..60)
        .map(|i| NewTask::new(if i % 2 == 0 { "a" } else { "b" }, json!(i)).queue("bulk"))
        .collect();
    let ids = submit_at(&*s, tasks, t0()).await;
    let others = submit_at(
        &*s,
        vec![NewTask::new("a", json!("x")).queue("other")],
        t0(),
    )
    .await;
    let claimed = s
        .task_claim(claim_params("bulk", &["a", "b"], 10, at(1)))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 10);
    for t in &claimed[..4] {
        assert!(finish(&*s, t.lease(), done(), 1, at(2)).await);
    }
    for id in &ids[20..26] {
        update(&*s, Target::Id(*id), Change::Hold).await.unwrap();
    }
    // 4 succeeded, 6 running, 6 held, 44 pending: 56 that a cancel applies to, in 9 chunks.
    let in_bulk = Target::Filter(TaskFilter::default().queue("bulk"));
    assert_eq!(
        update(&*s, in_bulk.clone(), Change::Cancel).await.unwrap(),
        56
    );
    let states = states_of(&*s, &ids).await;
    assert_eq!(count(&states, TaskState::Succeeded), 4);
    assert_eq!(count(&states, TaskState::Cancelled), 56);
    assert_eq!(get(&*s, others[0]).await.state, TaskState::Pending);
    for t in &claimed[4..] {
        let history = s.attempt_list(t.id).await.unwrap();
        assert_eq!(history.len(), 1, "task {}", t.id);
        assert_eq!(history[0].error.as_deref(), Some("cancelled by operator"));
    }
    assert_eq!(
        update(&*s, in_bulk.clone(), Change::Cancel).await.unwrap(),
        0,
        "nothing left to cancel"
    );

    assert_eq!(
        update(&*s, in_bulk.clone(), Change::Retry).await.unwrap(),
        56
    );
    let pending_or_done = Target::Filter(
        TaskFilter::default()
            .queue("bulk")
            .state(TaskState::Pending)
            .state(TaskState::Succeeded),
    );
    assert_eq!(
        update(&*s, pending_or_done, Change::SetPriority { priority: 3 })
            .await
            .unwrap(),
        56,
        "succeeded tasks are matched but never changed"
    );
    let b = Target::Filter(TaskFilter::default().queue("bulk").kind("b"));
    assert_eq!(update(&*s, b, Change::Hold).await.unwrap(), 28);
    let states = states_of(&*s, &ids).await;
    assert_eq!(count(&states, TaskState::Held), 28);
    assert_eq!(count(&states, TaskState::Pending), 28);
    for id in &ids {
        let t = get(&*s, *id).await;
        if t.state != TaskState::Succeeded {
            assert_eq!((t.priority, t.attempt), (3, 0), "task {id}");
        }
    }
}

pub async fn claims_and_finishes_go_through_between_chunks_of_a_bulk_change(db: &impl Backend) {
    let s = db.store().await;
    let (_, chunked) = db.store_with_bulk_chunk(3).await;
    let bulk = submit_at(
        &*s,
        (0..9)
            .map(|i| NewTask::new("bulk", json!(i)).queue("q"))
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
    let running = claim_in(&*s, "q", "work", 1).await.remove(0);
    assert_eq!(running.id, work[0]);

    let (paced, mut chunks) = Paced::new(chunked, 0);
    let change = tokio::spawn({
        let paced = paced.clone();
        async move {
            let filter = TaskFilter::default().queue("q").kind("bulk");
            update_in_chunks(&*paced, &filter, &Change::Cancel, Some(at(5)), 3).await
        }
    });
    assert_eq!(chunks.recv().await, Some(3), "the first chunk");

    // Held after its first chunk: on SQLite the writer must be free, elsewhere no row of
    // the queue may still be locked, or these would wait for the whole change.
    assert_eq!(claim_in(&*s, "q", "work", 1).await[0].id, work[1]);
    assert!(finish(&*s, running.lease(), done(), 1, at(6)).await);
    // A task the change has not reached yet starts running, and its chunk cancels it.
    let overtaken = claim_in(&*s, "q", "bulk", 1).await.remove(0);
    assert_eq!(overtaken.id, bulk[3]);
    // A task the change has passed is not visited again.
    update(&*s, Target::Id(bulk[0]), Change::Retry)
        .await
        .unwrap();
    // Nor is one submitted after it began.
    let late = submit_at(
        &*s,
        vec![NewTask::new("bulk", json!("late")).queue("q")],
        at(6),
    )
    .await;

    paced.open();
    assert_eq!(change.await.unwrap().unwrap(), 9);
    let states = states_of(&*s, &bulk).await;
    assert_eq!(states[0], TaskState::Pending);
    assert!(
        states[1..].iter().all(|st| *st == TaskState::Cancelled),
        "{states:?}"
    );
    assert_eq!(get(&*s, late[0]).await.state, TaskState::Pending);
    assert_eq!(
        states_of(&*s, &work).await,
        [TaskState::Succeeded, TaskState::Running]
    );
    let history = s.attempt_list(overtaken.id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].error.as_deref(), Some("cancelled by operator"));
    assert!(
        !finish(&*s, overtaken.lease(), done(), 1, at(7)).await,
        "its worker finds the task cancelled"
    );
}

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
        update_in_chunks(&*paced, &filter, &Change::Cancel, Some(at(5)), 3).await
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
