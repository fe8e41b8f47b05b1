//! Listing: keyset pages give each task once, newest first, and every filter narrows the
//! list.

use crate::pinned::{at, claim, finish, get, ok, submit_at, submit_one, update};
use crate::Backend;
use serde_json::json;
use tasktable_core::{HandlerOutcome, NewTask, TaskState};
use tasktable_store::*;

pub async fn list_filters_and_pages_by_keyset(db: &impl Backend) {
    let s = db.store().await;
    let mut ids = Vec::new();
    for i in 0..25 {
        let t = NewTask::new(if i % 5 == 0 { "report" } else { "email" }, json!(i))
            .key(format!("user-{}", i % 3));
        ids.push(submit_at(&*s, vec![t], at(i)).await[0]);
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = s
            .task_list(ListParams {
                filter: TaskFilter::default(),
                after,
                limit: 10,
                light: false,
            })
            .await
            .unwrap();
        seen.extend(page.tasks.iter().map(|t| t.id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(
        seen,
        ids.iter().rev().copied().collect::<Vec<_>>(),
        "newest first, each once"
    );
    let count = |f: TaskFilter| {
        let s = s.clone();
        async move {
            s.task_list(ListParams {
                filter: f,
                after: None,
                limit: 100,
                light: false,
            })
            .await
            .unwrap()
            .tasks
            .len()
        }
    };
    assert_eq!(count(TaskFilter::default().kind("report")).await, 5);
    assert_eq!(count(TaskFilter::default().key("user-1")).await, 8);
    assert_eq!(
        count(TaskFilter {
            created_after: Some(at(10)),
            created_before: Some(at(20)),
            ..Default::default()
        })
        .await,
        10
    );
    let t = claim(&*s, &["email"], 1, at(100)).await.remove(0);
    finish(
        &*s,
        t.lease(),
        HandlerOutcome::Failed {
            message: "SMTP 550 mailbox unavailable".into(),
        },
        1,
        at(101),
    )
    .await;
    assert_eq!(
        count(TaskFilter::default().error_contains("550 mailbox")).await,
        1
    );
    assert_eq!(
        count(TaskFilter::default().error_contains("%")).await,
        0,
        "no wildcards"
    );
    assert_eq!(
        count(
            TaskFilter::default()
                .state(TaskState::Failed)
                .state(TaskState::Running)
        )
        .await,
        1
    );
    assert_eq!(
        count(TaskFilter {
            updated_after: Some(at(101)),
            ..Default::default()
        })
        .await,
        1
    );
    let idem = submit_one(&*s, NewTask::new("x", json!(0)).idempotency_key("abc")).await;
    let page = s
        .task_list(ListParams {
            filter: TaskFilter {
                idempotency_key: Some("abc".into()),
                ..Default::default()
            },
            after: None,
            limit: 5,
            light: false,
        })
        .await
        .unwrap();
    assert_eq!(
        page.tasks.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![idem]
    );
    // Retried and succeeded since: the error is history, and no longer matches.
    update(&*s, Target::Id(t.id), Change::Retry).await.unwrap();
    let again = claim(&*s, &["email"], 100, at(102))
        .await
        .into_iter()
        .find(|c| c.id == t.id)
        .expect("claimed again");
    finish(&*s, again.lease(), ok(), 1, at(103)).await;
    let succeeded = get(&*s, t.id).await;
    assert_eq!(
        (succeeded.state, succeeded.last_error.as_deref()),
        (TaskState::Succeeded, Some("SMTP 550 mailbox unavailable")),
        "the column keeps it"
    );
    assert_eq!(succeeded.current_error(), None);
    assert_eq!(
        count(TaskFilter::default().error_contains("550 mailbox")).await,
        0
    );
    let err = s
        .task_list(ListParams {
            limit: MAX_PAGE_SIZE + 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("page size"), "{err}");
}
