//! What an operator may change about a task, and what each change does to a row, as
//! values: the stores write these values and decide nothing themselves.

use crate::outcome::AttemptOutcome;
use crate::state::{Operation, TaskState};
use crate::target::Target;
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
    /// Moves when a waiting task becomes due.
    Reschedule {
        /// The new `run_at`; the store keeps it within the years every backend holds
        /// ([`crate::stored::stored_run_at`]).
        run_at: DateTime<Utc>,
    },
    /// Changes where the task stands in claim order; for a running task that counts
    /// from its next claim.
    SetPriority {
        /// The new priority; higher is claimed first, and it may be negative.
        priority: i32,
    },
    /// Changes how many attempts the task may spend. A running attempt that fails is
    /// judged against the new limit ([`crate::outcome::attempts_left`]).
    SetMaxAttempts {
        /// The new limit, 1 to [`MAX_ATTEMPTS_LIMIT`](crate::names::MAX_ATTEMPTS_LIMIT)
        /// (the store refuses others); it may be below the attempts already spent.
        max_attempts: u32,
    },
    /// Replaces the input of a task no worker holds.
    EditPayload {
        /// The new payload, held to a submitted payload's checks and size limit.
        payload: Value,
    },
    /// Who may run the task. A running task whose worker the new target leaves out is
    /// taken from it ([`Change::effect_on`]).
    SetTarget {
        /// Who may run it from now on; [`Target::Any`] lets any worker run it again.
        target: Target,
    },
    /// Keeps a pending task from being claimed until it is released.
    Hold,
    /// Lets a held task be claimed again, at its `run_at` as it was.
    Release,
}

/// What a change does to one row, column by column; `None` leaves a column as it is.
/// `updated_at` is always set to the change's time.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChangeEffect {
    /// The task's new state; `None` keeps it.
    pub state: Option<TaskState>,
    /// `attempt` back to 0: a fresh set of attempts.
    pub reset_attempts: bool,
    /// The new `run_at`: a reschedule's time; for a retry, and for a running task a new
    /// target takes back, the change's own time (due at once).
    pub run_at: Option<DateTime<Utc>>,
    /// `Some(None)` clears `finished_at`.
    pub finished_at: Option<Option<DateTime<Utc>>>,
    /// The lease's expiry and the attempt's deadline cleared: no worker holds the task.
    pub end_lease: bool,
    /// The priority a [`Change::SetPriority`] writes.
    pub priority: Option<i32>,
    /// The limit a [`Change::SetMaxAttempts`] writes.
    pub max_attempts: Option<u32>,
    /// The payload a [`Change::EditPayload`] writes.
    pub payload: Option<Value>,
    /// The new target; `Some(Target::Any)` clears it.
    pub target: Option<Target>,
    /// `attempt` one lower: the running attempt that ends here is not spent.
    pub give_back_attempt: bool,
    /// The running attempt ends here: its history row gets this outcome and error.
    pub ends_attempt: Option<(AttemptOutcome, &'static str)>,
}

/// The worker running a task, as a change of target sees it: its id, and its groups as
/// the registry holds them (none when the registry does not know it).
#[derive(Debug, Clone, Copy)]
pub struct Runner<'a> {
    /// The worker's id, as the task's `worker_id` holds it.
    pub id: &'a str,
    /// The groups the registry holds for it; empty when the registry does not know it.
    pub groups: &'a [String],
}

/// The error a running attempt's history row gets when a new target leaves its worker
/// out.
pub const RETARGETED: &str = "the task's target changed and no longer includes this worker";

impl Change {
    /// The operation of the state machine this change is: it says which states the
    /// change may start from.
    pub fn operation(&self) -> Operation {
        match self {
            Change::Cancel => Operation::Cancel,
            Change::Retry => Operation::Retry,
            Change::Reschedule { .. } => Operation::Reschedule,
            Change::SetPriority { .. } => Operation::SetPriority,
            Change::SetMaxAttempts { .. } => Operation::SetMaxAttempts,
            Change::EditPayload { .. } => Operation::EditPayload,
            Change::SetTarget { .. } => Operation::SetTarget,
            Change::Hold => Operation::Hold,
            Change::Release => Operation::Release,
        }
    }

    /// Whether tasks this change touches may become due, so idle workers should look.
    pub fn may_make_due(&self) -> bool {
        // A new target may take a running task back, or let waiting workers have one.
        matches!(
            self,
            Change::Retry | Change::Release | Change::Reschedule { .. } | Change::SetTarget { .. }
        )
    }

    /// What this change does, at `now`, to a task in state `from` that `runner` runs (if
    /// it is running); `None` when the change may not start from there. Only a new target
    /// looks at the runner: one it leaves out (or one the registry does not know, when the
    /// target names groups) loses the task, which goes back to pending due now, its
    /// attempt given back; the worker learns it at its next fenced write.
    pub fn effect_on(
        &self,
        from: TaskState,
        runner: Option<Runner<'_>>,
        now: DateTime<Utc>,
    ) -> Option<ChangeEffect> {
        let effect = self.effect(from, now)?;
        let Change::SetTarget { target } = self else {
            return Some(effect);
        };
        let allowed = runner.is_some_and(|r| target.allows(r.id, r.groups));
        if from != TaskState::Running || allowed {
            return Some(effect);
        }
        Some(ChangeEffect {
            state: Some(TaskState::Pending),
            run_at: Some(now),
            end_lease: true,
            give_back_attempt: true,
            ends_attempt: Some((AttemptOutcome::Retargeted, RETARGETED)),
            ..effect
        })
    }

    /// What this change does, at `now`, to a task in state `from`; `None` when the change
    /// may not start from there. A new target of a running task is written as it is here;
    /// [`Change::effect_on`] also decides whether its worker may keep it.
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
            Change::SetTarget { target } => ChangeEffect {
                target: Some(target.clone()),
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
            Change::SetTarget {
                target: Target::Groups(vec!["gpu".into()]),
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

    #[test]
    fn a_new_target_takes_a_running_task_only_from_a_worker_it_leaves_out() {
        let gpu = vec!["gpu".to_string()];
        let to_gpu = Change::SetTarget {
            target: Target::Groups(gpu.clone()),
        };
        let member = Runner {
            id: "w1",
            groups: &gpu,
        };
        let outsider = Runner {
            id: "w2",
            groups: &[],
        };
        let kept = to_gpu
            .effect_on(TaskState::Running, Some(member), now())
            .unwrap();
        assert_eq!(kept.state, None);
        assert_eq!(kept.target, Some(Target::Groups(gpu.clone())));
        assert!(kept.ends_attempt.is_none());
        for runner in [Some(outsider), None] {
            let taken = to_gpu.effect_on(TaskState::Running, runner, now()).unwrap();
            assert_eq!(taken.state, Some(TaskState::Pending));
            assert!(taken.give_back_attempt && taken.end_lease);
            assert_eq!(taken.run_at, Some(now()));
            assert_eq!(
                taken.ends_attempt,
                Some((AttemptOutcome::Retargeted, RETARGETED))
            );
            assert!(!AttemptOutcome::Retargeted.spends_attempt());
            assert!(Operation::SetTarget
                .leads_to(TaskState::Running)
                .contains(&TaskState::Pending));
        }
        // Waiting tasks only get the new target, whoever ran them before.
        let pending = to_gpu
            .effect_on(TaskState::Pending, Some(outsider), now())
            .unwrap();
        assert_eq!(pending.state, None);
        assert!(!pending.give_back_attempt);
        // Any other change ignores the runner.
        for change in every_change() {
            if matches!(change, Change::SetTarget { .. }) {
                continue;
            }
            for from in TaskState::ALL {
                assert_eq!(
                    change.effect_on(from, Some(outsider), now()),
                    change.effect(from, now())
                );
            }
        }
    }
}
