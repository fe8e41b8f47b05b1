//! Finding the queues with work, for workers that take every queue.

use crate::pinned::{at, claim_params, submit_at};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::NewTask;
use tasktable_store::{DueParams, QueuePauseParams, SubmitParams};

pub async fn discovery_finds_each_queue_with_pending_tasks_once(db: &impl Backend) {
    let s = db.store().await;
    assert!(
        s.queue_discover().await.unwrap().is_empty(),
        "an empty table has none"
    );
    let mut tasks = Vec::new();
    for (queue, n) in [("b", 3), ("a", 1), ("delayed", 2), ("done", 1)] {
        for i in 0..n {
            let mut t = NewTask::new("job", json!({"i": i})).queue(queue);
            if queue == "delayed" {
                t = t.delay(Duration::from_secs(3600));
            }
            tasks.push(t);
        }
    }
    submit_at(&*s, tasks, at(0)).await;
    // "done" has no pending task left once its one task runs.
    let claimed = s
        .task_claim(claim_params("done", &["job"], 10, at(1)))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(s.queue_discover().await.unwrap(), vec!["a", "b", "delayed"]);

    // Many queues: each found once, in order.
    let many: Vec<String> = (0..40).map(|i| format!("q{i:02}")).collect();
    let tasks = many
        .iter()
        .flat_map(|q| (0..2).map(move |i| NewTask::new("job", json!({"i": i})).queue(q.as_str())))
        .collect();
    submit_at(&*s, tasks, at(2)).await;
    let found = s.queue_discover().await.unwrap();
    let mut want: Vec<String> = ["a", "b", "delayed"].map(String::from).to_vec();
    want.extend(many);
    assert_eq!(found, want);
}

/// The due check that lets claims waiting on a server sleep: a pending task of one of the
/// kinds, due by the database's clock, in a queue not paused.
pub async fn a_due_check_sees_due_tasks_of_its_kinds_in_queues_not_paused(db: &impl Backend) {
    let s = db.store().await;
    let due = |queue: &str, kinds: &[&str]| {
        let s = s.clone();
        let params = DueParams {
            queue: queue.into(),
            kinds: kinds.iter().map(|k| k.to_string()).collect(),
        };
        async move { s.queue_has_due(params).await.unwrap() }
    };
    let submit = |task: NewTask| {
        let s = s.clone();
        async move {
            let tasks = vec![task.queue("q")];
            s.task_submit(SubmitParams { tasks, now: None })
                .await
                .unwrap();
        }
    };
    let pause = |paused: bool| {
        let s = s.clone();
        async move {
            let queue = "q".into();
            s.queue_set_paused(QueuePauseParams {
                queue,
                paused,
                actor: tasktable_core::Actor::rust(),
            })
            .await
            .unwrap();
        }
    };
    assert!(!due("q", &[]).await, "an empty table has nothing due");
    submit(NewTask::new("job", json!({})).delay(Duration::from_secs(3600))).await;
    assert!(
        !due("q", &["job"]).await,
        "a task due in an hour is not due"
    );

    submit(NewTask::new("job", json!({}))).await;
    assert!(due("q", &["job"]).await);
    assert!(due("q", &[]).await, "no kinds: any kind");
    assert!(due("q", &["other", "job"]).await);
    assert!(!due("q", &["other"]).await, "a kind nobody waits for");
    assert!(!due("elsewhere", &["job"]).await, "another queue");

    pause(true).await;
    assert!(
        !due("q", &["job"]).await,
        "a paused queue has nothing to claim"
    );
    pause(false).await;
    assert!(due("q", &["job"]).await);

    // Once claimed, it is no longer pending.
    let mut claim = claim_params("q", &["job"], 10, at(0));
    claim.now = None;
    let claimed = s.task_claim(claim).await.unwrap();
    assert_eq!(claimed.len(), 1);
    assert!(!due("q", &["job"]).await);
}
