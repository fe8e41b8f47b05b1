//! What the server remembers of the tasks it handed to pull workers, so that the attempts
//! they end are counted in `/metrics` as an in-process worker's are
//! (`tasktable_attempts_total` by queue, kind and outcome). A claim remembers each task's
//! queue and kind under its lease; the end of the attempt takes them back. An end this
//! server did not hand out (another server's claim, or one forgotten when the memory was
//! full) reads the task once.

use crate::AppState;
use std::collections::HashMap;
use std::sync::Mutex;
use tasktable_core::{Lease, Task, TaskId};
use tasktable_runtime::attempt_log;
use tasktable_store::FinishItem;

/// Most leases remembered; past it the memory starts over (ends then read their task).
const MAX_REMEMBERED: usize = 100_000;

/// What an attempt's end is told with, remembered from its claim.
#[derive(Debug)]
struct Labels {
    queue: String,
    kind: String,
    worker: Option<String>,
    attempt: u32,
    max_attempts: u32,
}

/// Queue, kind, worker and attempt by lease (task and fencing token).
#[derive(Debug, Default)]
pub struct Claimed {
    labels: Mutex<HashMap<(TaskId, i64), Labels>>,
}

impl Claimed {
    /// The tasks a claim hands out.
    pub fn remember(&self, tasks: &[Task]) {
        let mut labels = self.labels.lock().expect("claimed labels lock");
        if labels.len() + tasks.len() > MAX_REMEMBERED {
            labels.clear();
        }
        for t in tasks {
            labels.insert(
                (t.id, t.lease_token),
                Labels {
                    queue: t.queue.clone(),
                    kind: t.kind.clone(),
                    worker: t.worker_id.clone(),
                    attempt: t.attempt,
                    max_attempts: t.max_attempts,
                },
            );
        }
    }

    fn take(&self, lease: &Lease) -> Option<Labels> {
        self.labels
            .lock()
            .expect("claimed labels lock")
            .remove(&(lease.task_id, lease.token))
    }
}

/// Counts an attempt a pull worker ended (`item`, which the store applied), and writes
/// its log line if it did not succeed.
pub async fn count_ended(state: &AppState, item: &FinishItem) {
    let (lease, outcome) = (&item.lease, item.plan.outcome);
    let labels = match state.claimed.take(lease) {
        Some(labels) => labels,
        None => match state.store.task_get(lease.task_id).await {
            // Read after the end: the attempt that ended is the task's, or its run's.
            Ok(Some(t)) => Labels {
                queue: t.queue,
                kind: t.kind,
                worker: t.worker_id,
                attempt: lease.run.unwrap_or(t.attempt),
                max_attempts: t.max_attempts,
            },
            // Gone already (purged), or the database did not answer: not counted.
            _ => return,
        },
    };
    let attempt = lease.run.unwrap_or(labels.attempt);
    let Labels {
        queue,
        kind,
        worker,
        max_attempts,
        ..
    } = labels;
    tasktable_runtime::metrics::attempt_ended(&queue, &kind, outcome);
    attempt_log::attempt_ended(attempt_log::Ended {
        task_id: lease.task_id,
        queue: &queue,
        kind: &kind,
        attempt,
        max_attempts,
        worker: worker.as_deref().unwrap_or("unknown"),
        outcome,
        error: item.plan.error.as_deref(),
    });
}
