//! A change to one task applies only in the states the state machine allows it, and says
//! why when it does not: a missing task, an illegal transition, a bad value.

use crate::pinned::{at, claim, finish, get, ok, submit_one, update};
use crate::Backend;
use serde_json::json;
use tasktable_core::{HandlerOutcome, NewTask, TaskState};
use tasktable_store::*;

pub async fn operator_changes_respect_the_state_machine(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!({"v": 1})).max_attempts(1)).await;
    let missing = update(&*s, Target::Id(id + 1000), Change::Hold)
        .await
        .unwrap_err();
    assert!(matches!(missing, StoreError::NotFound(_)), "{missing}");
    let illegal = update(&*s, Target::Id(id), Change::Release)
        .await
        .unwrap_err();
    assert!(
        matches!(
            illegal,
            StoreError::IllegalTransition {
                state: TaskState::Pending,
                ..
            }
        ),
        "{illegal}"
    );

    assert_eq!(update(&*s, Target::Id(id), Change::Hold).await.unwrap(), 1);
    assert_eq!(get(&*s, id).await.state, TaskState::Held);
    assert!(claim(&*s, &["k"], 1, at(10)).await.is_empty());
    assert_eq!(
        update(&*s, Target::Id(id), Change::Reschedule { run_at: at(100) })
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        update(&*s, Target::Id(id), Change::SetPriority { priority: 9 })
            .await
            .unwrap(),
        1
    );
    assert_eq!(
        update(
            &*s,
            Target::Id(id),
            Change::EditPayload {
                payload: json!({"v": 2})
            }
        )
        .await
        .unwrap(),
        1
    );
    assert_eq!(
        update(&*s, Target::Id(id), Change::Release).await.unwrap(),
        1
    );
    let t = get(&*s, id).await;
    assert_eq!(
        (t.state, t.run_at, t.priority, t.payload.clone()),
        (TaskState::Pending, at(100), 9, json!({"v": 2}))
    );
    assert_eq!(t.updated_at, at(5));
    assert!(claim(&*s, &["k"], 1, at(99)).await.is_empty());
    assert_eq!(
        update(&*s, Target::Id(id), Change::Retry).await.unwrap(),
        1,
        "retry now on a waiting task"
    );
    let t = claim(&*s, &["k"], 1, at(6)).await.remove(0);

    let err = update(
        &*s,
        Target::Id(id),
        Change::EditPayload { payload: json!(0) },
    )
    .await
    .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::IllegalTransition {
                state: TaskState::Running,
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(
        update(
            &*s,
            Target::Id(id),
            Change::SetMaxAttempts { max_attempts: 3 }
        )
        .await
        .unwrap(),
        1
    );
    let bad = update(
        &*s,
        Target::Id(id),
        Change::SetMaxAttempts { max_attempts: 0 },
    )
    .await
    .unwrap_err();
    assert!(matches!(bad, StoreError::InvalidInput(_)), "{bad}");
    // Raised while running: the failure now retries instead of failing.
    assert!(
        finish(
            &*s,
            t.lease(),
            HandlerOutcome::Error {
                message: "e".into(),
                retry_after: None
            },
            1,
            at(7)
        )
        .await
    );
    assert_eq!(get(&*s, id).await.state, TaskState::Pending);
    let t = claim(&*s, &["k"], 1, at(1000)).await.remove(0);
    assert!(
        finish(
            &*s,
            t.lease(),
            HandlerOutcome::Failed {
                message: "bad".into()
            },
            2,
            at(1001)
        )
        .await
    );
    let t = get(&*s, id).await;
    assert_eq!((t.state, t.attempt), (TaskState::Failed, 2));
    let err = update(&*s, Target::Id(id), Change::Hold).await.unwrap_err();
    assert!(err.to_string().contains("it has failed"), "{err}");
    assert_eq!(update(&*s, Target::Id(id), Change::Retry).await.unwrap(), 1);
    let t = get(&*s, id).await;
    assert_eq!(
        (t.state, t.attempt, t.run_at, t.finished_at),
        (TaskState::Pending, 0, at(5), None),
        "retry gives a fresh set of attempts"
    );
    assert_eq!(
        update(&*s, Target::Id(id), Change::Cancel).await.unwrap(),
        1
    );
    let err = update(&*s, Target::Id(id), Change::Cancel)
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            StoreError::IllegalTransition {
                state: TaskState::Cancelled,
                ..
            }
        ),
        "{err}"
    );
    let t = claim(&*s, &["k"], 1, at(10)).await;
    assert!(t.is_empty());
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Cancelled);
    let done = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let c = claim(&*s, &["k"], 1, at(11)).await.remove(0);
    assert!(finish(&*s, c.lease(), ok(), 1, at(12)).await);
    for change in [
        Change::Cancel,
        Change::Retry,
        Change::Hold,
        Change::SetPriority { priority: 1 },
    ] {
        let err = update(&*s, Target::Id(done), change).await.unwrap_err();
        assert!(
            matches!(
                err,
                StoreError::IllegalTransition {
                    state: TaskState::Succeeded,
                    ..
                }
            ),
            "{err}"
        );
    }
}
