//! The worker's row in the registry: what it says of itself, its heartbeat, and the
//! drain an operator may ask of it. The heartbeat also marks silent peers gone, so the
//! registry stays true while any worker runs, with no process in charge of it.

use crate::config::{facts, jittered};
use crate::metrics::{self, Call};
use crate::shared::Shared;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tasktable_store::{Store, StoreResult, WorkerBeatParams, WorkerReapParams};
use tokio_util::sync::CancellationToken;

/// One heartbeat; the worker drains or resumes as the registry says.
pub(crate) async fn beat(shared: &Shared, starting: bool) -> StoreResult<()> {
    let status = shared
        .store
        .worker_beat(WorkerBeatParams {
            facts: facts(&shared.config, shared.handlers.keys()),
            address: None,
            starting,
            now: None,
            owner: None,
            max_live_per_owner: None,
        })
        .await?;
    let was = shared.draining.swap(status.draining, Ordering::Relaxed);
    shared.emit(crate::WorkerEvent::Beat {
        draining: status.draining,
    });
    if was != status.draining {
        if status.draining {
            tracing::info!(worker = %shared.config.identity.id, "draining: claiming nothing new");
        } else {
            tracing::info!(worker = %shared.config.identity.id, "released: claiming again");
        }
        // A released worker claims at once rather than at its next poll.
        shared.capacity_freed.notify_one();
    }
    Ok(())
}

/// Heartbeats (and marks silent peers gone) until `stop` is cancelled.
pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(jittered(shared.config.heartbeat_interval)) => {}
        }
        if let Err(e) = beat(&shared, false).await {
            metrics::store_error(Call::Heartbeat);
            if !e.is_unreachable() {
                tracing::warn!(error = %e, "worker heartbeat failed");
            }
        }
        reap_silent(
            &*shared.store,
            shared.config.worker_silence,
            shared.config.forget_workers_after,
            None,
        )
        .await;
    }
}

/// Marks the workers silent for `silence` at `now` (`None`: the database's clock) gone
/// and forgets those gone for `forget_after` (idempotent: every worker and every rescuer
/// does it, so a registry is kept wherever workers run, a server without a worker of its
/// own included).
pub(crate) async fn reap_silent(
    store: &dyn Store,
    silence: Duration,
    forget_after: Duration,
    now: Option<chrono::DateTime<chrono::Utc>>,
) {
    let reaped = store
        .worker_reap(WorkerReapParams {
            silence,
            forget_after,
            now,
        })
        .await;
    match reaped {
        Ok(r) if r.gone > 0 => tracing::info!(workers = r.gone, "marked silent workers gone"),
        Ok(_) => {}
        Err(e) => {
            metrics::store_error(Call::Heartbeat);
            if !e.is_unreachable() {
                tracing::warn!(error = %e, "marking silent workers gone failed");
            }
        }
    }
}
