//! What the server remembers of the tasks it handed to pull workers, so that the attempts
//! they end are counted in `/metrics` as an in-process worker's are
//! (`tasktable_attempts_total` by queue, kind and outcome). A claim remembers each task's
//! queue and kind under its lease; the end of the attempt takes them back. An end this
//! server did not hand out (another server's claim, or one forgotten when the memory was
//! full) reads the task once.

use crate::AppState;
use std::collections::HashMap;
use std::sync::Mutex;
use tasktable_core::{AttemptOutcome, Lease, Task, TaskId};
use tasktable_runtime::attempt_log;
use tasktable_store::FinishItem;

/// Most leases remembered; past it the memory starts over (ends then read their task).
const MAX_REMEMBERED: usize = 100_000;

/// Queue and kind by lease (task and fencing token).
#[derive(Debug, Default)]
pub struct Claimed {
    labels: Mutex<HashMap<(TaskId, i64), (String, String)>>,
}

impl Claimed {
    /// The tasks a claim hands out.
    pub fn remember(&self, tasks: &[Task]) {
        let mut labels = self.labels.lock().expect("claimed labels lock");
        if labels.len() + tasks.len() > MAX_REMEMBERED {
            labels.clear();
        }
        for t in tasks {
            labels.insert((t.id, t.lease_token), (t.queue.clone(), t.kind.clone()));
        }
    }

    fn take(&self, lease: &Lease) -> Option<(String, String)> {
        self.labels
            .lock()
            .expect("claimed labels lock")
            .remove(&(lease.task_id, lease.token))
    }
}

/// Counts an attempt a pull worker ended (`item`, which the store applied), and writes
/// its log line if it did not succeed; `attempt` is its number and the attempts allowed,
/// when the server read them.
pub async fn count_ended(state: &AppState, item: &FinishItem, attempt: Option<(u32, u32)>) {
    let (lease, outcome) = (&item.lease, item.plan.outcome);
    let (queue, kind) = match state.claimed.take(lease) {
        Some(labels) => labels,
        None => match state.store.task_get(lease.task_id).await {
            Ok(Some(t)) => (t.queue, t.kind),
            // Gone already (purged), or the database did not answer: not counted.
            _ => return,
        },
    };
    tasktable_runtime::metrics::attempt_ended(&queue, &kind, outcome);
    if attempt_log::logs(outcome) {
        attempt_log::attempt_ended(attempt_log::Ended {
            task_id: lease.task_id,
            queue: &queue,
            kind: &kind,
            attempt: attempt.map(|(n, _)| n),
            worker: "pull",
            outcome,
            error: item.plan.error.as_deref(),
            task_failed: match attempt {
                Some((n, max)) => attempt_log::fails_for_good(outcome, n, max),
                None => outcome == AttemptOutcome::Failed,
            },
        });
    }
}
