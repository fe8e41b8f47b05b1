//! No task lost: every task the run submitted is in the table under the id the API
//! gave it, ended in a final state, and in the state (and with the result) its behaviour
//! calls for; and the table holds no task the run did not submit.

use super::{Evidence, Verdict};
use crate::behaviour::idempotency_key;
use std::collections::BTreeSet;
use tasktable::TaskState;

pub fn check(e: &Evidence) -> Verdict {
    let mut v = Verdict::new(
        "no_task_lost",
        "every submitted task is in the table once and ended as its behaviour requires",
    );
    let mut submitted = BTreeSet::new();
    for (index, spec) in e.specs.iter().enumerate() {
        v.examined += 1;
        let Some(id) = e.ledger.get(index).copied().flatten() else {
            v.fail(format!(
                "task #{index} ({}) was never acknowledged by the API",
                spec.name()
            ));
            continue;
        };
        submitted.insert(id);
        let Some(task) = e.tasks.get(&id) else {
            v.fail(format!(
                "task {id} (#{index}, {}) is not in the table",
                spec.name()
            ));
            continue;
        };
        let key = idempotency_key(e.seed, index);
        if task.idempotency_key.as_deref() != Some(key.as_str()) {
            v.fail(format!(
                "task {id} has idempotency key {:?}, but #{index} was submitted as {key:?}",
                task.idempotency_key
            ));
        }
        if !task.state.is_finished() {
            v.fail(format!(
                "task {id} ({}) is still {}",
                spec.name(),
                task.state.as_str()
            ));
        } else if task.state != spec.expected_state() {
            v.fail(format!(
                "task {id} ({}) ended {}, expected {}",
                spec.name(),
                task.state.as_str(),
                spec.expected_state().as_str()
            ));
        } else if task.state == TaskState::Succeeded && task.result != spec.expected_result() {
            v.fail(format!(
                "task {id} ({}) succeeded with result {:?}, expected {:?}",
                spec.name(),
                task.result,
                spec.expected_result()
            ));
        }
    }
    for id in e.tasks.keys().filter(|id| !submitted.contains(id)) {
        v.fail(format!(
            "task {id} is in the table but the run never submitted it"
        ));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::super::fixtures::{healthy, task};
    use super::*;

    fn fires(e: &Evidence, text: &str) {
        super::super::fixtures::fires(check, e, text);
    }

    #[test]
    fn a_task_missing_from_the_table_is_lost() {
        let mut e = healthy();
        e.tasks.clear();
        fires(&e, "task 1 (#0, ok) is not in the table");
    }

    #[test]
    fn a_task_the_api_never_acknowledged_is_reported() {
        let mut e = healthy();
        e.ledger[0] = None;
        fires(&e, "never acknowledged");
    }

    #[test]
    fn a_task_that_did_not_finish_or_finished_wrongly_is_reported() {
        let mut e = healthy();
        task(&mut e).state = TaskState::Pending;
        fires(&e, "is still pending");
        task(&mut e).state = TaskState::Failed;
        fires(&e, "ended failed, expected succeeded");
        task(&mut e).state = TaskState::Succeeded;
        task(&mut e).result = None;
        fires(&e, "succeeded with result None");
    }

    #[test]
    fn a_duplicate_or_foreign_task_is_reported() {
        let mut e = healthy();
        let mut copy = e.tasks[&1].clone();
        copy.id = 2;
        e.tasks.insert(2, copy);
        fires(&e, "task 2 is in the table but the run never submitted it");
        let mut e = healthy();
        task(&mut e).idempotency_key = Some("other".into());
        fires(&e, "idempotency key");
    }
}
