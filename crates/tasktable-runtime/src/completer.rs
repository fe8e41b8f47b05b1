//! Batches the ends of attempts into as few store calls as the load allows: whatever
//! finished while the previous batch was being written goes in the next one, so a lone
//! completion is written at once and a busy worker writes many per transaction.

use crate::metrics::{self, Call};
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::Lease;
use tasktable_store::{FinishItem, FinishParams, Store};
use tokio::sync::{mpsc, oneshot};

pub(crate) struct Completion {
    item: FinishItem,
    applied: oneshot::Sender<bool>,
}

#[derive(Clone, Debug)]
pub(crate) struct CompleterHandle {
    tx: mpsc::Sender<Completion>,
}

impl CompleterHandle {
    /// Ends an attempt; `true` when the store applied it (the lease was still held).
    pub async fn finish(&self, lease: Lease, plan: FinishPlan) -> bool {
        let (applied, rx) = oneshot::channel();
        let item = FinishItem { lease, plan };
        if self.tx.send(Completion { item, applied }).await.is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
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
        let items: Vec<FinishItem> = batch.iter().map(|c| c.item.clone()).collect();
        let applied = write(&*store, items, give_up_after).await;
        for (c, ok) in batch.into_iter().zip(applied) {
            let _ = c.applied.send(ok);
        }
    }
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
                tracing::warn!(error = %e, tasks = items.len(), "cannot record finished tasks; retrying");
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
