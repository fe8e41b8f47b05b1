//! A submit is one batch: ids come back in submit order with the documented defaults
//! applied, one bad task refuses the whole batch, and a submit inside the caller's
//! transaction commits or rolls back with it.

use crate::pinned::{at, claim_params, get, submit_at, submit_one, t0};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{Backoff, NewTask, TaskState};
use tasktable_store::*;

pub async fn submit_returns_ids_and_applies_defaults(db: &impl Backend) {
    let s = db.store().await;
    let ids = submit_at(
        &*s,
        vec![
            NewTask::new("a", json!({"n": 1})),
            NewTask::new("b", json!([1, 2])),
        ],
        t0(),
    )
    .await;
    assert_eq!(ids.len(), 2);
    assert!(ids[1] > ids[0], "ids grow in submit order");
    let t = get(&*s, ids[0]).await;
    assert_eq!(t.kind, "a");
    assert_eq!(t.queue, "default");
    assert_eq!(t.state, TaskState::Pending);
    assert_eq!(t.payload, json!({"n": 1}));
    assert_eq!(t.attempt, 0);
    assert_eq!(t.max_attempts, tasktable_core::task::DEFAULT_MAX_ATTEMPTS);
    assert_eq!(t.backoff, Backoff::default());
    assert_eq!(t.run_at, t0());
    assert_eq!(t.created_at, t0());
    assert_eq!(t.lease_token, 0);
    let held = submit_one(
        &*s,
        NewTask::new("a", json!(null))
            .held(true)
            .delay(Duration::from_secs(90)),
    )
    .await;
    let h = get(&*s, held).await;
    assert_eq!(h.state, TaskState::Held);
    assert_eq!(h.run_at, at(90));
}

pub async fn submit_rejects_a_bad_batch_and_writes_nothing(db: &impl Backend) {
    let s = db.store().await;
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![
                NewTask::new("ok", json!(1)),
                NewTask::new("bad", json!(1)).max_attempts(0),
            ],
            now: Some(t0()),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidTask { index: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("max_attempts"), "{err}");
    let big = json!("x".repeat(DEFAULT_MAX_PAYLOAD_BYTES + 1));
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("big", big)],
            now: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err}");
    let page = s
        .task_list(ListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        page.tasks.is_empty(),
        "nothing may be written: {:?}",
        page.tasks
    );
}

pub async fn transactional_submit_commits_and_rolls_back_with_the_caller(db: &impl Backend) {
    let s = db.store().await;
    let rolled = db
        .submit_in_transaction(vec![NewTask::new("tx", json!("rolled back"))], false)
        .await
        .unwrap();
    assert!(
        s.task_get(rolled[0].id).await.unwrap().is_none(),
        "rolled back task must not exist"
    );
    let committed = db
        .submit_in_transaction(vec![NewTask::new("tx", json!("committed"))], true)
        .await
        .unwrap();
    let claimed = s
        .task_claim(ClaimParams {
            now: None,
            ..claim_params("default", &["tx"], 10, t0())
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, committed[0].id);
    assert_eq!(claimed[0].payload, json!("committed"));
}
