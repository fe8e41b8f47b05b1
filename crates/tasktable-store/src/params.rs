//! One parameter struct per store call, and the results that are not core types.

use crate::filter::{Target, TaskFilter};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::policy::QueuePolicy;
use tasktable_core::stored::{stored_error, stored_value};
use tasktable_core::{
    Actor, AttemptOutcome, Lease, LeaseCredential, NewTask, Task, TaskId, TaskState,
};

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

/// A [`FinishItem`] as the columns a store writes, so every backend reads a plan the same
/// way: results and errors as [`tasktable_core::stored`] says they are stored.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishRow {
    pub task_id: TaskId,
    pub token: i64,
    /// Matched null-safely: `None` only matches a task claimed before credentials existed.
    pub credential: Option<String>,
    /// The state to move to; `None` for a retry, where the store picks `pending` or
    /// `failed` by [`tasktable_core::outcome::retry_state`] of the row's `attempt` and
    /// current `max_attempts`.
    pub new_state: Option<TaskState>,
    /// From now until `run_at`, when the task goes back to `pending`.
    pub delay: Duration,
    /// Give the attempt back (snooze, interruption).
    pub refund_attempt: bool,
    pub result: Option<Value>,
    /// Written to `last_error` and to the history when set.
    pub error: Option<String>,
    pub outcome: tasktable_core::AttemptOutcome,
}

impl FinishItem {
    pub fn row(&self) -> FinishRow {
        use tasktable_core::FinishAction;
        let (new_state, delay, refund_attempt, result) = match &self.plan.action {
            FinishAction::Complete { result } => (
                Some(TaskState::Succeeded),
                Duration::ZERO,
                false,
                result.clone(),
            ),
            FinishAction::Retry { delay } => (None, *delay, false, None),
            FinishAction::Fail => (Some(TaskState::Failed), Duration::ZERO, false, None),
            FinishAction::Cancel => (Some(TaskState::Cancelled), Duration::ZERO, false, None),
            FinishAction::Requeue { delay } => (Some(TaskState::Pending), *delay, true, None),
            FinishAction::Hold => (Some(TaskState::Held), Duration::ZERO, true, None),
        };
        FinishRow {
            task_id: self.lease.task_id,
            token: self.lease.token,
            credential: self.lease.credential.map(|c| c.to_hex()),
            new_state,
            delay,
            refund_attempt,
            result: result.map(stored_value),
            error: self.plan.error.as_deref().map(stored_error),
            outcome: self.plan.outcome,
        }
    }
}

/// What decides whether a finish's item applies: its task's row, as a store that chooses
/// the items before writing them read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FinishFence {
    pub token: i64,
    pub credential: Option<String>,
    pub running: bool,
    pub lease_expires_at: Option<DateTime<Utc>>,
}

/// Which items of a finish apply, one flag per item in input order: the task is
/// `running` under the item's token and credential (the credential matched null-safely),
/// its lease has run out by `now` when `only_if_expired` (the rescuer's finish), and no
/// earlier item for the same task applied: of two items for one task, the first whose
/// fence matches, in input order. `fence` looks a task's row up by id. PostgreSQL makes
/// the same choice inside its statement.
pub fn finish_applies<'a>(
    rows: &[FinishRow],
    fence: impl Fn(TaskId) -> Option<&'a FinishFence>,
    only_if_expired: bool,
    now: DateTime<Utc>,
) -> Vec<bool> {
    let mut taken = std::collections::HashSet::new();
    rows.iter()
        .map(|r| {
            fence(r.task_id).is_some_and(|f| {
                f.running
                    && f.token == r.token
                    && f.credential == r.credential
                    && (!only_if_expired || f.lease_expires_at.is_some_and(|t| t <= now))
            }) && taken.insert(r.task_id)
        })
        .collect()
}

impl FinishRow {
    /// Whether this end may make the task due at once (given back to `pending` without
    /// delay; a retry may turn out `failed`), so the store looks up its queue to wake.
    pub fn may_be_due_at_once(&self) -> bool {
        self.delay.is_zero() && self.new_state != Some(TaskState::Succeeded)
    }
}

/// The row a fenced write did not match, as [`lost_lease_status`] reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseRow {
    pub state: TaskState,
    pub token: i64,
    pub credential: Option<LeaseCredential>,
    /// How the task's latest recorded attempt ended; read only for a pending task.
    pub last_outcome: Option<AttemptOutcome>,
}

/// The status of a lease that a fenced write did not match: `Cancelled` when an operator
/// cancelled the task under this very lease (token and credential), `Retargeted` when an
/// operator's new target took it back from under this lease and no worker has claimed it
/// since, `Lost` otherwise, so a caller who guesses a credential learns nothing from the
/// answer. (A task claimed again after a new target answers `Lost` to its former worker:
/// the claim replaced the lease; the attempt history still says `retargeted`.)
pub fn lost_lease_status(lease: Lease, row: Option<LeaseRow>) -> LeaseStatus {
    let Some(row) = row else {
        return LeaseStatus::Lost;
    };
    if row.token != lease.token || row.credential != lease.credential {
        return LeaseStatus::Lost;
    }
    match (row.state, row.last_outcome) {
        (TaskState::Cancelled, _) => LeaseStatus::Cancelled,
        (TaskState::Pending, Some(AttemptOutcome::Retargeted)) => LeaseStatus::Retargeted,
        _ => LeaseStatus::Lost,
    }
}

/// An outcome column as stored; `None` for NULL or a name this version does not know.
pub fn outcome_from_db(text: Option<&str>) -> Option<AttemptOutcome> {
    text.and_then(|t| t.parse().ok())
}

/// A credential column as stored (32 hex digits, or NULL).
pub fn credential_from_db(text: Option<&str>) -> crate::StoreResult<Option<LeaseCredential>> {
    text.map(|t| {
        t.parse()
            .map_err(|e| crate::StoreError::Database(Box::new(e)))
    })
    .transpose()
}

/// Fresh credentials for `n` claims, from the thread's cryptographically secure generator
/// (ChaCha, reseeded from the operating system).
pub fn new_lease_credentials(n: usize) -> Vec<LeaseCredential> {
    (0..n)
        .map(|_| LeaseCredential::from_bytes(rand::random()))
        .collect()
}

/// The rows an operator's change applies to, chosen from the rows its target matched.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateSelection {
    /// Rows in a state the change may start from.
    pub ids: Vec<TaskId>,
    /// Those of them that are running (a cancel ends their attempt).
    pub running: Vec<TaskId>,
}

/// Applies the state machine to the `(id, state)` rows a target matched: a single task in
/// the wrong state (or missing) is an error; a filter skips such rows.
pub fn select_for_update(
    target: &Target,
    op: tasktable_core::Operation,
    rows: &[(TaskId, TaskState)],
) -> crate::StoreResult<UpdateSelection> {
    if let (Target::Id(id), true) = (target, rows.is_empty()) {
        return Err(crate::StoreError::NotFound(*id));
    }
    let mut selection = UpdateSelection::default();
    for &(id, state) in rows {
        if !op.can_apply(state) {
            if let Target::Id(_) = target {
                return Err(crate::StoreError::illegal(id, op, state));
            }
            continue;
        }
        if state == TaskState::Running {
            selection.running.push(id);
        }
        selection.ids.push(id);
    }
    Ok(selection)
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn item(task_id: TaskId, token: i64, credential: &str) -> FinishRow {
        FinishRow {
            task_id,
            token,
            credential: Some(credential.into()),
            new_state: Some(TaskState::Succeeded),
            delay: Duration::ZERO,
            refund_attempt: false,
            result: None,
            error: None,
            outcome: AttemptOutcome::Succeeded,
        }
    }

    /// A lease that ran out before [`now`] when `expired`, one that runs on otherwise.
    fn fence(token: i64, credential: &str, running: bool, expired: bool) -> FinishFence {
        let offset = chrono::Duration::seconds(if expired { -1 } else { 1 });
        FinishFence {
            token,
            credential: Some(credential.into()),
            running,
            lease_expires_at: Some(now() + offset),
        }
    }

    fn now() -> DateTime<Utc> {
        DateTime::from_timestamp(1_900_000_000, 0).unwrap()
    }

    #[test]
    fn the_first_item_whose_fence_matches_applies_once_per_task() {
        let fences = HashMap::from([
            (1, fence(5, "c1", true, false)),
            (2, fence(3, "c2", true, true)),
            (3, fence(1, "c3", false, true)),
        ]);
        let rows = [
            item(1, 4, "c1"),    // a stale token
            item(1, 5, "c1"),    // the first that matches
            item(1, 5, "c1"),    // a second for the same task
            item(2, 3, "other"), // a wrong credential
            item(2, 3, "c2"),
            item(3, 1, "c3"), // not running
            item(4, 1, "c4"), // no such task
        ];
        assert_eq!(
            finish_applies(&rows, |id| fences.get(&id), false, now()),
            [false, true, false, false, true, false, false]
        );
        // The rescuer's finish: only leases that ran out.
        assert_eq!(
            finish_applies(&rows, |id| fences.get(&id), true, now()),
            [false, false, false, false, true, false, false]
        );
        // A task claimed before credentials existed matches only an item without one.
        let unset = FinishFence {
            credential: None,
            ..fence(2, "", true, false)
        };
        let fences = HashMap::from([(9, unset)]);
        let without = FinishRow {
            credential: None,
            ..item(9, 2, "")
        };
        assert_eq!(
            finish_applies(
                &[item(9, 2, "x"), without],
                |id| fences.get(&id),
                false,
                now()
            ),
            [false, true]
        );
    }
}
