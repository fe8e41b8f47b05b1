//! What a handler can answer, and what each answer does to the task.

use crate::backoff::Backoff;
use crate::state::TaskState;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// What came of one run of a handler, as the runtime saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum HandlerOutcome {
    /// Done; the result is stored on the task.
    Succeeded {
        /// What the handler answered, if anything.
        result: Option<Value>,
    },
    /// A retryable error: try again after the backoff (or after `retry_after` when the
    /// handler knows better), unless attempts are exhausted.
    Error {
        /// What went wrong: the attempt's error and the task's `last_error`.
        message: String,
        /// The handler's own wait before the next attempt, instead of the backoff's.
        retry_after: Option<Duration>,
    },
    /// A permanent error: fail now, whatever attempts remain.
    Failed {
        /// Why: the attempt's error and the task's `last_error`.
        message: String,
    },
    /// Run again after `after`, without spending an attempt.
    Snooze {
        /// How long from the attempt's end until the task is due again.
        after: Duration,
    },
    /// The handler decided the task should not run at all.
    Cancel {
        /// Why, recorded as the attempt's error.
        reason: String,
    },
    /// Give the task back `held`, without spending an attempt, until an operator or the
    /// business releases it (a batch that was asked to pause).
    Hold {
        /// Why, recorded as the attempt's error.
        reason: String,
    },
    /// The worker is shutting down and the handler gave its task back within the grace
    /// period, its progress saved (a batch winds down so): due again at once, the attempt
    /// not spent, recorded as `interrupted`.
    Interrupted,
    /// The per-attempt timeout passed before the handler returned.
    TimedOut,
    /// The handler panicked; treated as a retryable error.
    Panicked {
        /// The panic's message, recorded as `handler panicked: <message>`.
        message: String,
    },
}

/// How one attempt ended, as recorded in the attempt history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    /// The handler succeeded: the task has, or (for a multi-run task) one run has.
    Succeeded,
    /// A retryable error (including a panic).
    Error,
    /// A permanent error.
    Failed,
    /// The per-attempt timeout passed, found by the worker's timer or by the rescuer.
    TimedOut,
    /// The worker stopped renewing; the rescuer took the task back.
    LeaseExpired,
    /// The handler asked to run later; no attempt spent.
    Snoozed,
    /// Cancelled by the handler or by an operator.
    Cancelled,
    /// The worker shut down before the handler finished; no attempt spent.
    Interrupted,
    /// An operator changed the task's target to leave its worker out; no attempt spent.
    Retargeted,
    /// The handler gave the task back held (a batch paused); no attempt spent.
    Paused,
}

impl AttemptOutcome {
    /// Every outcome, in the order they are declared.
    pub const ALL: [AttemptOutcome; 10] = [
        AttemptOutcome::Succeeded,
        AttemptOutcome::Error,
        AttemptOutcome::Failed,
        AttemptOutcome::TimedOut,
        AttemptOutcome::LeaseExpired,
        AttemptOutcome::Snoozed,
        AttemptOutcome::Cancelled,
        AttemptOutcome::Interrupted,
        AttemptOutcome::Retargeted,
        AttemptOutcome::Paused,
    ];

    /// The name in the history's `outcome` column and the API (`timed_out`), the same
    /// as serde writes; [`FromStr`] reads it back.
    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Succeeded => "succeeded",
            AttemptOutcome::Error => "error",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::TimedOut => "timed_out",
            AttemptOutcome::LeaseExpired => "lease_expired",
            AttemptOutcome::Snoozed => "snoozed",
            AttemptOutcome::Cancelled => "cancelled",
            AttemptOutcome::Interrupted => "interrupted",
            AttemptOutcome::Retargeted => "retargeted",
            AttemptOutcome::Paused => "paused",
        }
    }

    /// Whether an attempt that ended this way counts against `max_attempts`: snoozes,
    /// interruptions, a new target and a pause give theirs back.
    pub fn spends_attempt(self) -> bool {
        !matches!(
            self,
            AttemptOutcome::Snoozed
                | AttemptOutcome::Interrupted
                | AttemptOutcome::Retargeted
                | AttemptOutcome::Paused
        )
    }
}

impl fmt::Display for AttemptOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Text that names no [`AttemptOutcome`] (nor, for a run, `running`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown attempt outcome {0:?}")]
pub struct UnknownOutcome(
    /// The text as given.
    pub String,
);

impl FromStr for AttemptOutcome {
    type Err = UnknownOutcome;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AttemptOutcome::ALL
            .into_iter()
            .find(|o| o.as_str() == s)
            .ok_or_else(|| UnknownOutcome(s.to_owned()))
    }
}

/// The transition a store applies when an attempt ends. Every variant leaves `running`.
#[derive(Debug, Clone, PartialEq)]
pub enum FinishAction {
    /// To `succeeded`, storing the result.
    Complete {
        /// The handler's answer, for the task's `result`.
        result: Option<Value>,
    },
    /// To `pending` at now + `delay` with the attempt spent, or to `failed` for good when
    /// the task has no attempts left: the state is [`retry_state`] of the row's `attempt`
    /// and `max_attempts` ([`attempts_left`]). The store evaluates it when it writes,
    /// against the row's current `max_attempts`, so an operator's change made while the
    /// task ran is honoured.
    Retry {
        /// How long after the attempt's end the task is due again, if it may run again.
        delay: Duration,
    },
    /// To `failed`.
    Fail,
    /// To `cancelled`.
    Cancel,
    /// To `pending` at now + `delay`, giving the attempt back (snooze, interruption).
    Requeue {
        /// How long after the attempt's end the task is due again; zero: at once.
        delay: Duration,
    },
    /// To `held`, giving the attempt back (a paused batch).
    Hold,
}

/// Whether a task may run again after a failed attempt: `attempt` is the number of
/// attempts it has spent, counting the one that just ended, and `max_attempts` the most it
/// may spend. This is the one definition of the rule. The stores apply it inside the
/// statement that ends the attempt, where it reads the row's current `max_attempts`, and
/// the conformance suite checks every backend against this function.
pub fn attempts_left(attempt: u32, max_attempts: u32) -> bool {
    attempt < max_attempts
}

/// Where [`FinishAction::Retry`] takes a task that has spent `attempt` of its
/// `max_attempts`: back to `pending`, or to `failed` for good.
pub fn retry_state(attempt: u32, max_attempts: u32) -> TaskState {
    if attempts_left(attempt, max_attempts) {
        TaskState::Pending
    } else {
        TaskState::Failed
    }
}

/// What to write when an attempt ends: the history entry and the task's transition.
#[derive(Debug, Clone, PartialEq)]
pub struct FinishPlan {
    /// How the attempt ended, for its history row.
    pub outcome: AttemptOutcome,
    /// What becomes of the task.
    pub action: FinishAction,
    /// The history row's error, also written as the task's `last_error`; `None` for a
    /// success or a snooze, which leave `last_error` as it was.
    pub error: Option<String>,
}

impl FinishPlan {
    /// The plan for a handler's answer to attempt number `attempt` (1-based); `unit` is a
    /// random number in `[0, 1)` for the backoff's jitter.
    pub fn for_handler(
        outcome: HandlerOutcome,
        attempt: u32,
        backoff: &Backoff,
        unit: f64,
    ) -> Self {
        let retry = |explicit: Option<Duration>| FinishAction::Retry {
            delay: explicit.unwrap_or_else(|| backoff.delay(attempt, unit)),
        };
        match outcome {
            HandlerOutcome::Succeeded { result } => FinishPlan {
                outcome: AttemptOutcome::Succeeded,
                action: FinishAction::Complete { result },
                error: None,
            },
            HandlerOutcome::Error {
                message,
                retry_after,
            } => FinishPlan {
                outcome: AttemptOutcome::Error,
                action: retry(retry_after),
                error: Some(message),
            },
            HandlerOutcome::Panicked { message } => FinishPlan {
                outcome: AttemptOutcome::Error,
                action: retry(None),
                error: Some(format!("handler panicked: {message}")),
            },
            HandlerOutcome::TimedOut => FinishPlan::timed_out(attempt, backoff, unit, None),
            HandlerOutcome::Failed { message } => FinishPlan {
                outcome: AttemptOutcome::Failed,
                action: FinishAction::Fail,
                error: Some(message),
            },
            HandlerOutcome::Snooze { after } => FinishPlan {
                outcome: AttemptOutcome::Snoozed,
                action: FinishAction::Requeue { delay: after },
                error: None,
            },
            HandlerOutcome::Cancel { reason } => FinishPlan {
                outcome: AttemptOutcome::Cancelled,
                action: FinishAction::Cancel,
                error: Some(reason),
            },
            HandlerOutcome::Hold { reason } => FinishPlan {
                outcome: AttemptOutcome::Paused,
                action: FinishAction::Hold,
                error: Some(reason),
            },
            HandlerOutcome::Interrupted => FinishPlan::interrupted(),
        }
    }

    /// The plan for attempt number `attempt` whose timeout passed, found by the worker's
    /// timer or by the rescuer: the attempt counts, and the task is retried after its
    /// backoff (`unit` as in [`FinishPlan::for_handler`]) or fails. The error names the
    /// task's `limit` when it is known ("timed out after 30 s").
    pub fn timed_out(attempt: u32, backoff: &Backoff, unit: f64, limit: Option<Duration>) -> Self {
        FinishPlan {
            outcome: AttemptOutcome::TimedOut,
            action: FinishAction::Retry {
                delay: backoff.delay(attempt, unit),
            },
            error: Some(match limit {
                Some(limit) => format!("timed out after {}", spoken(limit)),
                None => "timed out".to_owned(),
            }),
        }
    }

    /// The rescuer's plan for a task whose lease ran out: the attempt counts.
    pub fn lease_expired(attempt: u32, backoff: &Backoff, unit: f64) -> Self {
        FinishPlan {
            outcome: AttemptOutcome::LeaseExpired,
            action: FinishAction::Retry {
                delay: backoff.delay(attempt, unit),
            },
            error: Some("lease expired".to_owned()),
        }
    }

    /// A task a worker claimed ahead of a free slot and never started (it waited too
    /// long, or the worker stopped): given back at once like an interruption, no attempt
    /// spent, with a history entry that says its handler did not run.
    pub fn given_back() -> Self {
        FinishPlan {
            error: Some(GIVEN_BACK.to_owned()),
            ..FinishPlan::interrupted()
        }
    }

    /// A task claimed for a caller that went away before it heard of the claim (an HTTP
    /// client that hung up): given back at once like an interruption, no attempt spent,
    /// with a history entry that says so.
    pub fn unheard() -> Self {
        FinishPlan {
            error: Some(UNHEARD.to_owned()),
            ..FinishPlan::interrupted()
        }
    }

    /// A graceful shutdown gives the task back at once: no attempt spent, checkpoint kept.
    pub fn interrupted() -> Self {
        FinishPlan {
            outcome: AttemptOutcome::Interrupted,
            action: FinishAction::Requeue {
                delay: Duration::ZERO,
            },
            error: Some("interrupted".to_owned()),
        }
    }
}

/// The error a [`FinishPlan::unheard`] attempt records.
pub const UNHEARD: &str =
    "given back before it started: the claim's caller went away before it was answered";

/// The error a [`FinishPlan::given_back`] attempt records.
pub const GIVEN_BACK: &str =
    "given back before it started: the worker had claimed it ahead of a free slot";

/// A duration as a message says it: `250 ms`, `1.5 s`, `30 s`, `5 min`, `2 h`.
pub fn spoken(d: Duration) -> String {
    let ms = d.as_millis();
    let secs = d.as_secs();
    if ms < 1_000 {
        format!("{ms} ms")
    } else if ms % 1_000 != 0 {
        let text = format!("{:.3}", d.as_secs_f64());
        format!("{} s", text.trim_end_matches('0'))
    } else if secs >= 3_600 && secs % 3_600 == 0 {
        format!("{} h", secs / 3_600)
    } else if secs >= 120 && secs % 60 == 0 {
        format!("{} min", secs / 60)
    } else {
        format!("{secs} s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backoff() -> Backoff {
        Backoff {
            initial: Duration::from_secs(2),
            multiplier: 3.0,
            max: Duration::from_secs(100),
            jitter: 0.0,
        }
    }

    #[test]
    fn retryable_error_backs_off_by_attempt() {
        let plan = FinishPlan::for_handler(
            HandlerOutcome::Error {
                message: "boom".into(),
                retry_after: None,
            },
            3,
            &backoff(),
            0.0,
        );
        assert_eq!(plan.outcome, AttemptOutcome::Error);
        assert_eq!(
            plan.action,
            FinishAction::Retry {
                delay: Duration::from_secs(18)
            }
        );
        assert_eq!(plan.error.as_deref(), Some("boom"));
    }

    #[test]
    fn explicit_retry_after_wins_over_backoff() {
        let plan = FinishPlan::for_handler(
            HandlerOutcome::Error {
                message: "rate limited".into(),
                retry_after: Some(Duration::from_millis(1500)),
            },
            1,
            &backoff(),
            0.0,
        );
        assert_eq!(
            plan.action,
            FinishAction::Retry {
                delay: Duration::from_millis(1500)
            }
        );
    }

    #[test]
    fn permanent_error_fails_at_once() {
        let plan = FinishPlan::for_handler(
            HandlerOutcome::Failed {
                message: "bad input".into(),
            },
            1,
            &backoff(),
            0.0,
        );
        assert_eq!(plan.action, FinishAction::Fail);
        assert_eq!(plan.outcome, AttemptOutcome::Failed);
    }

    #[test]
    fn snooze_and_interruption_give_the_attempt_back() {
        let snooze = FinishPlan::for_handler(
            HandlerOutcome::Snooze {
                after: Duration::from_secs(9),
            },
            4,
            &backoff(),
            0.0,
        );
        assert!(
            matches!(snooze.action, FinishAction::Requeue { delay } if delay == Duration::from_secs(9))
        );
        assert!(matches!(
            FinishPlan::interrupted().action,
            FinishAction::Requeue { .. }
        ));
    }

    #[test]
    fn a_timeout_names_its_limit() {
        let plan = |limit| FinishPlan::timed_out(1, &backoff(), 0.0, limit).error;
        assert_eq!(plan(None).as_deref(), Some("timed out"));
        for (limit, said) in [
            (Duration::from_millis(250), "timed out after 250 ms"),
            (Duration::from_millis(1_500), "timed out after 1.5 s"),
            (Duration::from_secs(30), "timed out after 30 s"),
            (Duration::from_secs(90), "timed out after 90 s"),
            (Duration::from_secs(300), "timed out after 5 min"),
            (Duration::from_secs(7_200), "timed out after 2 h"),
            (Duration::from_secs(3_601), "timed out after 3601 s"),
        ] {
            assert_eq!(plan(Some(limit)).as_deref(), Some(said));
        }
    }

    #[test]
    fn timeouts_panics_and_expiry_spend_an_attempt() {
        for plan in [
            FinishPlan::for_handler(HandlerOutcome::TimedOut, 2, &backoff(), 0.0),
            FinishPlan::for_handler(
                HandlerOutcome::Panicked {
                    message: "x".into(),
                },
                2,
                &backoff(),
                0.0,
            ),
            FinishPlan::lease_expired(2, &backoff(), 0.0),
        ] {
            assert_eq!(
                plan.action,
                FinishAction::Retry {
                    delay: Duration::from_secs(6)
                },
                "{plan:?}"
            );
        }
    }

    #[test]
    fn a_retry_fails_for_good_once_the_attempts_are_spent() {
        assert!(attempts_left(1, 3));
        assert!(attempts_left(2, 3));
        assert!(!attempts_left(3, 3));
        // An operator lowered max_attempts below the attempts already spent.
        assert!(!attempts_left(4, 2));
        assert_eq!(retry_state(2, 3), TaskState::Pending);
        assert_eq!(retry_state(3, 3), TaskState::Failed);
        assert_eq!(retry_state(1, 1), TaskState::Failed);
    }

    #[test]
    fn outcome_names_round_trip() {
        for o in AttemptOutcome::ALL {
            assert_eq!(o.as_str().parse::<AttemptOutcome>().unwrap(), o);
        }
    }
}
