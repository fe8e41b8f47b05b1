//! The batch calls' types ([`crate::Store::batch_get`] and the rest): a batch as stored,
//! its runner's fenced save, and operators' actions and edits. The rules come from
//! [`tasktable_core::batch`].

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::batch::{BatchAction, BatchControl, BatchSpec, BatchStatus};
use tasktable_core::{Actor, Lease, Task, TaskId};

use crate::LeaseStatus;

/// A batch as stored: its task (whose payload is the batch's data), what it asks for,
/// and where it got to.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Batch {
    /// The batch's task: its state, lease and attempts, and its data as the payload.
    pub task: Task,
    /// What the batch asks for, with the error budget as operators last set it.
    pub spec: BatchSpec,
    /// What operators last asked of it; its runner reads it at each save.
    pub control: BatchControl,
    /// What a user sees, from the task's state, `control` and `started`
    /// ([`BatchStatus::of`](tasktable_core::batch::BatchStatus::of)).
    pub status: BatchStatus,
    /// A runner ever had it ([`tasktable_core::batch::started`]).
    pub started: bool,
    /// It still waits for the business's start, whatever pauses, stops and resumes it
    /// went through ([`tasktable_core::batch::awaits_start`]): what
    /// [`BatchAction::apply`](tasktable_core::batch::BatchAction::apply) reads.
    pub awaits_start: bool,
    /// Every item below it is done: the offset a takeover starts from.
    pub low_water: u64,
    /// The last item plus one, when known: `items`, or where an open-ended batch's
    /// handler found its end.
    pub end: Option<u64>,
    /// Items that failed for good (the error budget spent).
    pub errors: u64,
    /// Items per second over the runner's last saves.
    pub items_per_second: Option<f64>,
    /// Grows with every change of the data, so a runner knows to read it again.
    pub data_version: u64,
    /// The runner's last save.
    pub saved_at: Option<DateTime<Utc>>,
    /// When the batch was submitted.
    pub created_at: DateTime<Utc>,
}

/// An item that failed for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemFailure {
    /// The item's index.
    pub item: u64,
    /// Its last try's error, kept to 8 KiB as every stored error is
    /// ([`tasktable_core::stored::MAX_ERROR_LEN`]).
    pub error: String,
    /// Tries made, the first one included.
    pub tries: u32,
    /// When it was stored; `None` in a save, where the store's clock fills it in.
    pub failed_at: Option<DateTime<Utc>>,
}

/// A runner's save: progress and the failures since its last save, under the batch
/// task's lease, which the save also renews.
#[derive(Debug, Clone)]
pub struct BatchSaveParams {
    /// The batch task's lease: a save applies only while it holds.
    pub lease: Lease,
    /// Every item below this index is done; replaces the saved mark.
    pub low_water: u64,
    /// The last item plus one, once known.
    pub end: Option<u64>,
    /// Items failed for good since the batch began, in all (the budget spent).
    pub errors: u64,
    /// Kept up to [`tasktable_core::batch::FAILURES_KEPT`] per batch; later ones only
    /// count in `errors`.
    pub failures: Vec<ItemFailure>,
    /// The runner's recent pace, shown to operators; a value that is not finite is saved
    /// as none.
    pub items_per_second: Option<f64>,
    /// How long the renewed lease lasts from now (never past the attempt's deadline).
    pub lease_for: Duration,
    /// The data version the runner holds: a save answers the data when it has changed.
    pub data_version: u64,
    /// The save's time, from which the lease runs and `saved_at` is set; `None`: the
    /// database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// What a save found: whether the lease holds, and what operators asked since.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSaved {
    /// `Held` with the lease's new end when the save applied; otherwise why not.
    pub lease: LeaseStatus,
    /// What operators ask now: go on, pause or stop.
    pub control: BatchControl,
    /// The error budget now: operators may raise it while the batch runs.
    pub error_budget: u64,
    /// The data and its version, when it changed since the version the runner holds.
    pub data: Option<(u64, Value)>,
}

/// An operator's (or the business's) start, pause, stop or resume.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchControlParams {
    /// The batch's task.
    pub id: TaskId,
    /// What to do; [`BatchAction::apply`](tasktable_core::batch::BatchAction::apply)
    /// says whether it applies and what it changes.
    pub action: BatchAction,
    /// Who asks: the event log records it.
    pub actor: Actor,
    /// The change's time; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// An edit of a batch: a new error budget (say, raised to resume a failed batch) or new
/// data (while it waits for the business, or runs serially:
/// [`tasktable_core::batch::data_may_change`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchUpdateParams {
    /// The batch's task.
    pub id: TaskId,
    /// Items that may fail for good before the batch fails; `None` leaves it.
    pub error_budget: Option<u64>,
    /// The new data (the task's payload), which raises the data version so that the
    /// runner reads it at its next save; `None` leaves it.
    pub data: Option<Value>,
    /// Who asks: the event log records it, with the fields changed (not the data).
    pub actor: Actor,
    /// The change's time; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// Which batches to list: newest first, `limit` of them, before the id `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchListParams {
    /// Batches at most; brought within 1 to [`MAX_BATCH_LIST`] rather than refused.
    pub limit: u32,
    /// Only batches whose task id is below this: the last id of the previous page.
    pub before: Option<TaskId>,
}

/// Most batches one list answers.
pub const MAX_BATCH_LIST: u32 = 1000;
