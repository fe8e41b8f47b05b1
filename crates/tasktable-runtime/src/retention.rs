//! Keeps the tasks table from growing without end: deletes (or archives) finished tasks
//! past their state's age (their events and log lines with them), and events that
//! concern no task past theirs, in batches of short transactions, so it never holds locks a
//! claim waits for. After each full batch it rests as long as the batch took, so a large
//! sweep takes at most half of the database's write time (on SQLite, whose one writer
//! claims share, that is what keeps claims going during a sweep). Safe to run in every process at once: a batch locks only the rows it
//! takes, and a row another process took is skipped.

use crate::metrics::{self, Call};
use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::retention::Retention;
use tasktable_core::TaskState;
use tasktable_store::{EventPruneParams, PurgeParams, Store, StoreResult};

/// Settings of the [`Retainer`].
#[derive(Debug, Clone)]
pub struct RetentionConfig {
    /// Which finished tasks go, after how long, and whether they are archived. Default:
    /// none (a retainer with it sweeps nothing).
    pub policy: Retention,
    /// Time between sweeps. Default 1 min.
    pub interval: Duration,
    /// Tasks per transaction. Default 500.
    pub batch: u32,
}

impl Default for RetentionConfig {
    fn default() -> Self {
        RetentionConfig {
            policy: Retention::default(),
            interval: Duration::from_secs(60),
            batch: 500,
        }
    }
}

/// What one sweep took, per state.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Swept {
    /// Tasks deleted or archived, for each final state the policy gives an age, in the
    /// order of [`Retention::ages`].
    pub by_state: Vec<(TaskState, u64)>,
    /// Events that concerned no task.
    pub events: u64,
}

impl Swept {
    /// Tasks taken in all states; events are not counted.
    pub fn total(&self) -> u64 {
        self.by_state.iter().map(|(_, n)| n).sum()
    }
}

/// Keeps the tasks table from growing without end: deletes (or archives) finished tasks
/// past their state's age, with their attempts, events and log lines, and events that
/// concern no task past theirs ([`RetentionConfig::policy`]). It works in batches of one
/// short transaction each and, after each full batch, rests as long as the batch took,
/// so a large sweep takes at most half of the database's write time (on SQLite, that is
/// what keeps claims going). Safe to run in every process at once: a batch locks only
/// the finished rows it takes, and skips a row another process took.
///
/// [`Worker::run`](crate::Worker::run) runs one, every minute, when its
/// [`retention`](crate::WorkerConfig::retention) removes anything.
#[derive(Debug, Clone)]
pub struct Retainer {
    store: Arc<dyn Store>,
    config: RetentionConfig,
}

impl Retainer {
    /// A retainer on `store`, [shielded](tasktable_store::Shielded) so that no batch is
    /// cut off half way.
    pub fn new(store: Arc<dyn Store>, config: RetentionConfig) -> Self {
        let store = tasktable_store::Shielded::wrap(store);
        Retainer { store, config }
    }

    /// One sweep at `now` (`None`: the database's clock): every state with an age, batch
    /// after batch until one comes back short, then the events that concern no task.
    /// `each` hears the count of every batch of tasks, the last, short one included. The
    /// first failed store call ends the sweep with its error.
    pub async fn run_once(
        &self,
        now: Option<DateTime<Utc>>,
        mut each: impl FnMut(TaskState, u64),
    ) -> StoreResult<Swept> {
        let mut swept = Swept::default();
        for (state, age) in self.config.policy.ages() {
            let mut total = 0;
            loop {
                let started = tokio::time::Instant::now();
                let p = self
                    .store
                    .task_purge(PurgeParams {
                        state,
                        older_than: age,
                        archive: self.config.policy.archive,
                        limit: self.config.batch,
                        dry_run: false,
                        now,
                    })
                    .await?;
                total += p.count;
                each(state, p.count);
                if p.count < u64::from(self.config.batch) {
                    break;
                }
                tokio::time::sleep(started.elapsed()).await;
            }
            metrics::purged(state, total, self.config.policy.archive);
            swept.by_state.push((state, total));
        }
        if let Some(age) = self.config.policy.events {
            loop {
                let started = tokio::time::Instant::now();
                let n = self
                    .store
                    .event_prune(EventPruneParams {
                        older_than: age,
                        limit: self.config.batch,
                        now,
                    })
                    .await?;
                swept.events += n;
                if n < u64::from(self.config.batch) {
                    break;
                }
                tokio::time::sleep(started.elapsed()).await;
            }
        }
        if swept.total() > 0 {
            tracing::info!(
                tasks = swept.total(),
                archive = self.config.policy.archive,
                "retention swept finished tasks"
            );
        }
        Ok(swept)
    }

    /// Sweeps at once, then every `interval`, until `stop` resolves. A failed sweep is
    /// logged (an unreachable database once, by the store), counted
    /// (`tasktable_store_errors_total{call="retention"}`) and tried again
    /// at the next one.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        metrics::describe();
        loop {
            if let Err(e) = self.run_once(None, |_, _| {}).await {
                metrics::store_error(Call::Retention);
                if !e.is_unreachable() {
                    tracing::warn!(error = %e, "retention sweep failed");
                }
            }
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(self.config.interval) => {}
            }
        }
    }
}
