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

/// Lone submits from many callers of one store at once (as a server's requests make
/// them): each caller is answered with its own task, and callers racing with one key
/// share one task.
pub async fn lone_submits_at_once_on_one_store_each_get_their_own_task(db: &impl Backend) {
    let s = db.store().await;
    let submit = |task: NewTask| {
        let s = s.clone();
        tokio::spawn(async move {
            s.task_submit(SubmitParams {
                tasks: vec![task],
                now: None,
            })
            .await
            .unwrap()[0]
        })
    };
    let mine: Vec<_> = (0..64)
        .map(|i| submit(NewTask::new("a", json!({ "i": i }))))
        .collect();
    let keyed: Vec<_> = (0..16)
        .map(|i| submit(NewTask::new("a", json!({ "k": i })).idempotency_key("shared")))
        .collect();
    let mine: Vec<Submitted> = futures::future::join_all(mine)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    let keyed: Vec<Submitted> = futures::future::join_all(keyed)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    for (i, one) in mine.iter().enumerate() {
        assert!(one.created);
        let task = s
            .task_get(one.id)
            .await
            .unwrap()
            .expect("the task answered");
        assert_eq!(
            task.payload,
            json!({ "i": i }),
            "caller {i} got another's task"
        );
    }
    let mut ids: Vec<_> = mine.iter().map(|m| m.id).collect();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), 64, "every caller got a task of its own");
    assert_eq!(keyed.iter().filter(|k| k.created).count(), 1, "{keyed:?}");
    assert!(keyed.iter().all(|k| k.id == keyed[0].id), "{keyed:?}");
    let page = s
        .task_list(ListParams {
            limit: 1000,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 65);
}
