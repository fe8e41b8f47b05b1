//! Queue policies: cluster-wide limits on what runs (per queue and per kind), rates of
//! starts (per queue and per task key), one task per worker, and fair shares of long
//! tasks. Claims of a limited queue leave the hot path and take no more than the policy
//! allows, whichever store instance claims; clearing the policy gives the queue back to
//! the hot path.

pub mod concurrent;
pub mod limits;
pub mod rates;
pub mod shares;

use crate::pinned::claim_params;
use chrono::{DateTime, Utc};
use tasktable_core::policy::QueuePolicy;
use tasktable_core::Task;
use tasktable_store::*;

pub(crate) async fn set(s: &dyn Store, queue: &str, policy: QueuePolicy) {
    s.queue_set_policy(QueuePolicyParams {
        actor: tasktable_core::Actor::rust(),
        queue: queue.into(),
        policy,
    })
    .await
    .expect("set policy");
}

/// A claim of `default` by `worker` of up to `limit` tasks of `kinds` at `now`.
pub(crate) async fn claim_as(
    s: &dyn Store,
    worker: &str,
    kinds: &[&str],
    limit: u32,
    now: DateTime<Utc>,
) -> Vec<Task> {
    s.task_claim(ClaimParams {
        worker_id: worker.into(),
        ..claim_params("default", kinds, limit, now)
    })
    .await
    .expect("claim")
}
