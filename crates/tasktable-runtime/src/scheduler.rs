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
                log_fired(f);
            }
            all.extend(fired);
            if !full {
                return Ok(all);
            }
        }
    }

    /// Saves the declared schedules, then fires due ones every `interval` until `stop`
    /// resolves. A failed call is logged (an unreachable database once, by the store) and
    /// tried again at the next tick.
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
                        if !e.is_unreachable() {
                            tracing::warn!(error = %e, "declared schedules could not be saved");
                        }
                    }
                }
            }
            if let Err(e) = self.run_once(None).await {
                metrics::store_error(Call::Schedule);
                if !e.is_unreachable() {
                    tracing::warn!(error = %e, "firing schedules failed");
                }
            }
            let jitter = 0.8 + 0.4 * rand::random::<f64>();
            tokio::select! {
                _ = &mut stop => return,
                _ = tokio::time::sleep(self.config.interval.mul_f64(jitter)) => {}
            }
        }
    }
}

/// Slot times a line lists; more are told as a count.
const LISTED: usize = 10;

/// The INFO lines of one firing: what fired, and, when some slots were missed or skipped,
/// how many and which, in a bounded line each (however many slots a long outage missed).
fn log_fired(f: &Fired) {
    let schedule = f.name.as_str();
    tracing::info!(
        schedule,
        tasks = f.tasks.len(),
        caught_up = f.caught_up,
        skipped = f.skipped.len(),
        missed_skipped = f.missed_skipped.count,
        "schedule fired"
    );
    if let Some(late) = f.tasks.get(..f.caught_up).filter(|l| !l.is_empty()) {
        let slots: Vec<DateTime<Utc>> = late.iter().map(|t| t.slot_at).collect();
        tracing::info!(
            schedule,
            caught_up = slots.len(),
            first_slot = %time(slots[0]),
            last_slot = %time(slots[slots.len() - 1]),
            slots = %listing(&slots),
            "schedule caught up missed slots"
        );
    }
    let missed = &f.missed_skipped;
    if let (Some(first), Some(last)) = (missed.first, missed.last) {
        tracing::info!(
            schedule,
            reason = "missed",
            skipped = missed.count,
            more = missed.more,
            first_slot = %time(first),
            last_slot = %time(last),
            "schedule skipped slots"
        );
    }
    // Slots the overlap policy skips (the previous task still runs) are counted by the
    // firing's own line (`skipped`): a line of their own at every slot of a schedule
    // whose task is stuck would be a line per slot for as long as it stays stuck.
}

/// A slot as RFC 3339 in UTC, to the millisecond (as a slot's idempotency key spells it).
fn time(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// The first [`LISTED`] slots, and how many more.
fn listing(slots: &[DateTime<Utc>]) -> String {
    let mut text: Vec<String> = slots.iter().take(LISTED).map(|t| time(*t)).collect();
    if slots.len() > LISTED {
        text.push(format!("and {} more", slots.len() - LISTED));
    }
    text.join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn a_listing_of_many_slots_names_the_first_ten_and_counts_the_rest() {
        let at = |m: u32| Utc.with_ymd_and_hms(2030, 1, 1, 0, m, 0).unwrap();
        assert_eq!(
            listing(&[at(1), at(2)]),
            "2030-01-01T00:01:00.000Z, 2030-01-01T00:02:00.000Z"
        );
        let many: Vec<_> = (0..50).map(at).collect();
        let text = listing(&many);
        assert!(
            text.ends_with(", 2030-01-01T00:09:00.000Z, and 40 more"),
            "{text}"
        );
        assert_eq!(text.matches("2030-").count(), LISTED);
    }
}
