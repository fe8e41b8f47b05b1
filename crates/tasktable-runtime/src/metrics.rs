//! What workers and rescuers record, through the [`metrics`] facade.
//!
//! Nothing is recorded unless the process installed a recorder (`tasktable serve` and
//! `tasktable worker --metrics-listen` install the Prometheus exporter of
//! `tasktable-server`); without one every call below is a no-op. A worker binds its
//! handles when [`Worker::run`](crate::Worker::run) starts, so install the recorder
//! before that: what a worker records into no recorder is lost for good.
//!
//! Names follow Prometheus conventions: the `tasktable_` prefix, base units (seconds),
//! `_total` on counters. Labels are few and bounded (queue, kind, outcome, call), never a
//! task id. Every series counts what this process did; sum over instances for the whole
//! system.
//!
//! | series | type | labels | meaning |
//! |---|---|---|---|
//! | `tasktable_attempts_total` | counter | queue, kind, outcome | attempts whose end this process recorded in the database: by a worker (any outcome but `lease_expired`) or by the rescuer (`lease_expired`, `timed_out`). An end the database refused (the lease was gone) is counted in `tasktable_lease_lost_total` instead. |
//! | `tasktable_attempt_duration_seconds` | histogram | queue, kind | how long a handler ran: from its start to its answer, its timeout, or the signal that stopped it |
//! | `tasktable_queue_wait_seconds` | histogram | queue, kind | from the moment a task was due (`run_at`) to its claim, both by the database's clock |
//! | `tasktable_tasks_claimed_total` | counter | queue, kind | tasks this process's workers claimed |
//! | `tasktable_lease_lost_total` | counter | queue, kind | attempts whose lease a worker lost: the database reported it gone, no renewal was confirmed for a whole lease length, or the end could not be recorded under it |
//! | `tasktable_tasks_rescued_total` | counter | queue, outcome | running tasks whose lease had expired that the rescuer took back (`lease_expired` or `timed_out`) |
//! | `tasktable_worker_running_tasks` | gauge | queue | tasks this process's workers are running now |
//! | `tasktable_worker_waiting_tasks` | gauge | | tasks this process's workers claimed ahead of a free slot and have not started (leased and renewed while they wait) |
//! | `tasktable_claims_total` | counter | queue | claim calls made to the database, whether or not they found work |
//! | `tasktable_store_errors_total` | counter | call | failed database calls of the runtime: `claim`, `renew`, `finish` (each failed try; the completer retries), `rescue`, `schedule`, `retention`, `heartbeat` (a heartbeat, or marking silent workers gone) |
//! | `tasktable_tasks_purged_total` | counter | state, action | finished tasks this process's retention took: `deleted` or `archived` |
//! | `tasktable_schedule_slots_total` | counter | schedule, result | slots of a schedule this process's scheduler settled: `fired` (a task was created) or `skipped` (by the overlap policy) |
//! | `tasktable_batch_items_total` | counter | queue, kind, outcome | items of batches this process's runners ended: `done`, or `failed` for good (each spent the error budget) |
//! | `tasktable_batch_saves_total` | counter | queue, kind | saves of batch progress this process's runners made (each one write transaction) |
//!
//! The attempt counters of every outcome exist at zero from the moment a worker starts,
//! for each of its queues and kinds, so a rate over them is defined before the first
//! failure; the rescue counters likewise, for the worker's queues and for every queue the
//! database holds when a rescuer starts.

use ::metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Counter,
    Gauge, Histogram, Unit,
};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, Task};

/// Counter of attempts whose end this process recorded, by queue, kind and outcome.
pub const ATTEMPTS_TOTAL: &str = "tasktable_attempts_total";
/// Histogram of how long handlers ran, in seconds, by queue and kind.
pub const ATTEMPT_DURATION_SECONDS: &str = "tasktable_attempt_duration_seconds";
/// Histogram of the time from a task's `run_at` to its claim, in seconds by the
/// database's clock, by queue and kind.
pub const QUEUE_WAIT_SECONDS: &str = "tasktable_queue_wait_seconds";
/// Counter of tasks this process's workers claimed, by queue and kind.
pub const TASKS_CLAIMED_TOTAL: &str = "tasktable_tasks_claimed_total";
/// Counter of attempts whose lease a worker lost, by queue and kind.
pub const LEASE_LOST_TOTAL: &str = "tasktable_lease_lost_total";
/// Counter of expired tasks this process's rescuer took back, by queue and outcome
/// (`lease_expired` or `timed_out`).
pub const TASKS_RESCUED_TOTAL: &str = "tasktable_tasks_rescued_total";
/// Gauge of the tasks this process's workers run now, by queue.
pub const WORKER_RUNNING_TASKS: &str = "tasktable_worker_running_tasks";
/// Gauge of the tasks this process's workers claimed ahead of a free slot and have not
/// started; no labels.
pub const WORKER_WAITING_TASKS: &str = "tasktable_worker_waiting_tasks";
/// Counter of claim calls, whether or not they found work, by queue.
pub const CLAIMS_TOTAL: &str = "tasktable_claims_total";
/// Counter of the runtime's failed database calls, by `call`.
pub const STORE_ERRORS_TOTAL: &str = "tasktable_store_errors_total";
/// Counter of schedule slots this process's scheduler settled, by schedule name and
/// result (`fired` or `skipped`).
pub const SCHEDULE_SLOTS_TOTAL: &str = "tasktable_schedule_slots_total";
/// Counter of finished tasks this process's retention took, by state and action
/// (`deleted` or `archived`).
pub const TASKS_PURGED_TOTAL: &str = "tasktable_tasks_purged_total";
/// Counter of batch items this process's runners ended, by queue, kind and outcome
/// (`done` or `failed`).
pub const BATCH_ITEMS_TOTAL: &str = "tasktable_batch_items_total";
/// Counter of batch progress saves this process's runners made, by queue and kind.
pub const BATCH_SAVES_TOTAL: &str = "tasktable_batch_saves_total";

/// Every series above, for exporters and tests that want to list them.
pub const ALL: [&str; 14] = [
    ATTEMPTS_TOTAL,
    ATTEMPT_DURATION_SECONDS,
    QUEUE_WAIT_SECONDS,
    TASKS_CLAIMED_TOTAL,
    LEASE_LOST_TOTAL,
    TASKS_RESCUED_TOTAL,
    WORKER_RUNNING_TASKS,
    WORKER_WAITING_TASKS,
    CLAIMS_TOTAL,
    STORE_ERRORS_TOTAL,
    SCHEDULE_SLOTS_TOTAL,
    TASKS_PURGED_TOTAL,
    BATCH_ITEMS_TOTAL,
    BATCH_SAVES_TOTAL,
];

/// Registers the help text of every series with the installed recorder. Workers and
/// rescuers call it when they start; calling it again changes nothing.
pub fn describe() {
    describe_counter!(
        ATTEMPTS_TOTAL,
        Unit::Count,
        "Attempts whose end this process recorded, by outcome."
    );
    describe_histogram!(
        ATTEMPT_DURATION_SECONDS,
        Unit::Seconds,
        "How long handlers ran, per attempt."
    );
    describe_histogram!(
        QUEUE_WAIT_SECONDS,
        Unit::Seconds,
        "Time from a task being due to its claim, by the database's clock."
    );
    describe_counter!(
        TASKS_CLAIMED_TOTAL,
        Unit::Count,
        "Tasks claimed by this process's workers."
    );
    describe_counter!(
        LEASE_LOST_TOTAL,
        Unit::Count,
        "Attempts whose lease a worker lost before recording their end."
    );
    describe_counter!(
        TASKS_RESCUED_TOTAL,
        Unit::Count,
        "Tasks with expired leases taken back by this process's rescuer."
    );
    describe_gauge!(
        WORKER_RUNNING_TASKS,
        Unit::Count,
        "Tasks this process's workers are running now."
    );
    describe_gauge!(
        WORKER_WAITING_TASKS,
        Unit::Count,
        "Tasks this process's workers claimed ahead of a free slot and have not started."
    );
    describe_counter!(
        CLAIMS_TOTAL,
        Unit::Count,
        "Claim calls made to the database."
    );
    describe_counter!(
        STORE_ERRORS_TOTAL,
        Unit::Count,
        "Failed database calls of the worker runtime, by call."
    );
    describe_counter!(
        SCHEDULE_SLOTS_TOTAL,
        Unit::Count,
        "Slots of recurring schedules this process settled, fired or skipped."
    );
    describe_counter!(
        TASKS_PURGED_TOTAL,
        Unit::Count,
        "Finished tasks this process's retention deleted or archived."
    );
    describe_counter!(
        BATCH_ITEMS_TOTAL,
        Unit::Count,
        "Items of batches this process's runners ended, done or failed for good."
    );
    describe_counter!(
        BATCH_SAVES_TOTAL,
        Unit::Count,
        "Saves of batch progress this process's runners made."
    );
    // Present at zero from the start, so that an alert on a rate of errors has a series.
    for call in Call::ALL {
        counter!(STORE_ERRORS_TOTAL, "call" => call.as_str()).increment(0);
    }
}

/// Tasks claimed ahead and waiting for a slot went up (or down) by `delta`; `0.0` makes
/// the series exist.
pub(crate) fn waiting(delta: f64) {
    gauge!(WORKER_WAITING_TASKS).increment(delta);
}

/// The counters of one batch attempt, bound once for its queue and kind.
pub(crate) struct BatchMetrics {
    pub done: Counter,
    pub failed: Counter,
    pub saves: Counter,
}

impl BatchMetrics {
    pub(crate) fn new(queue: &str, kind: &str) -> Self {
        let labels = |outcome: &'static str| {
            [
                ("queue", queue.to_owned()),
                ("kind", kind.to_owned()),
                ("outcome", outcome.to_owned()),
            ]
        };
        BatchMetrics {
            done: counter!(BATCH_ITEMS_TOTAL, &labels("done")),
            failed: counter!(BATCH_ITEMS_TOTAL, &labels("failed")),
            saves: counter!(
                BATCH_SAVES_TOTAL,
                &[("queue", queue.to_owned()), ("kind", kind.to_owned())]
            ),
        }
    }
}

/// Which database call failed, for [`STORE_ERRORS_TOTAL`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Call {
    Claim,
    Renew,
    Finish,
    Rescue,
    Schedule,
    Retention,
    Heartbeat,
}

impl Call {
    const ALL: [Call; 7] = [
        Call::Claim,
        Call::Renew,
        Call::Finish,
        Call::Rescue,
        Call::Schedule,
        Call::Retention,
        Call::Heartbeat,
    ];

    fn as_str(self) -> &'static str {
        match self {
            Call::Claim => "claim",
            Call::Renew => "renew",
            Call::Finish => "finish",
            Call::Rescue => "rescue",
            Call::Schedule => "schedule",
            Call::Retention => "retention",
            Call::Heartbeat => "heartbeat",
        }
    }
}

/// An attempt that ended outside this process's workers (a pull worker's, through the
/// server), counted as theirs are.
pub fn attempt_ended(queue: &str, kind: &str, outcome: AttemptOutcome) {
    counter!(
        ATTEMPTS_TOTAL,
        "queue" => queue.to_owned(),
        "kind" => kind.to_owned(),
        "outcome" => outcome.as_str(),
    )
    .increment(1);
}

pub(crate) fn store_error(call: Call) {
    counter!(STORE_ERRORS_TOTAL, "call" => call.as_str()).increment(1);
}

/// What one firing of a schedule settled. Schedules are few and named by operators, so
/// their names are bounded labels.
pub(crate) fn schedule_fired(f: &tasktable_store::Fired) {
    let created = f.tasks.iter().filter(|t| t.created).count() as u64;
    counter!(SCHEDULE_SLOTS_TOTAL, "schedule" => f.name.clone(), "result" => "fired")
        .increment(created);
    counter!(SCHEDULE_SLOTS_TOTAL, "schedule" => f.name.clone(), "result" => "skipped")
        .increment(f.skipped.len() as u64);
}

/// Tasks one sweep of retention took in one state.
pub(crate) fn purged(state: tasktable_core::TaskState, n: u64, archived: bool) {
    let action = if archived { "archived" } else { "deleted" };
    counter!(TASKS_PURGED_TOTAL, "state" => state.as_str(), "action" => action).increment(n);
}

/// The outcomes the rescuer gives the attempts it takes back.
const RESCUE_OUTCOMES: [AttemptOutcome; 2] =
    [AttemptOutcome::LeaseExpired, AttemptOutcome::TimedOut];

/// Makes the rescue counters of `queue` exist at zero, so that an alert on them has a
/// series before the first rescue.
pub(crate) fn rescued_zero(queue: &str) {
    for outcome in RESCUE_OUTCOMES {
        counter!(
            TASKS_RESCUED_TOTAL,
            "queue" => queue.to_owned(),
            "outcome" => outcome.as_str(),
        )
        .increment(0);
    }
}

/// A rescued attempt: the rescuer is not on the hot path, so its labels are built per
/// task.
pub(crate) fn rescued(task: &Task, outcome: AttemptOutcome) {
    counter!(
        TASKS_RESCUED_TOTAL,
        "queue" => task.queue.clone(),
        "outcome" => outcome.as_str(),
    )
    .increment(1);
    counter!(
        ATTEMPTS_TOTAL,
        "queue" => task.queue.clone(),
        "kind" => task.kind.clone(),
        "outcome" => outcome.as_str(),
    )
    .increment(1);
}

/// A worker's handles for one queue, bound once when it starts so the claim loop and the
/// executors record with no label building or registry lookup per task.
#[derive(Debug)]
pub(crate) struct QueueMetrics {
    queue: String,
    claims: Counter,
    running: Gauge,
    kinds: HashMap<String, Arc<TaskMetrics>>,
}

impl QueueMetrics {
    pub fn new(queue: &str, kinds: &[String]) -> Self {
        let running = gauge!(WORKER_RUNNING_TASKS, "queue" => queue.to_owned());
        rescued_zero(queue);
        QueueMetrics {
            queue: queue.to_owned(),
            claims: counter!(CLAIMS_TOTAL, "queue" => queue.to_owned()),
            kinds: kinds
                .iter()
                .map(|kind| {
                    let m = TaskMetrics::new(queue, kind, running.clone());
                    (kind.clone(), Arc::new(m))
                })
                .collect(),
            running,
        }
    }

    /// One claim call was made.
    pub fn claim_made(&self) {
        self.claims.increment(1);
    }

    /// Records the claim of `task` and returns the handles its executor records with.
    pub fn claimed(&self, task: &Task) -> Arc<TaskMetrics> {
        let m = match self.kinds.get(task.kind.as_str()) {
            Some(m) => m.clone(),
            // The claim asks only for registered kinds; a stranger still gets counted.
            None => Arc::new(TaskMetrics::new(
                &self.queue,
                &task.kind,
                self.running.clone(),
            )),
        };
        m.claimed.increment(1);
        if let Some(started) = task.started_at {
            // Both instants come from the database's clock; a task claimed before it was
            // due (it cannot be, but clocks are clocks) waited zero.
            let wait = (started - task.run_at).to_std().unwrap_or(Duration::ZERO);
            m.queue_wait.record(wait.as_secs_f64());
        }
        m
    }
}

/// A worker's handles for one queue and kind.
#[derive(Debug)]
pub(crate) struct TaskMetrics {
    claimed: Counter,
    queue_wait: Histogram,
    duration: Histogram,
    lease_lost: Counter,
    running: Gauge,
    /// Indexed like [`AttemptOutcome::ALL`].
    attempts: [Counter; AttemptOutcome::ALL.len()],
}

impl TaskMetrics {
    fn new(queue: &str, kind: &str, running: Gauge) -> Self {
        let labels = || [("queue", queue.to_owned()), ("kind", kind.to_owned())];
        TaskMetrics {
            claimed: counter!(TASKS_CLAIMED_TOTAL, &labels()),
            queue_wait: histogram!(QUEUE_WAIT_SECONDS, &labels()),
            duration: histogram!(ATTEMPT_DURATION_SECONDS, &labels()),
            lease_lost: counter!(LEASE_LOST_TOTAL, &labels()),
            running,
            attempts: AttemptOutcome::ALL.map(|outcome| {
                counter!(
                    ATTEMPTS_TOTAL,
                    "queue" => queue.to_owned(),
                    "kind" => kind.to_owned(),
                    "outcome" => outcome.as_str(),
                )
            }),
        }
    }

    pub fn started(&self) {
        self.running.increment(1.0);
    }

    pub fn ended(&self) {
        self.running.decrement(1.0);
    }

    pub fn ran_for(&self, d: Duration) {
        self.duration.record(d.as_secs_f64());
    }

    pub fn lease_lost(&self) {
        self.lease_lost.increment(1);
    }

    /// The end of an attempt was recorded in the database with `outcome`.
    pub fn recorded(&self, outcome: AttemptOutcome) {
        if let Some(i) = AttemptOutcome::ALL.iter().position(|o| *o == outcome) {
            self.attempts[i].increment(1);
        }
    }
}
