//! Which tasks a claim takes, and in which order: priority, then `run_at`, then id; never
//! before they are due, only of the claimer's queue and kinds, never held ones and never
//! from a paused queue.

use crate::pinned::{at, claim, claim_params, get, submit_at, submit_one, t0};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

pub async fn claim_order_is_priority_then_run_at_then_id(db: &impl Backend) {
    let s = db.store().await;
    let low_early = submit_one(&*s, NewTask::new("k", json!(0)).priority(0).run_at(at(-20))).await;
    let high_late = submit_one(&*s, NewTask::new("k", json!(0)).priority(5).run_at(at(-1))).await;
    let high_early = submit_one(&*s, NewTask::new("k", json!(0)).priority(5).run_at(at(-10))).await;
    let high_early_2 =
        submit_one(&*s, NewTask::new("k", json!(0)).priority(5).run_at(at(-10))).await;
    let negative = submit_one(
        &*s,
        NewTask::new("k", json!(0)).priority(-3).run_at(at(-100)),
    )
    .await;
    let mut order = Vec::new();
    for _ in 0..5 {
        let got = claim(&*s, &["k"], 1, t0()).await;
        assert_eq!(got.len(), 1);
        order.push(got[0].id);
    }
    assert_eq!(
        order,
        vec![high_early, high_early_2, high_late, low_early, negative]
    );
    let batch_store = db.store().await;
    let ids = submit_at(
        &*batch_store,
        (0..4)
            .map(|i| NewTask::new("k", json!(i)).priority(i))
            .collect(),
        t0(),
    )
    .await;
    let batch: Vec<i64> = claim(&*batch_store, &["k"], 10, t0())
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(
        batch,
        ids.into_iter().rev().collect::<Vec<_>>(),
        "a batch comes back in claim order"
    );
}

pub async fn delayed_tasks_are_not_claimed_early(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0)).delay(Duration::from_secs(60)),
    )
    .await;
    assert!(claim(&*s, &["k"], 10, at(59)).await.is_empty());
    let got = claim(&*s, &["k"], 10, at(60)).await;
    assert_eq!(got.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
}

pub async fn claim_takes_only_registered_kinds_of_its_queue(db: &impl Backend) {
    let s = db.store().await;
    let a = submit_one(&*s, NewTask::new("a", json!(0))).await;
    submit_one(&*s, NewTask::new("b", json!(0))).await;
    let other_queue = submit_one(&*s, NewTask::new("a", json!(0)).queue("other")).await;
    let held = submit_one(&*s, NewTask::new("a", json!(0)).held(true)).await;
    let got = claim(&*s, &["a"], 10, t0()).await;
    assert_eq!(got.iter().map(|t| t.id).collect::<Vec<_>>(), vec![a]);
    let got = s
        .task_claim(claim_params("other", &["a", "b"], 10, t0()))
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![other_queue]
    );
    assert_eq!(
        get(&*s, held).await.state,
        TaskState::Held,
        "held tasks are never claimed"
    );
    assert!(claim(&*s, &[], 10, t0()).await.is_empty());
}

pub async fn paused_queue_is_not_claimed_until_resumed(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    s.queue_set_paused(QueuePauseParams {
        actor: tasktable_core::Actor::rust(),
        queue: "default".into(),
        paused: true,
    })
    .await
    .unwrap();
    assert!(claim(&*s, &["k"], 10, t0()).await.is_empty());
    let queues = s.queue_list().await.unwrap();
    let q = queues
        .iter()
        .find(|q| q.name == "default")
        .expect("queue listed");
    assert!(q.paused);
    assert_eq!(q.counts, vec![(TaskState::Pending, 1)]);
    s.queue_set_paused(QueuePauseParams {
        actor: tasktable_core::Actor::rust(),
        queue: "default".into(),
        paused: false,
    })
    .await
    .unwrap();
    assert_eq!(claim(&*s, &["k"], 10, t0()).await[0].id, id);
    assert!(!s.queue_list().await.unwrap().iter().any(|q| q.paused));
}
