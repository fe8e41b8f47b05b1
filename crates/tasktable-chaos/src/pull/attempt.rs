//! One claimed task of the pull worker, from its claim to its end: the script's steps
//! with renewals beside them, the probe after a lost lease, and the end retried while the
//! server cannot be reached.

use super::{certain, Answer, Claimed, Pull};
use crate::behaviour::{script, Behaviour, Ending, Mark, Step};
use crate::journal::Op;
use chrono::Utc;
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The lease as this worker last saw it confirmed.
struct LeaseView {
    confirmed: Mutex<Instant>,
    /// Cancelled once the server calls the lease lost.
    lost: CancellationToken,
}

pub(super) async fn work(pull: &Pull, task: Claimed, stop: &CancellationToken) {
    let received = Mark::from_value(task.checkpoint.as_ref());
    let mut claim = pull.entry(Op::Claim, &task);
    claim.attempt = Some(task.attempt);
    claim.mark = received;
    claim.accepted = Some(true);
    pull.journal.record(&claim);
    let Ok(behaviour) = serde_json::from_value::<Behaviour>(task.payload.clone()) else {
        eprintln!(
            "task {} has a payload that is not a chaos behaviour",
            task.id
        );
        std::process::exit(3);
    };
    let view = LeaseView {
        confirmed: Mutex::new(Instant::now()),
        lost: CancellationToken::new(),
    };
    let (steps, ending) = script(&behaviour, task.attempt, received, task.token);
    let steps_done = async {
        for step in steps {
            match step {
                Step::Work(d) => tokio::time::sleep(d).await,
                Step::Save(mark) => {
                    let mut entry = pull.entry(Op::Checkpoint, &task);
                    entry.mark = Some(mark);
                    let answer = pull
                        .lease_call(&task, "checkpoint", json!({ "checkpoint": mark }))
                        .await;
                    entry.accepted = certain(&answer);
                    pull.journal.record(&entry);
                    match answer {
                        Answer::Ok => {}
                        Answer::Lost => return lost(&view),
                        Answer::Unknown => return false,
                    }
                }
                Step::Effect => {
                    let mut entry = pull.entry(Op::Effect, &task);
                    entry.accepted = Some(true);
                    pull.journal.record(&entry);
                }
            }
        }
        true
    };
    // Renewals stop when the steps are done (or the lease is lost), before the end is sent.
    let completed = tokio::select! {
        done = steps_done => done,
        () = keep_renewing(pull, &task, &view) => false,
        () = stop.cancelled() => {
            release(pull, &task).await;
            return;
        }
    };
    if view.lost.is_cancelled() {
        probe(pull, &task).await;
    } else if completed {
        end(pull, &task, &view, ending, stop).await;
    }
}

/// Renews every third of the lease; returns when the server calls the lease lost.
async fn keep_renewing(pull: &Pull, task: &Claimed, view: &LeaseView) {
    loop {
        tokio::time::sleep(pull.lease / 3).await;
        if !renew(pull, task, view).await {
            return;
        }
    }
}

/// One renewal; `false` when the server says the lease is lost.
async fn renew(pull: &Pull, task: &Claimed, view: &LeaseView) -> bool {
    let asked = Instant::now();
    let mut entry = pull.entry(Op::Renew, task);
    let answer = pull
        .lease_call(
            task,
            "renew",
            json!({ "lease_ms": pull.lease.as_millis() as u64 }),
        )
        .await;
    entry.accepted = certain(&answer);
    pull.journal.record(&entry);
    match answer {
        Answer::Ok => {
            let mut confirmed = view.confirmed.lock().expect("lease view");
            *confirmed = (*confirmed).max(asked);
            true
        }
        Answer::Lost => lost(view),
        Answer::Unknown => true,
    }
}

/// The server called the lease lost: the attempt is over. Returns `false` so callers can
/// `return` it.
fn lost(view: &LeaseView) -> bool {
    view.lost.cancel();
    false
}

/// After the server called the lease lost, one more `complete` under the same token, on
/// purpose: it must be refused too.
async fn probe(pull: &Pull, task: &Claimed) {
    let mut probe = pull.entry(Op::Probe, task);
    probe.outcome = Some("succeeded".into());
    let answer = pull
        .lease_call(task, "complete", json!({ "result": { "probe": true } }))
        .await;
    probe.accepted = certain(&answer);
    pull.journal.record(&probe);
}

/// Ends the attempt as the script says, retrying while the server cannot be reached and
/// the lease may still hold.
async fn end(
    pull: &Pull,
    task: &Claimed,
    view: &LeaseView,
    ending: Ending,
    stop: &CancellationToken,
) {
    let (op, outcome, fields) = match ending {
        Ending::Succeed(result) => ("complete", "succeeded", json!({ "result": result })),
        Ending::Retry(error) => (
            "fail",
            "error",
            json!({ "error": error, "retryable": true }),
        ),
        Ending::Fail(error) => (
            "fail",
            "failed",
            json!({ "error": error, "retryable": false }),
        ),
        Ending::Snooze(d) => (
            "snooze",
            "snoozed",
            json!({ "delay_ms": d.as_millis() as u64 }),
        ),
        Ending::Overrun => {
            // Work on until the deadline, then give up without a word: the lease is capped
            // at the deadline, and the rescuer records the attempt as timed out.
            if let Some(deadline) = task.deadline_at {
                let left = (deadline - Utc::now()).to_std().unwrap_or_default();
                tokio::select! {
                    () = tokio::time::sleep(left) => {}
                    () = stop.cancelled() => release(pull, task).await,
                }
            }
            return;
        }
    };
    // A lease not confirmed for a whole lease length (the process was frozen, or the
    // server unreachable) is confirmed before the attempt's end is sent.
    let stale = view.confirmed.lock().expect("lease view").elapsed() >= pull.lease;
    if stale && !renew(pull, task, view).await {
        probe(pull, task).await;
        return;
    }
    let mut unanswered = false;
    loop {
        let mut entry = pull.entry(Op::Finish, task);
        entry.outcome = Some(outcome.into());
        let answer = pull.lease_call(task, op, fields.clone()).await;
        entry.accepted = match (&answer, unanswered) {
            (Answer::Ok, _) => Some(true),
            // A refusal after an unanswered try may mean that try was applied.
            (Answer::Lost, false) => Some(false),
            _ => None,
        };
        let lease_gone = view.confirmed.lock().expect("lease view").elapsed() >= pull.lease;
        if !matches!(answer, Answer::Unknown) || lease_gone || stop.is_cancelled() {
            pull.journal.record(&entry);
            return;
        }
        unanswered = true;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Gives the task back without spending the attempt (this worker is stopping).
async fn release(pull: &Pull, task: &Claimed) {
    let mut entry = pull.entry(Op::Finish, task);
    entry.outcome = Some("interrupted".into());
    let answer = pull.lease_call(task, "release", json!({})).await;
    entry.accepted = certain(&answer);
    pull.journal.record(&entry);
}
