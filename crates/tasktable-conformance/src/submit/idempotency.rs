//! Idempotency keys: a submit whose key is taken returns the task that holds it, the first
//! submit's values win, and submits racing with one key create one task.

use crate::pinned::{get, t0};
use crate::Backend;
use serde_json::json;
use tasktable_core::NewTask;
use tasktable_store::*;

pub async fn idempotent_submit_returns_the_existing_task(db: &impl Backend) {
    let s = db.store().await;
    let first = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("a", json!(1)).idempotency_key("order-7")],
            now: Some(t0()),
        })
        .await
        .unwrap();
    assert!(first[0].created);
    let again = s
        .task_submit(SubmitParams {
            tasks: vec![
                NewTask::new("a", json!(2)).idempotency_key("order-7"),
                NewTask::new("a", json!(3)).idempotency_key("order-8"),
                NewTask::new("a", json!(4)).idempotency_key("order-8"),
            ],
            now: Some(t0()),
        })
        .await
        .unwrap();
    assert_eq!(
        again[0],
        Submitted {
            id: first[0].id,
            created: false
        }
    );
    assert!(again[1].created);
    assert_eq!(
        again[2],
        Submitted {
            id: again[1].id,
            created: false
        }
    );
    assert_eq!(
        get(&*s, first[0].id).await.payload,
        json!(1),
        "the first submit wins"
    );
    let page = s
        .task_list(ListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 2);
}

pub async fn racing_duplicate_submits_create_exactly_one_task(db: &impl Backend) {
    let mut handles = Vec::new();
    for i in 0..8 {
        let s = db.store().await;
        handles.push(tokio::spawn(async move {
            s.task_submit(SubmitParams {
                tasks: vec![NewTask::new("a", json!(i)).idempotency_key("the-one")],
                now: None,
            })
            .await
            .unwrap()[0]
        }));
    }
    let results: Vec<Submitted> = futures::future::join_all(handles)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        results.iter().filter(|r| r.created).count(),
        1,
        "{results:?}"
    );
    assert!(results.iter().all(|r| r.id == results[0].id), "{results:?}");
    let s = db.store().await;
    let page = s
        .task_list(ListParams {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 1);
}
