//! No stale write accepted. Every write a worker was told was accepted carried the token
//! of the attempt the history says was current:
//!
//! - an accepted end of an attempt (or probe) under token `T` is history row `T`, made by
//!   that worker, with that outcome;
//! - an accepted renewal or checkpoint under `T` came from row `T`'s worker, and was sent
//!   before any worker had claimed attempt `T + 1`: the claimer journals its claim after
//!   the claim committed, and from then on no write under `T` can hold (row `T`'s
//!   recorded end is no bound: a rescuer reads the clock before it waits for row locks,
//!   and a late write before the rescue lands is allowed);
//! - every effect row was written while the task ran under the effect's own token (its
//!   witness columns say so);
//! - every checkpoint a claim received was saved under an earlier token, and never by a
//!   write its worker was told was refused;
//! - when workers were frozen past their leases, at least one deliberate stale write (a
//!   pull worker's probe, or a thawed in-process handler's effect) was made and refused,
//!   so fencing was put to the test.

use super::{Evidence, TaskRecord, Verdict};
use crate::journal::{Entry, Op};
use std::collections::{BTreeSet, HashMap};

pub fn check(e: &Evidence) -> Verdict {
    let mut v = Verdict::new(
        "no_stale_write_accepted",
        "every accepted write carried the token of the attempt the history says was current",
    );
    let mut claimed_at: HashMap<(i64, i64), i64> = HashMap::new();
    for claim in e.journal.iter().filter(|x| x.op == Op::Claim) {
        if let Some(token) = claim.token {
            let at = claimed_at.entry((claim.task, token)).or_insert(claim.at_ms);
            *at = (*at).min(claim.at_ms);
        }
    }
    for x in e.journal.iter().filter(|x| x.accepted == Some(true)) {
        let (Some(task), Some(token)) = (e.tasks.get(&x.task), x.token) else {
            continue;
        };
        if !matches!(x.op, Op::Finish | Op::Probe | Op::Renew | Op::Checkpoint) {
            continue;
        }
        v.examined += 1;
        let next_claimed = claimed_at.get(&(x.task, token + 1)).copied();
        if let Some(problem) = against_history(x, task, token, next_claimed) {
            v.fail(problem);
        }
    }
    for effect in &e.effects {
        v.examined += 1;
        let state = effect.seen_state.as_deref().unwrap_or("missing");
        if effect.seen_token != Some(effect.token) || state != "running" {
            v.fail(format!(
                "task {}: {}'s effect under token {} was written while the task was {state} under token {:?}",
                effect.task, effect.worker, effect.token, effect.seen_token
            ));
        }
    }
    let froze = e.disruptions.iter().any(|d| d.kind == "freeze_worker");
    let deliberate_refused = e
        .journal
        .iter()
        .filter(|x| matches!(x.op, Op::Probe | Op::Effect) && x.accepted == Some(false))
        .count();
    if froze && deliberate_refused == 0 {
        v.fail(
            "workers were frozen past their leases, yet no deliberate stale write (a probe or a \
             thawed handler's effect) was made and refused: fencing went untested"
                .into(),
        );
    }
    let refused: BTreeSet<(i64, i64, u32)> = e
        .journal
        .iter()
        .filter(|x| x.op == Op::Checkpoint && x.accepted == Some(false))
        .filter_map(|x| x.mark.map(|m| (x.task, m.token, m.step)))
        .collect();
    for claim in e.journal.iter().filter(|x| x.op == Op::Claim) {
        let (Some(mark), Some(token)) = (claim.mark, claim.token) else {
            continue;
        };
        v.examined += 1;
        if mark.token >= token {
            v.fail(format!(
                "task {}: the claim under token {token} received a checkpoint saved under token {}",
                claim.task, mark.token
            ));
        }
        if refused.contains(&(claim.task, mark.token, mark.step)) {
            v.fail(format!(
                "task {}: the claim under token {token} received step {} saved under token {}, a write its worker was told was refused",
                claim.task, mark.step, mark.token
            ));
        }
    }
    v
}

fn against_history(
    x: &Entry,
    task: &TaskRecord,
    token: i64,
    next_claimed: Option<i64>,
) -> Option<String> {
    let id = task.id;
    let what = format!(
        "{} accepted for {} under token {token}",
        op_name(x.op),
        x.worker
    );
    let Some(row) = task.row(token) else {
        return (!task.runs_under(token))
            .then(|| format!("task {id}: {what}, but the history has no attempt {token}"));
    };
    if row.worker.as_deref() != Some(x.worker.as_str()) {
        return Some(format!(
            "task {id}: {what}, but attempt {token} was {:?}'s",
            row.worker
        ));
    }
    match x.op {
        Op::Finish | Op::Probe if x.outcome.as_deref() != Some(row.outcome.as_str()) => {
            Some(format!(
                "task {id}: {what} as {:?}, but the history says attempt {token} ended {}",
                x.outcome,
                row.outcome.as_str()
            ))
        }
        Op::Renew | Op::Checkpoint if next_claimed.is_some_and(|c| x.at_ms > c) => Some(format!(
            "task {id}: {what} was sent {} ms after attempt {} was claimed",
            x.at_ms - next_claimed.unwrap_or_default(),
            token + 1
        )),
        _ => None,
    }
}

fn op_name(op: Op) -> &'static str {
    match op {
        Op::Claim => "claim",
        Op::Renew => "renewal",
        Op::Checkpoint => "checkpoint",
        Op::Effect => "effect",
        Op::Finish => "end",
        Op::Probe => "probe",
    }
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{effect, entry, healthy};
    use super::super::Disruption;
    use super::*;
    use crate::behaviour::Mark;

    fn fires(e: &Evidence, text: &str) {
        super::super::fixtures::fires(check, e, text);
    }

    #[test]
    fn a_probe_accepted_after_the_rescue_is_a_stale_write() {
        let mut e = healthy();
        let mut probe = entry("w1", Op::Probe, 1, 6_500);
        probe.outcome = Some("succeeded".into());
        e.journal.push(probe);
        fires(&e, "probe accepted for w1 under token 1 as Some(\"succeeded\"), but the history says attempt 1 ended lease_expired");
    }

    #[test]
    fn a_run_with_freezes_must_have_made_a_stale_write_and_seen_it_refused() {
        let mut e = healthy();
        e.disruptions.push(Disruption {
            kind: "freeze_worker",
            target: Some("w1".into()),
            from_ms: 1_600,
            to_ms: 7_000,
        });
        fires(&e, "fencing went untested");
        let mut probe = entry("w1", Op::Probe, 1, 7_100);
        probe.outcome = Some("succeeded".into());
        probe.accepted = Some(false);
        e.journal.push(probe);
        assert!(check(&e).passed(), "{:?}", check(&e).violations);
    }

    #[test]
    fn a_renewal_accepted_after_the_next_attempt_was_claimed_is_a_stale_write() {
        // w2 journaled its claim of attempt 2 at 5,100.
        let mut e = healthy();
        e.journal.push(entry("w1", Op::Renew, 1, 5_300));
        fires(
            &e,
            "renewal accepted for w1 under token 1 was sent 200 ms after attempt 2 was claimed",
        );
        // Before the next claim, a late write may land ahead of a rescuer that read its
        // clock earlier: allowed, whatever the recorded end says.
        let mut e = healthy();
        e.journal.push(entry("w1", Op::Checkpoint, 1, 5_050));
        assert!(check(&e).passed(), "{:?}", check(&e).violations);
    }

    #[test]
    fn a_write_accepted_under_another_workers_token_is_reported() {
        let mut e = healthy();
        e.journal.push(entry("w1", Op::Checkpoint, 2, 5_500));
        fires(
            &e,
            "checkpoint accepted for w1 under token 2, but attempt 2 was Some(\"w2\")'s",
        );
        let mut e = healthy();
        e.journal.push(entry("w1", Op::Renew, 3, 5_500));
        fires(&e, "the history has no attempt 3");
    }

    #[test]
    fn an_effect_written_after_the_lease_moved_on_is_reported() {
        let mut e = healthy();
        e.effects.push(effect(1, 1, "w1", 2));
        fires(
            &e,
            "w1's effect under token 1 was written while the task was running under token Some(2)",
        );
    }

    #[test]
    fn a_claim_that_received_a_refused_or_future_checkpoint_is_reported() {
        let mark = Mark {
            token: 1,
            step: 3,
            snoozed: false,
        };
        let mut e = healthy();
        let mut refused = entry("w1", Op::Checkpoint, 1, 5_400);
        refused.mark = Some(mark);
        refused.accepted = Some(false);
        e.journal.push(refused);
        e.journal[2].mark = Some(mark);
        fires(
            &e,
            "received step 3 saved under token 1, a write its worker was told was refused",
        );
        let mut e = healthy();
        e.journal[2].mark = Some(Mark { token: 2, ..mark });
        fires(
            &e,
            "the claim under token 2 received a checkpoint saved under token 2",
        );
    }
}
