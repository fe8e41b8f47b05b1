//! Who gets a run, and when the task is done.

use super::*;
use crate::Backend;
use std::collections::HashSet;
use tasktable_core::runs::{RunCounts, RunState};
use tasktable_core::{AttemptOutcome, TaskState};

pub async fn copies_go_to_that_many_distinct_workers_and_the_nth_success_ends_the_task(
    db: &impl Backend,
) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(6)).target(group("g"))).await;
    let single = submit_one(&*s, NewTask::new("k", json!("once"))).await;
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Pending);
    assert_eq!(t.target, group("g"), "the task's own target shows");
    assert_eq!(t.runs.map(|r| (r.copies, r.at_once)), Some((6, 6)));
    assert_eq!(t.run_counts, Some(RunCounts::default()));
    // A worker outside the group takes the task that runs once, and no run.
    let outsider = claim_as(&*s, "outsider", &[], 1).await;
    assert_eq!(outsider.iter().map(|t| t.id).collect::<Vec<_>>(), [single]);
    assert_eq!(outsider[0].run, None);
    let mut held = Vec::new();
    let mut tokens = Vec::new();
    for i in 1..=20 {
        let worker = format!("w{i}");
        let got = claim_as(&*s, &worker, &["g"], 2).await;
        if i <= 6 {
            assert_eq!(got.len(), 1, "{worker} gets a run");
            assert_eq!(got[0].run, Some(i), "runs are numbered in order");
            assert_eq!(got[0].attempt, i);
            assert_eq!(got[0].worker_id.as_deref(), Some(worker.as_str()));
            tokens.push(got[0].lease_token);
            held.push(got[0].clone());
        } else {
            assert!(
                got.is_empty(),
                "six runs go on; {worker} gets none: {got:?}"
            );
        }
    }
    assert!(
        tokens.windows(2).all(|w| w[0] < w[1]),
        "tokens grow: {tokens:?}"
    );
    // A worker never holds two runs of one task.
    assert!(claim_as(&*s, "w1", &["g"], 3).await.is_empty());
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Running);
    assert_eq!(t.run_counts.unwrap().active, 6);
    for (n, run) in held.iter().enumerate() {
        assert!(finish(&*s, run.lease(), ok(), run.attempt, at(10)).await);
        let t = get(&*s, id).await;
        let last = n == held.len() - 1;
        assert_eq!(
            t.state,
            if last {
                TaskState::Succeeded
            } else {
                TaskState::Running
            }
        );
    }
    let t = get(&*s, id).await;
    assert_eq!(
        t.run_counts,
        Some(RunCounts {
            active: 0,
            succeeded: 6,
            failed: 0
        })
    );
    assert_eq!(t.finished_at, Some(at(10)));
    let runs = runs_of(&*s, id).await;
    let workers: HashSet<&str> = runs.iter().map(|r| r.worker_id.as_str()).collect();
    assert_eq!((runs.len(), workers.len()), (6, 6), "six distinct workers");
    assert!(runs
        .iter()
        .all(|r| r.state == RunState::Ended(AttemptOutcome::Succeeded)
            && r.result == Some(json!("done"))));
    let history = s.attempt_list(id).await.unwrap();
    assert_eq!(history.len(), 6, "each run is an attempt in the history");
    // Done: nobody gets another run.
    assert!(claim_as(&*s, "w7", &["g"], 11).await.is_empty());
}

pub async fn at_once_caps_the_runs_going_and_a_slot_frees_as_one_ends(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(4).at_once(2))).await;
    let a = one_run(&*s, "a", id, 1).await;
    let b = one_run(&*s, "b", id, 1).await;
    assert!(claim_as(&*s, "c", &[], 1).await.is_empty(), "two at once");
    assert!(finish(&*s, a.lease(), ok(), a.attempt, at(2)).await);
    // a succeeded once: the slot goes to someone else.
    assert!(claim_as(&*s, "a", &[], 3).await.is_empty());
    let c = one_run(&*s, "c", id, 3).await;
    assert!(claim_as(&*s, "d", &[], 3).await.is_empty());
    for t in [&b, &c] {
        assert!(finish(&*s, t.lease(), ok(), t.attempt, at(4)).await);
    }
    let d = one_run(&*s, "d", id, 5).await;
    assert_eq!(get(&*s, id).await.state, TaskState::Running);
    assert!(finish(&*s, d.lease(), ok(), d.attempt, at(6)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Succeeded);
}

pub async fn with_repeat_a_worker_that_finished_takes_it_again(db: &impl Backend) {
    let s = db.store().await;
    let again = submit_one(&*s, multi(Runs::copies(3).at_once(1).repeat(true))).await;
    for n in 1..=3 {
        let t = one_run(&*s, "solo", again, n).await;
        assert_eq!(t.run, Some(n as u32));
        assert!(finish(&*s, t.lease(), ok(), t.attempt, at(n)).await);
    }
    assert_eq!(get(&*s, again).await.state, TaskState::Succeeded);
    // Without repeat the same worker gets its one run only.
    let once = submit_one(&*s, multi(Runs::copies(3).at_once(1))).await;
    let t = one_run(&*s, "solo", once, 10).await;
    assert!(finish(&*s, t.lease(), ok(), t.attempt, at(10)).await);
    assert!(claim_as(&*s, "solo", &[], 11).await.is_empty());
    one_run(&*s, "other", once, 11).await;
}

pub async fn failed_runs_past_the_allowance_fail_the_task_and_end_the_runs_going(
    db: &impl Backend,
) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(3).max_failed(1))).await;
    let a = one_run(&*s, "a", id, 1).await;
    let b = one_run(&*s, "b", id, 1).await;
    let c = one_run(&*s, "c", id, 1).await;
    assert!(finish(&*s, a.lease(), error(), a.attempt, at(2)).await);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Running, "one failure is allowed");
    assert_eq!(t.run_counts.unwrap().failed, 1);
    // The next run waits for the failed run's backoff (10 s from its end).
    assert_eq!(t.run_at, at(12));
    assert!(claim_as(&*s, "d", &[], 11).await.is_empty());
    let d = one_run(&*s, "d", id, 12).await;
    assert!(finish(&*s, b.lease(), error(), b.attempt, at(13)).await);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Failed);
    assert_eq!(t.last_error.as_deref(), Some("try again"));
    assert_eq!(
        t.run_counts,
        Some(RunCounts {
            active: 0,
            succeeded: 0,
            failed: 2
        })
    );
    // The runs still going were ended with the task; their workers hear it.
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![c.lease(), d.lease()],
            lease_for: LEASE,
            now: Some(at(14)),
        })
        .await
        .unwrap();
    assert_eq!(renewed, [LeaseStatus::Cancelled, LeaseStatus::Cancelled]);
    assert!(!finish(&*s, c.lease(), ok(), c.attempt, at(14)).await);
    let states: Vec<RunState> = runs_of(&*s, id).await.iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [
            RunState::Ended(AttemptOutcome::Error),
            RunState::Ended(AttemptOutcome::Error),
            RunState::Ended(AttemptOutcome::Cancelled),
            RunState::Ended(AttemptOutcome::Cancelled),
        ]
    );
    assert_eq!(s.attempt_list(id).await.unwrap().len(), 4);
}

pub async fn bad_multi_run_requests_are_refused_and_store_nothing(db: &impl Backend) {
    let s = db.store().await;
    let bad = [
        multi(Runs::copies(0)),
        multi(Runs::copies(3).at_once(4)),
        multi(Runs::copies(3).at_once(0)),
        multi(Runs::copies(tasktable_core::runs::MAX_COPIES + 1)),
        multi(Runs::copies(2)).affinity(std::time::Duration::from_secs(5)),
    ];
    for task in bad {
        let err = s
            .task_submit(SubmitParams {
                tasks: vec![NewTask::new("k", json!(1)), task.clone()],
                now: Some(at(0)),
            })
            .await
            .expect_err("refused");
        assert!(
            matches!(
                err,
                StoreError::InvalidTask { .. } | StoreError::InvalidInput(_)
            ),
            "{task:?}: {err:?}"
        );
    }
    let page = s
        .task_list(ListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(page.tasks.is_empty(), "nothing stored");
}
