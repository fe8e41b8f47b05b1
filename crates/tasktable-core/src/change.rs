//! What an operator may change about a task, and what each change does to a row, as
//! values: the stores write these values and decide nothing themselves.

use crate::outcome::AttemptOutcome;
use crate::state::{Operation, TaskState};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// An operator's change. Each may start only from the states
/// [`Operation::allowed_from`] lists.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Change {
    /// Stops the task; a running handler is told through its lease.
    Cancel,
    /// Makes the task due now; a failed or cancelled one gets a fresh set of attempts.
    Retry,
    Reschedule {
        run_at: DateTime<Utc>,
    },
    SetPriority {
        priority: i32,
    },
    SetMaxAttempts {
        max_attempts: u32,
    },
    EditPayload {
        payload: Value,
    },
    Hold,
    Release,
}

/// What a change does to one row, column by column; `None` leaves a column as it is.
/// `updated_at` is always set to the change's time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChangeEffect {
    pub state: Option<TaskState>,
    /// `attempt` back to 0: a fresh set of attempts.
    pub reset_attempts: bool,
    pub run_at: Option<DateTime<Utc>>,
    /// `Some(None)` clears `finished_at`.
    pub finished_at: Option<Option<DateTime<Utc>>>,
    /// The lease's expiry and the attempt's deadline cleared: no worker holds the task.
    pub end_lease: bool,
    pub priority: Option<i32>,
    pub max_attempts: Option<u32>,
    pub payload: Option<Value>,
    /// The running attempt ends here: its history row gets this outcome and error.
    pub ends_attempt: Option<(AttemptOutcome, &'static str)>,
}

impl Change {
    pub fn operation(&self) -> Operation {
        match self {
            Change::Cancel => Operation::Cancel,
            Change::Retry => Operation::Retry,
            Change::Reschedule { .. } => Operation::Reschedule,
            Change::SetPriority { .. } => Operation::SetPriority,
            Change::SetMaxAttempts { .. } => Operation::SetMaxAttempts,
            Change::EditPayload { .. } => Operation::EditPayload,
            Change::Hold => Operation::Hold,
            Change::Release => Operation::Release,
        }
    }

    /// Whether tasks this change touches may become due, so idle workers should look.
    pub fn may_make_due(&self) -> bool {
        matches!(
            self,
            Change::Retry | Change::Release | Change::Reschedule { .. }
        )
    }

    /// What this change does, at `now`, to a task in state `from`; `None` when the change
    /// may not start from there.
    pub fn effect(&self, from: TaskState, now: DateTime<Utc>) -> Option<ChangeEffect> {
        if !self.operation().can_apply(from) {
            return None;
        }
        let keep = ChangeEffect::default();
        Some(match self {
            Change::Cancel => ChangeEffect {
                state: Some(TaskState::Cancelled),
                finished_at: Some(Some(now)),
                end_lease: true,
                ends_attempt: (from == TaskState::Running)
                    .then_some((AttemptOutcome::Cancelled, "cancelled by operator")),
                ..keep
            },
            Change::Retry => ChangeEffect {
                state: Some(TaskState::Pending),
                reset_attempts: matches!(from, TaskState::Failed | TaskState::Cancelled),
                run_at: Some(now),
                finished_at: Some(None),
                ..keep
            },
            Change::Reschedule { run_at } => ChangeEffect {
                run_at: Some(*run_at),
                ..keep
            },
            Change::SetPriority { priority } => ChangeEffect {
                priority: Some(*priority),
                ..keep
            },
            Change::SetMaxAttempts { max_attempts } => ChangeEffect {
                max_attempts: Some(*max_attempts),
                ..keep
            },
            Change::EditPayload { payload } => ChangeEffect {
                payload: Some(payload.clone()),
                ..keep
            },
            Change::Hold => ChangeEffect {
                state: Some(TaskState::Held),
                ..keep
            },
            Change::Release => ChangeEffect {
                state: Some(TaskState::Pending),
                ..keep
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn now() -> DateTime<Utc> {
        Utc.timestamp_opt(1_800_000_000, 0).unwrap()
    }

    fn every_change() -> Vec<Change> {
        vec![
            Change::Cancel,
            Change::Retry,
            Change::Reschedule { run_at: now() },
            Change::SetPriority { priority: 3 },
            Change::SetMaxAttempts { max_attempts: 4 },
            Change::EditPayload {
                payload: serde_json::json!({"a": 1}),
            },
            Change::Hold,
            Change::Release,
        ]
    }

    #[test]
    fn an_effect_exists_exactly_where_the_state_machine_allows_the_change() {
        for change in every_change() {
            for from in TaskState::ALL {
                assert_eq!(
                    change.effect(from, now()).is_some(),
                    change.operation().can_apply(from),
                    "{change:?} from {from}"
                );
            }
        }
    }

    #[test]
    fn every_new_state_is_one_the_state_machine_leads_to() {
        for change in every_change() {
            for from in TaskState::ALL {
                let Some(effect) = change.effect(from, now()) else {
                    continue;
                };
                let to = effect.state.unwrap_or(from);
                assert!(
                    change.operation().leads_to(from).contains(&to),
                    "{change:?}: {from} -> {to}"
                );
            }
        }
    }

    #[test]
    fn retry_gives_fresh_attempts_only_to_finished_tasks() {
        let failed = Change::Retry.effect(TaskState::Failed, now()).unwrap();
        assert!(failed.reset_attempts);
        assert_eq!(failed.finished_at, Some(None));
        assert_eq!(failed.run_at, Some(now()));
        let pending = Change::Retry.effect(TaskState::Pending, now()).unwrap();
        assert!(!pending.reset_attempts);
    }

    #[test]
    fn only_a_cancel_of_a_running_task_ends_an_attempt() {
        for change in every_change() {
            for from in TaskState::ALL {
                let ends = change
                    .effect(from, now())
                    .and_then(|e| e.ends_attempt)
                    .is_some();
                assert_eq!(
                    ends,
                    change == Change::Cancel && from == TaskState::Running,
                    "{change:?} from {from}"
                );
            }
        }
        let cancel = Change::Cancel.effect(TaskState::Pending, now()).unwrap();
        assert!(cancel.end_lease);
        assert_eq!(cancel.finished_at, Some(Some(now())));
    }
}
