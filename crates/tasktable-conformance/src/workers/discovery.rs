//! Finding the queues with work, for workers that take every queue.

use crate::pinned::{at, claim_params, submit_at};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::NewTask;

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
