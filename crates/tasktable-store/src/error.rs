use crate::schedule::ScheduleRef;
use tasktable_core::schedule::InvalidSchedule;
use tasktable_core::task::InvalidTask;
use tasktable_core::{Operation, TaskId, TaskState};

pub type StoreResult<T> = Result<T, StoreError>;

/// What can go wrong in a store call. Everything except [`StoreError::Database`] and
/// [`StoreError::Migration`] is the caller's mistake and changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("task {0} not found")]
    NotFound(TaskId),
    #[error("cannot {op} task {id}: it is {state}; {op} applies to {allowed}")]
    IllegalTransition {
        id: TaskId,
        op: Operation,
        state: TaskState,
        allowed: AllowedStates,
    },
    #[error("batch {id}: {refusal}")]
    BatchRefused {
        id: TaskId,
        refusal: tasktable_core::batch::BatchRefusal,
    },
    #[error("invalid task #{index} in the request: {source}")]
    InvalidTask {
        index: usize,
        #[source]
        source: InvalidTask,
    },
    #[error("{0}")]
    InvalidInput(String),
    #[error("schedule {0} not found")]
    ScheduleNotFound(ScheduleRef),
    #[error("a schedule named {0:?} exists")]
    ScheduleExists(String),
    #[error("invalid schedule: {0}")]
    InvalidSchedule(#[from] InvalidSchedule),
    #[error("payload of task #{index} is {size} bytes; the limit is {limit}")]
    PayloadTooLarge {
        index: usize,
        size: usize,
        limit: usize,
    },
    #[error("database migration failed: {0}")]
    Migration(String),
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    pub fn illegal(id: TaskId, op: Operation, state: TaskState) -> Self {
        StoreError::IllegalTransition {
            id,
            op,
            state,
            allowed: AllowedStates(op.allowed_from()),
        }
    }

    pub fn database(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Database(Box::new(err))
    }

    /// True when the error is the caller's to fix (bad input, wrong state, unknown id).
    pub fn is_client_error(&self) -> bool {
        !matches!(self, StoreError::Database(_) | StoreError::Migration(_))
    }
}

/// The states an operation may start from, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllowedStates(pub &'static [TaskState]);

impl std::fmt::Display for AllowedStates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.0.iter().map(|s| s.as_str()).collect();
        f.write_str(&names.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn illegal_transition_says_what_would_be_allowed() {
        let msg = StoreError::illegal(7, Operation::Release, TaskState::Pending).to_string();
        assert_eq!(
            msg,
            "cannot release task 7: it is pending; release applies to held"
        );
    }
}
