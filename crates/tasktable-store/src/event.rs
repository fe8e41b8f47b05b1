//! The event log's rows as the store reads them back, and the audit's filter.
//!
//! What events there are and who can cause them is core's ([`tasktable_core::event`]).
//! A store writes an event in the transaction of the change it records, so an event
//! exists if and only if its change committed.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tasktable_core::{
    Actor, ActorKind, Attempt, AttemptOutcome, EventKind, Lease, Task, TaskId, TaskState,
};

/// One row of the event log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Order of writing; the audit's pages and the live stream's cursor.
    pub id: i64,
    /// The database's clock in the writing transaction.
    pub at: DateTime<Utc>,
    /// What happened.
    pub event: EventKind,
    /// The task it concerns; `None` for a change to a queue, a worker or a schedule.
    pub task_id: Option<TaskId>,
    /// The queue it concerns: the task's, or the queue paused or given a policy.
    pub queue: Option<String>,
    /// The task's kind.
    pub kind: Option<String>,
    /// The schedule it concerns, or that fired the task.
    pub schedule_id: Option<i64>,
    /// The worker drained or released.
    pub worker_id: Option<String>,
    /// Who made the change.
    pub actor: Actor,
    /// What changed: for an edit `{"field": {"old": ..., "new": ...}}`; for the row of a
    /// change to many tasks, its filter and the values it set; `null` when the event says
    /// it all.
    pub detail: Value,
    /// The operator action it belongs to: a change to every task a filter matches
    /// writes one row without a task for the action and one per task changed, all with
    /// the action's key. `None` for a change to one task and for events of other kinds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub action: Option<String>,
    /// On an action's own row: how many tasks it changed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tasks: Option<u64>,
}

/// Which events an audit read wants; every field narrows it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EventFilter {
    /// The actor's name (a token's name, a worker's id, `scheduler`, ...).
    pub actor: Option<String>,
    /// The kind of caller, which says what `actor` names.
    pub actor_kind: Option<ActorKind>,
    /// Events of this task.
    pub task_id: Option<TaskId>,
    /// Events of this queue: of its tasks, or of the queue itself.
    pub queue: Option<String>,
    /// Any of these events; empty: all.
    pub events: Vec<EventKind>,
    /// At or after this time.
    pub from: Option<DateTime<Utc>>,
    /// Before this time.
    pub to: Option<DateTime<Utc>>,
    /// The events of this operator action: its own row and each task's.
    pub action: Option<String>,
}

impl EventFilter {
    /// Whether a read lists the rows an action wrote for each task it changed: only when
    /// it asks for one task's events or one action's. Otherwise an action is its own row
    /// alone, however many tasks it changed.
    pub fn lists_action_tasks(&self) -> bool {
        self.task_id.is_some() || self.action.is_some()
    }
}

/// A page of the log, newest first: `limit` events with ids below `before`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct EventListParams {
    /// Which events.
    pub filter: EventFilter,
    /// Only events with ids below this: the last id of the previous page.
    pub before: Option<i64>,
    /// Events at most, 1 to [`MAX_EVENT_LIST`]; others are refused.
    pub limit: u32,
}

/// Most events one read answers.
pub const MAX_EVENT_LIST: u32 = 1000;

/// One batch of pruning: events that concern no task, older than an age.
#[derive(Debug, Clone, PartialEq)]
pub struct EventPruneParams {
    /// Events written longer ago than this go; at most 100 years
    /// ([`tasktable_core::retention::MAX_AGE`]).
    pub older_than: std::time::Duration,
    /// Events per call at the most (1 to [`crate::MAX_PURGE_BATCH`]).
    pub limit: u32,
    /// What the age is measured back from; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// An event as a change writes it; the store adds the id and the time.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    /// What happened.
    pub event: EventKind,
    /// The task it concerns, if any.
    pub task_id: Option<TaskId>,
    /// The queue it concerns, if any.
    pub queue: Option<String>,
    /// The task's kind, if it concerns a task.
    pub kind: Option<String>,
    /// The schedule it concerns, if any.
    pub schedule_id: Option<i64>,
    /// The worker it concerns, if any.
    pub worker_id: Option<String>,
    /// What changed, as [`Event::detail`] says; `null` when the event says it all.
    pub detail: Value,
    /// The operator action it belongs to ([`Event::action`]).
    pub action: Option<String>,
    /// On an action's own event: how many tasks it changed so far.
    pub tasks: Option<u64>,
}

impl NewEvent {
    /// An event about nothing but itself; fill in what it concerns.
    pub fn new(event: EventKind) -> NewEvent {
        NewEvent {
            event,
            task_id: None,
            queue: None,
            kind: None,
            schedule_id: None,
            worker_id: None,
            detail: Value::Null,
            action: None,
            tasks: None,
        }
    }
}

/// Most lines a task's log keeps; the line that reaches it says that later ones were
/// dropped.
pub const MAX_LOG_LINES: u64 = 1000;
/// Longest line kept, in bytes; a longer one is cut (on a character boundary).
pub const MAX_LOG_LINE_BYTES: usize = 1024;
/// Most lines one call appends.
pub const MAX_LOG_LINES_PER_CALL: usize = 100;

/// Lines a handler appends to its task's log, fenced by its lease.
#[derive(Debug, Clone, PartialEq)]
pub struct LogParams {
    /// The task's (or run's) lease: nothing is appended unless it holds.
    pub lease: Lease,
    /// 1 to [`MAX_LOG_LINES_PER_CALL`] lines, in order; an empty or longer call is
    /// refused.
    pub lines: Vec<String>,
    /// The lines' time; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// One line of a task's log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LogLine {
    /// Order of writing, across every task's log.
    pub id: i64,
    /// The task whose log it is.
    pub task_id: TaskId,
    /// The attempt that wrote it (for a multi-run task, the run).
    pub attempt: u32,
    /// The run that wrote it; `None` for a task that runs once.
    pub run: Option<u32>,
    /// When it was appended.
    pub at: DateTime<Utc>,
    /// The text, cut to [`MAX_LOG_LINE_BYTES`].
    pub line: String,
}

/// One line of a task's timeline: what happened, when, and who did it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TimelineEntry {
    /// When it happened, by the database's clock.
    pub at: DateTime<Utc>,
    /// `submitted`, `claimed`, how an attempt ended (an [`AttemptOutcome`]'s name:
    /// `succeeded`, `error`, `lease_expired`, ...), or an event's name.
    pub event: String,
    /// Who: the worker for a claim and an attempt's end, the rescuer for an attempt
    /// whose lease ran out, the event's actor; `None` where nothing says (a submit).
    pub actor: Option<Actor>,
    /// The attempt a claim or an attempt's end belongs to.
    pub attempt: Option<u32>,
    /// The event's detail, or an attempt's error.
    pub detail: Value,
}

/// A task's timeline, oldest first: its submission, each attempt's claim and end (from
/// the attempt history, and the running attempt from the task's row), its events and its
/// log lines. Nothing here is stored twice: the claim and the finish write no event rows.
pub fn timeline(
    task: &Task,
    attempts: &[Attempt],
    events: &[Event],
    logs: &[LogLine],
) -> Vec<TimelineEntry> {
    let worker = |id: &Option<String>| {
        id.as_deref()
            .map(|w| Actor::new(ActorKind::Worker, w, None))
    };
    let mut out = vec![TimelineEntry {
        at: task.created_at,
        event: "submitted".into(),
        actor: task.created_by.clone(),
        attempt: None,
        detail: Value::Null,
    }];
    for a in attempts {
        if let Some(started) = a.started_at {
            out.push(TimelineEntry {
                at: started,
                event: "claimed".into(),
                actor: worker(&a.worker_id),
                attempt: Some(a.attempt),
                detail: Value::Null,
            });
        }
        let by_rescuer = matches!(
            a.outcome,
            AttemptOutcome::LeaseExpired | AttemptOutcome::TimedOut
        );
        out.push(TimelineEntry {
            at: a.finished_at,
            event: a.outcome.as_str().into(),
            actor: if by_rescuer {
                Some(Actor::system("rescuer"))
            } else {
                worker(&a.worker_id)
            },
            attempt: Some(a.attempt),
            detail: a
                .error
                .as_ref()
                .map_or(Value::Null, |e| serde_json::json!({ "error": e })),
        });
    }
    if task.state == TaskState::Running && task.runs.is_none() {
        if let Some(started) = task.started_at {
            out.push(TimelineEntry {
                at: started,
                event: "claimed".into(),
                actor: worker(&task.worker_id),
                attempt: Some(task.attempt),
                detail: Value::Null,
            });
        }
    }
    for e in events {
        out.push(TimelineEntry {
            at: e.at,
            event: e.event.as_str().into(),
            actor: Some(e.actor.clone()),
            attempt: None,
            detail: e.detail.clone(),
        });
    }
    for l in logs {
        out.push(TimelineEntry {
            at: l.at,
            event: "log".into(),
            actor: None,
            attempt: Some(l.attempt),
            detail: serde_json::json!({ "line": l.line }),
        });
    }
    // At one instant (clocks keep milliseconds), an attempt's lines come after its claim
    // and before its end, and an earlier attempt's end before a later one's claim.
    let rank = |e: &TimelineEntry| match e.event.as_str() {
        "submitted" => 0,
        "claimed" => 1,
        "log" => 2,
        _ if e.attempt.is_none() => 3,
        _ => 4,
    };
    out.sort_by_key(|e| (e.at, e.attempt.unwrap_or(0), rank(e)));
    out
}
