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
    pub task: Task,
    pub spec: BatchSpec,
    pub control: BatchControl,
    pub status: BatchStatus,
    /// A runner ever had it ([`tasktable_core::batch::started`]).
    pub started: bool,
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
    pub created_at: DateTime<Utc>,
}

/// An item that failed for good.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemFailure {
    pub item: u64,
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
    pub lease: Lease,
    pub low_water: u64,
    pub end: Option<u64>,
    pub errors: u64,
    /// Kept up to [`tasktable_core::batch::FAILURES_KEPT`] per batch; later ones only
    /// count in `errors`.
    pub failures: Vec<ItemFailure>,
    pub items_per_second: Option<f64>,
    pub lease_for: Duration,
    /// The data version the runner holds: a save answers the data when it has changed.
    pub data_version: u64,
    pub now: Option<DateTime<Utc>>,
}

/// What a save found: whether the lease holds, and what operators asked since.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchSaved {
    pub lease: LeaseStatus,
    pub control: BatchControl,
    pub error_budget: u64,
    /// The data and its version, when it changed since the version the runner holds.
    pub data: Option<(u64, Value)>,
}

/// An operator's (or the business's) start, pause, stop or resume.
#[derive(Debug, Clone, PartialEq)]
pub struct BatchControlParams {
    pub id: TaskId,
    pub action: BatchAction,
    pub actor: Actor,
    pub now: Option<DateTime<Utc>>,
}

/// An edit of a batch: a new error budget (say, raised to resume a failed batch) or new
/// data (while it waits for the business, or runs serially:
/// [`tasktable_core::batch::data_may_change`]).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct BatchUpdateParams {
    pub id: TaskId,
    pub error_budget: Option<u64>,
    pub data: Option<Value>,
    pub actor: Actor,
    pub now: Option<DateTime<Utc>>,
}

/// Which batches to list: newest first, `limit` of them, before the id `before`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BatchListParams {
    pub limit: u32,
    pub before: Option<TaskId>,
}

/// Most batches one list answers.
pub const MAX_BATCH_LIST: u32 = 1000;
