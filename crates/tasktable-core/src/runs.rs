//! Multi-run tasks: a task that wants `copies` successful runs, each by a worker of its
//! own (or, with `repeat`, by a worker that already finished one), at most `at_once` at a
//! time. Each run has its own lease, fencing token, checkpoint and result; the task's
//! state follows its runs.
//!
//! The rules live here as functions of counters: which worker may start a run
//! ([`Runs::may_start`]) and what the end of a run does to its task
//! ([`Runs::after_run`]). The stores keep the counters on the task's row, in the same
//! transaction as the run, and apply these functions to the row they locked.

use crate::outcome::{AttemptOutcome, FinishAction};
use crate::state::TaskState;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Most copies one task may ask for.
pub const MAX_COPIES: u32 = 10_000;

/// What a multi-run task asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Runs {
    /// Successful runs after which the task has succeeded.
    pub copies: u32,
    /// Most runs at the same time (1 to `copies`).
    pub at_once: u32,
    /// Whether a worker that finished a run may start another while copies remain. By
    /// default each worker succeeds at most once, so `copies` successes come from that
    /// many distinct workers.
    #[serde(default)]
    pub repeat: bool,
    /// Failed runs the task survives: one more fails it. `None` when submitted: the
    /// task's `max_attempts - 1`.
    #[serde(default)]
    pub max_failed: Option<u32>,
    /// Broadcast: once on every worker that is active when the task is submitted, takes
    /// its queue and is allowed by its target ([`broadcast_to`]). The store sets
    /// `copies` and `at_once` to how many there are and aims the task at them.
    #[serde(default)]
    pub broadcast: bool,
    /// With `broadcast`: a worker its target allows that had no run yet (one that became
    /// active after the submit, say) gets one while the task is open, each such run adding
    /// a copy.
    #[serde(default)]
    pub joining: bool,
}

impl Runs {
    /// `copies` runs, all at once, each by a distinct worker.
    pub fn copies(copies: u32) -> Self {
        Runs {
            copies,
            at_once: copies,
            repeat: false,
            max_failed: None,
            broadcast: false,
            joining: false,
        }
    }

    /// Once on every active worker the task's queue and target allow, when it is
    /// submitted ([`broadcast_to`]).
    pub fn everywhere() -> Self {
        Runs {
            broadcast: true,
            ..Runs::copies(1)
        }
    }

    /// At most `at_once` runs at the same time: 1 to `copies` (all of them unless set).
    pub fn at_once(mut self, at_once: u32) -> Self {
        self.at_once = at_once;
        self
    }

    /// Whether a worker that succeeded at a run may start another while copies remain;
    /// a broadcast may not.
    pub fn repeat(mut self, repeat: bool) -> Self {
        self.repeat = repeat;
        self
    }

    /// A broadcast that also runs on workers that join while it is open.
    pub fn joining(mut self, joining: bool) -> Self {
        self.joining = joining;
        self
    }

    /// The task survives `max_failed` failed runs and fails at the next; at most
    /// [`MAX_ATTEMPTS_LIMIT`](crate::names::MAX_ATTEMPTS_LIMIT).
    pub fn max_failed(mut self, max_failed: u32) -> Self {
        self.max_failed = Some(max_failed);
        self
    }

    /// Checks the request on its own terms; [`NewTask::validate`](crate::NewTask::validate)
    /// checks how it sits with the task's other options, and the store whether a
    /// broadcast has any worker to go to.
    pub fn validate(&self) -> Result<(), InvalidRuns> {
        if self.broadcast && self.repeat {
            return Err(InvalidRuns::BroadcastRepeat);
        }
        if self.joining && !self.broadcast {
            return Err(InvalidRuns::Joining);
        }
        if self.copies == 0 || self.copies > MAX_COPIES {
            return Err(InvalidRuns::Copies(self.copies));
        }
        if self.at_once == 0 || self.at_once > self.copies {
            return Err(InvalidRuns::AtOnce {
                at_once: self.at_once,
                copies: self.copies,
            });
        }
        if self
            .max_failed
            .is_some_and(|f| f > crate::names::MAX_ATTEMPTS_LIMIT)
        {
            return Err(InvalidRuns::MaxFailed(self.max_failed.unwrap_or_default()));
        }
        Ok(())
    }

    /// The failed runs the task survives, `max_failed` or else `max_attempts - 1`.
    pub fn failures_allowed(&self, max_attempts: u32) -> u32 {
        self.max_failed
            .unwrap_or_else(|| max_attempts.saturating_sub(1))
    }

    /// Whether a worker may start a run now: a slot is free (`at_once`), a copy is still
    /// wanted (counting the runs in progress as if they will succeed), the worker runs
    /// none of it now, and it has not succeeded at it unless the task allows `repeat`.
    pub fn may_start(&self, counts: RunCounts, worker: WorkerRuns) -> bool {
        if self.joins(counts, worker) {
            return true;
        }
        counts.active < self.at_once
            && counts.active + counts.succeeded < self.copies
            && !worker.running
            && (self.repeat || !worker.succeeded)
    }

    /// Whether a run this worker starts adds a copy (and a slot): a joining broadcast's
    /// worker that never ran the task, when no copy is left for it.
    pub fn joins(&self, counts: RunCounts, worker: WorkerRuns) -> bool {
        self.joining
            && !worker.ran
            && !(counts.active < self.at_once && counts.active + counts.succeeded < self.copies)
    }

    /// What the end of one run does to its task, whose counters were `before` (the
    /// ended run among `before.active`). `failures_allowed` is
    /// [`Runs::failures_allowed`] of the task's row as it is now.
    pub fn after_run(
        &self,
        before: RunCounts,
        outcome: AttemptOutcome,
        action: &FinishAction,
        failures_allowed: u32,
    ) -> RunEnd {
        let mut counts = RunCounts {
            active: before.active.saturating_sub(1),
            ..before
        };
        if outcome == AttemptOutcome::Succeeded {
            counts.succeeded += 1;
        } else if counts_as_failure(outcome) {
            counts.failed += 1;
        }
        let state = match action {
            FinishAction::Cancel => TaskState::Cancelled,
            FinishAction::Fail => TaskState::Failed,
            _ if counts.failed > failures_allowed => TaskState::Failed,
            _ if counts.succeeded >= self.copies => TaskState::Succeeded,
            _ if counts.active > 0 => TaskState::Running,
            _ => TaskState::Pending,
        };
        let next_run_after = match action {
            FinishAction::Retry { delay } | FinishAction::Requeue { delay }
                if !state.is_finished() =>
            {
                Some(*delay)
            }
            _ => None,
        };
        if state.is_finished() {
            // Runs still going are cancelled with the task.
            counts.active = 0;
        }
        RunEnd {
            counts,
            state,
            next_run_after,
        }
    }
}

/// Whether a run that ended this way counts against the task's allowance of failures.
pub fn counts_as_failure(outcome: AttemptOutcome) -> bool {
    outcome != AttemptOutcome::Succeeded
        && outcome != AttemptOutcome::Cancelled
        && outcome.spends_attempt()
}

/// What a submit that repeats a multi-run task's idempotency key does to the task it
/// finds (without it, nothing: the submit returns the task as it is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rearm {
    /// Forgive its failed runs; a failed or cancelled task opens again, its successes
    /// standing.
    Failed,
    /// Start over: the runs going are cancelled, successes and failures are forgotten,
    /// and every worker may run it again.
    All,
}

/// Why a multi-run request cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRuns {
    /// The copies asked for are 0 or more than [`MAX_COPIES`].
    #[error("copies must be between 1 and {MAX_COPIES}, got {0}")]
    Copies(u32),
    /// `at_once` is 0 or more than `copies`.
    #[error("at_once must be between 1 and copies ({copies}), got {at_once}")]
    AtOnce {
        /// The `at_once` given.
        at_once: u32,
        /// The copies asked for, which bound it.
        copies: u32,
    },
    /// `max_failed` is above [`MAX_ATTEMPTS_LIMIT`](crate::names::MAX_ATTEMPTS_LIMIT).
    #[error("max_failed_runs must be at most 10000, got {0}")]
    MaxFailed(u32),
    /// The task asks for an affinity as well as for runs.
    #[error("a multi-run task cannot have an affinity: each run is its worker's own")]
    Affinity,
    /// A broadcast that also asks to repeat.
    #[error("a broadcast runs once on each worker: it cannot repeat")]
    BroadcastRepeat,
    /// `joining` without `broadcast`.
    #[error("only a broadcast (copies \"all\") can take workers that join")]
    Joining,
    /// A rearm on a task that has no runs or no idempotency key to find its task by.
    #[error("rearm applies to a multi-run task submitted again with its idempotency key: it needs copies and an idempotency_key")]
    Rearm,
}

/// The workers a broadcast goes to: those active now (not draining, not gone) that take
/// `queue` and that `target` allows, by id.
pub fn broadcast_to(
    workers: &[crate::worker::WorkerInfo],
    queue: &str,
    target: &crate::Target,
) -> Vec<String> {
    let mut ids: Vec<String> = workers
        .iter()
        .filter(|w| w.state == crate::worker::WorkerState::Active)
        .filter(|w| w.facts.queues.takes(queue))
        .filter(|w| target.allows(&w.facts.id, &w.facts.groups))
        .map(|w| w.facts.id.clone())
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

/// A multi-run task's counters, kept on its row.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCounts {
    /// Runs in progress.
    pub active: u32,
    /// Runs that succeeded; at `copies` of them the task has succeeded.
    pub succeeded: u32,
    /// Runs that ended in a way that counts as a failure ([`counts_as_failure`]).
    pub failed: u32,
}

/// What one worker has done with a task so far, for [`Runs::may_start`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerRuns {
    /// It runs a run of the task now.
    pub running: bool,
    /// A run of the task by it succeeded.
    pub succeeded: bool,
    /// It started a run of the task, however that ended.
    pub ran: bool,
}

/// What [`Runs::after_run`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunEnd {
    /// The task's counters after the run; `active` is 0 once the task has finished,
    /// since the runs still going end with it.
    pub counts: RunCounts,
    /// The task's state after the run: finished, `running` while other runs go, else
    /// `pending`.
    pub state: TaskState,
    /// The next run may start no earlier than this long from now (a failed run's
    /// backoff, a snooze); `None` leaves the task's `run_at` as it is.
    pub next_run_after: Option<Duration>,
}

/// Where a run is: running, or ended with one of the attempt outcomes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum RunState {
    /// Its worker holds its lease.
    Running,
    /// Over, as the attempt history records it.
    Ended(AttemptOutcome),
}

impl RunState {
    /// The name in `tasktable_runs.state` and the API: `running`, or the outcome's name
    /// ([`AttemptOutcome::as_str`]); [`FromStr`] reads it back.
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Running => "running",
            RunState::Ended(o) => o.as_str(),
        }
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for RunState {
    type Err = crate::outcome::UnknownOutcome;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if s == "running" {
            return Ok(RunState::Running);
        }
        s.parse().map(RunState::Ended)
    }
}

impl From<RunState> for String {
    fn from(s: RunState) -> String {
        s.as_str().to_owned()
    }
}

impl TryFrom<String> for RunState {
    type Error = crate::outcome::UnknownOutcome;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        s.parse()
    }
}

/// One run of a multi-run task: a row of `tasktable_runs`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// The multi-run task it is a run of.
    pub task_id: crate::TaskId,
    /// The run's number among the task's runs, from 1; its lease carries it.
    pub run: u32,
    /// The worker that runs or ran it.
    pub worker_id: String,
    /// That worker's host name, where known.
    pub worker_host: Option<String>,
    /// Running, or how it ended.
    pub state: RunState,
    /// The fencing token of the run's lease (the task's counter at its claim).
    pub lease_token: i64,
    /// While it runs: when its lease runs out (never after `deadline_at`); `None` once
    /// it ended.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When the run times out, if the task has a timeout.
    pub deadline_at: Option<DateTime<Utc>>,
    /// What the run last saved to resume from; a later run may take it over.
    pub checkpoint: Option<Value>,
    /// What the run last reported, for people watching.
    pub progress: Option<Value>,
    /// What the run answered, if it succeeded.
    pub result: Option<Value>,
    /// Why it ended without succeeding, where there is a message.
    pub error: Option<String>,
    /// The earlier run whose checkpoint this one took over (a run that ended without
    /// succeeding, its checkpoint saved).
    pub resumed_from: Option<u32>,
    /// Its claim, on the database's clock.
    pub started_at: DateTime<Utc>,
    /// When it ended; `None` while it runs.
    pub finished_at: Option<DateTime<Utc>>,
}

#[cfg(test)]
mod tests;
