//! The live feed: submits, attempts' ends and events, each given out once, resumable from
//! a cursor without a gap, and a row that commits after the cursor passed its id still
//! given out.

use super::alice;
use crate::Backend;
use serde_json::json;
use std::collections::BTreeSet;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{HandlerOutcome, NewTask};
use tasktable_store::feed::{FeedCursor, FeedFilter, FeedItem, FeedSource, Follower};
use tasktable_store::*;

async fn submit(s: &dyn Store, queue: &str) -> i64 {
    s.task_submit(SubmitParams {
        tasks: vec![NewTask::new("job", json!({})).queue(queue)],
        now: None,
    })
    .await
    .unwrap()[0]
        .id
}

/// Reads until nothing new comes: each item with the cursor to resume from after it.
async fn drain_with_cursors(f: &mut Follower) -> Vec<(FeedItem, FeedCursor)> {
    let mut out = Vec::new();
    loop {
        let (items, more) = f.read().await.unwrap();
        let got = items.len();
        out.extend(items);
        if got == 0 && !more {
            return out;
        }
    }
}

async fn drain(f: &mut Follower) -> Vec<FeedItem> {
    drain_with_cursors(f)
        .await
        .into_iter()
        .map(|(item, _)| item)
        .collect()
}

pub async fn a_follower_sees_submits_attempts_and_events_once_and_resumes_without_a_gap(
    db: &impl Backend,
) {
    let s = db.store().await;
    let before = submit(&*s, "q").await;
    let mut follower = Follower::start(s.clone(), FeedFilter::default(), None)
        .await
        .unwrap();
    assert!(
        drain(&mut follower).await.is_empty(),
        "only what happens from now on"
    );
    assert_eq!(follower.cursor().tasks, before);

    let a = submit(&*s, "q").await;
    let b = submit(&*s, "q").await;
    let mut claim = crate::pinned::claim_params("q", &["job"], 1, crate::pinned::t0());
    claim.now = None;
    let claimed = s.task_claim(claim).await.unwrap();
    assert_eq!(claimed[0].id, before, "the oldest first");
    let plan = FinishPlan::for_handler(
        HandlerOutcome::Succeeded { result: None },
        claimed[0].attempt,
        &crate::pinned::no_jitter(),
        0.5,
    );
    s.task_finish(FinishParams {
        items: vec![FinishItem {
            lease: claimed[0].lease(),
            plan,
        }],
        only_if_expired: false,
        now: None,
    })
    .await
    .unwrap();
    s.task_update(UpdateParams {
        target: Target::Id(b),
        change: Change::Cancel,
        actor: alice(),
        now: None,
        action: None,
    })
    .await
    .unwrap();

    let with_cursors = drain_with_cursors(&mut follower).await;
    let seen: Vec<FeedItem> = with_cursors.iter().map(|(i, _)| i.clone()).collect();
    let got: Vec<(FeedSource, &str, Option<i64>)> = seen
        .iter()
        .map(|i| (i.source, i.event.as_str(), i.task_id))
        .collect();
    let want = [
        (FeedSource::Task, "submitted", Some(a)),
        (FeedSource::Task, "submitted", Some(b)),
        (FeedSource::Attempt, "succeeded", Some(before)),
        (FeedSource::Event, "cancelled", Some(b)),
    ];
    assert_eq!(
        got.iter().copied().collect::<BTreeSet<_>>(),
        want.iter().copied().collect::<BTreeSet<_>>(),
        "{seen:#?}"
    );
    assert_eq!(got.len(), 4, "each once");
    assert!(seen.windows(2).all(|w| w[0].at <= w[1].at), "oldest first");
    let done = seen
        .iter()
        .find(|i| i.source == FeedSource::Attempt)
        .unwrap();
    assert_eq!(done.actor.as_ref().unwrap().name, "w1");
    assert_eq!(done.detail["task_state"], "succeeded");
    assert!(drain(&mut follower).await.is_empty(), "nothing twice");

    // A consumer that stopped after the second item resumes from its cursor: it gets
    // everything after it (and, at least once, what the window holds again).
    let resumed_at = with_cursors[1].1;
    assert!(resumed_at.tasks >= seen[1].id.min(b));
    let mut resumed = Follower::start(s.clone(), FeedFilter::default(), Some(resumed_at))
        .await
        .unwrap();
    let again: BTreeSet<(FeedSource, i64)> =
        drain(&mut resumed).await.iter().map(|i| i.key()).collect();
    for item in &seen[2..] {
        assert!(again.contains(&item.key()), "no gap: {item:?} missing");
    }

    // Filters: a queue, an event name.
    let other = submit(&*s, "other").await;
    let mut of_q = Follower::start(
        s.clone(),
        FeedFilter {
            queue: Some("other".into()),
            events: vec!["submitted".into()],
            ..Default::default()
        },
        Some(follower.cursor()),
    )
    .await
    .unwrap();
    let only: Vec<Option<i64>> = drain(&mut of_q).await.iter().map(|i| i.task_id).collect();
    assert_eq!(only, [Some(other)]);
}

pub async fn a_row_that_commits_after_the_cursor_passed_its_id_is_still_given_out(
    db: &impl Backend,
) {
    let s = db.store().await;
    let early = submit(&*s, "q").await;
    let late = submit(&*s, "q").await;
    // As if the reader had read `late` while `early`'s transaction had not committed:
    // its cursor is past `early`'s id, which it never gave out.
    let cursor = FeedCursor {
        tasks: late,
        ..s.feed_head().await.unwrap()
    };
    let mut follower = Follower::start(s.clone(), FeedFilter::default(), Some(cursor))
        .await
        .unwrap();
    let got: Vec<Option<i64>> = drain(&mut follower)
        .await
        .iter()
        .filter(|i| i.source == FeedSource::Task)
        .map(|i| i.task_id)
        .collect();
    assert!(got.contains(&Some(early)), "the window reads it: {got:?}");
    let refused = s
        .event_feed(feed::FeedParams {
            after: cursor,
            window: std::time::Duration::from_secs(5),
            queue: None,
            kind: None,
            task_id: None,
            limit: 0,
        })
        .await;
    assert!(matches!(refused, Err(StoreError::InvalidInput(_))));
}
