//! Why a pending task waits, from the registry (the kinds heartbeats carry), its queue's
//! pause and policy, and its target: the facts each backend reads, and core's words.

use super::facts;
use crate::pinned::{at, claim, submit_at};
use crate::Backend;
use tasktable_core::policy::QueuePolicy;
use tasktable_core::worker::{Queues, WorkerFacts};
use tasktable_core::{Actor, NewTask, Target, TaskId};
use tasktable_store::*;

async fn beat(s: &dyn Store, f: WorkerFacts) {
    s.worker_beat(WorkerBeatParams {
        now: Some(at(0)),
        ..WorkerBeatParams::new(f)
    })
    .await
    .expect("beat");
}

fn with_kinds(id: &str, kinds: Option<&[&str]>) -> WorkerFacts {
    WorkerFacts {
        queues: Queues::Listed(vec!["default".into()]),
        kinds: kinds.map(|k| k.iter().map(|s| s.to_string()).collect()),
        ..facts(id)
    }
}

/// The reasons' codes and texts for task `id`, asked at `at(10)`.
async fn why(s: &dyn Store, id: TaskId) -> Vec<(&'static str, String)> {
    s.task_waiting(TaskWaitingParams {
        id,
        now: Some(at(10)),
    })
    .await
    .expect("waiting")
    .iter()
    .map(|r| (r.code(), r.to_string()))
    .collect()
}

async fn codes(s: &dyn Store, id: TaskId) -> Vec<&'static str> {
    why(s, id).await.into_iter().map(|(c, _)| c).collect()
}

pub async fn heartbeats_keep_the_kinds_a_worker_handles_and_an_old_beat_leaves_them_unknown(
    db: &impl Backend,
) {
    let s = db.store().await;
    beat(&*s, with_kinds("w1", Some(&["email", "resize"]))).await;
    let w = s.worker_get("w1".into()).await.unwrap().unwrap();
    assert_eq!(w.facts.kinds, Some(vec!["email".into(), "resize".into()]));
    beat(&*s, with_kinds("w1", Some(&[]))).await;
    let w = s.worker_get("w1".into()).await.unwrap().unwrap();
    assert_eq!(w.facts.kinds, Some(vec![]), "no handler yet is not unknown");
    beat(&*s, with_kinds("w1", None)).await;
    let w = s.worker_get("w1".into()).await.unwrap().unwrap();
    assert_eq!(
        w.facts.kinds, None,
        "a beat that does not say leaves them unknown"
    );
    let refused = s
        .worker_beat(WorkerBeatParams::new(with_kinds("w1", Some(&["a\nb"]))))
        .await;
    assert!(
        matches!(&refused, Err(StoreError::InvalidInput(m)) if m.contains("kind")),
        "{refused:?}"
    );
    let w = s.worker_get("w1".into()).await.unwrap().unwrap();
    assert_eq!(w.facts.kinds, None, "a refused beat changes nothing");
}

pub async fn a_pending_task_says_which_worker_it_lacks_and_a_fitting_worker_ends_it(
    db: &impl Backend,
) {
    let s = db.store().await;
    let id = submit_at(
        &*s,
        vec![NewTask::new("resize", serde_json::json!({}))],
        at(0),
    )
    .await[0];
    assert_eq!(
        why(&*s, id).await,
        vec![("no_live_worker", "no worker is live".to_owned())]
    );
    beat(&*s, with_kinds("mailer", Some(&["email"]))).await;
    assert_eq!(
        why(&*s, id).await,
        vec![(
            "no_worker_for_kind",
            "no live worker handles kind \"resize\" in queue \"default\"".to_owned()
        )]
    );
    // A worker of an older version, whose kinds are unknown, might handle it.
    beat(&*s, with_kinds("old", None)).await;
    assert_eq!(
        codes(&*s, id).await,
        vec!["turn"],
        "nothing definite is said"
    );
    s.worker_leave("old".into()).await.unwrap();
    assert_eq!(codes(&*s, id).await, vec!["no_worker_for_kind"]);
    beat(&*s, with_kinds("resizer", Some(&["resize"]))).await;
    assert_eq!(codes(&*s, id).await, vec!["turn"]);
    // A drained worker claims nothing.
    s.worker_set_draining(WorkerDrainParams {
        id: "resizer".into(),
        draining: true,
        actor: Actor::rust(),
    })
    .await
    .unwrap();
    assert_eq!(codes(&*s, id).await, vec!["all_draining"]);
}

pub async fn a_paused_queue_a_target_and_a_later_run_at_are_named(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, with_kinds("w1", Some(&["resize"]))).await;
    let task = || NewTask::new("resize", serde_json::json!({}));
    let ids = submit_at(
        &*s,
        vec![
            task(),
            task().target(Target::Groups(vec!["gpu-absent".into()])),
            task().target(Target::Workers(vec!["nobody".into()])),
            task().run_at(at(3600)),
        ],
        at(0),
    )
    .await;
    assert_eq!(
        why(&*s, ids[1]).await,
        vec![(
            "target_groups_empty",
            "no live worker is in group \"gpu-absent\"".to_owned()
        )]
    );
    assert_eq!(codes(&*s, ids[2]).await, vec!["target_workers_absent"]);
    assert_eq!(
        why(&*s, ids[3]).await,
        vec![(
            "not_due",
            "not due until 2030-01-01 01:00:00 UTC".to_owned()
        )]
    );
    s.queue_set_paused(QueuePauseParams {
        queue: "default".into(),
        paused: true,
        actor: Actor::rust(),
    })
    .await
    .unwrap();
    assert_eq!(
        why(&*s, ids[0]).await,
        vec![("queue_paused", "queue \"default\" is paused".to_owned())]
    );
    assert_eq!(codes(&*s, ids[3]).await, vec!["not_due", "queue_paused"]);
}

pub async fn a_limited_queue_at_its_limit_says_so_and_only_pending_tasks_wait(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, with_kinds("w1", Some(&["resize"]))).await;
    s.queue_set_policy(QueuePolicyParams {
        queue: "default".into(),
        policy: QueuePolicy {
            max_running: Some(1),
            ..QueuePolicy::default()
        },
        actor: Actor::rust(),
    })
    .await
    .unwrap();
    let task = || NewTask::new("resize", serde_json::json!({}));
    let ids = submit_at(&*s, vec![task(), task()], at(0)).await;
    let claimed = claim(&*s, &["resize"], 1, at(1)).await;
    assert_eq!(claimed.len(), 1);
    let waiting = ids.iter().find(|id| **id != claimed[0].id).unwrap();
    assert_eq!(
        why(&*s, *waiting).await,
        vec![(
            "queue_at_limit",
            "queue \"default\" is at its limit of 1 running".to_owned()
        )]
    );
    assert_eq!(
        why(&*s, claimed[0].id).await,
        vec![],
        "a running task has none"
    );
    assert_eq!(
        why(&*s, 999_999).await,
        vec![],
        "nor a task that is not there"
    );
}
