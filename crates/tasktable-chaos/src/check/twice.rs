//! No task completed twice: a succeeded task has exactly one `succeeded` row in its
//! history, and it is the last; a task that did not succeed has none. No two workers were
//! told their completion of one task was accepted, and the one that was names the
//! succeeded row's token. And the handler's effect was recorded exactly once under the
//! token whose completion was accepted (effects under other tokens belong to attempts
//! that did not succeed: at least once, as documented).

use super::{Evidence, Verdict};
use crate::journal::Op;
use tasktable::{AttemptOutcome, TaskState};

pub fn check(e: &Evidence) -> Verdict {
    let mut v = Verdict::new(
        "no_task_completed_twice",
        "each succeeded task has one accepted completion, and one effect under its token",
    );
    for task in e.tasks.values() {
        v.examined += 1;
        let id = task.id;
        let succeeded: Vec<usize> = task
            .rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r.outcome == AttemptOutcome::Succeeded)
            .map(|(i, _)| i)
            .collect();
        let accepted: Vec<_> = e
            .journal
            .iter()
            .filter(|x| x.task == id && matches!(x.op, Op::Finish | Op::Probe))
            .filter(|x| x.accepted == Some(true) && x.outcome.as_deref() == Some("succeeded"))
            .collect();
        if accepted.len() > 1 {
            let who: Vec<String> = accepted
                .iter()
                .map(|x| format!("{} under token {:?}", x.worker, x.token))
                .collect();
            v.fail(format!(
                "task {id}: completions accepted for {}",
                who.join(" and ")
            ));
        }
        if task.state != TaskState::Succeeded {
            if !succeeded.is_empty() {
                v.fail(format!(
                    "task {id} is {} but its history has a succeeded attempt",
                    task.state.as_str()
                ));
            }
            continue;
        }
        if succeeded.len() != 1 || succeeded[0] + 1 != task.rows.len() {
            v.fail(format!(
                "task {id}: {} succeeded rows in a history of {} (rows {:?}); exactly one, last, expected",
                succeeded.len(),
                task.rows.len(),
                succeeded
            ));
            continue;
        }
        let token = succeeded[0] as i64 + 1;
        for x in accepted
            .iter()
            .filter(|x| x.token.is_some_and(|t| t != token))
        {
            v.fail(format!(
                "task {id}: {} was told its completion under token {:?} was accepted, but token {token} succeeded",
                x.worker, x.token
            ));
        }
        let in_table = e
            .effects
            .iter()
            .filter(|x| x.task == id && x.token == token)
            .count();
        let in_journals = e
            .journal
            .iter()
            .filter(|x| x.task == id && x.op == Op::Effect && x.token == Some(token))
            .filter(|x| x.accepted == Some(true) && e.pull_workers.contains(&x.worker))
            .count();
        if in_table + in_journals != 1 {
            v.fail(format!(
                "task {id}: {} effects recorded under its succeeded token {token}, expected 1",
                in_table + in_journals
            ));
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{effect, entry, healthy, row, task};
    use super::*;

    fn fires(e: &Evidence, text: &str) {
        super::super::fixtures::fires(check, e, text);
    }

    #[test]
    fn two_succeeded_rows_are_a_double_completion() {
        let mut e = healthy();
        task(&mut e).rows[0].outcome = AttemptOutcome::Succeeded;
        fires(&e, "2 succeeded rows in a history of 2");
    }

    #[test]
    fn a_succeeded_row_on_a_task_that_did_not_succeed_is_reported() {
        let mut e = healthy();
        task(&mut e).state = TaskState::Failed;
        fires(&e, "is failed but its history has a succeeded attempt");
    }

    #[test]
    fn two_workers_told_their_completion_was_accepted_is_reported() {
        let mut e = healthy();
        let mut stale = entry("w1", Op::Probe, 1, 6_500);
        stale.outcome = Some("succeeded".into());
        e.journal.push(stale);
        fires(
            &e,
            "completions accepted for w2 under token Some(2) and w1 under token Some(1)",
        );
        fires(
            &e,
            "w1 was told its completion under token Some(1) was accepted",
        );
    }

    #[test]
    fn an_effect_missing_or_repeated_under_the_accepted_token_is_reported() {
        let mut e = healthy();
        e.effects.clear();
        fires(&e, "0 effects recorded under its succeeded token 2");
        let mut e = healthy();
        e.effects.push(effect(1, 2, "w2", 2));
        fires(&e, "2 effects recorded");
        // A pull worker's effect is its journal line.
        let mut e = healthy();
        e.pull_workers.insert("w2".into());
        fires(&e, "2 effects recorded");
    }

    #[test]
    fn an_effect_of_an_attempt_that_did_not_succeed_is_allowed() {
        let mut e = healthy();
        e.effects.push(effect(1, 1, "w1", 1));
        task(&mut e).rows[0] = row(1, "w1", AttemptOutcome::LeaseExpired, 5_000);
        assert!(check(&e).passed(), "{:?}", check(&e).violations);
    }
}
