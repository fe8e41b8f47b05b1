//! Reads what the database says after the drain: every task of the run's queue with its
//! history, through the store's own read calls, and the effects table.

use crate::behaviour::QUEUE;
use crate::check::{Row, TaskRecord};
use futures::{StreamExt, TryStreamExt};
use std::collections::BTreeMap;
use tasktable::store::ListParams;
use tasktable::{Store, StoreResult, Task, TaskFilter};

/// Every task in the run's queue, with its history.
pub async fn tasks(store: &dyn Store) -> StoreResult<BTreeMap<i64, TaskRecord>> {
    let mut all = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .task_list(ListParams {
                filter: TaskFilter::default().queue(QUEUE),
                after,
                limit: 1000,
                light: false,
            })
            .await?;
        all.extend(page.tasks);
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    futures::stream::iter(all)
        .map(|task| async move {
            let rows = store.attempt_list(task.id).await?;
            Ok((task.id, record(task, rows)))
        })
        .buffer_unordered(16)
        .try_collect()
        .await
}

fn record(task: Task, attempts: Vec<tasktable::Attempt>) -> TaskRecord {
    TaskRecord {
        id: task.id,
        idempotency_key: task.idempotency_key,
        state: task.state,
        attempt: task.attempt,
        max_attempts: task.max_attempts,
        lease_token: task.lease_token,
        result: task.result,
        rows: attempts
            .into_iter()
            .map(|a| Row {
                attempt: a.attempt,
                worker: a.worker_id,
                outcome: a.outcome,
                started_ms: a.started_at.map(|t| t.timestamp_millis()),
                finished_ms: a.finished_at.timestamp_millis(),
            })
            .collect(),
    }
}

/// How many tasks of the run's queue are not finished yet.
pub async fn unfinished(store: &dyn Store) -> StoreResult<u64> {
    let queues = store.queue_list().await?;
    Ok(queues
        .iter()
        .filter(|q| q.name == QUEUE)
        .flat_map(|q| &q.counts)
        .filter(|(state, _)| !state.is_finished())
        .map(|(_, n)| n)
        .sum())
}
