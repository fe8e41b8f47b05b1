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

/// Tasks to create, all or none ([`Store::task_submit`](crate::Store::task_submit)).
#[derive(Debug, Clone, Default)]
pub struct SubmitParams {
    /// The tasks; one [`Submitted`] comes back for each, in this order.
    pub tasks: Vec<NewTask>,
    /// The submit's time: `created_at`, and `run_at` of a task that names none; `None`:
    /// the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// The answer to one submitted task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submitted {
    /// The new task's id, or the id of the task that already held the idempotency key.
    pub id: TaskId,
    /// `false` when a task with the same idempotency key already existed.
    pub created: bool,
}

/// One claim of due tasks from a queue ([`Store::task_claim`](crate::Store::task_claim)).
#[derive(Debug, Clone)]
pub struct ClaimParams {
    /// The queue to claim from.
    pub queue: String,
    /// Only tasks of these kinds (the handlers the worker has); empty claims nothing.
    pub kinds: Vec<String>,
    /// Most tasks to take; 0 takes none. A queue's policy may allow fewer.
    pub limit: u32,
    /// The claimer's id: written as each task's `worker_id`, and the name targets and a
    /// retry's wait for its previous worker are matched against.
    pub worker_id: String,
    /// The claimer's host name, written on each task and, at its end, its attempt.
    pub worker_host: String,
    /// The claimer's groups: with its id, which targeted tasks it may take.
    pub worker_groups: Vec<String>,
    /// How long the lease lasts from now before it must be renewed; never past a task's
    /// deadline (its timeout), nor longer than [`MAX_LEASE`](tasktable_core::MAX_LEASE).
    pub lease_for: Duration,
    /// The claim's time: tasks due at or before it are taken, and leases run from it;
    /// `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// A renewal of many leases ([`Store::task_renew`](crate::Store::task_renew)).
#[derive(Debug, Clone)]
pub struct RenewParams {
    /// The leases, each renewed on its own; one status comes back for each, in order.
    pub leases: Vec<Lease>,
    /// How long each lease lasts from now; never past its attempt's deadline, nor longer
    /// than [`MAX_LEASE`](tasktable_core::MAX_LEASE).
    pub lease_for: Duration,
    /// The renewal's time; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// Whether a worker still holds a task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseStatus {
    /// Still held: the caller may go on writing under the lease.
    Held {
        /// The lease's new end, when the call renewed it (a renewal, a batch's save);
        /// `None` for calls that leave it as it was.
        expires_at: Option<DateTime<Utc>>,
    },
    /// An operator cancelled the task.
    Cancelled,
    /// An operator changed the task's target to leave this worker out; the task waits
    /// for an allowed worker, this attempt not spent.
    Retargeted,
    /// Taken back (rescued after expiry) or otherwise no longer under this token.
    Lost,
}

impl LeaseStatus {
    /// Whether the lease still holds ([`LeaseStatus::Held`]).
    pub fn is_held(&self) -> bool {
        matches!(self, LeaseStatus::Held { .. })
    }
}

/// A checkpoint or progress write under a lease
/// ([`Store::task_checkpoint`](crate::Store::task_checkpoint)). Each document is at most
/// [`Limits::max_payload_bytes`](crate::Limits::max_payload_bytes).
#[derive(Debug, Clone)]
pub struct CheckpointParams {
    /// The attempt's lease: nothing is saved unless it holds.
    pub lease: Lease,
    /// Replaces the checkpoint when set.
    pub checkpoint: Option<Value>,
    /// Replaces the progress when set.
    pub progress: Option<Value>,
}

/// The end of one attempt: the lease it ran under, and what becomes of its task.
#[derive(Debug, Clone)]
pub struct FinishItem {
    /// The attempt's lease: the item applies only while it holds.
    pub lease: Lease,
    /// The history entry and the transition, as core decided them from what happened.
    pub plan: FinishPlan,
}

/// Ends of attempts, many in one call ([`Store::task_finish`](crate::Store::task_finish)).
#[derive(Debug, Clone, Default)]
pub struct FinishParams {
    /// The ends; one flag comes back for each, in order. Of two items for one task,
    /// the first whose lease holds applies and the other does not.
    pub items: Vec<FinishItem>,
    /// The rescuer's guard: apply only to tasks whose lease or deadline has passed, so a
    /// worker that renewed in the meantime keeps its task.
    pub only_if_expired: bool,
    /// The end's time: `finished_at`, the history row's end, and where a retry's delay
    /// starts; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// The rescuer's read of leases that ran out
/// ([`Store::task_list_expired`](crate::Store::task_list_expired)).
#[derive(Debug, Clone)]
pub struct ExpiredParams {
    /// Tasks at most.
    pub limit: u32,
    /// Leases that ended at or before this time are expired; `None`: the database's
    /// clock.
    pub now: Option<DateTime<Utc>>,
}

/// Ending the waits of retries for their previous workers that are over (the wait passed,
/// or the worker is gone): the rescuer's second step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AffinityReleaseParams {
    /// Tasks per call at the most (1 to [`MAX_AFFINITY_BATCH`]).
    pub limit: u32,
    /// The time the waits are measured at; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// Most tasks one [`AffinityReleaseParams`] call frees.
pub const MAX_AFFINITY_BATCH: u32 = 1000;

/// Most tasks one page may hold.
pub const MAX_PAGE_SIZE: u32 = 1000;

/// One page of tasks, newest first ([`Store::task_list`](crate::Store::task_list)).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListParams {
    /// Which tasks.
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
    /// Which tasks.
    pub filter: TaskFilter,
    /// Stop counting here: the answer is exact below `cap`, and `cap` means "at least",
    /// so a count costs at most `cap` index entries however large the table.
    pub cap: u64,
}

/// One page of [`Store::task_list`](crate::Store::task_list)'s answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskPage {
    /// At most the page size asked for, newest (highest id) first.
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

/// An operator's change to one task or to every task a filter matches
/// ([`Store::task_update`](crate::Store::task_update)).
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateParams {
    /// Which tasks, and whether a task in the wrong state is an error or skipped.
    pub target: Target,
    /// What to do; its operation says which states it may start from
    /// ([`Change::operation`]).
    pub change: Change,
    /// Who asks: the event log records it with each task changed.
    pub actor: Actor,
    /// The change's time: `updated_at`, and `run_at` of a task retried to run now;
    /// `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
    /// For a change to a filter: the key of the operator action it is part of, so that
    /// the steps of one action (a change walked a window of ids at a time) are one row of
    /// the audit; `None`: an action of its own, under a new key
    /// ([`bulk::new_action_key`](crate::bulk::new_action_key)). At most
    /// [`bulk::MAX_ACTION_KEY`](crate::bulk::MAX_ACTION_KEY) letters, digits, `-` and `_`.
    /// A change to one task belongs to no action and must leave it `None`.
    pub action: Option<String>,
}

/// Pausing or resuming claims from a queue
/// ([`Store::queue_set_paused`](crate::Store::queue_set_paused)).
#[derive(Debug, Clone)]
pub struct QueuePauseParams {
    /// The queue's name; it need not have tasks yet.
    pub queue: String,
    /// `true`: pause; `false`: resume.
    pub paused: bool,
    /// Who asks: the event log records it when the flag changes.
    pub actor: Actor,
}

/// A queue's policy, replacing the one it had (the default policy clears it).
#[derive(Debug, Clone, PartialEq)]
pub struct QueuePolicyParams {
    /// The queue's name, 1 to [`MAX_NAME_LEN`](tasktable_core::task::MAX_NAME_LEN)
    /// characters, not all blank.
    pub queue: String,
    /// What the queue allows its claims, within core's bounds.
    pub policy: QueuePolicy,
    /// Who asks: the event log records it, with the old policy and the new.
    pub actor: Actor,
}

/// A queue as [`Store::queue_list`](crate::Store::queue_list) answers it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueInfo {
    /// The queue's name.
    pub name: String,
    /// Whether claims take nothing from it (running tasks go on).
    pub paused: bool,
    /// What the queue allows its claims (the default: no limits).
    #[serde(default)]
    pub policy: QueuePolicy,
    /// Tasks per state; states with none are left out.
    pub counts: Vec<(TaskState, u64)>,
}

/// A task whose reasons for waiting are asked for ([`Store::task_waiting`]).
///
/// [`Store::task_waiting`]: crate::Store::task_waiting
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskWaitingParams {
    /// The task.
    pub id: TaskId,
    /// The time a task's `run_at` and a rate's bucket are held against; `None`: the
    /// database's clock.
    pub now: Option<DateTime<Utc>>,
}

impl From<TaskId> for TaskWaitingParams {
    /// The task `id`, at the database's now.
    fn from(id: TaskId) -> Self {
        TaskWaitingParams { id, now: None }
    }
}

/// What a waiting claim could take: tasks of any of `kinds` in `queue`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DueParams {
    /// The queue the waiting claims take from.
    pub queue: String,
    /// Empty: any kind.
    pub kinds: Vec<String>,
}

/// A hint that `queue` may have due tasks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wake {
    /// The queue. Sent after a commit that may have made its tasks due: a submit, an
    /// attempt's end that sends its task back at once, an operator's retry, release or
    /// reschedule, a resume, a schedule firing.
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
    match (&params.target, params.action.as_deref()) {
        (Target::Filter(filter), action) => {
            filter.validate()?;
            action.map(crate::action::check_action_key).transpose()?;
        }
        (Target::Id(_), Some(_)) => {
            return Err(crate::StoreError::InvalidInput(
                "a change to one task is no bulk action: it takes no action key".into(),
            ))
        }
        (Target::Id(_), None) => {}
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
            tasktable_core::task::check_payload("payload", payload)
                .map_err(|e| crate::StoreError::InvalidInput(e.to_string()))?;
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
    /// What the age is measured back from; `None`: the database's clock.
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
