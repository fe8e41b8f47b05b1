//! Worker ids bound to tokens: an id belongs to the token that first used it, no other
//! token may beat, leave or take it over, and a token holds at most its cap of live ids.
//! Refusals change nothing. And the registry read a page at a time.

use super::facts;
use crate::pinned::at;
use crate::Backend;
use tasktable_core::ownership::WorkerRefusal;
use tasktable_core::worker::{Protocol, WorkerFacts, WorkerInfo};
use tasktable_store::*;

fn pull(id: &str, host: &str) -> WorkerFacts {
    WorkerFacts {
        host: host.into(),
        protocol: Protocol::Pull,
        kinds: None,
        ..facts(id)
    }
}

async fn beat_as(
    s: &dyn Store,
    f: WorkerFacts,
    owner: Option<&str>,
    cap: Option<u32>,
) -> StoreResult<WorkerStatus> {
    s.worker_beat(WorkerBeatParams {
        starting: true,
        now: Some(at(0)),
        owner: owner.map(str::to_owned),
        max_live_per_owner: cap,
        ..WorkerBeatParams::new(f)
    })
    .await
}

async fn leave_as(s: &dyn Store, id: &str, owner: &str) -> StoreResult<()> {
    s.worker_leave(WorkerLeaveParams {
        id: id.into(),
        owner: Some(owner.into()),
    })
    .await
}

async fn get(s: &dyn Store, id: &str) -> Option<WorkerInfo> {
    s.worker_get(id.into()).await.expect("worker_get")
}

fn refusal(result: StoreResult<impl std::fmt::Debug>) -> WorkerRefusal {
    match result {
        Err(StoreError::WorkerRefused(r)) => r,
        other => panic!("expected a refusal, got {other:?}"),
    }
}

pub async fn a_worker_id_belongs_to_the_token_that_first_used_it(db: &impl Backend) {
    let s = db.store().await;
    beat_as(&*s, pull("w1", "a.example"), Some("team-a"), None)
        .await
        .unwrap();
    assert_eq!(
        get(&*s, "w1").await.unwrap().owner.as_deref(),
        Some("team-a")
    );
    // Another token can neither overwrite it nor make it leave.
    let stolen = beat_as(&*s, pull("w1", "b.example"), Some("team-b"), None).await;
    assert_eq!(refusal(stolen), WorkerRefusal::NotOwned { id: "w1".into() });
    let left = leave_as(&*s, "w1", "team-b").await;
    assert_eq!(refusal(left), WorkerRefusal::NotOwned { id: "w1".into() });
    let w1 = get(&*s, "w1").await.unwrap();
    assert_eq!(
        (w1.facts.host.as_str(), w1.gone_at, w1.owner.as_deref()),
        ("a.example", None, Some("team-a")),
        "the refusals changed nothing"
    );
    // Its own token's beat and leave pass; a beat bound to no token (an in-process
    // caller, trusted with the database) passes and keeps the owner.
    beat_as(&*s, pull("w1", "a2.example"), Some("team-a"), None)
        .await
        .unwrap();
    beat_as(&*s, pull("w1", "a3.example"), None, None)
        .await
        .unwrap();
    assert_eq!(
        get(&*s, "w1").await.unwrap().owner.as_deref(),
        Some("team-a")
    );
    leave_as(&*s, "w1", "team-a").await.unwrap();
    assert!(get(&*s, "w1").await.unwrap().gone_at.is_some());
    // Gone, it is still its token's: a restart under the id comes back to it alone.
    let back = beat_as(&*s, pull("w1", "b.example"), Some("team-b"), None).await;
    assert_eq!(refusal(back), WorkerRefusal::NotOwned { id: "w1".into() });
    assert!(get(&*s, "w1").await.unwrap().gone_at.is_some());
}

pub async fn ids_without_a_token_go_to_the_first_token_unless_in_process(db: &impl Backend) {
    let s = db.store().await;
    // An in-process worker's id: no token may act as it.
    beat_as(&*s, facts("proc"), None, None).await.unwrap();
    let taken = beat_as(&*s, pull("proc", "x"), Some("team-a"), None).await;
    assert_eq!(
        refusal(taken),
        WorkerRefusal::InProcess { id: "proc".into() }
    );
    let left = leave_as(&*s, "proc", "team-a").await;
    assert_eq!(
        refusal(left),
        WorkerRefusal::InProcess { id: "proc".into() }
    );
    let proc = get(&*s, "proc").await.unwrap();
    assert_eq!(
        (proc.owner, proc.facts.protocol, proc.gone_at),
        (None, Protocol::Process, None)
    );
    // A pull worker registered without a token (a server without tokens, or before
    // owners were kept) is adopted by the first token, then is that token's.
    beat_as(&*s, pull("free", "x"), None, None).await.unwrap();
    assert_eq!(get(&*s, "free").await.unwrap().owner, None);
    beat_as(&*s, pull("free", "x"), Some("team-a"), None)
        .await
        .unwrap();
    assert_eq!(
        get(&*s, "free").await.unwrap().owner.as_deref(),
        Some("team-a")
    );
    let second = beat_as(&*s, pull("free", "x"), Some("team-b"), None).await;
    assert_eq!(
        refusal(second),
        WorkerRefusal::NotOwned { id: "free".into() }
    );
    // A token that used an in-process worker's id before the worker first started loses
    // it at the worker's first beat.
    beat_as(&*s, pull("squat", "x"), Some("team-a"), None)
        .await
        .unwrap();
    beat_as(&*s, facts("squat"), None, None).await.unwrap();
    let squat = get(&*s, "squat").await.unwrap();
    assert_eq!(
        (squat.owner, squat.facts.protocol),
        (None, Protocol::Process)
    );
    let again = beat_as(&*s, pull("squat", "x"), Some("team-a"), None).await;
    assert_eq!(
        refusal(again),
        WorkerRefusal::InProcess { id: "squat".into() }
    );
}

pub async fn a_token_holds_at_most_its_cap_of_live_workers(db: &impl Backend) {
    let s = db.store().await;
    let cap = Some(2);
    for id in ["a1", "a2"] {
        beat_as(&*s, pull(id, "h"), Some("team-a"), cap)
            .await
            .unwrap();
    }
    let third = beat_as(&*s, pull("a3", "h"), Some("team-a"), cap).await;
    assert_eq!(
        refusal(third),
        WorkerRefusal::TooMany {
            token: "team-a".into(),
            limit: 2
        }
    );
    assert!(
        get(&*s, "a3").await.is_none(),
        "the refused id was not registered"
    );
    // Beats of live ids pass; other tokens have caps of their own.
    beat_as(&*s, pull("a2", "h2"), Some("team-a"), cap)
        .await
        .unwrap();
    beat_as(&*s, pull("b1", "h"), Some("team-b"), cap)
        .await
        .unwrap();
    // A worker that left frees its place; coming back takes one.
    leave_as(&*s, "a1", "team-a").await.unwrap();
    beat_as(&*s, pull("a3", "h"), Some("team-a"), cap)
        .await
        .unwrap();
    let back = beat_as(&*s, pull("a1", "h"), Some("team-a"), cap).await;
    assert!(matches!(refusal(back), WorkerRefusal::TooMany { .. }));
    assert!(get(&*s, "a1").await.unwrap().gone_at.is_some());
    assert_eq!(s.worker_count_live().await.unwrap(), 3);

    // Workers that come and go under new ids: the token keeps at most its cap of gone
    // ones, the newest; a drained one is kept whatever its age.
    for i in 0..6 {
        let id = format!("c{i}");
        beat_as(&*s, pull(&id, "h"), Some("team-c"), cap)
            .await
            .unwrap();
        if i == 0 {
            s.worker_set_draining(WorkerDrainParams {
                id: id.clone(),
                draining: true,
                actor: tasktable_core::Actor::rust(),
            })
            .await
            .unwrap();
        }
        leave_as(&*s, &id, "team-c").await.unwrap();
    }
    let mut kept: Vec<String> = s
        .worker_list(WorkerListParams {
            include_gone: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .filter(|w| w.owner.as_deref() == Some("team-c"))
        .map(|w| w.facts.id)
        .collect();
    kept.sort();
    assert_eq!(
        kept,
        ["c0", "c4", "c5"],
        "the drained one and the newest gone"
    );
}

pub async fn the_registry_reads_a_page_at_a_time(db: &impl Backend) {
    let s = db.store().await;
    for id in ["w5", "w1", "w4", "w2", "w3"] {
        beat_as(&*s, pull(id, "h"), None, None).await.unwrap();
    }
    s.worker_leave("w2".into()).await.unwrap();
    let page = |after: Option<&str>, limit: u32, include_gone: bool| {
        let s = &s;
        let after = after.map(str::to_owned);
        async move {
            s.worker_list(WorkerListParams {
                include_gone,
                after,
                limit: Some(limit),
            })
            .await
            .expect("page")
            .into_iter()
            .map(|w| w.facts.id)
            .collect::<Vec<_>>()
        }
    };
    assert_eq!(page(None, 2, false).await, ["w1", "w3"]);
    assert_eq!(page(Some("w3"), 2, false).await, ["w4", "w5"]);
    assert!(page(Some("w5"), 2, false).await.is_empty());
    assert_eq!(page(Some("w1"), 2, true).await, ["w2", "w3"]);
    for limit in [0, MAX_WORKER_PAGE + 1] {
        let refused = s
            .worker_list(WorkerListParams {
                limit: Some(limit),
                ..Default::default()
            })
            .await;
        assert!(
            matches!(refused, Err(StoreError::InvalidInput(_))),
            "{refused:?}"
        );
    }
    assert_eq!(get(&*s, "w2").await.unwrap().facts.id, "w2");
    assert!(get(&*s, "w9").await.is_none());
}
