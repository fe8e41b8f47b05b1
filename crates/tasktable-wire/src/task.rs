//! A task, its attempts and its runs, as the API shows them; a task's target and backoff,
//! as requests write them too.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::runs::Run;
use tasktable_core::{Attempt, Backoff, Target, Task, TaskId, TaskState};

/// Who may run a task, as the API writes it: `{"workers": [...]}` or `{"groups": [...]}`
/// (exactly one of the two); `null` in its place means any worker.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "TargetFields", into = "TargetFields")]
pub struct TargetSpec(pub Target);

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct TargetFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    workers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    groups: Option<Vec<String>>,
}

impl TryFrom<TargetFields> for TargetSpec {
    type Error = &'static str;
    fn try_from(f: TargetFields) -> Result<Self, Self::Error> {
        match (f.workers, f.groups) {
            (Some(w), None) => Ok(TargetSpec(Target::Workers(w))),
            (None, Some(g)) => Ok(TargetSpec(Target::Groups(g))),
            _ => Err("a target names either workers or groups (exactly one of the two), or is null for any worker"),
        }
    }
}

impl From<TargetSpec> for TargetFields {
    fn from(t: TargetSpec) -> Self {
        let (workers, groups) = match t.0 {
            Target::Any => (None, None),
            Target::Workers(w) => (Some(w), None),
            Target::Groups(g) => (None, Some(g)),
        };
        TargetFields { workers, groups }
    }
}

impl TargetSpec {
    /// Core's target: any worker for none. The names are checked by the store.
    pub fn into_target(spec: Option<TargetSpec>) -> Target {
        spec.map_or(Target::Any, |s| s.0)
    }

    /// `None` (null) for any worker.
    pub fn view(target: Target) -> Option<TargetSpec> {
        (!target.is_any()).then_some(TargetSpec(target))
    }
}

/// Retry delays: `initial_ms * multiplier^(attempt-1)`, capped at `max_ms`, ± `jitter`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackoffSpec {
    #[serde(deserialize_with = "crate::whole::number")]
    pub initial_ms: u64,
    pub multiplier: f64,
    #[serde(deserialize_with = "crate::whole::number")]
    pub max_ms: u64,
    pub jitter: f64,
}

impl From<Backoff> for BackoffSpec {
    fn from(b: Backoff) -> Self {
        BackoffSpec {
            initial_ms: millis(b.initial),
            multiplier: b.multiplier,
            max_ms: millis(b.max),
            jitter: b.jitter,
        }
    }
}

impl From<BackoffSpec> for Backoff {
    fn from(b: BackoffSpec) -> Self {
        Backoff {
            initial: Duration::from_millis(b.initial_ms),
            multiplier: b.multiplier,
            max: Duration::from_millis(b.max_ms),
            jitter: b.jitter,
        }
    }
}

/// A duration in whole milliseconds, as the API writes it.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SubmittedView {
    pub id: TaskId,
    /// `false` when a task with the same idempotency key already existed; it is returned
    /// as it is and the request's values were not applied.
    pub created: bool,
}

/// A task as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskView {
    pub id: TaskId,
    pub kind: String,
    pub queue: String,
    pub state: TaskState,
    pub payload: Value,
    pub result: Option<Value>,
    pub checkpoint: Option<Value>,
    pub progress: Option<Value>,
    pub key: Option<String>,
    pub idempotency_key: Option<String>,
    pub priority: i32,
    pub run_at: DateTime<Utc>,
    pub attempt: u32,
    pub max_attempts: u32,
    pub backoff: BackoffSpec,
    pub timeout_ms: Option<u64>,
    pub lease_token: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub worker_id: Option<String>,
    pub worker_host: Option<String>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The schedule that fired the task, and the slot it was fired for.
    #[serde(default)]
    pub schedule_id: Option<i64>,
    #[serde(default)]
    pub slot_at: Option<DateTime<Utc>>,
    /// Who may run it; null for any worker.
    #[serde(default)]
    pub target: Option<TargetSpec>,
    /// How long a retry waits for the worker of the previous attempt (`worker_id`).
    #[serde(default)]
    pub affinity_ms: Option<u64>,
    /// While set, the task waits for that worker until then (or until it is gone).
    #[serde(default)]
    pub affinity_until: Option<DateTime<Utc>>,
    /// A multi-run task's request and counters; null for a task that runs once.
    #[serde(default)]
    pub copies: Option<u32>,
    #[serde(default)]
    pub at_once: Option<u32>,
    #[serde(default)]
    pub repeat: Option<bool>,
    /// A broadcast that workers joining while it is open get too.
    #[serde(default)]
    pub joining: Option<bool>,
    #[serde(default)]
    pub max_failed_runs: Option<u32>,
    #[serde(default)]
    pub runs_active: Option<u32>,
    #[serde(default)]
    pub runs_succeeded: Option<u32>,
    #[serde(default)]
    pub runs_failed: Option<u32>,
    /// Who submitted it, where recorded.
    #[serde(default)]
    pub created_by: Option<tasktable_core::Actor>,
    /// The W3C `traceparent` of its submitter, which its attempts continue.
    #[serde(default)]
    pub traceparent: Option<tasktable_core::trace::TraceParent>,
}

impl TaskView {
    /// The error the task stands at: `last_error` unless the task has succeeded since
    /// ([`tasktable_core::TaskState::has_current_error`]).
    pub fn current_error(&self) -> Option<&str> {
        self.last_error
            .as_deref()
            .filter(|_| self.state.has_current_error())
    }
}

impl From<Task> for TaskView {
    fn from(t: Task) -> Self {
        TaskView {
            id: t.id,
            kind: t.kind,
            queue: t.queue,
            state: t.state,
            payload: t.payload,
            result: t.result,
            checkpoint: t.checkpoint,
            progress: t.progress,
            key: t.key,
            idempotency_key: t.idempotency_key,
            priority: t.priority,
            run_at: t.run_at,
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            backoff: t.backoff.into(),
            timeout_ms: t.timeout.map(millis),
            lease_token: t.lease_token,
            lease_expires_at: t.lease_expires_at,
            deadline_at: t.deadline_at,
            worker_id: t.worker_id,
            worker_host: t.worker_host,
            last_error: t.last_error,
            created_at: t.created_at,
            updated_at: t.updated_at,
            started_at: t.started_at,
            finished_at: t.finished_at,
            schedule_id: t.schedule_id,
            slot_at: t.slot_at,
            target: TargetSpec::view(t.target),
            affinity_ms: t.affinity.map(millis),
            affinity_until: t.affinity_until,
            copies: t.runs.map(|r| r.copies),
            at_once: t.runs.map(|r| r.at_once),
            repeat: t.runs.map(|r| r.repeat),
            joining: t.runs.map(|r| r.joining),
            max_failed_runs: t.runs.and_then(|r| r.max_failed),
            runs_active: t.run_counts.map(|c| c.active),
            runs_succeeded: t.run_counts.map(|c| c.succeeded),
            runs_failed: t.run_counts.map(|c| c.failed),
            created_by: t.created_by,
            traceparent: t.traceparent,
        }
    }
}

/// One reason a pending task waits (`waiting` beside a task's page): what a program may
/// test, and the words a person reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaitingView {
    /// A code that stays the same across versions
    /// ([`WaitReason::code`](tasktable_core::waiting::WaitReason::code)).
    pub reason: String,
    /// The reason in plain words.
    pub text: String,
}

impl From<&tasktable_core::waiting::WaitReason> for WaitingView {
    fn from(r: &tasktable_core::waiting::WaitReason) -> Self {
        WaitingView {
            reason: r.code().to_owned(),
            text: r.to_string(),
        }
    }
}

/// One run of a multi-run task.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunView {
    pub run: u32,
    pub worker_id: String,
    pub worker_host: Option<String>,
    pub state: String,
    pub lease_token: i64,
    pub lease_expires_at: Option<DateTime<Utc>>,
    pub deadline_at: Option<DateTime<Utc>>,
    pub checkpoint: Option<Value>,
    pub progress: Option<Value>,
    pub result: Option<Value>,
    pub error: Option<String>,
    pub resumed_from: Option<u32>,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
}

impl From<Run> for RunView {
    fn from(r: Run) -> Self {
        RunView {
            run: r.run,
            worker_id: r.worker_id,
            worker_host: r.worker_host,
            state: r.state.as_str().to_owned(),
            lease_token: r.lease_token,
            lease_expires_at: r.lease_expires_at,
            deadline_at: r.deadline_at,
            checkpoint: r.checkpoint,
            progress: r.progress,
            result: r.result,
            error: r.error,
            resumed_from: r.resumed_from,
            started_at: r.started_at,
            finished_at: r.finished_at,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptView {
    pub attempt: u32,
    pub worker_id: Option<String>,
    pub worker_host: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: DateTime<Utc>,
    pub outcome: String,
    pub error: Option<String>,
}

impl From<Attempt> for AttemptView {
    fn from(a: Attempt) -> Self {
        AttemptView {
            attempt: a.attempt,
            worker_id: a.worker_id,
            worker_host: a.worker_host,
            started_at: a.started_at,
            finished_at: a.finished_at,
            outcome: a.outcome.as_str().to_owned(),
            error: a.error,
        }
    }
}
