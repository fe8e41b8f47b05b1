//! Bulk changes run in short chunks: every row the change applies to is changed and
//! counted whatever the chunk size, and claims and finishes in the same queue go on while
//! the change is between chunks.

use super::{claim_in, count, done, states_of};
use crate::pace::Paced;
use crate::pinned::{at, claim_params, finish, get, submit_at, t0, update};
use crate::Backend;
use serde_json::json;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

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
    // Its chunks are one operator action: one row of the audit, counting them all, and a
    // row in each task's history.
    let audit = |filter| {
        s.event_list(tasktable_store::EventListParams {
            filter,
            before: None,
            limit: 100,
        })
    };
    let listed = audit(tasktable_store::EventFilter::default())
        .await
        .unwrap();
    let actions: Vec<_> = listed.iter().filter(|e| e.action.is_some()).collect();
    assert_eq!(actions.len(), 1, "{listed:?}");
    let own = actions[0];
    assert_eq!(
        (own.task_id, own.tasks, own.action.as_deref()),
        (None, Some(9), Some("paced-cancel"))
    );
    assert_eq!(own.detail["filter"], json!({"queue": "q", "kind": "bulk"}));
    let of_action = audit(tasktable_store::EventFilter {
        action: Some("paced-cancel".into()),
        ..Default::default()
    })
    .await
    .unwrap();
    assert_eq!(
        of_action.len(),
        10,
        "its own row and one per task: {of_action:?}"
    );
    let of_task = s.task_events(bulk[4]).await.unwrap();
    assert_eq!(of_task.len(), 1);
    assert_eq!(of_task[0].action.as_deref(), Some("paced-cancel"));
}
