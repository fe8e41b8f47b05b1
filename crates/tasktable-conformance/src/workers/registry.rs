//! Registering, draining, reaping and counting workers.

use super::facts;
use crate::pinned::{at, claim, submit_at};
use crate::Backend;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::time::Duration;
use tasktable_core::worker::{Protocol, Queues, WorkerFacts, WorkerInfo, WorkerState};
use tasktable_core::NewTask;
use tasktable_store::*;

async fn beat(s: &dyn Store, f: WorkerFacts, starting: bool, now: DateTime<Utc>) -> WorkerStatus {
    s.worker_beat(WorkerBeatParams {
        facts: f,
        address: None,
        starting,
        now: Some(now),
        owner: None,
        max_live_per_owner: None,
    })
    .await
    .expect("beat")
}

async fn list(s: &dyn Store, include_gone: bool) -> Vec<WorkerInfo> {
    s.worker_list(WorkerListParams {
        include_gone,
        ..Default::default()
    })
    .await
    .expect("list")
}

async fn one(s: &dyn Store, id: &str) -> WorkerInfo {
    list(s, true)
        .await
        .into_iter()
        .find(|w| w.facts.id == id)
        .unwrap_or_else(|| panic!("worker {id} is in the registry"))
}

async fn drain(s: &dyn Store, id: &str, draining: bool) -> Option<WorkerInfo> {
    s.worker_set_draining(WorkerDrainParams {
        actor: tasktable_core::Actor::rust(),
        id: id.into(),
        draining,
    })
    .await
    .expect("drain")
}

async fn reap(s: &dyn Store, silence: u64, forget_after: u64, now: DateTime<Utc>) -> Reaped {
    s.worker_reap(WorkerReapParams {
        silence: Duration::from_secs(silence),
        forget_after: Duration::from_secs(forget_after),
        now: Some(now),
    })
    .await
    .expect("reap")
}

pub async fn heartbeats_register_update_and_bring_back_a_worker(db: &impl Backend) {
    let s = db.store().await;
    let status = beat(&*s, facts("w1"), true, at(0)).await;
    assert!(!status.draining);
    let w = one(&*s, "w1").await;
    assert_eq!(w.facts, facts("w1"), "every fact is kept as sent");
    assert_eq!((w.started_at, w.last_seen_at), (at(0), at(0)));
    assert_eq!(
        (w.state, w.draining, w.gone_at, w.running),
        (WorkerState::Active, false, None, 0)
    );
    // The address is the one the database sees: the loopback address of the test
    // servers, or none for SQLite's file.
    match s.backend() {
        "sqlite" => assert_eq!(w.address, None),
        _ => assert!(
            matches!(
                w.address.as_deref(),
                Some("127.0.0.1" | "localhost" | "::1")
            ),
            "{:?}",
            w.address
        ),
    }

    let mut changed = facts("w1");
    changed.capacity = 3;
    changed.groups = vec![];
    changed.queues = Queues::All;
    changed.pid = None;
    beat(&*s, changed.clone(), false, at(5)).await;
    let w = one(&*s, "w1").await;
    assert_eq!(w.facts, changed, "a later beat replaces the facts");
    assert_eq!(
        (w.started_at, w.last_seen_at),
        (at(0), at(5)),
        "and only it moves last_seen"
    );

    s.worker_leave("w1".into()).await.unwrap();
    assert!(
        list(&*s, false).await.is_empty(),
        "a worker that left is not listed as live"
    );
    let w = one(&*s, "w1").await;
    assert_eq!(w.state, WorkerState::Gone);
    assert!(w.gone_at.is_some());
    assert_eq!(s.worker_count_live().await.unwrap(), 0);

    // Restarted under the same id: back, with a new start time.
    let mut pulled = facts("w1");
    pulled.protocol = Protocol::Pull;
    s.worker_beat(WorkerBeatParams {
        facts: pulled.clone(),
        address: Some("10.1.2.3".into()),
        starting: true,
        now: Some(at(60)),
        owner: None,
        max_live_per_owner: None,
    })
    .await
    .unwrap();
    let w = one(&*s, "w1").await;
    assert_eq!((w.state, w.gone_at), (WorkerState::Active, None));
    assert_eq!((w.started_at, w.last_seen_at), (at(60), at(60)));
    assert_eq!(
        w.address.as_deref(),
        Some("10.1.2.3"),
        "an address given is kept"
    );
    assert_eq!(w.facts.protocol, Protocol::Pull);
    assert_eq!(s.worker_count_live().await.unwrap(), 1);
}

pub async fn a_drain_outlives_a_restart_until_released(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, facts("w1"), true, at(0)).await;
    beat(&*s, facts("w2"), true, at(0)).await;
    let w = drain(&*s, "w1", true).await.expect("w1 exists");
    assert_eq!((w.state, w.draining), (WorkerState::Draining, true));
    assert!(
        beat(&*s, facts("w1"), false, at(5)).await.draining,
        "the next beat hears of it"
    );
    assert!(
        !beat(&*s, facts("w2"), false, at(5)).await.draining,
        "no other worker does"
    );

    s.worker_leave("w1".into()).await.unwrap();
    let w = one(&*s, "w1").await;
    assert_eq!(
        (w.state, w.draining),
        (WorkerState::Gone, true),
        "gone wins, the drain is kept"
    );
    assert!(
        beat(&*s, facts("w1"), true, at(60)).await.draining,
        "a restart stays drained"
    );
    assert_eq!(one(&*s, "w1").await.state, WorkerState::Draining);

    let w = drain(&*s, "w1", false).await.expect("w1 exists");
    assert_eq!((w.state, w.draining), (WorkerState::Active, false));
    assert!(
        !beat(&*s, facts("w1"), false, at(65)).await.draining,
        "released"
    );
    assert_eq!(
        drain(&*s, "nobody", true).await,
        None,
        "an unknown id is no worker"
    );
    assert_eq!(list(&*s, true).await.len(), 2, "and none was made");
}

/// What the server asks before it gives a pull worker's claim any task, in one read.
pub async fn a_workers_standing_is_one_read(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, facts("w1"), true, at(0)).await;
    let draining = |id: &str| {
        let id = id.to_owned();
        let s = &s;
        async move { s.worker_standing(id).await.unwrap().map(|w| w.draining) }
    };
    let standing = s.worker_standing("w1".into()).await.unwrap().unwrap();
    assert_eq!(
        standing,
        WorkerStanding {
            owner: None,
            protocol: Protocol::Process,
            groups: vec!["gpu".into(), "eu".into()],
            draining: false,
            gone: false,
        }
    );
    drain(&*s, "w1", true).await.unwrap();
    assert_eq!(draining("w1").await, Some(true));
    s.worker_leave("w1".into()).await.unwrap();
    assert_eq!(
        draining("w1").await,
        Some(true),
        "a drain holds past leaving"
    );
    assert!(s.worker_standing("w1".into()).await.unwrap().unwrap().gone);
    drain(&*s, "w1", false).await.unwrap();
    assert_eq!(draining("w1").await, Some(false));
    assert_eq!(
        draining("nobody").await,
        None,
        "an unknown id has no standing"
    );
    assert_eq!(list(&*s, true).await.len(), 1, "and asking made no worker");
}

/// A rescuer's scan marks silent workers gone, so a server that runs no worker of its own
/// (`serve --workers 0`) still keeps its registry.
pub async fn a_rescuer_marks_silent_workers_gone(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, facts("quiet"), true, at(0)).await;
    beat(&*s, facts("loud"), true, at(0)).await;
    beat(&*s, facts("loud"), false, at(25)).await;
    let rescuer = tasktable_runtime::Rescuer::new(
        s.clone(),
        tasktable_runtime::RescuerConfig {
            worker_silence: Duration::from_secs(30),
            ..Default::default()
        },
    );
    rescuer.run_once(Some(at(20))).await.unwrap();
    assert_eq!(
        s.worker_count_live().await.unwrap(),
        2,
        "nobody silent for 30 s yet"
    );
    rescuer.run_once(Some(at(31))).await.unwrap();
    assert_eq!(one(&*s, "quiet").await.state, WorkerState::Gone);
    assert_eq!(one(&*s, "loud").await.state, WorkerState::Active);
}

pub async fn silent_workers_are_marked_gone_then_forgotten_unless_drained(db: &impl Backend) {
    let s = db.store().await;
    for id in ["a", "b", "c"] {
        beat(&*s, facts(id), true, at(0)).await;
    }
    beat(&*s, facts("b"), false, at(40)).await;
    drain(&*s, "c", true).await.unwrap();
    assert_eq!(s.worker_count_live().await.unwrap(), 3);

    assert_eq!(
        reap(&*s, 30, 60, at(40)).await,
        Reaped {
            gone: 2,
            forgotten: 0
        }
    );
    assert_eq!(
        s.worker_count_live().await.unwrap(),
        1,
        "b is the one live node"
    );
    assert_eq!(one(&*s, "a").await.gone_at, Some(at(40)));
    assert_eq!(
        reap(&*s, 30, 60, at(40)).await,
        Reaped::default(),
        "nothing twice"
    );

    // b falls silent; a has been gone long enough to forget; c's drain keeps its row.
    assert_eq!(
        reap(&*s, 30, 60, at(200)).await,
        Reaped {
            gone: 1,
            forgotten: 1
        }
    );
    let left: Vec<(String, WorkerState)> = list(&*s, true)
        .await
        .into_iter()
        .map(|w| (w.facts.id, w.state))
        .collect();
    assert_eq!(
        left,
        vec![
            ("b".into(), WorkerState::Gone),
            ("c".into(), WorkerState::Gone)
        ]
    );
    assert_eq!(s.worker_count_live().await.unwrap(), 0);
    assert!(one(&*s, "c").await.draining);
}

pub async fn the_registry_counts_what_each_worker_runs(db: &impl Backend) {
    let s = db.store().await;
    beat(&*s, facts("w1"), true, at(0)).await;
    let tasks = (0..3)
        .map(|i| NewTask::new("job", json!({"i": i})))
        .collect();
    submit_at(&*s, tasks, at(0)).await;
    // The pinned claims run as worker w1.
    assert_eq!(claim(&*s, &["job"], 2, at(1)).await.len(), 2);
    assert_eq!(one(&*s, "w1").await.running, 2);
}

pub async fn bad_worker_facts_are_refused_and_change_nothing(db: &impl Backend) {
    let s = db.store().await;
    let mut bad = Vec::new();
    let mut f = facts("");
    bad.push(f.clone());
    f = facts("w\u{0}1");
    bad.push(f.clone());
    f = facts(&"x".repeat(tasktable_core::worker::MAX_NAME_CHARS + 1));
    bad.push(f.clone());
    f = facts("w1");
    f.capacity = 0;
    bad.push(f.clone());
    f = facts("w1");
    f.queues = Queues::Listed(vec![]);
    bad.push(f.clone());
    f = facts("w1");
    f.groups = vec!["".into()];
    bad.push(f);
    for f in bad {
        let err = s
            .worker_beat(WorkerBeatParams {
                facts: f.clone(),
                address: None,
                starting: true,
                now: Some(at(0)),
                owner: None,
                max_live_per_owner: None,
            })
            .await
            .expect_err("refused");
        assert!(matches!(err, StoreError::InvalidInput(_)), "{f:?}: {err}");
    }
    let err = s
        .worker_beat(WorkerBeatParams {
            facts: facts("w1"),
            address: Some("\n".into()),
            starting: true,
            now: Some(at(0)),
            owner: None,
            max_live_per_owner: None,
        })
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
    let err = s
        .worker_reap(WorkerReapParams {
            silence: Duration::ZERO,
            forget_after: Duration::ZERO,
            now: None,
        })
        .await
        .expect_err("refused");
    assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
    assert!(list(&*s, true).await.is_empty(), "nothing was registered");
}
