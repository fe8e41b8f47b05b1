//! Takes back running tasks whose lease ran out: the worker died, froze, or lost the
//! database; and ends the waits of retries for their previous worker that are over
//! ([`tasktable_store::Store::task_release_affinity`]). Safe to run on every node at once: each take-back is fenced by the lease
//! token and applies only if the lease is still expired, so two rescuers cannot both
//! apply and a worker that renewed in time keeps its task.

use crate::metrics::{self, Call};
use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_store::{
    AffinityReleaseParams, ExpiredParams, FinishItem, FinishParams, Store, StoreResult,
    MAX_AFFINITY_BATCH,
};

/// Settings of the [`Rescuer`].
#[derive(Debug, Clone)]
pub struct RescuerConfig {
    /// Time between scans. Default 5 s.
    pub interval: Duration,
    /// Tasks taken back per store call, and retries' waits ended per call (of those at
    /// most [`MAX_AFFINITY_BATCH`], 1,000). Default 500.
    pub batch: u32,
    /// How long a worker may go without a heartbeat before each scan marks it gone in the
    /// registry (so broadcasts, affinities and fair shares stop counting it). Default
    /// 30 s, as `WorkerConfig::worker_silence`.
    pub worker_silence: Duration,
    /// How long a gone worker stays listed before it is forgotten. Default 24 h.
    pub forget_workers_after: Duration,
}

impl Default for RescuerConfig {
    fn default() -> Self {
        RescuerConfig {
            interval: Duration::from_secs(5),
            batch: 500,
            worker_silence: Duration::from_secs(30),
            forget_workers_after: Duration::from_secs(24 * 3600),
        }
    }
}

/// Takes back running tasks whose lease ran out (their worker died, froze or lost the
/// database), then ends the waits of retries for a previous worker that are over; each
/// scan also marks silent workers gone in the registry. Safe to run on every node at
/// once: a take-back is fenced by the lease token and applies only while the lease is
/// still expired, so two rescuers never both apply, and a worker that renewed in time
/// keeps its task.
///
/// [`Worker::run`](crate::Worker::run) runs one ([`WorkerConfig::rescue_interval`],
/// 5 s by default); start one where no worker does, or step it with
/// [`Rescuer::run_once`].
///
/// [`WorkerConfig::rescue_interval`]: crate::WorkerConfig::rescue_interval
#[derive(Debug, Clone)]
pub struct Rescuer {
    store: Arc<dyn Store>,
    config: RescuerConfig,
}

impl Rescuer {
    /// A rescuer on `store`, [shielded](tasktable_store::Shielded) so that no scan is
    /// cut off half way.
    pub fn new(store: Arc<dyn Store>, config: RescuerConfig) -> Self {
        let store = tasktable_store::Shielded::wrap(store);
        Rescuer { store, config }
    }

    /// One scan: takes back every task expired at `now` (`None`: the database's clock)
    /// and returns how many it took; then ends the waits for a previous worker that are
    /// over, and marks gone the workers silent for `worker_silence` at `now`.
    ///
    /// The attempt counts. A task whose per-attempt deadline passed is recorded as timed
    /// out, any other as "lease expired"; either goes back to `pending` after its backoff,
    /// or to `failed` when it has no attempts left.
    pub async fn run_once(&self, now: Option<DateTime<Utc>>) -> StoreResult<usize> {
        let rescued = self.rescue(now).await?;
        crate::registry::reap_silent(
            &*self.store,
            self.config.worker_silence,
            self.config.forget_workers_after,
            now,
        )
        .await;
        Ok(rescued)
    }

    async fn rescue(&self, now: Option<DateTime<Utc>>) -> StoreResult<usize> {
        let mut total = 0;
        loop {
            let expired = self
                .store
                .task_list_expired(ExpiredParams {
                    limit: self.config.batch,
                    now,
                })
                .await?;
            if expired.is_empty() {
                break;
            }
            let full = expired.len() as u32 >= self.config.batch;
            let items: Vec<FinishItem> = expired
                .iter()
                .map(|t| {
                    let unit = rand::random::<f64>();
                    let timed_out =
                        matches!((t.deadline_at, t.lease_expires_at), (Some(d), Some(l)) if d <= l);
                    let plan = if timed_out {
                        FinishPlan::timed_out(t.attempt, &t.backoff, unit, t.timeout)
                    } else {
                        FinishPlan::lease_expired(t.attempt, &t.backoff, unit)
                    };
                    FinishItem {
                        lease: t.lease(),
                        plan,
                    }
                })
                .collect();
            let outcomes: Vec<_> = items.iter().map(|i| i.plan.outcome).collect();
            let applied = self
                .store
                .task_finish(FinishParams {
                    items,
                    only_if_expired: true,
                    now,
                })
                .await?;
            for ((task, outcome), _) in expired
                .iter()
                .zip(outcomes)
                .zip(&applied)
                .filter(|(_, applied)| **applied)
            {
                metrics::rescued(task, outcome);
                crate::attempt_log::attempt_ended(crate::attempt_log::Ended {
                    task_id: task.id,
                    queue: &task.queue,
                    kind: &task.kind,
                    attempt: task.attempt,
                    max_attempts: task.max_attempts,
                    worker: task.worker_id.as_deref().unwrap_or("unknown"),
                    outcome,
                    error: None,
                });
            }
            let n = applied.iter().filter(|a| **a).count();
            if n > 0 {
                tracing::info!(tasks = n, "rescued tasks with expired leases");
            }
            total += n;
            if !full {
                break;
            }
        }
        // Then the retries whose wait for their previous worker is over (a rescued task
        // of a worker that is gone among them) go to any allowed worker.
        loop {
            let freed = self
                .store
                .task_release_affinity(AffinityReleaseParams {
                    limit: self.config.batch.clamp(1, MAX_AFFINITY_BATCH),
                    now,
                })
                .await?;
            if freed > 0 {
                tracing::info!(
                    tasks = freed,
                    "retries stopped waiting for their previous worker"
                );
            }
            if freed < u64::from(self.config.batch.clamp(1, MAX_AFFINITY_BATCH)) {
                return Ok(total);
            }
        }
    }

    /// Scans at once, then every `interval`, until `stop` resolves. A failed scan is
    /// logged (an unreachable database once, by the store), counted
    /// (`tasktable_store_errors_total{call="rescue"}`) and tried again at
    /// the next one.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        metrics::describe();
        // At start (and at each scan until the listing succeeds, when the database was
        // busy or away): a rescue of any queue then has a series to rise from.
        let mut zeroed = false;
        loop {
            if !zeroed {
                match self.store.queue_list().await {
                    Ok(queues) => {
                        queues.iter().for_each(|q| metrics::rescued_zero(&q.name));
                        zeroed = true;
                    }
                    Err(e) => {
                        tracing::debug!(error = %e, "listing queues for the rescue counters failed")
                    }
                }
            }
            if let Err(e) = self.run_once(None).await {
                metrics::store_error(Call::Rescue);
                if !e.is_unreachable() {
                    tracing::warn!(error = %e, "rescue scan failed");
                }
            }

            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(self.config.interval) => {}
            }
        }
    }
}
