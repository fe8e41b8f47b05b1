use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tasktable_core::{TaskId, TaskState};

/// Which tasks a query or a bulk change covers. Empty fields match everything; set fields
/// must all match. As JSON, only the set fields are written.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TaskFilter {
    /// The queue, matched exactly (case-sensitive, as every text here).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub queue: Option<String>,
    /// The kind: the handler that runs the task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Any of these states.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub states: Vec<TaskState>,
    /// The business key (`task_key`), which many tasks may share.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// The idempotency key, which at most one task holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Submitted at or after this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_after: Option<DateTime<Utc>>,
    /// Submitted before this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub created_before: Option<DateTime<Utc>>,
    /// Last submitted, claimed, ended or changed by an operator at or after this time
    /// (`updated_at`: renewals and checkpoints leave it alone).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_after: Option<DateTime<Utc>>,
    /// Last submitted, claimed, ended or changed by an operator before this time.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_before: Option<DateTime<Utc>>,
    /// Case-sensitive substring of `last_error`, in tasks whose error is current (not
    /// succeeded since: [`TaskState::has_current_error`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error_contains: Option<String>,
    /// Fired by this schedule.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub schedule_id: Option<i64>,
    /// Ids from this one on: with [`TaskFilter::id_below`], a window of ids, by which a
    /// bulk change is applied a step at a time. Not read from or written to JSON: a
    /// request names a step by its `limit` and `after`, and an event's filter is the one
    /// asked for.
    #[serde(skip)]
    pub id_at_least: Option<TaskId>,
    /// Ids below this one (see [`TaskFilter::id_at_least`]).
    #[serde(skip)]
    pub id_below: Option<TaskId>,
}

impl TaskFilter {
    /// Narrowed to the queue `queue`.
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = Some(queue.into());
        self
    }
    /// Narrowed to the kind `kind`.
    pub fn kind(mut self, kind: impl Into<String>) -> Self {
        self.kind = Some(kind.into());
        self
    }
    /// `state` added to the states matched (a task in any of them matches).
    pub fn state(mut self, state: TaskState) -> Self {
        self.states.push(state);
        self
    }
    /// Narrowed to the business key `key`.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    /// Narrowed to tasks whose current error (`last_error`, unless they succeeded since)
    /// contains `text`.
    pub fn error_contains(mut self, text: impl Into<String>) -> Self {
        self.error_contains = Some(text.into());
        self
    }
    /// Narrowed to the tasks the schedule with id `schedule_id` fired.
    pub fn schedule(mut self, schedule_id: i64) -> Self {
        self.schedule_id = Some(schedule_id);
        self
    }

    /// Refuses text no stored value can hold: NUL, which PostgreSQL cannot even compare
    /// against, so a filter with one fails there rather than matching nothing. Refused on
    /// every backend alike.
    pub fn validate(&self) -> crate::StoreResult<()> {
        let texts = [
            ("queue", &self.queue),
            ("kind", &self.kind),
            ("key", &self.key),
            ("idempotency_key", &self.idempotency_key),
            ("error_contains", &self.error_contains),
        ];
        for (field, text) in texts {
            refuse_nul(field, text.as_deref())?;
        }
        Ok(())
    }
}

/// Refuses a filter text that holds NUL (see [`TaskFilter::validate`]).
pub(crate) fn refuse_nul(field: &str, text: Option<&str>) -> crate::StoreResult<()> {
    if text.is_some_and(|t| t.contains('\0')) {
        return Err(crate::StoreError::InvalidInput(format!(
            "{field} contains a NUL character (\\u0000), which no stored text holds; tasktable refuses it on every backend"
        )));
    }
    Ok(())
}

/// One task by id, or every task a filter matches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[allow(
    clippy::large_enum_variant,
    reason = "made once per operator change and moved a few times; a box would buy nothing"
)]
pub enum Target {
    /// One task: an id that does not exist, or a task in a state the change may not start
    /// from, is an error ([`StoreError::NotFound`](crate::StoreError::NotFound),
    /// [`StoreError::IllegalTransition`](crate::StoreError::IllegalTransition)).
    Id(TaskId),
    /// Every task the filter matches in a state the change may start from; the others
    /// are skipped. Runs in chunks ([`bulk`](crate::bulk) says what that guarantees).
    Filter(TaskFilter),
}
