//! Batches the ends of attempts into as few store calls as the load allows: whatever
//! finished while the previous batch was being written goes in the next one, so a lone
//! completion is written at once and a busy worker writes many per transaction.
//!
//! A batch the store refuses is written again item by item, so one item the database
//! will not take (say, a result over the size limit) never sends unrelated tasks back to
//! run again. An item refused on its own ends its attempt as a retryable error that says
//! why, so the task is neither lost nor stuck; when every item fails alone too, the
//! database itself is failing, and the batch is retried with backoff as before.

use crate::metrics::{self, Call};
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
use tasktable_core::{AttemptOutcome, Backoff, Task};
use tasktable_store::{FinishItem, FinishParams, Store, StoreError};
use tokio::sync::{mpsc, oneshot};

pub(crate) struct Completion {
    item: FinishItem,
    /// What a retry of this attempt needs: its number and the task's backoff.
    attempt: u32,
    backoff: Backoff,
    recorded: oneshot::Sender<Recorded>,
}

/// How an attempt's end was recorded: `None` when the lease was lost first, otherwise the
/// outcome written (an error when the store refused the original one).
pub(crate) type Recorded = Option<AttemptOutcome>;

#[derive(Clone, Debug)]
pub(crate) struct CompleterHandle {
    tx: mpsc::Sender<Completion>,
}

impl CompleterHandle {
    /// Ends `task`'s attempt and says how it was recorded.
    pub async fn finish(&self, task: &Task, plan: FinishPlan) -> Recorded {
        let (recorded, rx) = oneshot::channel();
        let completion = Completion {
            item: FinishItem {
                lease: task.lease(),
                plan,
            },
            attempt: task.attempt,
            backoff: task.backoff,
            recorded,
        };
        if self.tx.send(completion).await.is_err() {
            return None;
        }
        rx.await.unwrap_or(None)
    }
}

pub(crate) fn start(
    store: Arc<dyn Store>,
    max_batch: usize,
    give_up_after: Duration,
) -> (CompleterHandle, tokio::task::JoinHandle<()>) {
    let (tx, rx) = mpsc::channel(max_batch * 4);
    let task = tokio::spawn(run(store, rx, max_batch, give_up_after));
    (CompleterHandle { tx }, task)
}

async fn run(
    store: Arc<dyn Store>,
    mut rx: mpsc::Receiver<Completion>,
    max_batch: usize,
    give_up_after: Duration,
) {
    while let Some(first) = rx.recv().await {
        let mut batch = vec![first];
        while batch.len() < max_batch {
            match rx.try_recv() {
                Ok(c) => batch.push(c),
                Err(_) => break,
            }
        }
        let recorded = write_batch(&*store, &batch, give_up_after).await;
        for (c, r) in batch.into_iter().zip(recorded) {
            let _ = c.recorded.send(r);
        }
    }
}

/// Writes a batch in one call; if the store refuses it, writes each item alone.
async fn write_batch(
    store: &dyn Store,
    batch: &[Completion],
    give_up_after: Duration,
) -> Vec<Recorded> {
    let items: Vec<FinishItem> = batch.iter().map(|c| c.item.clone()).collect();
    let as_planned = |applied: Vec<bool>| -> Vec<Recorded> {
        applied
            .into_iter()
            .zip(batch)
            .map(|(ok, c)| ok.then_some(c.item.plan.outcome))
            .collect()
    };
    if batch.len() == 1 {
        return vec![write_alone(store, &batch[0], give_up_after).await];
    }
    match finish_once(store, items.clone()).await {
        Ok(applied) => return as_planned(applied),
        // The database is what fails, not the items: no use writing them one by one.
        Err(e) if e.is_unreachable() => {
            return as_planned(write(store, items, give_up_after).await);
        }
        Err(e) => {
            tracing::warn!(error = %e, tasks = items.len(), "the store refused a batch of finished tasks; writing them one by one");
        }
    }
    let mut recorded = Vec::with_capacity(batch.len());
    let mut refused = Vec::new();
    for (i, c) in batch.iter().enumerate() {
        match finish_once(store, vec![c.item.clone()]).await {
            Ok(flags) => recorded.push(
                flags
                    .first()
                    .copied()
                    .unwrap_or(false)
                    .then_some(c.item.plan.outcome),
            ),
            Err(e) => {
                recorded.push(None);
                refused.push((i, e));
            }
        }
    }
    if refused.len() == batch.len() {
        // Nothing went in alone either: the database is failing, not the items.
        return as_planned(write(store, items, give_up_after).await);
    }
    for (i, e) in refused {
        recorded[i] = write_refusal(store, &batch[i], &e, give_up_after).await;
    }
    recorded
}

/// One item: a refusal that is the item's own (too large, invalid) ends the attempt as
/// an error saying so; anything else is retried with backoff.
async fn write_alone(store: &dyn Store, c: &Completion, give_up_after: Duration) -> Recorded {
    let applied = match finish_once(store, vec![c.item.clone()]).await {
        Ok(applied) => applied,
        Err(e @ (StoreError::PayloadTooLarge { .. } | StoreError::InvalidInput(_))) => {
            return write_refusal(store, c, &e, give_up_after).await;
        }
        Err(_) => write(store, vec![c.item.clone()], give_up_after).await,
    };
    applied
        .first()
        .copied()
        .unwrap_or(false)
        .then_some(c.item.plan.outcome)
}

/// Ends the attempt of an item the store would not take as a retryable error naming the
/// refusal: the attempt counts and the task backs off, or fails when none are left.
async fn write_refusal(
    store: &dyn Store,
    c: &Completion,
    refusal: &StoreError,
    give_up_after: Duration,
) -> Recorded {
    tracing::error!(task_id = c.item.lease.task_id, error = %refusal, "the store refused this attempt's end; recording it as an error");
    let plan = FinishPlan::for_handler(
        HandlerOutcome::Error {
            message: format!(
                "the attempt ended ({}) but the store refused to record it: {refusal}",
                c.item.plan.outcome
            ),
            retry_after: None,
        },
        c.attempt,
        &c.backoff,
        rand::random(),
    );
    let outcome = plan.outcome;
    let item = FinishItem {
        lease: c.item.lease,
        plan,
    };
    write(store, vec![item], give_up_after)
        .await
        .first()
        .copied()
        .unwrap_or(false)
        .then_some(outcome)
}

async fn finish_once(store: &dyn Store, items: Vec<FinishItem>) -> Result<Vec<bool>, StoreError> {
    let result = store
        .task_finish(FinishParams {
            items,
            only_if_expired: false,
            now: None,
        })
        .await;
    if result.is_err() {
        metrics::store_error(Call::Finish);
    }
    result
}

/// Retries a failed write with backoff for as long as the leases could still be valid;
/// after that the rescuer owns these tasks and the results are dropped.
async fn write(store: &dyn Store, items: Vec<FinishItem>, give_up_after: Duration) -> Vec<bool> {
    let started = tokio::time::Instant::now();
    let mut wait = Duration::from_millis(50);
    loop {
        let params = FinishParams {
            items: items.clone(),
            only_if_expired: false,
            now: None,
        };
        let result = store.task_finish(params).await;
        if result.is_err() {
            metrics::store_error(Call::Finish);
        }
        match result {
            Ok(applied) => return applied,
            Err(e) if started.elapsed() + wait < give_up_after => {
                if !e.is_unreachable() {
                    tracing::warn!(error = %e, tasks = items.len(), "cannot record finished tasks; retrying");
                }
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(Duration::from_secs(2));
            }
            Err(e) => {
                tracing::error!(error = %e, tasks = items.len(), "giving up on recording finished tasks; the rescuer will take them back");
                return vec![false; items.len()];
            }
        }
    }
}
