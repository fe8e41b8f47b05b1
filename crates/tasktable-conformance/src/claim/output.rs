//! What a worker writes is stored the same way on every backend: NUL (which PostgreSQL
//! cannot store) becomes U+FFFD in results, checkpoints, progress and errors, long errors
//! are cut to a known length, and oversized results are refused before anything is
//! written. Payloads, which operators choose, are refused instead when they hold NUL.

use crate::pinned::{at, claim, get, no_jitter, submit_at, update, LEASE};
use crate::Backend;
use serde_json::json;
use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
use tasktable_core::stored::MAX_ERROR_LEN;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

async fn finish_with(
    s: &dyn Store,
    lease: tasktable_core::Lease,
    outcome: HandlerOutcome,
) -> StoreResult<Vec<bool>> {
    s.task_finish(FinishParams {
        items: vec![FinishItem {
            lease,
            plan: FinishPlan::for_handler(outcome, 1, &no_jitter(), 0.5),
        }],
        only_if_expired: false,
        now: Some(at(10)),
    })
    .await
}

pub async fn worker_output_with_nul_is_stored_alike_everywhere(db: &impl Backend) {
    let s = db.store().await;
    let ids = submit_at(
        &*s,
        vec![
            NewTask::new("k", json!(1)).backoff(no_jitter()),
            NewTask::new("k", json!(2)),
        ],
        at(0),
    )
    .await;
    let claimed = claim(&*s, &["k"], 2, at(1)).await;
    let lease = |id: i64| claimed.iter().find(|t| t.id == id).unwrap().lease();

    let status = s
        .task_checkpoint(CheckpointParams {
            lease: lease(ids[0]),
            checkpoint: Some(json!({"cursor\u{0}": "a\u{0}b"})),
            progress: Some(json!(["\u{0}"])),
        })
        .await
        .unwrap();
    assert!(status.is_held());
    let error = format!("exit\u{0}code 3: {}", "x".repeat(MAX_ERROR_LEN));
    let applied = finish_with(
        &*s,
        lease(ids[0]),
        HandlerOutcome::Error {
            message: error.clone(),
            retry_after: None,
        },
    )
    .await
    .unwrap();
    assert_eq!(applied, vec![true]);
    let t = get(&*s, ids[0]).await;
    assert_eq!(t.checkpoint, Some(json!({"cursor\u{FFFD}": "a\u{FFFD}b"})));
    assert_eq!(t.progress, Some(json!(["\u{FFFD}"])));
    let stored = t.last_error.unwrap();
    assert!(
        stored.starts_with("exit\u{FFFD}code 3: xxx"),
        "{stored:.40}"
    );
    assert!(stored.len() <= MAX_ERROR_LEN, "{}", stored.len());
    assert!(stored.ends_with(&format!("[truncated: {} bytes in all]", error.len() + 2)));
    let history = s.attempt_list(ids[0]).await.unwrap();
    assert_eq!(history[0].error.as_deref(), Some(stored.as_str()));

    let applied = finish_with(
        &*s,
        lease(ids[1]),
        HandlerOutcome::Succeeded {
            result: Some(json!({"out\u{0}": ["\u{0}\u{0}"]})),
        },
    )
    .await
    .unwrap();
    assert_eq!(applied, vec![true]);
    let t = get(&*s, ids[1]).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(t.result, Some(json!({"out\u{FFFD}": ["\u{FFFD}\u{FFFD}"]})));
}

pub async fn payloads_with_nul_and_oversized_results_are_refused(db: &impl Backend) {
    let s = db.store().await;
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", json!({"a": "\u{0}"}))],
            now: Some(at(0)),
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("NUL"), "{err}");
    let ids = submit_at(
        &*s,
        vec![NewTask::new("k", json!(1)), NewTask::new("k", json!(2))],
        at(0),
    )
    .await;
    let err = update(
        &*s,
        Target::Id(ids[1]),
        Change::EditPayload {
            payload: json!("\u{0}"),
        },
    )
    .await
    .unwrap_err();
    assert!(err.to_string().contains("NUL"), "{err}");
    assert_eq!(get(&*s, ids[1]).await.payload, json!(2));

    let claimed = claim(&*s, &["k"], 2, at(1)).await;
    let big = json!("x".repeat(DEFAULT_MAX_PAYLOAD_BYTES));
    let items = claimed
        .iter()
        .map(|t| FinishItem {
            lease: t.lease(),
            plan: FinishPlan::for_handler(
                HandlerOutcome::Succeeded {
                    result: Some(if t.id == ids[1] {
                        big.clone()
                    } else {
                        json!(1)
                    }),
                },
                1,
                &no_jitter(),
                0.5,
            ),
        })
        .collect();
    let err = s
        .task_finish(FinishParams {
            items,
            only_if_expired: false,
            now: Some(at(2)),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err}");
    for t in &claimed {
        assert_eq!(
            get(&*s, t.id).await.state,
            TaskState::Running,
            "nothing was written"
        );
        assert!(s.attempt_list(t.id).await.unwrap().is_empty());
    }
    let held = s
        .task_renew(RenewParams {
            leases: claimed.iter().map(|t| t.lease()).collect(),
            lease_for: LEASE,
            now: Some(at(3)),
        })
        .await
        .unwrap();
    assert!(held.iter().all(LeaseStatus::is_held));
}
