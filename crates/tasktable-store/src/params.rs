//! One parameter struct per store call, and the results that are not core types.

use crate::filter::{Target, TaskFilter};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::policy::QueuePolicy;
use tasktable_core::stored::stored_value;
use tasktable_core::{Actor, Lease, NewTask, Task, TaskId, TaskState};

#[derive(Debug, Clone, Default)]
pub struct SubmitParams {
    pub tasks: Vec<NewTask>,
    pub now: Option<DateTime<Utc>>,
}

/// The answer to one submitted task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    pub id: TaskId,
    /// `false` when a task with the same idempotency key already existed.
    pub created: bool,
}

#[derive(Debug, Clone)]
pub struct ClaimParams {
    pub queue: String,
    /// Only tasks of these kinds (the handlers the worker has).
    pub kinds: Vec<String>,
    pub limit: u32,
    pub worker_id: String,
    pub worker_host: String,
    /// The claimer's groups: with its id, which targeted tasks it may take.
    pub worker_groups: Vec<String>,
    /// How long the lease lasts from now before it must be renewed.
    pub lease_for: Duration,
    pub now: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
pub struct RenewParams {
    pub leases: Vec<Lease>,
    pub lease_for: Duration,
    pub now: Option<DateTime<Utc>>,
}

/// Whether a worker still holds a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Still held; renewed until this time, when the call was a renewal.
    Held { expires_at: Option<DateTime<Utc>> },
    /// An operator cancelled the task.
    Cancelled,
    /// An operator changed the task's target to leave this worker out; the task waits
    /// for an allowed worker, this attempt not spent.
    Retargeted,
    /// Taken back (rescued after expiry) or otherwise no longer under this token.
    Lost,
}

impl LeaseStatus {
    pub fn is_held(&self) -> bool {
        matches!(self, LeaseStatus::Held { .. })
    }
}

#[derive(Debug, Clone)]
pub struct CheckpointParams {
    pub lease: Lease,
    /// Replaces the checkpoint when set.
    pub checkpoint: Option<Value>,
    /// Replaces the progress when set.
    pub progress: Option<Value>,
}

#[derive(Debug, Clone)]
pub struct FinishItem {
    pub lease: Lease,
    pub plan: FinishPlan,
}

#[derive(Debug, Clone, Default)]
pub struct FinishParams {
    pub items: Vec<FinishItem>,
    /// The rescuer's guard: apply only to tasks whose lease or deadline has passed, so a
    /// worker that renewed in the meantime keeps its task.
    pub only_if_expired: bool,
    pub now: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
pub struct ExpiredParams {
    pub limit: u32,
    pub now: Option<DateTime<Utc>>,
}

/// Ending the waits of retries for their previous workers that are over (the wait passed,
/// or the worker is gone): the rescuer's second step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AffinityReleaseParams {
    /// Tasks per call at the most (1 to [`MAX_AFFINITY_BATCH`]).
    pub limit: u32,
    pub now: Option<DateTime<Utc>>,
}

/// Most tasks one [`AffinityReleaseParams`] call frees.
pub const MAX_AFFINITY_BATCH: u32 = 1000;

/// Most tasks one page may hold.
pub const MAX_PAGE_SIZE: u32 = 1000;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListParams {
    pub filter: TaskFilter,
    /// Continue after this id (exclusive): the `next` of the previous page.
    pub after: Option<TaskId>,
    /// At most [`MAX_PAGE_SIZE`].
    pub limit: u32,
    /// Leave the documents out: each task's `payload` is `null` and its `result`,
    /// `checkpoint` and `progress` are `None`, so a page costs its row headers only,
    /// however large the documents (for pages that show who runs what).
    #[serde(default)]
    pub light: bool,
}

/// Counting the tasks a filter matches, up to a cap.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CountParams {
    pub filter: TaskFilter,
    /// Stop counting here: the answer is exact below `cap`, and `cap` means "at least",
    /// so a count costs at most `cap` index entries however large the table.
    pub cap: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPage {
    pub tasks: Vec<Task>,
    /// Pass as `after` for the next page; `None` on the last page.
    pub next: Option<TaskId>,
}

impl TaskPage {
    /// A page from a query that fetched `limit + 1` rows, newest first: the extra row only
    /// tells that another page follows.
    pub fn from_overfetch(mut tasks: Vec<Task>, limit: u32) -> Self {
        let next = if tasks.len() > limit as usize {
            tasks.truncate(limit as usize);
            tasks.last().map(|t| t.id)
        } else {
            None
        };
        TaskPage { tasks, next }
    }
}

pub use tasktable_core::{Change, ChangeEffect};

#[derive(Debug, Clone, PartialEq)]
pub struct UpdateParams {
    pub target: Target,
    pub change: Change,
    /// Who asks: the event log records it with each task changed.
    pub actor: Actor,
    pub now: Option<DateTime<Utc>>,
}

#[derive(Debug, Clone)]
pub struct QueuePauseParams {
    pub queue: String,
    pub paused: bool,
    pub actor: Actor,
}

/// A queue's policy, replacing the one it had (the default policy clears it).
#[derive(Debug, Clone, PartialEq)]
pub struct QueuePolicyParams {
    pub queue: String,
    pub policy: QueuePolicy,
    pub actor: Actor,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueInfo {
    pub name: String,
    pub paused: bool,
    /// What the queue allows its claims (the default: no limits).
    #[serde(default)]
    pub policy: QueuePolicy,
    /// Tasks per state; states with none are left out.
    pub counts: Vec<(TaskState, u64)>,
}

/// What a waiting claim could take: tasks of any of `kinds` in `queue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueParams {
    pub queue: String,
    /// Empty: any kind.
    pub kinds: Vec<String>,
}

/// A hint that `queue` may have due tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    pub queue: String,
}

/// Checks a batch before anything is written, so a bad task fails the whole call, and
/// puts each task's values in the form every backend stores
/// ([`tasktable_core::stored::stored_run_at`]).
pub(crate) fn prepare_submit(
    tasks: &mut [NewTask],
    max_payload_bytes: usize,
) -> crate::StoreResult<()> {
    validate_submit(tasks, max_payload_bytes)?;
    for task in tasks.iter_mut() {
        task.run_at = task.run_at.map(tasktable_core::stored::stored_run_at);
    }
    Ok(())
}

/// Checks a batch before anything is written, so a bad task fails the whole call.
pub(crate) fn validate_submit(
    tasks: &[NewTask],
    max_payload_bytes: usize,
) -> crate::StoreResult<()> {
    for (index, task) in tasks.iter().enumerate() {
        task.validate()
            .map_err(|source| crate::StoreError::InvalidTask { index, source })?;
        check_size(&task.payload, index, max_payload_bytes)?;
    }
    Ok(())
}

/// Checks a page request.
pub(crate) fn validate_list(params: &ListParams) -> crate::StoreResult<()> {
    params.filter.validate()?;
    if params.limit == 0 || params.limit > MAX_PAGE_SIZE {
        return Err(crate::StoreError::InvalidInput(format!(
            "page size must be between 1 and {MAX_PAGE_SIZE}, got {}",
            params.limit
        )));
    }
    Ok(())
}

/// Checks an update's filter, if it has one, and its change's values, and puts a new
/// `run_at` in the form every backend stores.
pub(crate) fn prepare_update(
    params: &mut UpdateParams,
    max_payload_bytes: usize,
) -> crate::StoreResult<()> {
    if let Target::Filter(filter) = &params.target {
        filter.validate()?;
    }
    validate_change(&params.change, max_payload_bytes)?;
    if let Change::Reschedule { run_at } = &mut params.change {
        *run_at = tasktable_core::stored::stored_run_at(*run_at);
    }
    Ok(())
}

/// Checks a change's own values (states are checked by the store against the row).
pub(crate) fn validate_change(change: &Change, max_payload_bytes: usize) -> crate::StoreResult<()> {
    use tasktable_core::task::{InvalidTask, MAX_ATTEMPTS_LIMIT};
    match change {
        Change::SetMaxAttempts { max_attempts }
            if *max_attempts == 0 || *max_attempts > MAX_ATTEMPTS_LIMIT =>
        {
            Err(crate::StoreError::InvalidInput(
                InvalidTask::MaxAttempts(*max_attempts).to_string(),
            ))
        }
        Change::EditPayload { payload } => {
            if tasktable_core::stored::contains_nul(payload) {
                return Err(crate::StoreError::InvalidInput(
                    InvalidTask::Nul("payload").to_string(),
                ));
            }
            check_size(payload, 0, max_payload_bytes)
        }
        Change::SetTarget { target } => target
            .validate()
            .map_err(|e| crate::StoreError::InvalidInput(e.to_string())),
        _ => Ok(()),
    }
}

/// Default largest payload or checkpoint: 1 MiB of JSON.
pub const DEFAULT_MAX_PAYLOAD_BYTES: usize = 1 << 20;

/// Refuses a JSON document (item `index` of its call) larger than `limit` bytes as
/// stored.
fn check_size(value: &Value, index: usize, limit: usize) -> crate::StoreResult<()> {
    let size = serde_json::to_vec(value).map_or(usize::MAX, |v| v.len());
    if size > limit {
        return Err(crate::StoreError::PayloadTooLarge { index, size, limit });
    }
    Ok(())
}

/// Checks a finish call before anything is written: a result larger than
/// `max_payload_bytes` refuses the whole call, like an oversized task in a submit.
pub(crate) fn check_finish(
    items: &[FinishItem],
    max_payload_bytes: usize,
) -> crate::StoreResult<()> {
    for (index, item) in items.iter().enumerate() {
        if let tasktable_core::FinishAction::Complete {
            result: Some(result),
        } = &item.plan.action
        {
            check_size(result, index, max_payload_bytes)?;
        }
    }
    Ok(())
}

/// A checkpoint call as it is stored: each value checked against `max_payload_bytes`,
/// then NUL replaced as [`tasktable_core::stored`] says.
pub(crate) fn prepare_checkpoint(
    mut p: CheckpointParams,
    max_payload_bytes: usize,
) -> crate::StoreResult<CheckpointParams> {
    for value in [&p.checkpoint, &p.progress].into_iter().flatten() {
        check_size(value, 0, max_payload_bytes)?;
    }
    p.checkpoint = p.checkpoint.map(stored_value);
    p.progress = p.progress.map(stored_value);
    Ok(p)
}

/// One batch of retention: finished tasks of one state older than an age, deleted or
/// moved to the archive with their attempts, in one short transaction.
#[derive(Debug, Clone)]
pub struct PurgeParams {
    /// `succeeded`, `failed` or `cancelled`.
    pub state: TaskState,
    /// Tasks that finished longer ago than this (by the database's clock) go.
    pub older_than: Duration,
    /// Move them to `tasktable_tasks_archive` and `tasktable_attempts_archive` instead.
    pub archive: bool,
    /// Tasks per call at the most (1 to [`MAX_PURGE_BATCH`]).
    pub limit: u32,
    /// Count what a whole purge would take, and change nothing.
    pub dry_run: bool,
    pub now: Option<DateTime<Utc>>,
}

/// Most tasks one purge call takes.
pub const MAX_PURGE_BATCH: u32 = 1000;

/// What one purge call did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Purged {
    /// Tasks deleted or archived by this call; for a dry run, every task a whole purge
    /// would take now.
    pub count: u64,
    /// Tasks that finished before this instant were eligible: the age's cutoff, or
    /// earlier when statistics have not been rolled up that far yet (a purge never takes
    /// what statistics still read from the raw rows).
    pub cutoff: DateTime<Utc>,
}
