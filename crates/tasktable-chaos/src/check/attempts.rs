//! Attempts recorded equal attempts counted. For every finished task:
//!
//! - one history row per claim (`lease_token` rows);
//! - each row records the attempt number the state machine gives it (1 + the attempts
//!   spent before it; snoozes and interruptions give theirs back);
//! - the task's `attempt` counter equals the attempts its history spent;
//! - every row but the last sent the task back to `pending` (a retry with attempts
//!   left, a snooze, an interruption), and the last one explains the final state (a
//!   retryable end fails the task only with every attempt spent);
//! - every claim a worker journaled is the row of its token, with the same attempt
//!   number and worker.

use super::{spends, Evidence, TaskRecord, Verdict};
use crate::journal::Op;
use tasktable::{AttemptOutcome as O, TaskState};

pub fn check(e: &Evidence) -> Verdict {
    let mut v = Verdict::new(
        "attempts_recorded_equal_attempts_counted",
        "one history row per claim, numbered and counted as the state machine defines",
    );
    for task in e.tasks.values().filter(|t| t.state.is_finished()) {
        v.examined += 1;
        for problem in history(task) {
            v.fail(format!("task {}: {problem}", task.id));
        }
    }
    for claim in e.journal.iter().filter(|x| x.op == Op::Claim) {
        let (Some(task), Some(token)) = (e.tasks.get(&claim.task), claim.token) else {
            continue;
        };
        let Some(row) = task.row(token) else {
            if !task.runs_under(token) {
                v.fail(format!(
                    "task {}: {} claimed it under token {token}, but the history has no attempt {token}",
                    task.id, claim.worker
                ));
            }
            continue;
        };
        v.examined += 1;
        if row.worker.as_deref() != Some(claim.worker.as_str())
            || Some(row.attempt) != claim.attempt
        {
            v.fail(format!(
                "task {}: {} claimed attempt {:?} under token {token}, but the history says attempt {} by {:?}",
                task.id, claim.worker, claim.attempt, row.attempt, row.worker
            ));
        }
    }
    v
}

fn history(task: &TaskRecord) -> Vec<String> {
    let mut problems = Vec::new();
    if task.rows.len() as i64 != task.lease_token {
        problems.push(format!(
            "{} attempts recorded for {} claims (lease_token)",
            task.rows.len(),
            task.lease_token
        ));
    }
    let mut spent = 0;
    for (i, row) in task.rows.iter().enumerate() {
        if row.attempt != spent + 1 {
            problems.push(format!(
                "row {} records attempt {}, but {spent} attempts were spent before it",
                i + 1,
                row.attempt
            ));
        }
        if spends(row.outcome) {
            spent += 1;
        }
        let last = i + 1 == task.rows.len();
        let retryable = matches!(row.outcome, O::Error | O::TimedOut | O::LeaseExpired);
        let back_to_pending = matches!(row.outcome, O::Snoozed | O::Interrupted)
            || (retryable && spent < task.max_attempts);
        let explains_end = match task.state {
            TaskState::Succeeded => row.outcome == O::Succeeded,
            TaskState::Failed => {
                row.outcome == O::Failed || (retryable && spent >= task.max_attempts)
            }
            TaskState::Cancelled => row.outcome == O::Cancelled,
            _ => false,
        };
        if !last && !back_to_pending {
            problems.push(format!(
                "row {} ended {} with {spent} of {} attempts spent, yet another attempt followed",
                i + 1,
                row.outcome.as_str(),
                task.max_attempts
            ));
        }
        if last && !explains_end {
            problems.push(format!(
                "it is {} after a last attempt that ended {} with {spent} of {} attempts spent",
                task.state.as_str(),
                row.outcome.as_str(),
                task.max_attempts
            ));
        }
    }
    if task.attempt != spent {
        problems.push(format!(
            "its attempt counter is {} but its history spent {spent}",
            task.attempt
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{healthy, row, task};
    use super::*;

    fn fires(e: &Evidence, text: &str) {
        super::super::fixtures::fires(check, e, text);
    }

    #[test]
    fn a_claim_without_a_history_row_is_reported() {
        let mut e = healthy();
        task(&mut e).lease_token = 3;
        fires(&e, "2 attempts recorded for 3 claims");
    }

    #[test]
    fn a_counter_that_disagrees_with_the_history_is_reported() {
        let mut e = healthy();
        task(&mut e).attempt = 3;
        fires(&e, "its attempt counter is 3 but its history spent 2");
    }

    #[test]
    fn a_refunded_attempt_keeps_its_number_and_a_spent_one_does_not() {
        let mut e = healthy();
        let t = task(&mut e);
        t.rows = vec![row(1, "w1", O::Snoozed, 1), row(1, "w1", O::Succeeded, 2)];
        t.attempt = 1;
        e.journal.clear();
        assert!(check(&e).passed(), "{:?}", check(&e).violations);
        let t = task(&mut e);
        t.rows[0].outcome = O::Error;
        fires(
            &e,
            "row 2 records attempt 1, but 1 attempts were spent before it",
        );
    }

    #[test]
    fn a_retry_past_max_attempts_or_a_failure_with_attempts_left_is_reported() {
        let mut e = healthy();
        e.journal.clear();
        let t = task(&mut e);
        t.max_attempts = 1;
        fires(
            &e,
            "row 1 ended lease_expired with 1 of 1 attempts spent, yet another attempt followed",
        );
        let t = task(&mut e);
        t.max_attempts = 25;
        t.state = TaskState::Failed;
        t.rows[1].outcome = O::Error;
        fires(
            &e,
            "it is failed after a last attempt that ended error with 2 of 25 attempts spent",
        );
    }

    #[test]
    fn a_claim_the_history_gives_to_another_worker_is_reported() {
        let mut e = healthy();
        e.journal[0].worker = "w9".into();
        fires(&e, "w9 claimed attempt Some(1) under token 1, but the history says attempt 1 by Some(\"w1\")");
    }
}
