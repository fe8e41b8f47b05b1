//! The log lines of attempts that did not succeed: a WARN line for each attempt that
//! failed, timed out or lost its lease, and for each task that failed for good, naming
//! the task, its kind and queue, the attempt, the worker, the outcome and the error (cut
//! to [`MAX_ERROR_CHARS`]; never the payload or the result). The in-process worker, the
//! rescuer and the server (for pull workers' ends) write them.
//!
//! Bounded, so that a storm of failures is a sample and not a flood: at most
//! [`LINES_PER_WINDOW`] such lines in each window of [`WINDOW`] in a process; the rest are
//! counted, and the first line of a later window is preceded by one line saying how many
//! the windows before it left out.
//!
//! Owns: which ends are logged, their fields and words, the bound. Must not know: how an
//! end is recorded (the store, the completer) or counted (metrics).

use std::sync::Mutex;
use std::time::{Duration, Instant};
use tasktable_core::{AttemptOutcome, TaskId};

/// The length of a window of the bound.
pub const WINDOW: Duration = Duration::from_secs(10);
/// Most lines of attempts per window.
pub const LINES_PER_WINDOW: u32 = 50;
/// Longest error written, in characters; a longer one is cut and says so.
pub const MAX_ERROR_CHARS: usize = 1000;

/// An attempt's end, as a log line names it.
#[derive(Debug, Clone, Copy)]
pub struct Ended<'a> {
    /// The task whose attempt ended.
    pub task_id: TaskId,
    /// The task's queue, the line's `queue` field.
    pub queue: &'a str,
    /// The task's kind, the line's `kind` field.
    pub kind: &'a str,
    /// The attempt's number, from 1.
    pub attempt: u32,
    /// The attempts the task allows: a retryable end of the last one is written as the
    /// task failing for good.
    pub max_attempts: u32,
    /// The worker that ran it (for a pull worker, the id it claimed with).
    pub worker: &'a str,
    /// How the attempt ended; only the outcomes [`logs`] accepts get a line.
    pub outcome: AttemptOutcome,
    /// The attempt's error, cut to [`MAX_ERROR_CHARS`] in the line; `None` when the end
    /// recorded none (the rescuer's take-backs).
    pub error: Option<&'a str>,
}

/// Whether an attempt that ended so gets a line: errors, permanent failures, timeouts
/// and lost leases.
pub fn logs(outcome: AttemptOutcome) -> bool {
    matches!(
        outcome,
        AttemptOutcome::Error
            | AttemptOutcome::Failed
            | AttemptOutcome::TimedOut
            | AttemptOutcome::LeaseExpired
    )
}

/// Whether attempt `attempt` of `max_attempts`, ended so, leaves its task failed for
/// good: a permanent failure, or a retryable one with no attempt left (core's rule; an
/// operator's change of the attempts meanwhile is the store's to honour).
fn fails_for_good(outcome: AttemptOutcome, attempt: u32, max_attempts: u32) -> bool {
    match outcome {
        AttemptOutcome::Failed => true,
        AttemptOutcome::Error | AttemptOutcome::TimedOut | AttemptOutcome::LeaseExpired => {
            attempt >= max_attempts
        }
        _ => false,
    }
}

/// Writes the line of `ended` if its outcome is one an operator should hear of (an
/// error, a permanent failure, a timeout, a lost lease) and the bound allows.
pub fn attempt_ended(ended: Ended<'_>) {
    let failed = fails_for_good(ended.outcome, ended.attempt, ended.max_attempts);
    let what = match (ended.outcome, failed) {
        (AttemptOutcome::Error | AttemptOutcome::Failed | AttemptOutcome::TimedOut, true) => {
            "task failed for good"
        }
        (AttemptOutcome::Failed, false) => "attempt failed for good",
        (AttemptOutcome::Error, false) => "attempt failed; the task will be retried",
        (AttemptOutcome::TimedOut, false) => "attempt timed out; the task will be retried",
        (AttemptOutcome::LeaseExpired, true) => {
            "lease lost with the last attempt: the task failed for good"
        }
        (AttemptOutcome::LeaseExpired, false) => "lease lost: the attempt was taken back",
        _ => return,
    };
    if !admitted(Instant::now()) {
        return;
    }
    let error = ended.error.map(cut);
    tracing::warn!(
        task_id = ended.task_id,
        kind = ended.kind,
        queue = ended.queue,
        attempt = ended.attempt,
        worker = ended.worker,
        outcome = ended.outcome.as_str(),
        error = error.as_deref(),
        "{what}"
    );
}

/// A worker found its lease gone before it could record the end it had (`planned`): the
/// handler's result was dropped.
pub fn result_dropped(
    task_id: TaskId,
    queue: &str,
    kind: &str,
    worker: &str,
    planned: AttemptOutcome,
) {
    if admitted(Instant::now()) {
        tracing::warn!(
            task_id,
            kind,
            queue,
            worker,
            outcome = planned.as_str(),
            "result dropped: the lease was lost before it was recorded"
        );
    }
}

fn cut(error: &str) -> String {
    match error.char_indices().nth(MAX_ERROR_CHARS) {
        None => error.to_owned(),
        Some((at, _)) => format!("{}... ({} bytes in all)", &error[..at], error.len()),
    }
}

static BOUND: Mutex<Option<Bound>> = Mutex::new(None);

fn admitted(now: Instant) -> bool {
    let mut bound = BOUND.lock().unwrap_or_else(|e| e.into_inner());
    let bound = bound.get_or_insert_with(|| Bound::new(now));
    let (admit, left_out) = bound.admit(now);
    if let Some(n) = left_out {
        tracing::warn!(
            not_logged = n,
            "{n} more lines of failed attempts were not logged (at most {LINES_PER_WINDOW} every {} s)",
            WINDOW.as_secs()
        );
    }
    admit
}

/// The count behind the bound: the current window, the lines it wrote, and the lines
/// left out since the last summary.
#[derive(Debug)]
struct Bound {
    window: Instant,
    written: u32,
    left_out: u64,
}

impl Bound {
    fn new(now: Instant) -> Self {
        Bound {
            window: now,
            written: 0,
            left_out: 0,
        }
    }

    /// Whether a line may be written at `now`, and the count to report first when a new
    /// window begins after lines were left out.
    fn admit(&mut self, now: Instant) -> (bool, Option<u64>) {
        let mut summary = None;
        if now.duration_since(self.window) >= WINDOW {
            self.window = now;
            self.written = 0;
            if self.left_out > 0 {
                summary = Some(std::mem::take(&mut self.left_out));
            }
        }
        if self.written < LINES_PER_WINDOW {
            self.written += 1;
            (true, summary)
        } else {
            self.left_out += 1;
            (false, summary)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_storm_is_sampled_and_summed_up_in_the_next_window() {
        let start = Instant::now();
        let mut bound = Bound::new(start);
        let admitted = (0..1000)
            .filter(|i| bound.admit(start + Duration::from_millis(*i)).0)
            .count();
        assert_eq!(admitted, LINES_PER_WINDOW as usize);
        let later = start + WINDOW + Duration::from_secs(1);
        assert_eq!(
            bound.admit(later),
            (true, Some(1000 - u64::from(LINES_PER_WINDOW)))
        );
        assert_eq!(bound.admit(later), (true, None), "the count is told once");
    }

    #[test]
    fn long_errors_are_cut_on_a_character_boundary() {
        let long = "é".repeat(MAX_ERROR_CHARS + 10);
        let said = cut(&long);
        assert!(said.starts_with(&"é".repeat(MAX_ERROR_CHARS)));
        assert!(said.ends_with(&format!("... ({} bytes in all)", long.len())));
        assert_eq!(cut("short"), "short");
    }
}
