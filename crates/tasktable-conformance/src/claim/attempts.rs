//! An attempt from claim to end: the claim counts it and grows the token, a success stores
//! its result and history, an error backs off until the attempts run out, and a snooze or
//! an interruption gives the attempt back.

use crate::pinned::{at, claim, finish, get, no_jitter, ok, submit_one};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{AttemptOutcome, HandlerOutcome, NewTask, TaskState};
use tasktable_store::*;

pub async fn claim_counts_the_attempt_and_grows_the_token(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0)).timeout(Duration::from_secs(600)),
    )
    .await;
    let t = claim(&*s, &["k"], 1, at(1)).await.remove(0);
    assert_eq!(t.state, TaskState::Running);
    assert_eq!(t.attempt, 1);
    assert_eq!(t.lease_token, 1);
    assert_eq!(t.worker_id.as_deref(), Some("w1"));
    assert_eq!(t.worker_host.as_deref(), Some("host-a"));
    assert_eq!(t.started_at, Some(at(1)));
    assert_eq!(t.lease_expires_at, Some(at(31)));
    assert_eq!(t.deadline_at, Some(at(601)));
    assert!(
        claim(&*s, &["k"], 1, at(1)).await.is_empty(),
        "a running task is not claimed again"
    );
    assert!(
        finish(
            &*s,
            t.lease(),
            HandlerOutcome::Error {
                message: "x".into(),
                retry_after: Some(Duration::ZERO)
            },
            1,
            at(2)
        )
        .await
    );
    let again = claim(&*s, &["k"], 1, at(3)).await.remove(0);
    assert_eq!((again.id, again.attempt, again.lease_token), (id, 2, 2));
}

pub async fn complete_stores_result_and_history(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(1)).await.remove(0);
    assert!(finish(&*s, t.lease(), ok(), 1, at(4)).await);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(t.result, Some(json!({"ok": true})));
    assert_eq!(t.finished_at, Some(at(4)));
    assert_eq!(t.lease_expires_at, None);
    let history = s.attempt_list(id).await.unwrap();
    assert_eq!(history.len(), 1);
    let a = &history[0];
    assert_eq!((a.attempt, a.outcome), (1, AttemptOutcome::Succeeded));
    assert_eq!(a.worker_id.as_deref(), Some("w1"));
    assert_eq!(a.worker_host.as_deref(), Some("host-a"));
    assert_eq!((a.started_at, a.finished_at), (Some(at(1)), at(4)));
    assert_eq!(a.error, None);
}

pub async fn retryable_error_backs_off_then_fails_when_attempts_run_out(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0))
            .max_attempts(2)
            .backoff(no_jitter()),
    )
    .await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    let err = || HandlerOutcome::Error {
        message: "upstream 503".into(),
        retry_after: None,
    };
    assert!(finish(&*s, t.lease(), err(), 1, at(1)).await);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Pending);
    assert_eq!(t.run_at, at(11), "first retry after the initial 10 s");
    assert_eq!(t.last_error.as_deref(), Some("upstream 503"));
    assert!(claim(&*s, &["k"], 1, at(10)).await.is_empty());
    let t = claim(&*s, &["k"], 1, at(11)).await.remove(0);
    assert!(finish(&*s, t.lease(), err(), 2, at(12)).await);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Failed, "two attempts of two are spent");
    assert_eq!(t.attempt, 2);
    assert_eq!(t.finished_at, Some(at(12)));
    let outcomes: Vec<_> = s
        .attempt_list(id)
        .await
        .unwrap()
        .iter()
        .map(|a| (a.attempt, a.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![(1, AttemptOutcome::Error), (2, AttemptOutcome::Error)]
    );
}

pub async fn snooze_and_interruption_do_not_spend_an_attempt(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    s.task_checkpoint(CheckpointParams {
        lease: t.lease(),
        checkpoint: Some(json!({"done": 3})),
        progress: None,
    })
    .await
    .unwrap();
    assert!(
        finish(
            &*s,
            t.lease(),
            HandlerOutcome::Snooze {
                after: Duration::from_secs(20)
            },
            1,
            at(1)
        )
        .await
    );
    let t = get(&*s, id).await;
    assert_eq!(
        (t.state, t.attempt, t.run_at),
        (TaskState::Pending, 0, at(21))
    );
    let t = claim(&*s, &["k"], 1, at(21)).await.remove(0);
    assert_eq!(t.attempt, 1);
    let plan = FinishPlan::interrupted();
    let done = s
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: t.lease(),
                plan,
            }],
            only_if_expired: false,
            now: Some(at(22)),
        })
        .await
        .unwrap();
    assert_eq!(done, vec![true]);
    let t = get(&*s, id).await;
    assert_eq!(
        (t.state, t.attempt, t.run_at),
        (TaskState::Pending, 0, at(22))
    );
    assert_eq!(
        t.checkpoint,
        Some(json!({"done": 3})),
        "the checkpoint survives"
    );
    let outcomes: Vec<_> = s
        .attempt_list(id)
        .await
        .unwrap()
        .iter()
        .map(|a| (a.attempt, a.outcome))
        .collect();
    assert_eq!(
        outcomes,
        vec![
            (1, AttemptOutcome::Snoozed),
            (1, AttemptOutcome::Interrupted)
        ]
    );
}
