//! Concurrency limits: per queue, per kind, one per worker; set, read back, cleared, and
//! refused when bad.

use super::{claim_as, set};
use crate::pinned::*;
use crate::Backend;
use serde_json::json;
use std::collections::BTreeMap;
use tasktable_core::policy::{QueuePolicy, Rate};
use tasktable_core::NewTask;
use tasktable_store::*;

fn tasks(kind: &str, n: usize) -> Vec<NewTask> {
    (0..n).map(|_| NewTask::new(kind, json!(null))).collect()
}

pub async fn a_queue_limit_caps_what_runs_anywhere_and_frees_as_tasks_end(db: &impl Backend) {
    let (s1, s2) = (db.store().await, db.store().await);
    submit_at(&*s1, tasks("k", 10), t0()).await;
    let policy = QueuePolicy {
        max_running: Some(3),
        ..QueuePolicy::default()
    };
    set(&*s1, "default", policy.clone()).await;
    let queues = s2.queue_list().await.unwrap();
    let q = queues.iter().find(|q| q.name == "default").expect("listed");
    assert_eq!(q.policy, policy, "the policy reads back as set");
    let first = claim_as(&*s1, "w1", &["k"], 10, at(1)).await;
    assert_eq!(first.len(), 3);
    assert!(first
        .iter()
        .all(|t| t.lease_credential.is_some() && t.attempt == 1));
    assert!(claim_as(&*s2, "w2", &["k"], 10, at(1)).await.is_empty());
    assert!(claim_as(&*s1, "w1", &["k"], 10, at(1)).await.is_empty());
    assert!(finish(&*s1, first[0].lease(), ok(), 1, at(2)).await);
    let next = claim_as(&*s2, "w2", &["k"], 10, at(3)).await;
    assert_eq!(next.len(), 1, "one slot freed, one task started");
    // A lease of any length is capped, as the hot claims cap it.
    assert!(finish(&*s1, first[1].lease(), ok(), 1, at(3)).await);
    let long = s2
        .task_claim(ClaimParams {
            worker_id: "w2".into(),
            lease_for: std::time::Duration::MAX,
            ..claim_params("default", &["k"], 10, at(3))
        })
        .await
        .expect("claim");
    assert_eq!(long.len(), 1);
    assert!(long[0].lease_expires_at.unwrap() > at(3) + chrono::Duration::days(365 * 99));
    // Cleared, the queue goes back to the hot path for both stores.
    set(&*s2, "default", QueuePolicy::default()).await;
    assert_eq!(claim_as(&*s1, "w1", &["k"], 10, at(4)).await.len(), 5);
    let queues = s1.queue_list().await.unwrap();
    let q = queues.iter().find(|q| q.name == "default").unwrap();
    assert!(!q.policy.is_limited());
}

pub async fn a_policy_set_while_a_worker_believes_the_queue_free_binds_its_next_claim(
    db: &impl Backend,
) {
    let (s1, s2) = (db.store().await, db.store().await);
    submit_at(&*s1, tasks("k", 5), t0()).await;
    assert_eq!(claim_as(&*s1, "w1", &["k"], 1, at(1)).await.len(), 1);
    set(
        &*s2,
        "default",
        QueuePolicy {
            max_running: Some(2),
            ..QueuePolicy::default()
        },
    )
    .await;
    assert_eq!(claim_as(&*s1, "w1", &["k"], 10, at(2)).await.len(), 1);
    assert!(claim_as(&*s1, "w1", &["k"], 10, at(2)).await.is_empty());
    // A pause still closes a limited queue.
    s2.queue_set_paused(QueuePauseParams {
        actor: tasktable_core::Actor::rust(),
        queue: "default".into(),
        paused: true,
    })
    .await
    .unwrap();
    set(
        &*s2,
        "default",
        QueuePolicy {
            max_running: Some(100),
            ..QueuePolicy::default()
        },
    )
    .await;
    assert!(claim_as(&*s1, "w1", &["k"], 10, at(3)).await.is_empty());
    s2.queue_set_paused(QueuePauseParams {
        actor: tasktable_core::Actor::rust(),
        queue: "default".into(),
        paused: false,
    })
    .await
    .unwrap();
    assert_eq!(claim_as(&*s1, "w1", &["k"], 10, at(3)).await.len(), 3);
}

pub async fn a_kind_limit_holds_back_only_its_kind(db: &impl Backend) {
    let s = db.store().await;
    let mut batch = tasks("slow", 4);
    batch.extend(tasks("fast", 4));
    // The slow ones first in claim order, so that a window of them comes first.
    for t in batch.iter_mut().take(4) {
        t.priority = 5;
    }
    submit_at(&*s, batch, t0()).await;
    set(
        &*s,
        "default",
        QueuePolicy {
            kind_max_running: BTreeMap::from([("slow".to_owned(), 1)]),
            ..QueuePolicy::default()
        },
    )
    .await;
    let got = claim_as(&*s, "w1", &["slow", "fast"], 3, at(1)).await;
    let kinds: Vec<&str> = got.iter().map(|t| t.kind.as_str()).collect();
    assert_eq!(
        kinds,
        ["slow", "fast", "fast"],
        "claim order, one slow only"
    );
    let got = claim_as(&*s, "w2", &["slow", "fast"], 10, at(1)).await;
    assert!(got.iter().all(|t| t.kind == "fast"));
    assert_eq!(got.len(), 2);
    assert!(claim_as(&*s, "w2", &["slow"], 10, at(1)).await.is_empty());
}

pub async fn one_per_worker_never_hands_a_worker_a_second_task(db: &impl Backend) {
    let s = db.store().await;
    submit_at(&*s, tasks("k", 5), t0()).await;
    set(
        &*s,
        "default",
        QueuePolicy {
            one_per_worker: true,
            ..QueuePolicy::default()
        },
    )
    .await;
    let w1 = claim_as(&*s, "w1", &["k"], 4, at(1)).await;
    assert_eq!(w1.len(), 1);
    assert!(claim_as(&*s, "w1", &["k"], 4, at(1)).await.is_empty());
    assert_eq!(claim_as(&*s, "w2", &["k"], 4, at(1)).await.len(), 1);
    // Its task ended, the worker may take the next.
    assert!(finish(&*s, w1[0].lease(), ok(), 1, at(2)).await);
    assert_eq!(claim_as(&*s, "w1", &["k"], 4, at(3)).await.len(), 1);
    // A lease that expired is still the worker's task until it is rescued.
    assert!(claim_as(&*s, "w1", &["k"], 4, at(100)).await.is_empty());
    rescue_all(&*s, at(100)).await;
    assert_eq!(claim_as(&*s, "w1", &["k"], 4, at(200)).await.len(), 1);
}

pub async fn bad_policies_are_refused_and_change_nothing(db: &impl Backend) {
    let s = db.store().await;
    let good = QueuePolicy {
        max_running: Some(4),
        ..QueuePolicy::default()
    };
    set(&*s, "default", good.clone()).await;
    let bad = [
        (
            "default",
            QueuePolicy {
                rate: Some(Rate::per_second(0.0)),
                ..QueuePolicy::default()
            },
        ),
        (
            "default",
            QueuePolicy {
                key_rate: Some(Rate::per_second(5.0).with_burst(0)),
                ..QueuePolicy::default()
            },
        ),
        (
            "default",
            QueuePolicy {
                kind_max_running: BTreeMap::from([("".to_owned(), 1)]),
                ..QueuePolicy::default()
            },
        ),
        (" ", good.clone()),
    ];
    for (queue, policy) in bad {
        let err = s
            .queue_set_policy(QueuePolicyParams {
                actor: tasktable_core::Actor::rust(),
                queue: queue.into(),
                policy: policy.clone(),
            })
            .await
            .expect_err("refused");
        assert!(
            matches!(err, StoreError::InvalidInput(_)),
            "{policy:?}: {err}"
        );
    }
    let queues = s.queue_list().await.unwrap();
    assert_eq!(queues.len(), 1, "no queue was made");
    assert_eq!(queues[0].policy, good);
}
