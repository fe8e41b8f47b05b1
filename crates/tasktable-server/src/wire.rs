//! The JSON the API speaks. Durations are whole milliseconds (`*_ms`), times are RFC 3339
//! in UTC, and request types refuse unknown fields, so a misspelt option is an error
//! rather than silently ignored.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::runs::{Rearm, Runs};
use tasktable_core::{Backoff, NewTask, Task, TaskId, TaskState};
pub use tasktable_wire::task::*;

/// A task to submit.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitTask {
    pub kind: String,
    #[serde(default)]
    pub queue: Option<String>,
    #[serde(default)]
    pub payload: Value,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub idempotency_key: Option<String>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub priority: Option<i32>,
    #[serde(default)]
    pub run_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub delay_ms: Option<u64>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub max_attempts: Option<u32>,
    #[serde(default)]
    pub backoff: Option<BackoffSpec>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub held: Option<bool>,
    /// Who may run it; any worker when absent or null.
    #[serde(default)]
    pub target: Option<TargetSpec>,
    /// How long a retry waits for the worker of the previous attempt.
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub affinity_ms: Option<u64>,
    /// Run it this many times, each run by a worker of its own, or `"all"`: once on every
    /// active worker its queue and target allow.
    #[serde(default)]
    pub copies: Option<Copies>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub at_once: Option<u32>,
    #[serde(default)]
    pub repeat: Option<bool>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub max_failed_runs: Option<u32>,
    /// With copies and an idempotency key: what a repeat does to the multi-run task it
    /// finds (`failed`: forgive failed runs; `all`: start over).
    #[serde(default)]
    pub rearm: Option<Rearm>,
    /// A batch (docs/batches.md): items run through the kind's batch handler, the payload
    /// being the data every item reads.
    #[serde(default)]
    pub batch: Option<crate::batch_wire::BatchSpecWire>,
}

/// `copies` as a request writes it: a whole number, or `"all"` for a broadcast.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Copies {
    Count(u32),
    All,
    /// `"all_joining"`: a broadcast that workers joining while it is open get too.
    AllJoining,
}

impl<'de> Deserialize<'de> for Copies {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        use serde::de::Error;
        match Value::deserialize(d)? {
            Value::String(s) if s == "all" => Ok(Copies::All),
            Value::String(s) if s == "all_joining" => Ok(Copies::AllJoining),
            Value::Number(n) => crate::whole::number(n)
                .map(Copies::Count)
                .map_err(D::Error::custom),
            other => Err(D::Error::custom(format!(
                "copies is a whole number from 1, \"all\" or \"all_joining\", not {other}"
            ))),
        }
    }
}

impl SubmitTask {
    /// The task to store; values are checked by the store's validation, so the API and the
    /// library refuse exactly the same things. The one thing refused here: options of a
    /// multi-run task without `copies`.
    pub fn into_new_task(self) -> Result<NewTask, String> {
        let runs = match (self.copies, self.at_once, self.repeat, self.max_failed_runs) {
            (Some(Copies::Count(copies)), at_once, repeat, max_failed) => Some(Runs {
                at_once: at_once.unwrap_or(copies),
                repeat: repeat.unwrap_or(false),
                max_failed,
                ..Runs::copies(copies)
            }),
            (Some(all @ (Copies::All | Copies::AllJoining)), None, repeat, max_failed) => {
                Some(Runs {
                    repeat: repeat.unwrap_or(false),
                    max_failed,
                    ..Runs::everywhere().joining(all == Copies::AllJoining)
                })
            }
            (Some(Copies::All | Copies::AllJoining), Some(_), ..) => {
                return Err(
                    "a broadcast (copies \"all\") runs on every worker at once: \
                            at_once does not apply"
                        .to_owned(),
                );
            }
            (None, None, None, None) => None,
            (None, ..) => {
                return Err("at_once, repeat and max_failed_runs need copies".to_owned());
            }
        };
        let target = TargetSpec::into_target(self.target);
        let mut task = NewTask::new(self.kind, self.payload).target(target);
        if let Some(queue) = self.queue {
            task = task.queue(queue);
        }
        task.key = self.key;
        task.idempotency_key = self.idempotency_key;
        task.priority = self.priority.unwrap_or(task.priority);
        task.run_at = self.run_at;
        task.delay = self.delay_ms.map(Duration::from_millis);
        task.max_attempts = self.max_attempts.unwrap_or(task.max_attempts);
        task.backoff = self.backoff.map(Backoff::from).unwrap_or(task.backoff);
        task.timeout = self.timeout_ms.map(Duration::from_millis);
        task.held = self.held.unwrap_or(false);
        task.affinity = self.affinity_ms.map(Duration::from_millis);
        task.runs = runs;
        task.rearm = self.rearm;
        task.batch = self.batch.map(crate::batch_wire::BatchSpecWire::into_spec);
        Ok(task)
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubmitBatch {
    pub tasks: Vec<SubmitTask>,
}

/// A task handed to a remote worker by a claim.
#[derive(Debug, Clone, Serialize)]
pub struct ClaimedTask {
    pub id: TaskId,
    /// The fencing token: grows on every claim of the task. Send it with every lease call,
    /// and use it to fence side effects (an external write accepted only with a token at
    /// least as new as the last one seen).
    pub token: i64,
    /// The claim's secret: send it with every lease call. Nobody but this claimer is told.
    pub credential: String,
    pub kind: String,
    pub queue: String,
    pub payload: Value,
    /// What an earlier attempt saved, to resume from.
    pub checkpoint: Option<Value>,
    pub attempt: u32,
    pub max_attempts: u32,
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When the attempt times out, if the task has a timeout.
    pub deadline_at: Option<DateTime<Utc>>,
    /// For a run of a multi-run task, the run's number: send it with every lease call;
    /// null for a task that runs once.
    pub run: Option<u32>,
    /// The W3C `traceparent` of whoever submitted the task: run the attempt in a span of
    /// that trace. Null when the submit had none.
    pub traceparent: Option<String>,
}

impl From<Task> for ClaimedTask {
    fn from(t: Task) -> Self {
        ClaimedTask {
            id: t.id,
            token: t.lease_token,
            credential: t.lease_credential.map(|c| c.to_hex()).unwrap_or_default(),
            kind: t.kind,
            queue: t.queue,
            payload: t.payload,
            checkpoint: t.checkpoint,
            attempt: t.attempt,
            max_attempts: t.max_attempts,
            lease_expires_at: t.lease_expires_at,
            deadline_at: t.deadline_at,
            run: t.run,
            traceparent: t.traceparent.map(|tp| tp.as_str().to_owned()),
        }
    }
}

/// A statistics window: a whole number of minutes (`m`), hours (`h`) or days (`d`).
pub fn parse_window(text: &str) -> Result<Duration, String> {
    let bad = || format!("window must look like 15m, 1h, 24h or 7d; got {text:?}");
    let split = text.len().checked_sub(1).ok_or_else(bad)?;
    if !text.is_char_boundary(split) {
        return Err(bad());
    }
    let (number, unit) = text.split_at(split);
    // Digits only: `u64::from_str` would also take a sign, which the documented pattern
    // does not allow.
    if !number.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: u64 = number.parse().map_err(|_| bad())?;
    let unit_secs = match unit {
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return Err(bad()),
    };
    n.checked_mul(unit_secs)
        .map(Duration::from_secs)
        .ok_or_else(bad)
}

fn percentiles_view(p: &tasktable_store::Percentiles) -> Value {
    serde_json::json!({"count": p.count, "p50": p.p50, "p95": p.p95, "p99": p.p99})
}

/// The JSON of windowed statistics: states as an object, durations in seconds.
pub fn stats_view(s: &tasktable_store::Stats, window: Duration) -> Value {
    let groups: Vec<Value> = s
        .groups
        .iter()
        .map(|g| {
            let mut active = serde_json::Map::new();
            for state in [TaskState::Held, TaskState::Pending, TaskState::Running] {
                let n = g
                    .active
                    .iter()
                    .find(|(s, _)| *s == state)
                    .map_or(0, |(_, n)| *n);
                active.insert(state.as_str().to_owned(), n.into());
            }
            let w = &g.window;
            serde_json::json!({
                "queue": g.queue,
                "kind": g.kind,
                "active": active,
                "oldest_due_at": g.oldest_due,
                "submitted": w.submitted,
                "succeeded": w.succeeded,
                "failed": w.failed,
                "retried": w.retried,
                "cancelled": w.cancelled,
                "submitted_per_min": w.submitted_per_min,
                "succeeded_per_min": w.succeeded_per_min,
                "failed_per_min": w.failed_per_min,
                "success_rate": w.success_rate,
                "wait_seconds": percentiles_view(&w.wait),
                "run_seconds": percentiles_view(&w.run),
            })
        })
        .collect();
    let points: Vec<Value> = s
        .series
        .iter()
        .map(|p| {
            serde_json::json!({
                "at": p.at, "submitted": p.submitted, "succeeded": p.succeeded,
                "failed": p.failed, "retried": p.retried,
            })
        })
        .collect();
    serde_json::json!({
        "window": {"from": s.from, "to": s.to, "seconds": window.as_secs()},
        "groups": groups,
        "series": {"step_seconds": s.series_step_secs, "points": points},
    })
}

#[cfg(test)]
mod window_tests {
    use super::parse_window;
    use std::time::Duration;

    #[test]
    fn windows_take_minutes_hours_and_days_only() {
        assert_eq!(parse_window("15m"), Ok(Duration::from_secs(900)));
        assert_eq!(parse_window("24h"), Ok(Duration::from_secs(86_400)));
        assert_eq!(parse_window("7d"), Ok(Duration::from_secs(604_800)));
        for bad in [
            "",
            "h",
            "1.5h",
            "-1h",
            "10",
            "3w",
            "1é",
            "+1h",
            " 1h",
            "99999999999999999999d",
        ] {
            assert!(parse_window(bad).is_err(), "{bad:?}");
        }
    }
}
