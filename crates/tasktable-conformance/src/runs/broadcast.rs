//! Broadcast: once on every worker active at submit that takes the queue and that the
//! task's target allows.

use super::*;
use crate::workers::facts;
use crate::Backend;
use tasktable_core::runs::RunCounts;
use tasktable_core::worker::Queues;
use tasktable_core::TaskState;

async fn beat(s: &dyn Store, id: &str, worker_groups: &[&str], queues: Queues) {
    s.worker_beat(WorkerBeatParams {
        facts: tasktable_core::worker::WorkerFacts {
            groups: worker_groups.iter().map(|g| g.to_string()).collect(),
            queues,
            ..facts(id)
        },
        address: None,
        starting: true,
        now: None,
        owner: None,
        max_live_per_owner: None,
    })
    .await
    .expect("beat");
}

pub async fn a_broadcast_runs_once_on_every_active_worker_its_queue_and_target_allow(
    db: &impl Backend,
) {
    let s = db.store().await;
    for id in ["w1", "w2", "w3"] {
        beat(&*s, id, &["g"], Queues::All).await;
    }
    beat(&*s, "draining", &["g"], Queues::All).await;
    s.worker_set_draining(WorkerDrainParams {
        actor: tasktable_core::Actor::rust(),
        id: "draining".into(),
        draining: true,
    })
    .await
    .unwrap();
    beat(
        &*s,
        "elsewhere",
        &["g"],
        Queues::Listed(vec!["other".into()]),
    )
    .await;
    beat(&*s, "outsider", &[], Queues::All).await;
    let id = submit_one(&*s, multi(Runs::everywhere()).target(group("g"))).await;
    let t = get(&*s, id).await;
    assert_eq!(t.runs.map(|r| (r.copies, r.at_once)), Some((3, 3)));
    assert_eq!(
        t.target,
        Target::Workers(vec!["w1".into(), "w2".into(), "w3".into()]),
        "aimed at the workers it goes to"
    );
    // A worker that joins later, or was not allowed, gets none.
    beat(&*s, "late", &["g"], Queues::All).await;
    for worker in ["late", "outsider", "elsewhere"] {
        assert!(
            claim_as(&*s, worker, &["g"], 1).await.is_empty(),
            "{worker}"
        );
    }
    let mut held = Vec::new();
    for worker in ["w1", "w2", "w3"] {
        held.push(one_run(&*s, worker, id, 1).await);
        assert!(
            claim_as(&*s, worker, &["g"], 1).await.is_empty(),
            "once each"
        );
    }
    // The registry counts each worker's run.
    let running: Vec<(String, u64)> = s
        .worker_list(WorkerListParams {
            include_gone: false,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .map(|w| (w.facts.id, w.running))
        .filter(|(_, n)| *n > 0)
        .collect();
    assert_eq!(
        running,
        [("w1".into(), 1), ("w2".into(), 1), ("w3".into(), 1)]
    );
    for t in &held {
        assert!(finish(&*s, t.lease(), ok(), t.attempt, at(2)).await);
    }
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(
        t.run_counts,
        Some(RunCounts {
            active: 0,
            succeeded: 3,
            failed: 0
        })
    );
}

pub async fn a_broadcast_no_worker_would_take_is_refused(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, "w1", &["other"], Queues::All).await;
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![
                NewTask::new("k", json!(1)),
                multi(Runs::everywhere()).target(group("g")),
            ],
            now: Some(at(0)),
        })
        .await
        .expect_err("refused");
    assert!(
        matches!(&err, StoreError::InvalidInput(m) if m.contains("no active worker")),
        "{err:?}"
    );
    let page = s
        .task_list(ListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(page.tasks.is_empty(), "nothing stored");
    let repeat = s
        .task_submit(SubmitParams {
            tasks: vec![multi(Runs::everywhere().repeat(true))],
            now: Some(at(0)),
        })
        .await;
    assert!(repeat.is_err(), "a broadcast does not repeat");
}

/// `worker`'s claim as a member of group `g`, which must return exactly one run of `id`.
async fn member_run(s: &dyn Store, worker: &str, id: i64) -> Task {
    let mut got = claim_as(s, worker, &["g"], 1).await;
    assert_eq!(got.len(), 1, "{worker} gets one run: {got:?}");
    let t = got.pop().unwrap();
    assert_eq!((t.id, t.run.is_some()), (id, true));
    t
}

pub async fn a_joining_broadcast_runs_on_workers_that_join_while_it_is_open(db: &impl Backend) {
    let s = db.store().await;
    for id in ["w1", "w2"] {
        beat(&*s, id, &["g"], Queues::All).await;
    }
    let id = submit_one(
        &*s,
        multi(Runs::everywhere().joining(true)).target(group("g")),
    )
    .await;
    let t = get(&*s, id).await;
    assert_eq!(t.runs.map(|r| (r.copies, r.joining)), Some((2, true)));
    assert_eq!(t.target, group("g"), "it keeps its own target");
    let w1 = member_run(&*s, "w1", id).await;
    let w2 = member_run(&*s, "w2", id).await;
    // A worker that joins gets a run though no copy is left, which adds one; once only.
    beat(&*s, "late", &["g"], Queues::All).await;
    let late = member_run(&*s, "late", id).await;
    assert_eq!(get(&*s, id).await.runs.map(|r| r.copies), Some(3));
    assert!(claim_as(&*s, "late", &["g"], 1).await.is_empty());
    assert!(claim_as(&*s, "w1", &["g"], 1).await.is_empty());
    assert!(claim_as(&*s, "outsider", &[], 1).await.is_empty());
    for t in [&w1, &late, &w2] {
        assert!(finish(&*s, t.lease(), ok(), t.attempt, at(2)).await);
    }
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(t.run_counts.map(|c| c.succeeded), Some(3));
    // Closed: a worker that joins now gets nothing.
    assert!(claim_as(&*s, "later", &["g"], 3).await.is_empty());
    let refused = s
        .task_submit(SubmitParams {
            tasks: vec![multi(Runs::copies(2).joining(true))],
            now: Some(at(0)),
        })
        .await;
    assert!(refused.is_err(), "only a broadcast takes workers that join");
}
