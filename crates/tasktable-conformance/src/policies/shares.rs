//! Fair shares of long tasks over the live workers that take the queue.

use super::{claim_as, set};
use crate::pinned::*;
use crate::workers::facts;
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::policy::QueuePolicy;
use tasktable_core::worker::Queues;
use tasktable_core::{HandlerOutcome, NewTask, Task};
use tasktable_store::*;

async fn beat(s: &dyn Store, id: &str, queues: Queues) {
    s.worker_beat(WorkerBeatParams {
        facts: tasktable_core::worker::WorkerFacts {
            queues,
            ..facts(id)
        },
        address: None,
        starting: true,
        now: Some(at(0)),
        owner: None,
        max_live_per_owner: None,
    })
    .await
    .expect("beat");
}

pub async fn ten_long_tasks_over_three_workers_come_out_at_most_four_each_and_rebalance(
    db: &impl Backend,
) {
    let s = db.store().await;
    let tasks = (0..10).map(|_| NewTask::new("long", json!(null))).collect();
    submit_at(&*s, tasks, t0()).await;
    set(
        &*s,
        "default",
        QueuePolicy {
            fair_share: true,
            ..QueuePolicy::default()
        },
    )
    .await;
    for w in ["w1", "w2", "w3"] {
        beat(&*s, w, Queues::All).await;
    }
    // A worker that does not take the queue has no share of it.
    beat(&*s, "mail", Queues::Listed(vec!["emails".into()])).await;
    let mut held: Vec<Vec<Task>> = Vec::new();
    for w in ["w1", "w2", "w3"] {
        held.push(claim_as(&*s, w, &["long"], 10, at(1)).await);
    }
    let counts: Vec<usize> = held.iter().map(Vec::len).collect();
    assert_eq!(counts, vec![4, 4, 2]);
    // Asking again changes nothing: each is at its share.
    for w in ["w1", "w2", "w3"] {
        assert!(claim_as(&*s, w, &["long"], 10, at(2)).await.is_empty());
    }
    // w3 leaves; its tasks go back to waiting. The two left share ten: five each.
    s.worker_leave("w3".into()).await.unwrap();
    for t in &held[2] {
        let snooze = HandlerOutcome::Snooze {
            after: Duration::ZERO,
        };
        assert!(finish(&*s, t.lease(), snooze, 1, at(3)).await);
    }
    assert_eq!(claim_as(&*s, "w1", &["long"], 10, at(4)).await.len(), 1);
    assert_eq!(claim_as(&*s, "w2", &["long"], 10, at(4)).await.len(), 1);
    // A newcomer gets its share as the others' tasks end.
    beat(&*s, "w4", Queues::Listed(vec!["default".into()])).await;
    assert!(
        claim_as(&*s, "w4", &["long"], 10, at(5)).await.is_empty(),
        "none due"
    );
    for t in held[0].iter().take(2) {
        assert!(finish(&*s, t.lease(), ok(), 1, at(6)).await);
    }
    // Two of w1's end: eight run and none wait, so w4 still finds nothing.
    assert!(claim_as(&*s, "w4", &["long"], 10, at(7)).await.is_empty());
    // Two more arrive: ten want to run over three workers, a share of four each, and
    // w4, running none, takes both.
    let tasks = (0..2).map(|_| NewTask::new("long", json!(null))).collect();
    submit_at(&*s, tasks, at(7)).await;
    assert_eq!(claim_as(&*s, "w4", &["long"], 10, at(8)).await.len(), 2);
}
