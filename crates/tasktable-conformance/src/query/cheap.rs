//! Reads that stay cheap on large tables: a count that stops at its cap, and light pages
//! that leave the documents (payload, result, checkpoint, progress) in the table.

use crate::pinned::{at, claim, submit_at};
use crate::Backend;
use serde_json::{json, Value};
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

pub async fn counts_stop_at_their_cap_and_light_pages_leave_documents_out(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..7)
        .map(|i| {
            NewTask::new(
                if i < 5 { "a" } else { "b" },
                json!({"big": "x".repeat(1000), "i": i}),
            )
        })
        .collect();
    submit_at(&*s, tasks, at(0)).await;
    let running = claim(&*s, &["a"], 2, at(1)).await;
    let count = |filter: TaskFilter, cap: u64| {
        let s = s.clone();
        async move { s.task_count(CountParams { filter, cap }).await.unwrap() }
    };
    assert_eq!(count(TaskFilter::default(), 100).await, 7);
    assert_eq!(count(TaskFilter::default(), 3).await, 3, "stops at the cap");
    assert_eq!(count(TaskFilter::default().kind("a"), 100).await, 5);
    assert_eq!(
        count(
            TaskFilter::default().kind("a").state(TaskState::Pending),
            100
        )
        .await,
        3
    );
    assert_eq!(count(TaskFilter::default().kind("nope"), 100).await, 0);

    let page = |light: bool| {
        let s = s.clone();
        async move {
            s.task_list(ListParams {
                filter: TaskFilter::default().state(TaskState::Running),
                after: None,
                limit: 10,
                light,
            })
            .await
            .unwrap()
        }
    };
    let full = page(false).await;
    let light = page(true).await;
    assert_eq!(full.tasks.len(), 2);
    for (f, l) in full.tasks.iter().zip(&light.tasks) {
        assert_eq!(l.payload, Value::Null);
        assert_eq!(
            (&l.result, &l.checkpoint, &l.progress),
            (&None, &None, &None)
        );
        assert_ne!(f.payload, Value::Null);
        let headers = |t: &tasktable_core::Task| {
            (
                t.id,
                t.kind.clone(),
                t.state,
                t.worker_id.clone(),
                t.lease_expires_at,
                t.attempt,
            )
        };
        assert_eq!(headers(f), headers(l));
    }
    let mut ids: Vec<i64> = running.iter().map(|t| t.id).collect();
    ids.sort_unstable_by(|a, b| b.cmp(a));
    assert_eq!(light.tasks.iter().map(|t| t.id).collect::<Vec<_>>(), ids);
}
