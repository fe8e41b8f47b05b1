//! A change over a filter changes the rows it applies to, leaves the others, and reports
//! how many it changed.

use crate::pinned::{claim_params, submit_at, t0, update};
use crate::Backend;
use serde_json::json;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

pub async fn bulk_changes_report_how_many_rows_changed(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..10)
        .map(|i| {
            NewTask::new(if i < 6 { "a" } else { "b" }, json!(i)).queue(if i % 2 == 0 {
                "even"
            } else {
                "odd"
            })
        })
        .collect();
    submit_at(&*s, tasks, t0()).await;
    let even_a = Target::Filter(TaskFilter::default().queue("even").kind("a"));
    assert_eq!(update(&*s, even_a.clone(), Change::Hold).await.unwrap(), 3);
    assert_eq!(
        update(&*s, even_a.clone(), Change::Hold).await.unwrap(),
        0,
        "already held: nothing changes"
    );
    let claimed = s
        .task_claim(claim_params("odd", &["a", "b"], 2, t0()))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let odd = Target::Filter(TaskFilter::default().queue("odd"));
    assert_eq!(
        update(&*s, odd.clone(), Change::SetPriority { priority: 7 })
            .await
            .unwrap(),
        5
    );
    assert_eq!(
        update(
            &*s,
            odd.clone(),
            Change::EditPayload {
                payload: json!("x")
            }
        )
        .await
        .unwrap(),
        3,
        "not the two running"
    );
    assert_eq!(
        update(&*s, Target::Filter(TaskFilter::default()), Change::Cancel)
            .await
            .unwrap(),
        10
    );
    let failed_or_cancelled =
        Target::Filter(TaskFilter::default().state(TaskState::Cancelled).kind("b"));
    assert_eq!(
        update(&*s, failed_or_cancelled, Change::Retry)
            .await
            .unwrap(),
        4
    );
    let page = s
        .task_list(ListParams {
            filter: TaskFilter::default().state(TaskState::Pending),
            limit: 100,
            after: None,
            light: false,
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 4);
    assert!(page.tasks.iter().all(|t| t.kind == "b"));
}
