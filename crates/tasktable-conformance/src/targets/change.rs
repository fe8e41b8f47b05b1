//! A new target: waiting tasks just take it; a running task keeps its worker while the
//! target allows it (by id, or by a group the registry knows the worker in), and otherwise
//! goes back to pending at once with its attempt given back, the attempt history saying
//! why, and every later write of the old worker refused.

use super::{groups, workers};
use crate::pinned::*;
use crate::Backend;
use serde_json::json;
use tasktable_core::worker::{Protocol, Queues, WorkerFacts};
use tasktable_core::{AttemptOutcome, Change, NewTask, Target, TaskState};
use tasktable_store::*;

fn facts(id: &str, groups: &[&str]) -> WorkerFacts {
    WorkerFacts {
        id: id.into(),
        host: "host-a".into(),
        pid: None,
        version: "test".into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        queues: Queues::All,
        capacity: 4,
        protocol: Protocol::Process,
        kinds: None,
    }
}

async fn retarget(s: &dyn Store, id: i64, target: Target) -> StoreResult<u64> {
    update(
        s,
        tasktable_store::Target::Id(id),
        Change::SetTarget { target },
    )
    .await
}

async fn renew(s: &dyn Store, lease: tasktable_core::Lease) -> LeaseStatus {
    s.task_renew(RenewParams {
        leases: vec![lease],
        lease_for: LEASE,
        now: Some(at(6)),
    })
    .await
    .unwrap()[0]
}

pub async fn a_new_target_takes_a_running_task_only_from_a_worker_it_leaves_out(db: &impl Backend) {
    let s = db.store().await;
    s.worker_beat(WorkerBeatParams {
        facts: facts("w1", &["gpu"]),
        address: None,
        starting: true,
        now: Some(t0()),
        owner: None,
        max_live_per_owner: None,
    })
    .await
    .unwrap();
    let id = submit_one(&*s, NewTask::new("k", json!(null))).await;
    let claimed = claim(&*s, &["k"], 1, at(1)).await.remove(0);
    let lease = claimed.lease();

    // Targets that still allow w1, by id and by the group the registry knows it in.
    for t in [workers(&["w1", "w2"]), groups(&["gpu"])] {
        assert_eq!(retarget(&*s, id, t.clone()).await.unwrap(), 1);
        let task = get(&*s, id).await;
        assert_eq!((task.state, task.target), (TaskState::Running, t));
        assert!(renew(&*s, lease).await.is_held());
    }

    // One that leaves it out: back to pending, due now, the attempt given back.
    assert_eq!(retarget(&*s, id, workers(&["w2"])).await.unwrap(), 1);
    let task = get(&*s, id).await;
    assert_eq!(task.state, TaskState::Pending);
    assert_eq!(task.attempt, 0);
    assert_eq!(task.run_at, at(5));
    assert_eq!(task.lease_expires_at, None);
    let history = s.attempt_list(id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].outcome, AttemptOutcome::Retargeted);
    assert_eq!(history[0].worker_id.as_deref(), Some("w1"));
    assert_eq!(history[0].attempt, 1);

    // The old worker is told why, and its result is refused.
    assert_eq!(renew(&*s, lease).await, LeaseStatus::Retargeted);
    assert_eq!(
        s.lease_status(lease).await.unwrap(),
        LeaseStatus::Retargeted
    );
    assert!(!finish(&*s, lease, ok(), 1, at(7)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Pending);

    // w1 may not take it again; w2 does, with the attempt counted once.
    assert!(claim(&*s, &["k"], 1, at(8)).await.is_empty());
    let again = s
        .task_claim(ClaimParams {
            worker_id: "w2".into(),
            ..claim_params("default", &["k"], 1, at(8))
        })
        .await
        .unwrap()
        .remove(0);
    assert_eq!((again.id, again.attempt), (id, 1));
    // Once claimed again, the first lease is simply lost.
    assert_eq!(renew(&*s, lease).await, LeaseStatus::Lost);
    assert!(finish(&*s, again.lease(), ok(), 1, at(9)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Succeeded);
}

pub async fn a_group_target_takes_a_task_from_a_worker_the_registry_does_not_know(
    db: &impl Backend,
) {
    // w1 never beat: nothing says it is in `gpu`, so a group target cannot keep it.
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(null))).await;
    let lease = claim(&*s, &["k"], 1, at(1)).await.remove(0).lease();
    assert_eq!(retarget(&*s, id, groups(&["gpu"])).await.unwrap(), 1);
    assert_eq!(get(&*s, id).await.state, TaskState::Pending);
    assert_eq!(renew(&*s, lease).await, LeaseStatus::Retargeted);
}

pub async fn waiting_and_finished_tasks_take_a_new_target_and_bad_ones_are_refused(
    db: &impl Backend,
) {
    let s = db.store().await;
    let pending = submit_one(&*s, NewTask::new("k", json!(1))).await;
    let held = submit_one(&*s, NewTask::new("k", json!(2)).held(true)).await;
    let done = submit_one(&*s, NewTask::new("k", json!(3)).target(workers(&["w1"]))).await;
    let c = claim(&*s, &["k"], 1, at(1)).await.remove(0);
    assert_eq!(c.id, done);
    assert!(finish(&*s, c.lease(), ok(), 1, at(2)).await);

    for id in [pending, held] {
        assert_eq!(retarget(&*s, id, groups(&["eu"])).await.unwrap(), 1);
        assert_eq!(get(&*s, id).await.target, groups(&["eu"]));
    }
    assert_eq!(retarget(&*s, pending, Target::Any).await.unwrap(), 1);
    assert_eq!(get(&*s, pending).await.target, Target::Any);
    // A succeeded task is final.
    assert!(matches!(
        retarget(&*s, done, Target::Any).await,
        Err(StoreError::IllegalTransition { .. })
    ));
    assert_eq!(get(&*s, done).await.target, workers(&["w1"]));

    // Bad targets are refused and change nothing.
    for bad in [
        workers(&[]),
        groups(&["a|b"]),
        groups(&[" "]),
        workers(&["x\ny"]),
    ] {
        let err = retarget(&*s, held, bad.clone()).await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidInput(_)), "{bad:?}: {err}");
        let err = s
            .task_submit(SubmitParams {
                tasks: vec![NewTask::new("k", json!(null)).target(bad.clone())],
                now: Some(t0()),
            })
            .await
            .unwrap_err();
        assert!(
            matches!(err, StoreError::InvalidTask { .. }),
            "{bad:?}: {err}"
        );
    }
    assert_eq!(get(&*s, held).await.target, groups(&["eu"]));
}
