//! What every backend's hot path shares about the rows it writes and reads: a finish's
//! items as the columns stored ([`FinishRow`]), which of them apply ([`finish_applies`]),
//! what a missed fence means ([`lost_lease_status`]), credentials and outcomes as stored,
//! and which rows an operator's change selects ([`select_for_update`]).

use crate::filter::Target;
use crate::params::*;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::stored::{stored_error, stored_value};
use tasktable_core::{AttemptOutcome, Lease, LeaseCredential, TaskId, TaskState};

/// A [`FinishItem`] as the columns a store writes, so every backend reads a plan the same
/// way: results and errors as [`tasktable_core::stored`] says they are stored.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishRow {
    /// The task whose attempt ends.
    pub task_id: TaskId,
    /// The lease's fencing token, matched against the row's `lease_token`.
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
    /// The handler's output, stored on success, NUL replaced as stored.
    pub result: Option<Value>,
    /// Written to `last_error` and to the history when set.
    pub error: Option<String>,
    /// How the attempt ended, for its history row.
    pub outcome: tasktable_core::AttemptOutcome,
}

impl FinishItem {
    /// This item as the columns every backend writes.
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
    /// The row's `lease_token`.
    pub token: i64,
    /// The row's `lease_credential`, in its stored form (hex), or NULL.
    pub credential: Option<String>,
    /// Whether the row is `running`.
    pub running: bool,
    /// The row's `lease_expires_at`, which a rescuer's finish needs passed.
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
    /// The task's state now.
    pub state: TaskState,
    /// The row's `lease_token`: the last claim's.
    pub token: i64,
    /// The row's `lease_credential`: the last claim's secret, NULL for a task claimed
    /// before credentials existed.
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
