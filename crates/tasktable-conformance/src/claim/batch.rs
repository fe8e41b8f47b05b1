//! One `task_finish` call carrying many items: each item's values must land on its own
//! task and history row, whatever the backend's batching (one statement with arrays,
//! one transaction of statements, or `CASE id` lists).

use crate::pinned::{at, claim, get, no_jitter, submit_at};
use crate::Backend;
use serde_json::json;
use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_store::{FinishItem, FinishParams};

pub async fn one_finish_call_ends_each_task_by_its_own_item(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..5)
        .map(|i| {
            NewTask::new("k", json!(i))
                .max_attempts(3)
                .backoff(no_jitter())
        })
        .collect();
    let ids = submit_at(&*s, tasks, at(0)).await;
    let claimed = claim(&*s, &["k"], 5, at(1)).await;
    assert_eq!(claimed.len(), 5);
    let lease = |id: i64| claimed.iter().find(|t| t.id == id).unwrap().lease();
    let plan = |o: HandlerOutcome| FinishPlan::for_handler(o, 1, &no_jitter(), 0.5);
    let mut stale = lease(ids[3]);
    stale.token += 1;
    let items = vec![
        // Task 0 succeeds with a result of its own.
        FinishItem {
            lease: lease(ids[0]),
            plan: plan(HandlerOutcome::Succeeded {
                result: Some(json!({"task": 0})),
            }),
        },
        // Task 1 fails for now and goes back with the initial 10 s backoff.
        FinishItem {
            lease: lease(ids[1]),
            plan: plan(HandlerOutcome::Error {
                message: "upstream 503".into(),
                retry_after: None,
            }),
        },
        // A second item for task 0 cannot apply: the first one ended the lease.
        FinishItem {
            lease: lease(ids[0]),
            plan: plan(HandlerOutcome::Failed {
                message: "too late".into(),
            }),
        },
        // Task 2 fails for good.
        FinishItem {
            lease: lease(ids[2]),
            plan: plan(HandlerOutcome::Failed {
                message: "bad input".into(),
            }),
        },
        // Task 4 snoozes: back in 60 s, the attempt given back.
        FinishItem {
            lease: lease(ids[4]),
            plan: plan(HandlerOutcome::Snooze {
                after: std::time::Duration::from_secs(60),
            }),
        },
        // Task 3's item carries a token it never had.
        FinishItem {
            lease: stale,
            plan: plan(HandlerOutcome::Succeeded { result: None }),
        },
    ];
    let applied = s
        .task_finish(FinishParams {
            items,
            only_if_expired: false,
            now: Some(at(5)),
        })
        .await
        .expect("finish");
    assert_eq!(applied, vec![true, true, false, true, true, false]);

    let t0 = get(&*s, ids[0]).await;
    assert_eq!(t0.state, TaskState::Succeeded);
    assert_eq!(t0.result, Some(json!({"task": 0})));
    assert_eq!((t0.last_error, t0.finished_at), (None, Some(at(5))));
    let t1 = get(&*s, ids[1]).await;
    assert_eq!(t1.state, TaskState::Pending);
    assert_eq!(t1.run_at, at(15));
    assert_eq!(t1.last_error.as_deref(), Some("upstream 503"));
    assert_eq!((t1.result, t1.finished_at), (None, None));
    let t2 = get(&*s, ids[2]).await;
    assert_eq!(t2.state, TaskState::Failed);
    assert_eq!(t2.last_error.as_deref(), Some("bad input"));
    assert_eq!(t2.finished_at, Some(at(5)));
    let t3 = get(&*s, ids[3]).await;
    assert_eq!(t3.state, TaskState::Running, "a stale item changes nothing");
    let t4 = get(&*s, ids[4]).await;
    assert_eq!(
        (t4.state, t4.run_at, t4.attempt),
        (TaskState::Pending, at(65), 0)
    );

    let history = |id: i64| {
        let s = s.clone();
        async move {
            s.attempt_list(id)
                .await
                .unwrap()
                .iter()
                .map(|a| (a.attempt, a.outcome, a.error.clone(), a.finished_at))
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(
        history(ids[0]).await,
        vec![(1, AttemptOutcome::Succeeded, None, at(5))]
    );
    assert_eq!(
        history(ids[1]).await,
        vec![(1, AttemptOutcome::Error, Some("upstream 503".into()), at(5))]
    );
    assert_eq!(
        history(ids[2]).await,
        vec![(1, AttemptOutcome::Failed, Some("bad input".into()), at(5))]
    );
    assert!(history(ids[3]).await.is_empty());
    assert_eq!(
        history(ids[4]).await,
        vec![(1, AttemptOutcome::Snoozed, None, at(5))]
    );
}
