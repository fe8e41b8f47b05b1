//! The retention flags of `serve` and `worker`: how long finished tasks are kept, by
//! state, and whether they are archived rather than deleted.

use crate::input;
use clap::Args;
use std::time::Duration;
use tasktable::retention::Retention;

/// How long finished tasks are kept. Without an age a state is kept forever (the
/// default); with one, a sweep every minute deletes (or, with --archive, moves to the
/// archive tables) tasks that finished longer ago, in small batches that never hold up
/// claims. Every process given ages sweeps; they never take a task twice.
#[derive(Args, Debug, Clone, Default)]
pub struct RetentionArgs {
    /// Keep succeeded tasks this long after they finished (7d, 12h, ...).
    #[arg(long, value_name = "AGE", value_parser = input::duration)]
    retain_succeeded: Option<Duration>,
    /// Keep failed tasks this long after they finished.
    #[arg(long, value_name = "AGE", value_parser = input::duration)]
    retain_failed: Option<Duration>,
    /// Keep cancelled tasks this long after they finished.
    #[arg(long, value_name = "AGE", value_parser = input::duration)]
    retain_cancelled: Option<Duration>,
    /// Move tasks past their age, with their attempts, to tasktable_tasks_archive and
    /// tasktable_attempts_archive instead of deleting them.
    #[arg(long)]
    archive: bool,
    /// Keep events that concern no task (queues paused, workers drained, schedules
    /// edited) this long; a task's events go with the task. 0 keeps them forever.
    #[arg(long, value_name = "AGE", value_parser = input::duration, default_value = "90d")]
    retain_events: Duration,
}

impl RetentionArgs {
    pub fn policy(&self) -> Retention {
        Retention {
            succeeded: self.retain_succeeded,
            failed: self.retain_failed,
            cancelled: self.retain_cancelled,
            archive: self.archive,
            events: (!self.retain_events.is_zero()).then_some(self.retain_events),
        }
    }
}
