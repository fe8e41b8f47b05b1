//! Renews the leases of every running task at a third of the lease length, in one store
//! call per 500 leases each round, and tells handlers whose lease is gone.
//!
//! The database is the authority on leases. The worker trusts its own lease only for a
//! local window: if no renewal has been confirmed for a whole lease length (the database
//! unreachable, the process stalled), it tells the handler the lease is lost, because by
//! then the rescuer may have given the task to someone else.

use crate::context::StopReason;
use crate::metrics::{self, Call};
use crate::shared::{Shared, WorkerEvent};
use std::sync::Arc;
use tasktable_store::{LeaseStatus, RenewParams};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

const RENEW_CHUNK: usize = 500;

pub(crate) async fn run(shared: Arc<Shared>, stop: CancellationToken) {
    let period = shared.config.lease_for / 3;
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(period) => {}
        }
        renew_once(&shared).await;
    }
}

pub(crate) async fn renew_once(shared: &Shared) {
    let snapshot = shared.active_snapshot();
    for chunk in snapshot.chunks(RENEW_CHUNK) {
        let asked_at = Instant::now();
        let leases = chunk.iter().map(|(ctx, _)| ctx.lease()).collect();
        let params = RenewParams {
            leases,
            lease_for: shared.config.lease_for,
            now: None,
        };
        match shared.store.task_renew(params).await {
            Ok(statuses) => {
                for ((ctx, _), status) in chunk.iter().zip(statuses) {
                    if ctx.heed(&status).is_ok() {
                        shared.mark_renewed(ctx.task_id(), asked_at);
                        if let LeaseStatus::Held { expires_at } = status {
                            shared.emit(WorkerEvent::Renewed {
                                task_id: ctx.task_id(),
                                attempt: ctx.attempt(),
                                expires_at,
                            });
                        }
                    }
                }
            }
            Err(e) => {
                metrics::store_error(Call::Renew);
                if !e.is_unreachable() {
                    tracing::warn!(error = %e, leases = chunk.len(), "cannot renew leases");
                }
            }
        }
    }
    let now = Instant::now();
    for (ctx, renewed) in shared.active_snapshot() {
        if now.duration_since(renewed) >= shared.config.lease_for {
            tracing::warn!(
                task_id = ctx.task_id(),
                "lease not confirmed for a whole lease length; stopping the handler"
            );
            ctx.stop(StopReason::LeaseLost);
        }
    }
}
