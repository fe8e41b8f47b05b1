//! The task state machine: every state, every operation, and which states each operation
//! may start from. Nothing else decides whether a transition is legal: the store applies
//! these sets to the rows it locked (`tasktable_store::select_for_update` for one task, the
//! states in each chunk's `WHERE` clause for a bulk change), and a worker's transitions
//! start only from `running`, which every fenced write requires.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// Where a task is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Created, waits for an explicit release before it can run.
    Held,
    /// Waits for `run_at`; claimable once it has passed.
    Pending,
    /// Leased by a worker.
    Running,
    /// Finished with success. Final.
    Succeeded,
    /// Attempts exhausted or a permanent error: the dead-letter state, retryable by hand.
    Failed,
    /// Cancelled by an operator or by its handler; retryable by hand.
    Cancelled,
}

impl TaskState {
    /// Every state, in the order declared, which is also the order `Ord` gives.
    pub const ALL: [TaskState; 6] = [
        TaskState::Held,
        TaskState::Pending,
        TaskState::Running,
        TaskState::Succeeded,
        TaskState::Failed,
        TaskState::Cancelled,
    ];

    /// The name in the `state` column and the API (`held`, `pending`, ...), the same as
    /// serde writes; [`FromStr`] reads it back.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskState::Held => "held",
            TaskState::Pending => "pending",
            TaskState::Running => "running",
            TaskState::Succeeded => "succeeded",
            TaskState::Failed => "failed",
            TaskState::Cancelled => "cancelled",
        }
    }

    /// A finished task: no worker will touch it again unless an operator retries it.
    pub fn is_finished(self) -> bool {
        matches!(
            self,
            TaskState::Succeeded | TaskState::Failed | TaskState::Cancelled
        )
    }

    /// Where a task in this state stands, in words for a message: `it is pending`, `it
    /// has succeeded`, `it was cancelled`.
    pub fn described(self) -> &'static str {
        match self {
            TaskState::Held => "it is held",
            TaskState::Pending => "it is pending",
            TaskState::Running => "it is running",
            TaskState::Succeeded => "it has succeeded",
            TaskState::Failed => "it has failed",
            TaskState::Cancelled => "it was cancelled",
        }
    }

    /// Whether a task's `last_error` still says something about it in this state: not
    /// once it has succeeded, when the error is an earlier attempt's and stays only in
    /// the attempts' history. Views show `last_error` as the task's error only then, and
    /// a filter on the error matches only such tasks.
    pub fn has_current_error(self) -> bool {
        self != TaskState::Succeeded
    }
}

impl fmt::Display for TaskState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no [`TaskState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown task state {0:?} (expected one of held, pending, running, succeeded, failed, cancelled)")]
pub struct UnknownState(
    /// The text as given.
    pub String,
);

impl FromStr for TaskState {
    type Err = UnknownState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        TaskState::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| UnknownState(s.to_owned()))
    }
}

/// Everything that moves a task from one state to another, or edits it in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    /// A worker takes a due task.
    Claim,
    /// The worker's handler finished, or the rescuer took the task back.
    Finish,
    /// Operator: stop a task; a running handler is signalled.
    Cancel,
    /// Operator: run a failed or cancelled task again (with a fresh set of attempts), or
    /// run a waiting task now.
    Retry,
    /// Operator: change `run_at`.
    Reschedule,
    /// Operator: change priority.
    SetPriority,
    /// Operator: change `max_attempts`.
    SetMaxAttempts,
    /// Operator: replace the payload. Never while a worker holds the task.
    EditPayload,
    /// Operator: change who may run the task. A running task whose worker the new target
    /// leaves out goes back to pending, its attempt given back.
    SetTarget,
    /// Operator: keep a pending task from running.
    Hold,
    /// Operator: let a held task run.
    Release,
}

impl Operation {
    /// Every operation, in the order declared.
    pub const ALL: [Operation; 11] = [
        Operation::Claim,
        Operation::Finish,
        Operation::Cancel,
        Operation::Retry,
        Operation::Reschedule,
        Operation::SetPriority,
        Operation::SetMaxAttempts,
        Operation::EditPayload,
        Operation::SetTarget,
        Operation::Hold,
        Operation::Release,
    ];

    /// The operations an operator asks for by name (in the API's paths, the dashboard's
    /// forms and the CLI's verbs), in the order the API documents them.
    pub const OPERATOR: [Operation; 9] = [
        Operation::Cancel,
        Operation::Retry,
        Operation::Hold,
        Operation::Release,
        Operation::Reschedule,
        Operation::SetPriority,
        Operation::SetMaxAttempts,
        Operation::EditPayload,
        Operation::SetTarget,
    ];

    /// An operator's operation's name as requests write it (`set-priority`); `None` for
    /// the worker's claim and finish.
    pub fn request_name(self) -> Option<&'static str> {
        Some(match self {
            Operation::Claim | Operation::Finish => return None,
            Operation::Cancel => "cancel",
            Operation::Retry => "retry",
            Operation::Hold => "hold",
            Operation::Release => "release",
            Operation::Reschedule => "reschedule",
            Operation::SetPriority => "set-priority",
            Operation::SetMaxAttempts => "set-max-attempts",
            Operation::EditPayload => "edit-payload",
            Operation::SetTarget => "set-target",
        })
    }

    /// The operator's operation a request names, if it names one.
    pub fn requested(name: &str) -> Option<Operation> {
        Operation::OPERATOR
            .into_iter()
            .find(|op| op.request_name() == Some(name))
    }

    /// The states this operation may start from. This is the state machine.
    pub fn allowed_from(self) -> &'static [TaskState] {
        use TaskState::*;
        match self {
            Operation::Claim => &[Pending],
            Operation::Finish => &[Running],
            Operation::Cancel => &[Held, Pending, Running],
            Operation::Retry => &[Pending, Failed, Cancelled],
            Operation::Reschedule => &[Held, Pending],
            Operation::SetPriority | Operation::SetMaxAttempts => &[Held, Pending, Running],
            Operation::EditPayload => &[Held, Pending, Failed, Cancelled],
            Operation::SetTarget => &[Held, Pending, Running, Failed, Cancelled],
            Operation::Hold => &[Pending],
            Operation::Release => &[Held],
        }
    }

    /// The states this operation may lead to, given where it starts.
    pub fn leads_to(self, from: TaskState) -> &'static [TaskState] {
        use TaskState::*;
        if !self.allowed_from().contains(&from) {
            return &[];
        }
        match self {
            Operation::Claim => &[Running],
            // A retryable error goes back to pending, or to failed once attempts run out;
            // snooze and interruption go back to pending without spending an attempt.
            Operation::Finish => &[Succeeded, Pending, Failed, Cancelled],
            Operation::Cancel => &[Cancelled],
            Operation::Retry => &[Pending],
            // A worker the new target leaves out is stopped and the task waits again.
            Operation::SetTarget if from == Running => &[Running, Pending],
            Operation::Reschedule
            | Operation::SetPriority
            | Operation::SetMaxAttempts
            | Operation::EditPayload
            | Operation::SetTarget => match from {
                Held => &[Held],
                Pending => &[Pending],
                Running => &[Running],
                Failed => &[Failed],
                Cancelled => &[Cancelled],
                Succeeded => &[],
            },
            Operation::Hold => &[Held],
            Operation::Release => &[Pending],
        }
    }

    /// Whether this operation may start from `from`: the test a store applies to each
    /// row it locked.
    pub fn can_apply(self, from: TaskState) -> bool {
        self.allowed_from().contains(&from)
    }

    /// The name in snake case (`set_priority`), as serde writes it and errors show it;
    /// requests name an operator's operation by [`Operation::request_name`] instead.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Claim => "claim",
            Operation::Finish => "finish",
            Operation::Cancel => "cancel",
            Operation::Retry => "retry",
            Operation::Reschedule => "reschedule",
            Operation::SetPriority => "set_priority",
            Operation::SetMaxAttempts => "set_max_attempts",
            Operation::EditPayload => "edit_payload",
            Operation::SetTarget => "set_target",
            Operation::Hold => "hold",
            Operation::Release => "release",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_operators_operation_has_one_request_name_and_is_found_by_it() {
        for op in Operation::OPERATOR {
            let name = op
                .request_name()
                .expect("an operator's operation has a name");
            assert_eq!(Operation::requested(name), Some(op), "{name}");
        }
        for op in [Operation::Claim, Operation::Finish] {
            assert_eq!(op.request_name(), None);
        }
        assert_eq!(Operation::requested("set_priority"), None);
        assert_eq!(Operation::requested("claim"), None);
    }

    #[test]
    fn state_names_round_trip() {
        for st in TaskState::ALL {
            assert_eq!(st.as_str().parse::<TaskState>().unwrap(), st);
            assert_eq!(
                serde_json::to_string(&st).unwrap(),
                format!("\"{}\"", st.as_str())
            );
        }
        assert!("runnning".parse::<TaskState>().is_err());
    }

    #[test]
    fn succeeded_is_final_for_every_operation() {
        for op in Operation::ALL {
            assert!(!op.can_apply(TaskState::Succeeded), "{op} from succeeded");
        }
    }

    #[test]
    fn only_claim_enters_running_and_only_finish_cancel_or_a_new_target_leaves_it() {
        for op in Operation::ALL {
            for from in TaskState::ALL {
                let to = op.leads_to(from);
                if from != TaskState::Running && to.contains(&TaskState::Running) {
                    assert_eq!(op, Operation::Claim);
                }
                if from == TaskState::Running && to.iter().any(|s| *s != TaskState::Running) {
                    assert!(
                        matches!(
                            op,
                            Operation::Finish | Operation::Cancel | Operation::SetTarget
                        ),
                        "{op}"
                    );
                }
            }
        }
    }

    #[test]
    fn payload_is_never_edited_under_a_worker() {
        assert!(!Operation::EditPayload.can_apply(TaskState::Running));
    }

    #[test]
    fn leads_to_is_empty_exactly_when_not_allowed() {
        for op in Operation::ALL {
            for from in TaskState::ALL {
                assert_eq!(
                    op.can_apply(from),
                    !op.leads_to(from).is_empty(),
                    "{op} {from}"
                );
            }
        }
    }

    #[test]
    fn every_state_is_reachable_from_pending() {
        let mut seen = vec![TaskState::Pending];
        let mut i = 0;
        while i < seen.len() {
            for op in Operation::ALL {
                for to in op.leads_to(seen[i]) {
                    if !seen.contains(to) {
                        seen.push(*to);
                    }
                }
            }
            i += 1;
        }
        for st in TaskState::ALL {
            assert!(seen.contains(&st), "{st} unreachable");
        }
    }
}
