//! Operator changes: a change to one task follows the state machine, and a change over a
//! filter reports how many rows it changed. Bulk changes run in short chunks: every row
//! the change applies to is changed and counted whatever the chunk size, rows in other
//! states are never locked, and claims and finishes in the same queue go on while a change
//! is between chunks or waits for a row inside one.
//!
//! The functions here serve the bulk cases (`chunks`, `row_locks`).

pub mod bulk;
pub mod chunks;
pub mod row_locks;
pub mod transitions;

use crate::pinned::{at, claim_params, get};
use tasktable_core::{HandlerOutcome, Task, TaskId, TaskState};
use tasktable_store::*;

fn done() -> HandlerOutcome {
    HandlerOutcome::Succeeded { result: None }
}

async fn claim_in(s: &dyn Store, queue: &str, kind: &str, limit: u32) -> Vec<Task> {
    s.task_claim(claim_params(queue, &[kind], limit, at(6)))
        .await
        .expect("claim")
}

async fn states_of(s: &dyn Store, ids: &[TaskId]) -> Vec<TaskState> {
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        out.push(get(s, *id).await.state);
    }
    out
}

fn count(states: &[TaskState], state: TaskState) -> usize {
    states.iter().filter(|s| **s == state).count()
}
