//! A schedule as the API shows it.

use crate::task::{BackoffSpec, TargetSpec};
use chrono::{DateTime, FixedOffset, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tasktable_core::schedule::{Missed, Overlap, Recurrence};
use tasktable_core::TaskId;
use tasktable_store::Schedule;

/// What a schedule submits, as the API shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TemplateView {
    pub kind: String,
    pub queue: String,
    pub payload: Value,
    pub key: Option<String>,
    pub priority: i32,
    pub max_attempts: u32,
    pub backoff: BackoffSpec,
    pub timeout_ms: Option<u64>,
    /// Who may run the fired tasks; null for any worker.
    pub target: Option<TargetSpec>,
}

/// A schedule as the API shows it, with its next fire times in its own zone.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ScheduleView {
    pub id: i64,
    pub name: String,
    pub recurrence: Recurrence,
    pub template: TemplateView,
    pub missed: Missed,
    pub overlap: Overlap,
    pub enabled: bool,
    pub covered_until: DateTime<Utc>,
    pub next_run_at: Option<DateTime<Utc>>,
    pub last_task_id: Option<TaskId>,
    pub last_slot_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub upcoming: Vec<DateTime<FixedOffset>>,
}

impl ScheduleView {
    /// `s` with its next `upcoming` fire times; the caller has already redacted the
    /// template's payload for its reader.
    pub fn new(s: Schedule, upcoming: usize) -> Self {
        let spec = s.spec;
        let t = spec.template;
        ScheduleView {
            id: s.id,
            upcoming: tasktable_core::schedule::upcoming(&spec.recurrence, s.next_run_at, upcoming),
            name: spec.name,
            recurrence: spec.recurrence,
            template: TemplateView {
                kind: t.kind,
                queue: t.queue,
                payload: t.payload,
                key: t.key,
                priority: t.priority,
                max_attempts: t.max_attempts,
                backoff: t.backoff.into(),
                timeout_ms: t.timeout.map(|d| d.as_millis() as u64),
                target: TargetSpec::view(t.target),
            },
            missed: spec.missed,
            overlap: spec.overlap,
            enabled: spec.enabled,
            covered_until: s.covered_until,
            next_run_at: s.next_run_at,
            last_task_id: s.last_task_id,
            last_slot_at: s.last_slot_at,
            created_at: s.created_at,
            updated_at: s.updated_at,
        }
    }
}
