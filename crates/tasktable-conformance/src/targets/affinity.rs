//! Affinity: a retry waits for the worker of its previous attempt, while that worker is
//! live and for the task's wait at most, then goes to any worker its own target allows.

use super::groups;
use crate::pinned::*;
use crate::workers::facts;
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{Change, HandlerOutcome, NewTask, Target, Task, TaskState};
use tasktable_store::*;

async fn beat(s: &dyn Store, id: &str, worker_groups: &[&str]) {
    s.worker_beat(WorkerBeatParams {
        facts: tasktable_core::worker::WorkerFacts {
            groups: worker_groups.iter().map(|g| g.to_string()).collect(),
            ..facts(id)
        },
        address: None,
        starting: true,
        now: Some(at(0)),
        owner: None,
        max_live_per_owner: None,
    })
    .await
    .expect("beat");
}

async fn claim_as(s: &dyn Store, worker: &str, worker_groups: &[&str], secs: i64) -> Vec<Task> {
    s.task_claim(ClaimParams {
        worker_id: worker.into(),
        worker_groups: worker_groups.iter().map(|g| g.to_string()).collect(),
        ..claim_params("default", &["k"], 10, at(secs))
    })
    .await
    .expect("claim")
}

async fn release(s: &dyn Store, secs: i64) -> u64 {
    s.task_release_affinity(AffinityReleaseParams {
        limit: 100,
        now: Some(at(secs)),
    })
    .await
    .expect("release")
}

fn failed() -> HandlerOutcome {
    HandlerOutcome::Error {
        message: "try again".into(),
        retry_after: None,
    }
}

fn task(wait_secs: u64) -> NewTask {
    NewTask::new("k", json!(null))
        .backoff(no_jitter())
        .affinity(Duration::from_secs(wait_secs))
}

pub async fn a_retry_waits_for_its_previous_worker_then_goes_to_any(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, "w1", &[]).await;
    beat(&*s, "w2", &[]).await;
    let id = submit_one(&*s, task(60)).await;
    let plain = submit_one(&*s, NewTask::new("k", json!(null)).backoff(no_jitter())).await;
    let mine = claim_as(&*s, "w1", &[], 1).await;
    assert_eq!(mine.len(), 2);
    for t in &mine {
        assert!(finish(&*s, t.lease(), failed(), 1, at(2)).await);
    }
    let t = get(&*s, id).await;
    // Due again after the 10 s backoff, waiting a minute from then.
    assert_eq!((t.state, t.run_at), (TaskState::Pending, at(12)));
    assert_eq!(t.affinity_until, Some(at(72)));
    assert_eq!(t.affinity, Some(Duration::from_secs(60)));
    assert_eq!(t.target, Target::Any, "the task's own target shows");
    assert_eq!(get(&*s, plain).await.affinity_until, None);
    // Another worker gets only the task without an affinity.
    let other: Vec<i64> = claim_as(&*s, "w2", &[], 13)
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(other, vec![plain]);
    assert_eq!(
        release(&*s, 13).await,
        0,
        "the wait is not over and w1 is live"
    );
    let again = claim_as(&*s, "w1", &[], 13).await;
    assert_eq!(again.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
    assert!(finish(&*s, again[0].lease(), failed(), 2, at(14)).await);
    // The second retry waits again, from its own due time.
    let t = get(&*s, id).await;
    assert_eq!((t.run_at, t.affinity_until), (at(34), Some(at(94))));
    assert!(claim_as(&*s, "w2", &[], 93).await.is_empty());
    assert_eq!(release(&*s, 94).await, 1);
    assert_eq!(release(&*s, 94).await, 0, "each wait ends once");
    let t = get(&*s, id).await;
    assert_eq!((t.affinity_until, t.target.clone()), (None, Target::Any));
    let taken = claim_as(&*s, "w2", &[], 95).await;
    assert_eq!(taken.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
    assert!(finish(&*s, taken[0].lease(), ok(), 3, at(96)).await);
    let t = get(&*s, id).await;
    assert_eq!((t.state, t.affinity_until), (TaskState::Succeeded, None));
}

pub async fn a_retry_stops_waiting_when_its_worker_is_gone(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, "w1", &[]).await;
    let id = submit_one(&*s, task(3600)).await;
    let t = claim_as(&*s, "w1", &[], 1).await.remove(0);
    assert!(finish(&*s, t.lease(), failed(), 1, at(2)).await);
    assert!(claim_as(&*s, "w2", &[], 13).await.is_empty());
    s.worker_leave("w1".into()).await.unwrap();
    assert_eq!(release(&*s, 13).await, 1, "its worker left");
    let t = claim_as(&*s, "w2", &[], 13).await.remove(0);
    assert_eq!(t.id, id);
    assert!(finish(&*s, t.lease(), ok(), 2, at(14)).await);
    // A worker that crashed: its lease runs out, the rescue retries the task for it, and
    // when the registry marks it gone the task goes to another.
    let id = submit_one(&*s, task(3600)).await;
    beat(&*s, "w3", &[]).await;
    assert_eq!(claim_as(&*s, "w3", &[], 20).await[0].id, id);
    assert_eq!(rescue_all(&*s, at(60)).await, vec![true]);
    let t = get(&*s, id).await;
    assert_eq!(
        (t.state, t.worker_id.as_deref()),
        (TaskState::Pending, Some("w3"))
    );
    assert!(t.affinity_until.is_some());
    assert!(claim_as(&*s, "w2", &[], 80).await.is_empty());
    s.worker_leave("w3".into()).await.unwrap();
    assert_eq!(release(&*s, 80).await, 1);
    assert_eq!(claim_as(&*s, "w2", &[], 80).await[0].id, id);
}

pub async fn a_retry_keeps_its_own_target_through_the_wait(db: &impl Backend) {
    let s = db.store().await;
    for (w, g) in [("w1", &["gpu"][..]), ("w2", &["gpu"]), ("w3", &[])] {
        beat(&*s, w, g).await;
    }
    let id = submit_one(&*s, task(30).target(groups(&["gpu"]))).await;
    let t = claim_as(&*s, "w1", &["gpu"], 1).await.remove(0);
    assert!(finish(&*s, t.lease(), failed(), 1, at(2)).await);
    assert_eq!(get(&*s, id).await.target, groups(&["gpu"]));
    assert!(claim_as(&*s, "w2", &["gpu"], 13).await.is_empty());
    assert_eq!(release(&*s, 42).await, 1);
    assert!(
        claim_as(&*s, "w3", &[], 43).await.is_empty(),
        "not in the group"
    );
    assert_eq!(claim_as(&*s, "w2", &["gpu"], 43).await[0].id, id);
}

pub async fn an_operators_change_ends_the_wait(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, "w1", &[]).await;
    let ids = submit_at(&*s, vec![task(3600), task(3600)], t0()).await;
    for t in claim_as(&*s, "w1", &[], 1).await {
        assert!(finish(&*s, t.lease(), failed(), 1, at(2)).await);
    }
    // A new target replaces the wait; a reschedule ends it and the own target applies.
    s.task_update(UpdateParams {
        actor: tasktable_core::Actor::rust(),
        target: tasktable_store::Target::Id(ids[0]),
        change: Change::SetTarget {
            target: Target::Workers(vec!["w2".into()]),
        },
        now: Some(at(3)),
        action: None,
    })
    .await
    .unwrap();
    s.task_update(UpdateParams {
        actor: tasktable_core::Actor::rust(),
        target: tasktable_store::Target::Id(ids[1]),
        change: Change::Reschedule { run_at: at(4) },
        now: Some(at(3)),
        action: None,
    })
    .await
    .unwrap();
    for id in &ids {
        assert_eq!(get(&*s, *id).await.affinity_until, None);
    }
    let got: Vec<i64> = claim_as(&*s, "w2", &[], 13)
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(got, ids);
}
