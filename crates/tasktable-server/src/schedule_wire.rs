//! The JSON of schedules, in the API's own words (whole milliseconds as `*_ms`, a
//! template's backoff as on tasks). Request types refuse unknown fields and read
//! integers as JSON means them ([`whole`](crate::whole)), so the OpenAPI document can
//! describe exactly what is accepted; the rules themselves are core's.

use crate::wire::{BackoffSpec, TargetSpec};
use chrono::{DateTime, NaiveTime, Utc};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;
use tasktable_core::schedule::{
    Missed, Overlap, Recurrence, ScheduleEdit, ScheduleSpec, TaskTemplate,
};
pub use tasktable_wire::schedule::*;

/// What a schedule submits: a task's options without its time, keys or hold.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TemplateBody {
    kind: String,
    #[serde(default)]
    queue: Option<String>,
    #[serde(default)]
    payload: Value,
    #[serde(default)]
    key: Option<String>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    priority: Option<i32>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    max_attempts: Option<u32>,
    #[serde(default)]
    backoff: Option<BackoffSpec>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    timeout_ms: Option<u64>,
    #[serde(default)]
    target: Option<TargetSpec>,
}

impl From<TemplateBody> for TaskTemplate {
    fn from(b: TemplateBody) -> Self {
        let defaults = tasktable_core::NewTask::new(b.kind.clone(), Value::Null);
        TaskTemplate {
            kind: b.kind,
            queue: b.queue.unwrap_or(defaults.queue),
            payload: b.payload,
            key: b.key,
            priority: b.priority.unwrap_or(defaults.priority),
            max_attempts: b.max_attempts.unwrap_or(defaults.max_attempts),
            backoff: b.backoff.map_or(defaults.backoff, Into::into),
            timeout: b.timeout_ms.map(Duration::from_millis),
            target: TargetSpec::into_target(b.target),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum RecurrenceBody {
    Cron {
        expr: String,
        zone: String,
    },
    Every {
        #[serde(deserialize_with = "crate::whole::number")]
        every_ms: u64,
        start: DateTime<Utc>,
    },
    Daily {
        /// `HH:MM:SS`, exactly.
        #[serde(deserialize_with = "time_of_day")]
        at: NaiveTime,
        zone: String,
    },
}

/// A time of day written `HH:MM:SS` and nothing else (chrono alone would also take
/// fractions and a missing second, which the document does not describe).
fn time_of_day<'de, D: serde::Deserializer<'de>>(d: D) -> Result<NaiveTime, D::Error> {
    let text = String::deserialize(d)?;
    let b = text.as_bytes();
    let shaped = b.len() == 8
        && b[2] == b':'
        && b[5] == b':'
        && [0, 1, 3, 4, 6, 7].iter().all(|&i| b[i].is_ascii_digit());
    let parsed = shaped
        .then(|| NaiveTime::parse_from_str(&text, "%H:%M:%S").ok())
        .flatten()
        .filter(|t| t.format("%H:%M:%S").to_string() == text);
    parsed.ok_or_else(|| {
        serde::de::Error::custom(format!(
            "at must be a time of day HH:MM:SS (00:00:00 to 23:59:59), got {text:?}"
        ))
    })
}

impl From<RecurrenceBody> for Recurrence {
    fn from(b: RecurrenceBody) -> Self {
        match b {
            RecurrenceBody::Cron { expr, zone } => Recurrence::Cron { expr, zone },
            RecurrenceBody::Every { every_ms, start } => Recurrence::Every { every_ms, start },
            RecurrenceBody::Daily { at, zone } => Recurrence::Daily { at, zone },
        }
    }
}

/// `{"policy": "skip"}`, `{"policy": "run_latest"}` or `{"policy": "run_all", "max": n}`:
/// read as one object and checked, so a `max` beside the first two is refused too.
#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(try_from = "MissedFields")]
pub struct MissedBody(Missed);

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum Policy {
    Skip,
    RunLatest,
    RunAll,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(deny_unknown_fields)]
struct MissedFields {
    policy: Policy,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    max: Option<u32>,
}

impl TryFrom<MissedFields> for MissedBody {
    type Error = String;
    fn try_from(f: MissedFields) -> Result<Self, String> {
        match (f.policy, f.max) {
            (Policy::Skip, None) => Ok(MissedBody(Missed::Skip)),
            (Policy::RunLatest, None) => Ok(MissedBody(Missed::RunLatest)),
            (Policy::RunAll, Some(max)) => Ok(MissedBody(Missed::RunAll { max })),
            (Policy::RunAll, None) => Err("policy run_all needs max".into()),
            (_, Some(_)) => Err("max goes with policy run_all only".into()),
        }
    }
}

impl From<MissedBody> for Missed {
    fn from(b: MissedBody) -> Self {
        b.0
    }
}

/// `POST /api/v1/schedules`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CreateBody {
    name: String,
    recurrence: RecurrenceBody,
    template: TemplateBody,
    #[serde(default)]
    missed: Option<MissedBody>,
    #[serde(default)]
    overlap: Option<Overlap>,
    #[serde(default)]
    enabled: Option<bool>,
}

impl From<CreateBody> for ScheduleSpec {
    fn from(b: CreateBody) -> Self {
        ScheduleSpec {
            name: b.name,
            recurrence: b.recurrence.into(),
            template: b.template.into(),
            missed: b.missed.map_or(Missed::RunLatest, Into::into),
            overlap: b.overlap.unwrap_or_default(),
            enabled: b.enabled.unwrap_or(true),
        }
    }
}

/// `PATCH /api/v1/schedules/{schedule}`: the fields given replace the stored ones (a
/// template is replaced whole); null is the same as leaving a field out.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EditBody {
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    recurrence: Option<RecurrenceBody>,
    #[serde(default)]
    template: Option<TemplateBody>,
    #[serde(default)]
    missed: Option<MissedBody>,
    #[serde(default)]
    overlap: Option<Overlap>,
    #[serde(default)]
    enabled: Option<bool>,
}

impl From<EditBody> for ScheduleEdit {
    fn from(b: EditBody) -> Self {
        ScheduleEdit {
            name: b.name,
            recurrence: b.recurrence.map(Into::into),
            template: b.template.map(Into::into),
            missed: b.missed.map(Into::into),
            overlap: b.overlap,
            enabled: b.enabled,
        }
    }
}
