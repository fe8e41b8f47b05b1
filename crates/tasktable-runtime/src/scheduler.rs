//! Fires recurring schedules. Every worker runs one by default, and `serve` runs one too:
//! no leader is elected and none is needed, because the store fires each schedule in a
//! transaction with its row locked (see [`Store::schedule_run_due`]), so a slot fires
//! once however many schedulers reach it together.
//!
//! A scheduler also saves the schedules declared in code when it starts
//! ([`SchedulerConfig::declared`]), bringing any stored one of the same name to the code's
//! version, except its `enabled` flag: an operator's disable survives restarts.

use crate::metrics::{self, Call};
use chrono::{DateTime, Utc};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::schedule::ScheduleSpec;
use tasktable_store::{CreateScheduleParams, Fired, OnExisting, RunDueParams, Store, StoreResult};

/// Settings of the [`Scheduler`].
#[derive(Debug, Clone)]
pub struct SchedulerConfig {
    /// Time between looks for due schedules (±20 % jitter). Default 1 s: a slot fires
    /// within about a second of its time.
    pub interval: Duration,
    /// Schedules fired per store call. Default 100.
    pub batch: u32,
    /// Schedules declared in code, saved when the scheduler starts.
    pub declared: Vec<ScheduleSpec>,
}

impl Default for SchedulerConfig {
    fn default() -> Self {
        SchedulerConfig {
            interval: Duration::from_secs(1),
            batch: 100,
            declared: Vec::new(),
        }
    }
}

/// Fires recurring schedules, and saves those declared in code when it starts. Every
/// worker runs one by default ([`WorkerConfig::schedule_interval`]), and so does
/// `tasktable serve`: no leader is needed, because the store fires each schedule in a
/// transaction with its row locked ([`Store::schedule_run_due`]), so a slot fires once
/// however many schedulers reach it together.
///
/// [`WorkerConfig::schedule_interval`]: crate::WorkerConfig::schedule_interval
#[derive(Debug, Clone)]
pub struct Scheduler {
    store: Arc<dyn Store>,
    config: SchedulerConfig,
}

impl Scheduler {
    /// A scheduler on `store`, [shielded](tasktable_store::Shielded) so that no firing
    /// is cut off half way.
    pub fn new(store: Arc<dyn Store>, config: SchedulerConfig) -> Self {
        let store = tasktable_store::Shielded::wrap(store);
        Scheduler { store, config }
    }

    /// Saves the declared schedules ([`SchedulerConfig::declared`]): a new name is
    /// created, and a stored schedule of the same name is brought to the declared spec,
    /// except its `enabled` flag, so an operator's disable survives restarts. Stops at
    /// the first that fails.
    pub async fn declare(&self) -> StoreResult<()> {
        for spec in &self.config.declared {
            let saved = self
                .store
                .schedule_create(CreateScheduleParams {
                    spec: spec.clone(),
                    on_existing: OnExisting::Update,
                    // Declared in the application's code.
                    actor: tasktable_core::Actor::rust(),
                    now: None,
                })
                .await?;
            tracing::debug!(schedule = %saved.spec.name, id = saved.id, "declared schedule saved");
        }
        Ok(())
    }

    /// Fires every schedule due at `now` (`None`: the database's clock), in batches until
    /// none is left, and returns what fired.
    pub async fn run_once(&self, now: Option<DateTime<Utc>>) -> StoreResult<Vec<Fired>> {
        let mut all = Vec::new();
        loop {
            let fired = self
                .store
                .schedule_run_due(RunDueParams {
                    limit: self.config.batch,
                    now,
                })
                .await?;
            let full = fired.len() as u32 >= self.config.batch;
            for f in &fired {
                metrics::schedule_fired(f);
                tracing::info!(
                    schedule = %f.name,
                    tasks = f.tasks.len(),
                    skipped = f.skipped.len(),
                    "schedule fired"
                );
            }
            all.extend(fired);
            if !full {
                return Ok(all);
            }
        }
    }

    /// Saves the declared schedules, then fires due ones every `interval` until `stop`
    /// resolves. A failed call is logged and tried again at the next tick.
    pub async fn run(self, stop: impl Future<Output = ()>) {
        tokio::pin!(stop);
        metrics::describe();
        let mut declared = self.config.declared.is_empty();
        loop {
            if !declared {
                match self.declare().await {
                    Ok(()) => declared = true,
                    Err(e) => {
                        metrics::store_error(Call::Schedule);
                        tracing::warn!(error = %e, "declared schedules could not be saved");
                    }
                }
            }
            if let Err(e) = self.run_once(None).await {
                metrics::store_error(Call::Schedule);
                tracing::warn!(error = %e, "firing schedules failed");
            }
            let jitter = 0.8 + 0.4 * rand::random::<f64>();
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(self.config.interval.mul_f64(jitter)) => {}
            }
        }
    }
}
