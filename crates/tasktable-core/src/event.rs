//! The event log's vocabulary: who did something ([`Actor`]), what it was
//! ([`EventKind`]), and what an operator's change to a task is recorded as
//! ([`Change::event`]). Where each event lives (its own row, or read from the attempt
//! history) is the stores' business; docs/events.md has the whole design.

use crate::batch::BatchAction;
use crate::change::Change;
use crate::task::Task;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::fmt;

pub use crate::actor::{Actor, ActorKind, MAX_ACTOR_LEN, MAX_ROLE_LEN};

/// What happened. The names are the log's `event` column and the API's `event` field.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    // Of a task, by an operator.
    /// A task was cancelled ([`Change::Cancel`]).
    Cancelled,
    /// A task was retried, or a waiting one made due now ([`Change::Retry`]).
    Retried,
    /// A task's `run_at` was moved ([`Change::Reschedule`]).
    Rescheduled,
    /// A task's priority, `max_attempts` or payload was changed; the detail names which.
    Edited,
    /// A pending task was held ([`Change::Hold`]).
    Held,
    /// A held task was released ([`Change::Release`]).
    Released,
    /// Who may run a task was changed ([`Change::SetTarget`]).
    TargetChanged,
    // Of a queue.
    /// A queue was paused: workers claim nothing from it.
    QueuePaused,
    /// A paused queue was resumed.
    QueueResumed,
    /// A queue's policy ([`crate::policy::QueuePolicy`]) was set; the detail holds the
    /// old one and the new.
    PolicySet,
    // Of a worker.
    /// A worker was asked to drain: finish what it runs, claim nothing new.
    WorkerDrained,
    /// A drained worker was released: it claims again.
    WorkerReleased,
    // Of a schedule.
    /// A schedule was created.
    ScheduleCreated,
    /// A schedule was edited; the detail names the fields changed, not their values.
    ScheduleEdited,
    /// A schedule was deleted; the tasks it fired are kept.
    ScheduleDeleted,
    /// A schedule's slot was fired, by a scheduler or an operator's "fire now", or
    /// settled without a task (the detail says what was skipped).
    ScheduleFired,
    // Of a batch.
    /// A waiting batch was started ([`BatchAction::Start`]).
    BatchStarted,
    /// A batch was paused ([`BatchAction::Pause`]).
    BatchPaused,
    /// A batch was stopped ([`BatchAction::Stop`]).
    BatchStopped,
    /// A batch was resumed ([`BatchAction::Resume`]).
    BatchResumed,
    /// A batch's error budget or data was changed.
    BatchEdited,
}

impl EventKind {
    /// Every kind, in the order they are declared.
    pub const ALL: [EventKind; 21] = [
        EventKind::Cancelled,
        EventKind::Retried,
        EventKind::Rescheduled,
        EventKind::Edited,
        EventKind::Held,
        EventKind::Released,
        EventKind::TargetChanged,
        EventKind::QueuePaused,
        EventKind::QueueResumed,
        EventKind::PolicySet,
        EventKind::WorkerDrained,
        EventKind::WorkerReleased,
        EventKind::ScheduleCreated,
        EventKind::ScheduleEdited,
        EventKind::ScheduleDeleted,
        EventKind::ScheduleFired,
        EventKind::BatchStarted,
        EventKind::BatchPaused,
        EventKind::BatchStopped,
        EventKind::BatchResumed,
        EventKind::BatchEdited,
    ];

    /// The name in the log's `event` column and the API's `event` field
    /// (`target_changed`), the same as serde writes.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Cancelled => "cancelled",
            EventKind::Retried => "retried",
            EventKind::Rescheduled => "rescheduled",
            EventKind::Edited => "edited",
            EventKind::Held => "held",
            EventKind::Released => "released",
            EventKind::TargetChanged => "target_changed",
            EventKind::QueuePaused => "queue_paused",
            EventKind::QueueResumed => "queue_resumed",
            EventKind::PolicySet => "policy_set",
            EventKind::WorkerDrained => "worker_drained",
            EventKind::WorkerReleased => "worker_released",
            EventKind::ScheduleCreated => "schedule_created",
            EventKind::ScheduleEdited => "schedule_edited",
            EventKind::ScheduleDeleted => "schedule_deleted",
            EventKind::ScheduleFired => "schedule_fired",
            EventKind::BatchStarted => "batch_started",
            EventKind::BatchPaused => "batch_paused",
            EventKind::BatchStopped => "batch_stopped",
            EventKind::BatchResumed => "batch_resumed",
            EventKind::BatchEdited => "batch_edited",
        }
    }

    /// The kind [`EventKind::as_str`] names `s`; `None` for any other text.
    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl fmt::Display for EventKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Change {
    /// The event an operator's change is recorded as.
    pub fn event(&self) -> EventKind {
        match self {
            Change::Cancel => EventKind::Cancelled,
            Change::Retry => EventKind::Retried,
            Change::Reschedule { .. } => EventKind::Rescheduled,
            Change::SetPriority { .. }
            | Change::SetMaxAttempts { .. }
            | Change::EditPayload { .. } => EventKind::Edited,
            Change::SetTarget { .. } => EventKind::TargetChanged,
            Change::Hold => EventKind::Held,
            Change::Release => EventKind::Released,
        }
    }

    /// The task column an edit changes, and so what its event's detail names:
    /// `priority`, `max_attempts`, `payload`, `run_at` or `target`; `None` for changes of
    /// state alone.
    pub fn field(&self) -> Option<&'static str> {
        match self {
            Change::Reschedule { .. } => Some("run_at"),
            Change::SetPriority { .. } => Some("priority"),
            Change::SetMaxAttempts { .. } => Some("max_attempts"),
            Change::EditPayload { .. } => Some("payload"),
            Change::SetTarget { .. } => Some("target"),
            Change::Cancel | Change::Retry | Change::Hold | Change::Release => None,
        }
    }

    /// Whether this edit sets `task` to what it already is (nothing to record).
    pub fn sets_what_is(&self, task: &Task) -> bool {
        match self {
            Change::Reschedule { run_at } => task.run_at == *run_at,
            Change::SetPriority { priority } => task.priority == *priority,
            Change::SetMaxAttempts { max_attempts } => task.max_attempts == *max_attempts,
            Change::EditPayload { payload } => task.payload == *payload,
            Change::SetTarget { target } => task.target == *target,
            Change::Cancel | Change::Retry | Change::Hold | Change::Release => false,
        }
    }

    /// What an edit does to `task`, as its event's detail records it:
    /// `{"<field>": {"old": ..., "new": ...}}`, or `None` for changes of state alone.
    pub fn edit_detail(&self, task: &Task) -> Option<(&'static str, Value)> {
        let field = self.field()?;
        let (old, new) = match self {
            Change::Reschedule { run_at } => (json!(task.run_at), json!(run_at)),
            Change::SetPriority { priority } => (json!(task.priority), json!(priority)),
            Change::SetMaxAttempts { max_attempts } => {
                (json!(task.max_attempts), json!(max_attempts))
            }
            Change::EditPayload { payload } => (shown(&task.payload), shown(payload)),
            Change::SetTarget { target } => (json!(task.target), json!(target)),
            Change::Cancel | Change::Retry | Change::Hold | Change::Release => return None,
        };
        Some((field, json!({"old": old, "new": new})))
    }

    /// What an edit sets, for the event of a change to many tasks (each task's own event
    /// has the old value too): `("priority", {"new": 7})`; `None` for changes of state,
    /// and for a new payload: whether a reader may see a payload's fields depends on the
    /// task's kind, which a change to many tasks need not have one of, so the payload is
    /// only in each task's own event.
    pub fn new_detail(&self) -> Option<(&'static str, Value)> {
        let field = self.field()?;
        let new = match self {
            Change::Reschedule { run_at } => json!(run_at),
            Change::SetPriority { priority } => json!(priority),
            Change::SetMaxAttempts { max_attempts } => json!(max_attempts),
            Change::SetTarget { target } => json!(target),
            Change::EditPayload { .. }
            | Change::Cancel
            | Change::Retry
            | Change::Hold
            | Change::Release => return None,
        };
        Some((field, json!({ "new": new })))
    }
}

/// Largest payload an edit's event keeps whole, in bytes of JSON; a larger one is
/// recorded by its size, so the log stays small however large payloads are.
pub const MAX_DETAIL_PAYLOAD_BYTES: usize = 8192;

/// A payload as an event keeps it.
fn shown(payload: &Value) -> Value {
    let size = payload.to_string().len();
    if size <= MAX_DETAIL_PAYLOAD_BYTES {
        payload.clone()
    } else {
        json!({ "omitted_bytes": size })
    }
}

impl BatchAction {
    /// The event an operator's action on a batch is recorded as.
    pub fn event(self) -> EventKind {
        match self {
            BatchAction::Start => EventKind::BatchStarted,
            BatchAction::Pause => EventKind::BatchPaused,
            BatchAction::Stop => EventKind::BatchStopped,
            BatchAction::Resume => EventKind::BatchResumed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_read_back_as_themselves() {
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.as_str())
            );
        }
        for k in ActorKind::ALL {
            assert_eq!(ActorKind::parse(k.as_str()), Some(k));
            assert_eq!(
                serde_json::to_value(k).unwrap(),
                serde_json::json!(k.as_str())
            );
        }
        assert_eq!(EventKind::parse("exploded"), None);
    }

    #[test]
    fn the_column_form_reads_back_whatever_the_name_holds() {
        for actor in [
            Actor::new(ActorKind::Token, "deploy:bot (x)", Some("operator")),
            Actor::system("scheduler"),
            Actor::rust(),
            Actor::new(ActorKind::Worker, "", None),
        ] {
            assert_eq!(Actor::from_column(&actor.to_column()), Some(actor));
        }
        assert_eq!(Actor::from_column("robot::x"), None);
        assert_eq!(Actor::from_column("token"), None);
    }

    #[test]
    fn long_names_are_cut_on_a_character_boundary() {
        let name = "é".repeat(MAX_ACTOR_LEN);
        let a = Actor::new(ActorKind::Token, &name, Some("admin"));
        assert!(a.name.len() <= MAX_ACTOR_LEN);
        assert!(a.name.chars().all(|c| c == 'é'));
        assert_eq!(a.to_string(), format!("token:{} (admin)", a.name));
    }

    #[test]
    fn every_change_names_its_event_and_edits_name_their_field() {
        use chrono::Utc;
        let edits = [
            (
                Change::SetPriority { priority: 1 },
                EventKind::Edited,
                Some("priority"),
            ),
            (
                Change::Reschedule { run_at: Utc::now() },
                EventKind::Rescheduled,
                Some("run_at"),
            ),
            (Change::Cancel, EventKind::Cancelled, None),
            (Change::Hold, EventKind::Held, None),
        ];
        for (change, event, field) in edits {
            assert_eq!(change.event(), event);
            assert_eq!(change.field(), field);
        }
    }
}
