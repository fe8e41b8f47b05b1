//! Rates of starts: the queue's bucket, and a bucket per task key.

use super::{claim_as, set};
use crate::pinned::*;
use crate::Backend;
use chrono::Duration;
use serde_json::json;
use tasktable_core::policy::{QueuePolicy, Rate};
use tasktable_core::NewTask;

fn ms(n: i64) -> chrono::DateTime<chrono::Utc> {
    at(10) + Duration::milliseconds(n)
}

pub async fn a_queue_rate_starts_its_burst_then_one_per_interval(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..20).map(|_| NewTask::new("k", json!(null))).collect();
    submit_at(&*s, tasks, t0()).await;
    set(
        &*s,
        "default",
        QueuePolicy {
            rate: Some(Rate::per_second(4.0).with_burst(3)),
            ..QueuePolicy::default()
        },
    )
    .await;
    assert_eq!(claim_as(&*s, "w1", &["k"], 10, ms(0)).await.len(), 3);
    assert!(claim_as(&*s, "w2", &["k"], 10, ms(0)).await.is_empty());
    assert!(claim_as(&*s, "w2", &["k"], 10, ms(249)).await.is_empty());
    assert_eq!(claim_as(&*s, "w2", &["k"], 10, ms(250)).await.len(), 1);
    assert_eq!(claim_as(&*s, "w1", &["k"], 10, ms(750)).await.len(), 2);
    // A quiet spell fills the bucket to its burst, no further.
    assert_eq!(claim_as(&*s, "w1", &["k"], 10, ms(60_000)).await.len(), 3);
    // A new rate starts with a full bucket, whatever debt the old one ran up.
    set(
        &*s,
        "default",
        QueuePolicy {
            rate: Some(Rate::per_second(1.0 / 86_400.0).with_burst(2)),
            ..QueuePolicy::default()
        },
    )
    .await;
    assert_eq!(claim_as(&*s, "w1", &["k"], 10, ms(61_000)).await.len(), 2);
    assert!(claim_as(&*s, "w1", &["k"], 10, ms(62_000)).await.is_empty());
    set(
        &*s,
        "default",
        QueuePolicy {
            rate: Some(Rate::per_second(100.0).with_burst(4)),
            ..QueuePolicy::default()
        },
    )
    .await;
    assert_eq!(claim_as(&*s, "w1", &["k"], 10, ms(62_000)).await.len(), 4);
}

pub async fn a_key_rate_holds_back_only_the_key_that_spent_its_tokens(db: &impl Backend) {
    let s = db.store().await;
    let mut tasks = Vec::new();
    for key in ["acme", "acme", "acme", "zeta", "acme", "zeta"] {
        tasks.push(NewTask::new("k", json!(null)).key(key));
    }
    tasks.push(NewTask::new("k", json!(null)));
    let id = submit_at(&*s, tasks, t0()).await;
    set(
        &*s,
        "default",
        QueuePolicy {
            key_rate: Some(Rate::per_second(1.0).with_burst(2)),
            ..QueuePolicy::default()
        },
    )
    .await;
    let got: Vec<i64> = claim_as(&*s, "w1", &["k"], 10, ms(0))
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    // Two of acme's, both of zeta's, and the task without a key.
    assert_eq!(got, vec![id[0], id[1], id[3], id[5], id[6]]);
    assert!(claim_as(&*s, "w1", &["k"], 10, ms(999)).await.is_empty());
    let later = claim_as(&*s, "w1", &["k"], 10, ms(1000)).await;
    assert_eq!(later.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id[2]]);
    // Buckets that filled up again are the same as none: retention may take them.
    let purged = s
        .task_purge(tasktable_store::PurgeParams {
            state: tasktable_core::TaskState::Succeeded,
            older_than: std::time::Duration::from_secs(1),
            limit: 10,
            archive: false,
            dry_run: false,
            now: Some(ms(60_000)),
        })
        .await
        .unwrap();
    assert_eq!(purged.count, 0);
    let last = claim_as(&*s, "w1", &["k"], 10, ms(61_000)).await;
    assert_eq!(last.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id[4]]);
}
