//! What a worker writes is stored the same way on every backend: NUL (which PostgreSQL
//! cannot store) becomes U+FFFD in results, checkpoints, progress and errors, long errors
//! are cut to a known length, and oversized results are refused before anything is
//! written. Payloads, which operators choose, are refused instead when they hold NUL.

use crate::cases::{at, claim, get, no_jitter, submit_at, update, LEASE};
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

/// Names are limited in characters, so the longest one may take four bytes a character:
/// every column that holds a name (MySQL's `VARCHAR(255)` included) keeps it whole, from
/// the task through its attempt, its queue's pause row and the statistics rollup.
pub async fn names_of_the_longest_length_are_stored_whole(db: &impl Backend) {
    let s = db.store().await;
    let name = |c: char| c.to_string().repeat(tasktable_core::task::MAX_NAME_LEN);
    let (kind, queue) = (name('😀'), name('é'));
    let id = submit_at(
        &*s,
        vec![NewTask::new(kind.clone(), json!(1))
            .queue(queue.clone())
            .key(name('鍵'))
            .idempotency_key(name('🔑'))],
        at(0),
    )
    .await[0];
    let task = get(&*s, id).await;
    assert_eq!(
        (&task.kind, &task.queue, task.key, task.idempotency_key),
        (&kind, &queue, Some(name('鍵')), Some(name('🔑')))
    );
    let mut params = crate::cases::claim_params(&queue, &[kind.as_str()], 1, at(1));
    params.worker_id = name('w');
    let claimed = s.task_claim(params).await.unwrap();
    assert_eq!(claimed.len(), 1, "claimed by its queue and kind");
    let plan = FinishPlan::for_handler(
        HandlerOutcome::Succeeded { result: None },
        1,
        &no_jitter(),
        0.5,
    );
    let finished = s
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: claimed[0].lease(),
                plan,
            }],
            only_if_expired: false,
            now: Some(at(2)),
        })
        .await
        .unwrap();
    assert_eq!(finished, vec![true]);
    s.queue_set_paused(QueuePauseParams {
        queue: queue.clone(),
        paused: true,
    })
    .await
    .unwrap();
    let queues = s.queue_list().await.unwrap();
    assert!(queues.iter().any(|q| q.name == queue && q.paused));
    let stats = s
        .stats(StatsParams {
            window: std::time::Duration::from_secs(4 * 3600),
            queue: Some(queue.clone()),
            kind: Some(kind.clone()),
            now: Some(at(3 * 3600)),
        })
        .await
        .unwrap();
    let group = stats.groups.iter().find(|g| g.kind == kind).expect("group");
    assert_eq!((group.window.submitted, group.window.succeeded), (1, 1));
}

/// A filter holding NUL matches no stored text, and PostgreSQL cannot even compare with
/// one: every backend refuses it as bad input before asking the database.
pub async fn filters_holding_nul_are_refused_on_every_backend(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_at(&*s, vec![NewTask::new("k", json!(1))], at(0)).await[0];
    let nul = TaskFilter::default().queue("a\u{0}b");
    let list = s
        .task_list(ListParams {
            filter: nul.clone(),
            after: None,
            limit: 10,
            light: false,
        })
        .await;
    assert!(matches!(list, Err(StoreError::InvalidInput(_))), "{list:?}");
    let count = s
        .task_count(CountParams {
            filter: nul.clone(),
            cap: 10,
        })
        .await;
    assert!(
        matches!(count, Err(StoreError::InvalidInput(_))),
        "{count:?}"
    );
    let changed = update(&*s, Target::Filter(nul), Change::Cancel).await;
    assert!(
        matches!(changed, Err(StoreError::InvalidInput(_))),
        "{changed:?}"
    );
    let stats = s
        .stats(StatsParams {
            kind: Some("\u{0}".into()),
            ..StatsParams::window(std::time::Duration::from_secs(3600))
        })
        .await;
    assert!(
        matches!(stats, Err(StoreError::InvalidInput(_))),
        "{stats:?}"
    );
    assert_eq!(
        get(&*s, id).await.state,
        TaskState::Pending,
        "nothing changed"
    );
}

/// Times at the edges of what a `run_at` may say: every backend stores them alike, though
/// MySQL's `DATETIME` holds no year before 1000.
pub async fn far_past_and_far_future_run_at_are_stored_alike(db: &impl Backend) {
    use chrono::{TimeZone, Utc};
    let s = db.store().await;
    let early = Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap();
    let late = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap();
    let ids = submit_at(
        &*s,
        vec![
            NewTask::new("k", json!(1)).run_at(early),
            NewTask::new("k", json!(2)).run_at(late),
        ],
        at(0),
    )
    .await;
    let epoch = Utc.timestamp_opt(0, 0).unwrap();
    assert_eq!(
        get(&*s, ids[0]).await.run_at,
        epoch,
        "before 1970 is stored as 1970"
    );
    assert_eq!(get(&*s, ids[1]).await.run_at, late);
    let claimed = claim(&*s, &["k"], 2, at(1)).await;
    assert_eq!(
        claimed.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![ids[0]]
    );
    update(
        &*s,
        Target::Id(ids[1]),
        Change::Reschedule { run_at: early },
    )
    .await
    .unwrap();
    assert_eq!(get(&*s, ids[1]).await.run_at, epoch);
    let after_2038 = Utc.with_ymd_and_hms(2100, 6, 1, 12, 0, 0).unwrap();
    update(
        &*s,
        Target::Filter(TaskFilter::default().state(TaskState::Pending)),
        Change::Reschedule { run_at: after_2038 },
    )
    .await
    .unwrap();
    assert_eq!(get(&*s, ids[1]).await.run_at, after_2038);
}
