//! What a chaos task does. Its payload names a [`Behaviour`]; [`script`] turns it, the
//! attempt number and the checkpoint the claim handed over into the steps an attempt
//! takes and how it ends. Both kinds of worker (the in-process runtime and the pull
//! worker) run the same script, so the checks expect the same outcome whoever ran a task.

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::time::Duration;
use tasktable::TaskState;

/// The one task kind and queue of a run.
pub const KIND: &str = "chaos";
pub const QUEUE: &str = "chaos";

/// How long a `timeout` task's attempts may run; its handler never finishes in time.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_millis(800);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(tag = "b", rename_all = "snake_case")]
pub enum Behaviour {
    /// Works for `ms`, records its effect, succeeds.
    Ok { ms: u64 },
    /// Fails with a retryable error on attempts 1 to `fail`, then behaves like `Ok`.
    Flaky { fail: u32, ms: u64 },
    /// Fails for good at once.
    Permanent,
    /// `steps` steps of `ms` each, a checkpoint after every one; a later attempt resumes
    /// from the last checkpoint saved.
    Checkpoint { steps: u32, ms: u64 },
    /// Like `Checkpoint`, but longer than a lease in all: it lives only if its lease is
    /// renewed.
    Long { steps: u32, ms: u64 },
    /// Snoozes once (remembered in its checkpoint), then behaves like `Ok`.
    Snooze { ms: u64 },
    /// Runs past its per-attempt timeout every time, so it must end `failed`.
    Timeout,
}

impl Behaviour {
    pub fn name(&self) -> &'static str {
        match self {
            Behaviour::Ok { .. } => "ok",
            Behaviour::Flaky { .. } => "flaky",
            Behaviour::Permanent => "permanent",
            Behaviour::Checkpoint { .. } => "checkpoint",
            Behaviour::Long { .. } => "long",
            Behaviour::Snooze { .. } => "snooze",
            Behaviour::Timeout => "timeout",
        }
    }

    /// The state the task must end in.
    pub fn expected_state(&self) -> TaskState {
        match self {
            Behaviour::Permanent | Behaviour::Timeout => TaskState::Failed,
            _ => TaskState::Succeeded,
        }
    }

    /// The result a succeeding task must store.
    pub fn expected_result(&self) -> Option<Value> {
        match self {
            Behaviour::Checkpoint { steps, .. } | Behaviour::Long { steps, .. } => {
                Some(json!({ "steps": steps }))
            }
            Behaviour::Permanent | Behaviour::Timeout => None,
            _ => Some(json!({ "done": true })),
        }
    }

    /// Enough attempts that faults cannot use them all up on a task that should succeed;
    /// a timeout task gets two, so it fails soon.
    pub fn max_attempts(&self) -> u32 {
        match self {
            Behaviour::Timeout => 2,
            Behaviour::Flaky { fail, .. } => fail + 25,
            _ => 25,
        }
    }

    /// The task as `POST /api/v1/tasks/batch` takes it; `index` makes its idempotency
    /// key, so a batch sent again after a lost answer creates nothing twice.
    pub fn submission(&self, index: usize, seed: u64) -> Value {
        let mut task = json!({
            "kind": KIND,
            "queue": QUEUE,
            "payload": self,
            "idempotency_key": idempotency_key(seed, index),
            "max_attempts": self.max_attempts(),
            "backoff": {"initial_ms": 100, "multiplier": 2.0, "max_ms": 1000, "jitter": 0.1},
        });
        if *self == Behaviour::Timeout {
            task["timeout_ms"] = json!(ATTEMPT_TIMEOUT.as_millis() as u64);
        }
        task
    }
}

pub fn idempotency_key(seed: u64, index: usize) -> String {
    format!("chaos-{seed}-{index}")
}

/// What the chaos handlers save as a checkpoint: which attempt wrote it (its fencing
/// token) and how far it got, so the checks can tell where a claim's checkpoint came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mark {
    pub token: i64,
    pub step: u32,
    #[serde(default)]
    pub snoozed: bool,
}

impl Mark {
    pub fn from_value(value: Option<&Value>) -> Option<Mark> {
        value.and_then(|v| serde_json::from_value(v.clone()).ok())
    }
}

/// One thing an attempt does before it ends.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Work(Duration),
    Save(Mark),
    /// The task's side effect, recorded under the attempt's fencing token.
    Effect,
}

/// How an attempt ends once its steps are done.
#[derive(Debug, Clone, PartialEq)]
pub enum Ending {
    Succeed(Value),
    Retry(String),
    Fail(String),
    Snooze(Duration),
    /// Keeps working until the attempt's deadline takes it away.
    Overrun,
}

/// The steps and ending of one attempt of `behaviour`.
pub fn script(
    behaviour: &Behaviour,
    attempt: u32,
    checkpoint: Option<Mark>,
    token: i64,
) -> (Vec<Step>, Ending) {
    let done = || Ending::Succeed(json!({ "done": true }));
    let ms = Duration::from_millis;
    match *behaviour {
        Behaviour::Ok { ms: t } => (vec![Step::Work(ms(t)), Step::Effect], done()),
        Behaviour::Flaky { fail, ms: t } if attempt <= fail => (
            vec![Step::Work(ms(t))],
            Ending::Retry(format!("flaky failure on attempt {attempt}")),
        ),
        Behaviour::Flaky { ms: t, .. } => (vec![Step::Work(ms(t)), Step::Effect], done()),
        Behaviour::Permanent => (Vec::new(), Ending::Fail("permanent failure".into())),
        Behaviour::Checkpoint { steps, ms: t } | Behaviour::Long { steps, ms: t } => {
            let from = checkpoint.map_or(0, |m| m.step.min(steps));
            let mut plan = Vec::new();
            for step in from + 1..=steps {
                plan.push(Step::Work(ms(t)));
                plan.push(Step::Save(Mark {
                    token,
                    step,
                    snoozed: false,
                }));
            }
            plan.push(Step::Effect);
            (plan, Ending::Succeed(json!({ "steps": steps })))
        }
        Behaviour::Snooze { ms: t } if !checkpoint.is_some_and(|m| m.snoozed) => (
            vec![Step::Save(Mark {
                token,
                step: 0,
                snoozed: true,
            })],
            Ending::Snooze(ms(t)),
        ),
        Behaviour::Snooze { ms: t } => (vec![Step::Work(ms(t)), Step::Effect], done()),
        Behaviour::Timeout => (vec![Step::Work(ATTEMPT_TIMEOUT * 20)], Ending::Overrun),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkpoint_task_resumes_after_the_last_step_saved() {
        let b = Behaviour::Checkpoint { steps: 3, ms: 5 };
        let (steps, _) = script(
            &b,
            2,
            Some(Mark {
                token: 1,
                step: 2,
                snoozed: false,
            }),
            2,
        );
        assert_eq!(
            steps,
            vec![
                Step::Work(Duration::from_millis(5)),
                Step::Save(Mark {
                    token: 2,
                    step: 3,
                    snoozed: false
                }),
                Step::Effect
            ]
        );
    }

    #[test]
    fn a_flaky_task_fails_until_its_attempt_passes_the_count() {
        let b = Behaviour::Flaky { fail: 2, ms: 1 };
        assert!(matches!(script(&b, 2, None, 2).1, Ending::Retry(_)));
        assert!(matches!(script(&b, 3, None, 3).1, Ending::Succeed(_)));
    }

    #[test]
    fn a_snooze_task_snoozes_once_then_succeeds() {
        let b = Behaviour::Snooze { ms: 1 };
        let (steps, ending) = script(&b, 1, None, 1);
        assert!(matches!(ending, Ending::Snooze(_)));
        let Step::Save(mark) = steps[0] else {
            panic!("{steps:?}")
        };
        let (_, ending) = script(&b, 1, Some(mark), 2);
        assert!(matches!(ending, Ending::Succeed(_)));
    }

    #[test]
    fn payloads_round_trip_and_name_their_behaviour() {
        let b = Behaviour::Flaky { fail: 1, ms: 7 };
        let task = b.submission(4, 9);
        assert_eq!(task["payload"]["b"], "flaky");
        let back: Behaviour = serde_json::from_value(task["payload"].clone()).unwrap();
        assert_eq!(back, b);
        assert_eq!(task["idempotency_key"], "chaos-9-4");
        assert_eq!(Behaviour::Timeout.submission(0, 0)["timeout_ms"], 800);
    }
}
