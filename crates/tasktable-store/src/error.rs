use crate::schedule::ScheduleRef;
use tasktable_core::schedule::InvalidSchedule;
use tasktable_core::task::InvalidTask;
use tasktable_core::{Operation, TaskId, TaskState};

/// What every store call returns: its answer, or why it did not happen.
pub type StoreResult<T> = Result<T, StoreError>;

/// What can go wrong in a store call. Everything except [`StoreError::Database`] and
/// [`StoreError::Migration`] is the caller's mistake and changed nothing.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// No task (or, for a batch call, no batch) has this id. Reads that look a task up
    /// answer `None` instead.
    #[error("task {0} not found")]
    NotFound(TaskId),
    /// An operator's change to one task ([`Target::Id`](crate::Target::Id)) in a state
    /// the operation may not start from ([`Operation::allowed_from`]). A change to a
    /// filter skips such tasks instead.
    #[error("cannot {op} task {id}: {}; {op} applies to {allowed}", state.described())]
    IllegalTransition {
        /// The task the change named.
        id: TaskId,
        /// What the change asked for.
        op: Operation,
        /// The state the store found the task in, under the change's lock.
        state: TaskState,
        /// The states `op` may start from, for the message.
        allowed: AllowedStates,
    },
    /// A batch action or edit that does not apply to the batch as it stands
    /// ([`Store::batch_control`](crate::Store::batch_control),
    /// [`Store::batch_update`](crate::Store::batch_update)); nothing changed.
    #[error("batch {id}: {refusal}")]
    BatchRefused {
        /// The batch's task.
        id: TaskId,
        /// Why core's lifecycle refuses it.
        refusal: tasktable_core::batch::BatchRefusal,
    },
    /// A task of a submit that fails core's checks
    /// ([`NewTask::validate`](tasktable_core::NewTask::validate)): the whole call is
    /// refused, and no task of it is created.
    #[error("invalid task #{index} in the request: {source}")]
    InvalidTask {
        /// The task's place in the call's `tasks`, from 0.
        index: usize,
        /// What is wrong with it.
        #[source]
        source: InvalidTask,
    },
    /// Parameters refused before anything was read or written: a limit out of its range,
    /// text holding NUL, a value core's bounds refuse. The text says which, in words fit
    /// for the caller's user.
    #[error("{0}")]
    InvalidInput(String),
    /// No schedule has this id or name.
    #[error("schedule {0} not found")]
    ScheduleNotFound(ScheduleRef),
    /// The name is another schedule's: a create with
    /// [`OnExisting::Refuse`](crate::OnExisting::Refuse), or an edit that renames.
    #[error("a schedule named {0:?} exists")]
    ScheduleExists(String),
    /// A schedule's spec, as created or as an edit leaves it, fails core's checks (its
    /// name, recurrence, template or missed-slot policy).
    #[error("invalid schedule: {0}")]
    InvalidSchedule(#[from] InvalidSchedule),
    /// A worker call bound to a token that may not act as the worker id, or that would
    /// make the token hold more live workers than it may; nothing changed.
    #[error("{0}")]
    WorkerRefused(#[from] tasktable_core::ownership::WorkerRefusal),
    /// A JSON document larger than the store's
    /// [`Limits::max_payload_bytes`](crate::Limits::max_payload_bytes): a payload
    /// submitted or edited, a result, a checkpoint or progress. The whole call is refused.
    #[error("payload of task #{index} is {size} bytes; the limit is {limit}")]
    PayloadTooLarge {
        /// The item of the call it belongs to, from 0 (0 in a call of one document).
        index: usize,
        /// Its size, in bytes of JSON.
        size: usize,
        /// The store's limit, in bytes.
        limit: usize,
    },
    /// [`Store::migrate`](crate::Store::migrate) failed: a migration's script failed
    /// (the text names it), or the database is at a schema version newer than this
    /// tasktable knows.
    #[error("database migration failed: {0}")]
    Migration(String),
    /// The database or the connection failed, a row could not be read, or no turn at a
    /// [`Shielded`](crate::Shielded) store came within
    /// [`TURN_WAIT`](crate::shielded::TURN_WAIT). Not the caller's mistake. A write that
    /// fails so may still have committed (its answer lost on the way), or part of it may
    /// have (a bulk change keeps the chunks it committed). When the cause is an
    /// [`Unreachable`] database, [`StoreError::is_unreachable`] says so.
    #[error("database error: {0}")]
    Database(#[source] Box<dyn std::error::Error + Send + Sync>),
}

impl StoreError {
    /// [`StoreError::IllegalTransition`] for task `id`, found in `state`, which `op`
    /// may not start from; the allowed states come from `op`.
    pub fn illegal(id: TaskId, op: Operation, state: TaskState) -> Self {
        StoreError::IllegalTransition {
            id,
            op,
            state,
            allowed: AllowedStates(op.allowed_from()),
        }
    }

    /// [`StoreError::Database`] wrapping a driver's error.
    pub fn database(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Database(Box::new(err))
    }

    /// [`StoreError::Database`] for a driver's error that says the database could not be
    /// reached ([`Unreachable`]).
    pub fn unreachable(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        StoreError::Database(Box::new(Unreachable(Box::new(err))))
    }

    /// True when the error is the caller's to fix (bad input, wrong state, unknown id).
    pub fn is_client_error(&self) -> bool {
        !matches!(self, StoreError::Database(_) | StoreError::Migration(_))
    }

    /// True when the call failed because the database could not be reached
    /// ([`Unreachable`]). A [`Shielded`](crate::Shielded) store logs such an outage once,
    /// when it begins, and once more when a call succeeds again; whoever retries the call
    /// need not log each failure.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, StoreError::Database(e) if e.is::<Unreachable>())
    }
}

/// The cause of a [`StoreError::Database`] when the database could not be reached: the
/// connection was refused, reset or cut, the server is shutting down or starting up, no
/// connection could be had within the pool's wait, or no turn at a
/// [`Shielded`](crate::Shielded) store within
/// [`TURN_WAIT`](crate::shielded::TURN_WAIT). The backends decide which of their driver's
/// errors these are, in one place (`tasktable_sqlx::store_error` for the sqlx-driven
/// ones); everything else about the error, its text included, is the driver's.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct Unreachable(Box<dyn std::error::Error + Send + Sync>);

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
    fn an_unreachable_database_reads_as_any_database_error_and_says_so() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let text = refused.to_string();
        let e = StoreError::unreachable(refused);
        assert!(e.is_unreachable());
        assert!(!e.is_client_error());
        assert_eq!(e.to_string(), format!("database error: {text}"));
        let other = StoreError::database(std::io::Error::other("no such table"));
        assert!(!other.is_unreachable());
        assert!(!StoreError::NotFound(7).is_unreachable());
    }

    #[test]
    fn illegal_transition_says_what_would_be_allowed() {
        let msg = StoreError::illegal(7, Operation::Release, TaskState::Pending).to_string();
        assert_eq!(
            msg,
            "cannot release task 7: it is pending; release applies to held"
        );
    }
}
