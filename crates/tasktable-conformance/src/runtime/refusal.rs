//! The worker runtime when the store refuses what an attempt produced: the refused item
//! ends as an error that says why, and every other task finished beside it is recorded as
//! it ended, never sent back to run again.

use super::{fast, get, outcomes, start, submit, wait_event, PATIENCE};
use crate::Backend;
use serde_json::json;
use std::collections::HashSet;
use std::sync::Arc;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::DEFAULT_MAX_PAYLOAD_BYTES;
use tokio::sync::Barrier;

/// Returns a string of the payload's length, once every task of the batch has got this
/// far, so their ends reach the completer together.
struct Echo {
    together: Arc<Barrier>,
}

impl Handler for Echo {
    const KIND: &'static str = "echo";
    type Payload = usize;
    type Output = String;
    async fn run(&self, _ctx: TaskContext, len: usize) -> Result<String, HandlerError> {
        self.together.wait().await;
        Ok("x".repeat(len))
    }
}

pub async fn one_refused_result_never_sends_other_tasks_back(db: &impl Backend) {
    const TASKS: usize = 8;
    let store = db.store().await;
    let mut ids = Vec::new();
    for i in 0..TASKS {
        let len = if i == 3 {
            DEFAULT_MAX_PAYLOAD_BYTES + 1
        } else {
            10
        };
        ids.push(submit(&*store, NewTask::new("echo", json!(len)).max_attempts(1)).await);
    }
    let big = ids[3];
    let worker = fast(db.store().await)
        .concurrency(TASKS)
        .queue("default", TASKS)
        .register(Echo {
            together: Arc::new(Barrier::new(TASKS)),
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let running = start(worker);
    let mut seen = HashSet::new();
    let mut big_outcome = None;
    while seen.len() < TASKS {
        let event = wait_event(&mut events, "every task to finish", |e| {
            matches!(e, WorkerEvent::Finished { .. })
        })
        .await;
        if let WorkerEvent::Finished {
            task_id,
            outcome,
            applied,
        } = event
        {
            assert!(applied, "task {task_id}'s end was recorded");
            if task_id == big {
                big_outcome = Some(outcome);
            }
            seen.insert(task_id);
        }
    }
    tokio::time::timeout(PATIENCE, running.shutdown())
        .await
        .unwrap();

    assert_eq!(big_outcome, Some(AttemptOutcome::Error));
    let t = get(&*store, big).await;
    assert_eq!(t.state, TaskState::Failed, "its one attempt is spent");
    assert_eq!(t.result, None);
    let error = t.last_error.unwrap();
    assert!(
        error.contains("store refused to record it") && error.contains("limit"),
        "{error}"
    );
    for &id in ids.iter().filter(|&&id| id != big) {
        let t = get(&*store, id).await;
        assert_eq!(t.state, TaskState::Succeeded, "task {id}");
        assert_eq!(t.result, Some(json!("x".repeat(10))));
        assert_eq!(
            outcomes(&*store, id).await,
            vec![AttemptOutcome::Succeeded],
            "task {id} ran once and was recorded once"
        );
    }
}
