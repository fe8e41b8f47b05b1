//! Store-level cases: each drives one backend's store directly with pinned times.

use crate::Backend;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{AttemptOutcome, Backoff, HandlerOutcome, Lease, NewTask, Task, TaskState};
use tasktable_store::*;

pub use crate::batch_cases::one_finish_call_ends_each_task_by_its_own_item;
pub use crate::lease_cases::{
    every_claim_gets_a_credential_of_its_own, writes_with_a_wrong_credential_change_nothing,
};
pub use crate::read_cases::counts_stop_at_their_cap_and_light_pages_leave_documents_out;
pub use crate::stats_cases::stats_count_throughput_and_latency_per_queue_and_kind;
pub use crate::write_cases::{
    far_past_and_far_future_run_at_are_stored_alike,
    filters_holding_nul_are_refused_on_every_backend, names_of_the_longest_length_are_stored_whole,
    payloads_with_nul_and_oversized_results_are_refused,
    worker_output_with_nul_is_stored_alike_everywhere,
};

/// Every case pins its clock here so results do not depend on when it runs.
pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
}

pub fn at(secs: i64) -> DateTime<Utc> {
    t0() + chrono::Duration::seconds(secs)
}

pub const LEASE: Duration = Duration::from_secs(30);

pub fn no_jitter() -> Backoff {
    Backoff {
        initial: Duration::from_secs(10),
        multiplier: 2.0,
        max: Duration::from_secs(3600),
        jitter: 0.0,
    }
}

pub async fn submit_at(store: &dyn Store, tasks: Vec<NewTask>, now: DateTime<Utc>) -> Vec<i64> {
    store
        .task_submit(SubmitParams {
            tasks,
            now: Some(now),
        })
        .await
        .expect("submit")
        .into_iter()
        .map(|s| s.id)
        .collect()
}

pub async fn submit_one(store: &dyn Store, task: NewTask) -> i64 {
    submit_at(store, vec![task], t0()).await[0]
}

pub fn claim_params(queue: &str, kinds: &[&str], limit: u32, now: DateTime<Utc>) -> ClaimParams {
    ClaimParams {
        queue: queue.into(),
        kinds: kinds.iter().map(|k| k.to_string()).collect(),
        limit,
        worker_id: "w1".into(),
        worker_host: "host-a".into(),
        lease_for: LEASE,
        now: Some(now),
    }
}

pub async fn claim(store: &dyn Store, kinds: &[&str], limit: u32, now: DateTime<Utc>) -> Vec<Task> {
    store
        .task_claim(claim_params("default", kinds, limit, now))
        .await
        .expect("claim")
}

pub async fn get(store: &dyn Store, id: i64) -> Task {
    store.task_get(id).await.expect("get").expect("task exists")
}

pub async fn finish(
    store: &dyn Store,
    lease: Lease,
    outcome: HandlerOutcome,
    attempt: u32,
    now: DateTime<Utc>,
) -> bool {
    let plan = FinishPlan::for_handler(outcome, attempt, &no_jitter(), 0.5);
    store
        .task_finish(FinishParams {
            items: vec![FinishItem { lease, plan }],
            only_if_expired: false,
            now: Some(now),
        })
        .await
        .expect("finish")[0]
}

pub async fn update(store: &dyn Store, target: Target, change: Change) -> StoreResult<u64> {
    store
        .task_update(UpdateParams {
            target,
            change,
            now: Some(at(5)),
        })
        .await
}

fn ok() -> HandlerOutcome {
    HandlerOutcome::Succeeded {
        result: Some(json!({"ok": true})),
    }
}

pub async fn submit_returns_ids_and_applies_defaults(db: &impl Backend) {
    let s = db.store().await;
    let ids = submit_at(
        &*s,
        vec![
            NewTask::new("a", json!({"n": 1})),
            NewTask::new("b", json!([1, 2])),
        ],
        t0(),
    )
    .await;
    assert_eq!(ids.len(), 2);
    assert!(ids[1] > ids[0], "ids grow in submit order");
    let t = get(&*s, ids[0]).await;
    assert_eq!(t.kind, "a");
    assert_eq!(t.queue, "default");
    assert_eq!(t.state, TaskState::Pending);
    assert_eq!(t.payload, json!({"n": 1}));
    assert_eq!(t.attempt, 0);
    assert_eq!(t.max_attempts, tasktable_core::task::DEFAULT_MAX_ATTEMPTS);
    assert_eq!(t.backoff, Backoff::default());
    assert_eq!(t.run_at, t0());
    assert_eq!(t.created_at, t0());
    assert_eq!(t.lease_token, 0);
    let held = submit_one(
        &*s,
        NewTask::new("a", json!(null))
            .held(true)
            .delay(Duration::from_secs(90)),
    )
    .await;
    let h = get(&*s, held).await;
    assert_eq!(h.state, TaskState::Held);
    assert_eq!(h.run_at, at(90));
}

pub async fn submit_rejects_a_bad_batch_and_writes_nothing(db: &impl Backend) {
    let s = db.store().await;
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![
                NewTask::new("ok", json!(1)),
                NewTask::new("bad", json!(1)).max_attempts(0),
            ],
            now: Some(t0()),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidTask { index: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("max_attempts"), "{err}");
    let big = json!("x".repeat(DEFAULT_MAX_PAYLOAD_BYTES + 1));
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("big", big)],
            now: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err}");
    let page = s
        .task_list(ListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        page.tasks.is_empty(),
        "nothing may be written: {:?}",
        page.tasks
    );
}

pub async fn idempotent_submit_returns_the_existing_task(db: &impl Backend) {
    let s = db.store().await;
    let first = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("a", json!(1)).idempotency_key("order-7")],
            now: Some(t0()),
        })
        .await
        .unwrap();
    assert!(first[0].created);
    let again = s
        .task_submit(SubmitParams {
            tasks: vec![
                NewTask::new("a", json!(2)).idempotency_key("order-7"),
                NewTask::new("a", json!(3)).idempotency_key("order-8"),
                NewTask::new("a", json!(4)).idempotency_key("order-8"),
            ],
            now: Some(t0()),
        })
        .await
        .unwrap();
    assert_eq!(
        again[0],
        Submitted {
            id: first[0].id,
            created: false
        }
    );
    assert!(again[1].created);
    assert_eq!(
        again[2],
        Submitted {
            id: again[1].id,
            created: false
        }
    );
    assert_eq!(
        get(&*s, first[0].id).await.payload,
        json!(1),
        "the first submit wins"
    );
    let page = s
        .task_list(ListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 2);
}

pub async fn racing_duplicate_submits_create_exactly_one_task(db: &impl Backend) {
    let mut handles = Vec::new();
    for i in 0..8 {
        let s = db.store().await;
        handles.push(tokio::spawn(async move {
            s.task_submit(SubmitParams {
                tasks: vec![NewTask::new("a", json!(i)).idempotency_key("the-one")],
                now: None,
            })
            .await
            .unwrap()[0]
        }));
    }
    let results: Vec<Submitted> = futures::future::join_all(handles)
        .await
        .into_iter()
        .map(|r| r.unwrap())
        .collect();
    assert_eq!(
        results.iter().filter(|r| r.created).count(),
        1,
        "{results:?}"
    );
    assert!(results.iter().all(|r| r.id == results[0].id), "{results:?}");
    let s = db.store().await;
    let page = s
        .task_list(ListParams {
            limit: 100,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 1);
}

pub async fn transactional_submit_commits_and_rolls_back_with_the_caller(db: &impl Backend) {
    let s = db.store().await;
    let rolled = db
        .submit_in_transaction(vec![NewTask::new("tx", json!("rolled back"))], false)
        .await
        .unwrap();
    assert!(
        s.task_get(rolled[0].id).await.unwrap().is_none(),
        "rolled back task must not exist"
    );
    let committed = db
        .submit_in_transaction(vec![NewTask::new("tx", json!("committed"))], true)
        .await
        .unwrap();
    let claimed = s
        .task_claim(ClaimParams {
            now: None,
            ..claim_params("default", &["tx"], 10, t0())
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, committed[0].id);
    assert_eq!(claimed[0].payload, json!("committed"));
}

pub async fn claim_order_is_priority_then_run_at_then_id(db: &impl Backend) {
    let s = db.store().await;
    let low_early = submit_one(&*s, NewTask::new("k", json!(0)).priority(0).run_at(at(-20))).await;
    let high_late = submit_one(&*s, NewTask::new("k", json!(0)).priority(5).run_at(at(-1))).await;
    let high_early = submit_one(&*s, NewTask::new("k", json!(0)).priority(5).run_at(at(-10))).await;
    let high_early_2 =
        submit_one(&*s, NewTask::new("k", json!(0)).priority(5).run_at(at(-10))).await;
    let negative = submit_one(
        &*s,
        NewTask::new("k", json!(0)).priority(-3).run_at(at(-100)),
    )
    .await;
    let mut order = Vec::new();
    for _ in 0..5 {
        let got = claim(&*s, &["k"], 1, t0()).await;
        assert_eq!(got.len(), 1);
        order.push(got[0].id);
    }
    assert_eq!(
        order,
        vec![high_early, high_early_2, high_late, low_early, negative]
    );
    let batch_store = db.store().await;
    let ids = submit_at(
        &*batch_store,
        (0..4)
            .map(|i| NewTask::new("k", json!(i)).priority(i))
            .collect(),
        t0(),
    )
    .await;
    let batch: Vec<i64> = claim(&*batch_store, &["k"], 10, t0())
        .await
        .iter()
        .map(|t| t.id)
        .collect();
    assert_eq!(
        batch,
        ids.into_iter().rev().collect::<Vec<_>>(),
        "a batch comes back in claim order"
    );
}

pub async fn delayed_tasks_are_not_claimed_early(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0)).delay(Duration::from_secs(60)),
    )
    .await;
    assert!(claim(&*s, &["k"], 10, at(59)).await.is_empty());
    let got = claim(&*s, &["k"], 10, at(60)).await;
    assert_eq!(got.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
}

pub async fn claim_takes_only_registered_kinds_of_its_queue(db: &impl Backend) {
    let s = db.store().await;
    let a = submit_one(&*s, NewTask::new("a", json!(0))).await;
    submit_one(&*s, NewTask::new("b", json!(0))).await;
    let other_queue = submit_one(&*s, NewTask::new("a", json!(0)).queue("other")).await;
    let held = submit_one(&*s, NewTask::new("a", json!(0)).held(true)).await;
    let got = claim(&*s, &["a"], 10, t0()).await;
    assert_eq!(got.iter().map(|t| t.id).collect::<Vec<_>>(), vec![a]);
    let got = s
        .task_claim(claim_params("other", &["a", "b"], 10, t0()))
        .await
        .unwrap();
    assert_eq!(
        got.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![other_queue]
    );
    assert_eq!(
        get(&*s, held).await.state,
        TaskState::Held,
        "held tasks are never claimed"
    );
    assert!(claim(&*s, &[], 10, t0()).await.is_empty());
}

pub async fn paused_queue_is_not_claimed_until_resumed(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    s.queue_set_paused(QueuePauseParams {
        queue: "default".into(),
        paused: true,
    })
    .await
    .unwrap();
    assert!(claim(&*s, &["k"], 10, t0()).await.is_empty());
    let queues = s.queue_list().await.unwrap();
    let q = queues
        .iter()
        .find(|q| q.name == "default")
        .expect("queue listed");
    assert!(q.paused);
    assert_eq!(q.counts, vec![(TaskState::Pending, 1)]);
    s.queue_set_paused(QueuePauseParams {
        queue: "default".into(),
        paused: false,
    })
    .await
    .unwrap();
    assert_eq!(claim(&*s, &["k"], 10, t0()).await[0].id, id);
    assert!(!s.queue_list().await.unwrap().iter().any(|q| q.paused));
}

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

pub async fn stale_token_writes_change_nothing(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let first = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    // The first lease expires and the task is claimed again.
    rescue_all(&*s, at(31)).await;
    let second = claim(&*s, &["k"], 1, at(40)).await.remove(0);
    assert_ne!(first.lease_token, second.lease_token);
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![first.lease(), second.lease()],
            lease_for: LEASE,
            now: Some(at(41)),
        })
        .await
        .unwrap();
    assert_eq!(renewed[0], LeaseStatus::Lost);
    assert_eq!(
        renewed[1],
        LeaseStatus::Held {
            expires_at: Some(at(71))
        }
    );
    let cp = s
        .task_checkpoint(CheckpointParams {
            lease: first.lease(),
            checkpoint: Some(json!({"i": 99})),
            progress: None,
        })
        .await
        .unwrap();
    assert_eq!(cp, LeaseStatus::Lost);
    assert!(
        !finish(&*s, first.lease(), ok(), 1, at(42)).await,
        "a stale complete is refused"
    );
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Running);
    assert_eq!(t.checkpoint, None);
    assert_eq!(t.lease_token, second.lease_token);
    assert!(finish(&*s, second.lease(), ok(), 2, at(43)).await);
    assert_eq!(get(&*s, id).await.state, TaskState::Succeeded);
}

/// The rescuer's two store calls, as the runtime's `Rescuer` makes them.
pub async fn rescue_all(s: &dyn Store, now: DateTime<Utc>) -> Vec<bool> {
    let expired = s
        .task_list_expired(ExpiredParams {
            limit: 100,
            now: Some(now),
        })
        .await
        .unwrap();
    let items = expired
        .iter()
        .map(|t| FinishItem {
            lease: t.lease(),
            plan: FinishPlan::lease_expired(t.attempt, &t.backoff, 0.5),
        })
        .collect();
    s.task_finish(FinishParams {
        items,
        only_if_expired: true,
        now: Some(now),
    })
    .await
    .unwrap()
}

pub async fn rescue_takes_back_expired_leases_and_counts_the_attempt(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0))
            .max_attempts(2)
            .backoff(no_jitter()),
    )
    .await;
    claim(&*s, &["k"], 1, at(0)).await;
    assert!(s
        .task_list_expired(ExpiredParams {
            limit: 10,
            now: Some(at(29))
        })
        .await
        .unwrap()
        .is_empty());
    assert_eq!(rescue_all(&*s, at(30)).await, vec![true]);
    let t = get(&*s, id).await;
    assert_eq!((t.state, t.attempt), (TaskState::Pending, 1));
    assert_eq!(t.run_at, at(40));
    assert_eq!(t.last_error.as_deref(), Some("lease expired"));
    claim(&*s, &["k"], 1, at(40)).await;
    assert_eq!(rescue_all(&*s, at(70)).await, vec![true]);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Failed, "the last attempt expired too");
    let outcomes: Vec<_> = s
        .attempt_list(id)
        .await
        .unwrap()
        .iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(
        outcomes,
        vec![AttemptOutcome::LeaseExpired, AttemptOutcome::LeaseExpired]
    );
}

pub async fn rescue_leaves_a_renewed_lease_alone(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    let expired = s
        .task_list_expired(ExpiredParams {
            limit: 10,
            now: Some(at(31)),
        })
        .await
        .unwrap();
    assert_eq!(expired.len(), 1);
    // The worker renews after the rescuer listed the task but before it acted.
    s.task_renew(RenewParams {
        leases: vec![t.lease()],
        lease_for: LEASE,
        now: Some(at(31)),
    })
    .await
    .unwrap();
    let items = vec![FinishItem {
        lease: t.lease(),
        plan: FinishPlan::lease_expired(1, &no_jitter(), 0.5),
    }];
    let applied = s
        .task_finish(FinishParams {
            items,
            only_if_expired: true,
            now: Some(at(31)),
        })
        .await
        .unwrap();
    assert_eq!(applied, vec![false]);
    assert_eq!(get(&*s, id).await.state, TaskState::Running);
}

pub async fn timeout_caps_the_lease_at_the_deadline(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(
        &*s,
        NewTask::new("k", json!(0)).timeout(Duration::from_secs(45)),
    )
    .await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    assert_eq!(t.deadline_at, Some(at(45)));
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![t.lease()],
            lease_for: LEASE,
            now: Some(at(20)),
        })
        .await
        .unwrap();
    assert_eq!(
        renewed,
        vec![LeaseStatus::Held {
            expires_at: Some(at(45))
        }],
        "renewal stops at the deadline"
    );
    let expired = s
        .task_list_expired(ExpiredParams {
            limit: 10,
            now: Some(at(45)),
        })
        .await
        .unwrap();
    assert_eq!(expired.iter().map(|t| t.id).collect::<Vec<_>>(), vec![id]);
    let short = submit_one(
        &*s,
        NewTask::new("k", json!(0)).timeout(Duration::from_millis(1500)),
    )
    .await;
    let t = claim(&*s, &["k"], 1, at(50)).await.remove(0);
    assert_eq!(t.id, short);
    assert_eq!(
        t.lease_expires_at,
        Some(at(50) + chrono::Duration::milliseconds(1500))
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

pub async fn cancel_of_a_running_task_is_seen_by_its_worker(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    assert_eq!(
        update(&*s, Target::Id(id), Change::Cancel).await.unwrap(),
        1
    );
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![t.lease()],
            lease_for: LEASE,
            now: Some(at(6)),
        })
        .await
        .unwrap();
    assert_eq!(renewed, vec![LeaseStatus::Cancelled]);
    assert!(
        !finish(&*s, t.lease(), ok(), 1, at(7)).await,
        "the cancelled worker's result is dropped"
    );
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Cancelled);
    assert_eq!(t.result, None);
    let history = s.attempt_list(id).await.unwrap();
    assert_eq!(history.len(), 1);
    assert_eq!(history[0].outcome, AttemptOutcome::Cancelled);
    assert_eq!(history[0].worker_id.as_deref(), Some("w1"));
}

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
    assert!(err.to_string().contains("it is failed"), "{err}");
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

pub async fn bulk_changes_report_how_many_rows_changed(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..10)
        .map(|i| {
            NewTask::new(if i < 6 { "a" } else { "b" }, json!(i)).queue(if i % 2 == 0 {
                "even"
            } else {
                "odd"
            })
        })
        .collect();
    submit_at(&*s, tasks, t0()).await;
    let even_a = Target::Filter(TaskFilter::default().queue("even").kind("a"));
    assert_eq!(update(&*s, even_a.clone(), Change::Hold).await.unwrap(), 3);
    assert_eq!(
        update(&*s, even_a.clone(), Change::Hold).await.unwrap(),
        0,
        "already held: nothing changes"
    );
    let claimed = s
        .task_claim(claim_params("odd", &["a", "b"], 2, t0()))
        .await
        .unwrap();
    assert_eq!(claimed.len(), 2);
    let odd = Target::Filter(TaskFilter::default().queue("odd"));
    assert_eq!(
        update(&*s, odd.clone(), Change::SetPriority { priority: 7 })
            .await
            .unwrap(),
        5
    );
    assert_eq!(
        update(
            &*s,
            odd.clone(),
            Change::EditPayload {
                payload: json!("x")
            }
        )
        .await
        .unwrap(),
        3,
        "not the two running"
    );
    assert_eq!(
        update(&*s, Target::Filter(TaskFilter::default()), Change::Cancel)
            .await
            .unwrap(),
        10
    );
    let failed_or_cancelled =
        Target::Filter(TaskFilter::default().state(TaskState::Cancelled).kind("b"));
    assert_eq!(
        update(&*s, failed_or_cancelled, Change::Retry)
            .await
            .unwrap(),
        4
    );
    let page = s
        .task_list(ListParams {
            filter: TaskFilter::default().state(TaskState::Pending),
            limit: 100,
            after: None,
            light: false,
        })
        .await
        .unwrap();
    assert_eq!(page.tasks.len(), 4);
    assert!(page.tasks.iter().all(|t| t.kind == "b"));
}

pub async fn list_filters_and_pages_by_keyset(db: &impl Backend) {
    let s = db.store().await;
    let mut ids = Vec::new();
    for i in 0..25 {
        let t = NewTask::new(if i % 5 == 0 { "report" } else { "email" }, json!(i))
            .key(format!("user-{}", i % 3));
        ids.push(submit_at(&*s, vec![t], at(i)).await[0]);
    }
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page = s
            .task_list(ListParams {
                filter: TaskFilter::default(),
                after,
                limit: 10,
                light: false,
            })
            .await
            .unwrap();
        seen.extend(page.tasks.iter().map(|t| t.id));
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(
        seen,
        ids.iter().rev().copied().collect::<Vec<_>>(),
        "newest first, each once"
    );
    let count = |f: TaskFilter| {
        let s = s.clone();
        async move {
            s.task_list(ListParams {
                filter: f,
                after: None,
                limit: 100,
                light: false,
            })
            .await
            .unwrap()
            .tasks
            .len()
        }
    };
    assert_eq!(count(TaskFilter::default().kind("report")).await, 5);
    assert_eq!(count(TaskFilter::default().key("user-1")).await, 8);
    assert_eq!(
        count(TaskFilter {
            created_after: Some(at(10)),
            created_before: Some(at(20)),
            ..Default::default()
        })
        .await,
        10
    );
    let t = claim(&*s, &["email"], 1, at(100)).await.remove(0);
    finish(
        &*s,
        t.lease(),
        HandlerOutcome::Failed {
            message: "SMTP 550 mailbox unavailable".into(),
        },
        1,
        at(101),
    )
    .await;
    assert_eq!(
        count(TaskFilter::default().error_contains("550 mailbox")).await,
        1
    );
    assert_eq!(
        count(TaskFilter::default().error_contains("%")).await,
        0,
        "no wildcards"
    );
    assert_eq!(
        count(
            TaskFilter::default()
                .state(TaskState::Failed)
                .state(TaskState::Running)
        )
        .await,
        1
    );
    assert_eq!(
        count(TaskFilter {
            updated_after: Some(at(101)),
            ..Default::default()
        })
        .await,
        1
    );
    let idem = submit_one(&*s, NewTask::new("x", json!(0)).idempotency_key("abc")).await;
    let page = s
        .task_list(ListParams {
            filter: TaskFilter {
                idempotency_key: Some("abc".into()),
                ..Default::default()
            },
            after: None,
            limit: 5,
            light: false,
        })
        .await
        .unwrap();
    assert_eq!(
        page.tasks.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![idem]
    );
    let err = s
        .task_list(ListParams {
            limit: MAX_PAGE_SIZE + 1,
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert!(err.to_string().contains("page size"), "{err}");
}

pub async fn migrate_is_idempotent_and_safe_concurrently(db: &impl Backend) {
    let mut handles = Vec::new();
    for _ in 0..4 {
        let s = db.store().await;
        handles.push(tokio::spawn(async move { s.migrate().await }));
    }
    for h in handles {
        h.await.unwrap().expect("concurrent migrate");
    }
    let s = db.store().await;
    s.migrate().await.unwrap();
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    assert_eq!(get(&*s, id).await.state, TaskState::Pending);
}

pub async fn checkpoint_and_progress_are_fenced(db: &impl Backend) {
    let s: Arc<dyn Store> = db.store().await;
    let id = submit_one(&*s, NewTask::new("k", json!(0))).await;
    let t = claim(&*s, &["k"], 1, at(0)).await.remove(0);
    let held = s
        .task_checkpoint(CheckpointParams {
            lease: t.lease(),
            checkpoint: Some(json!({"offset": 10})),
            progress: Some(json!({"pct": 10})),
        })
        .await
        .unwrap();
    assert!(held.is_held());
    s.task_checkpoint(CheckpointParams {
        lease: t.lease(),
        checkpoint: None,
        progress: Some(json!({"pct": 20})),
    })
    .await
    .unwrap();
    let t2 = get(&*s, id).await;
    assert_eq!(
        t2.checkpoint,
        Some(json!({"offset": 10})),
        "progress alone keeps the checkpoint"
    );
    assert_eq!(t2.progress, Some(json!({"pct": 20})));
    let forged = Lease {
        token: t.lease_token + 1,
        ..t.lease()
    };
    let status = s
        .task_checkpoint(CheckpointParams {
            lease: forged,
            checkpoint: Some(json!(0)),
            progress: None,
        })
        .await
        .unwrap();
    assert_eq!(status, LeaseStatus::Lost);
    let big = json!("x".repeat(DEFAULT_MAX_PAYLOAD_BYTES + 1));
    let err = s
        .task_checkpoint(CheckpointParams {
            lease: t.lease(),
            checkpoint: Some(big),
            progress: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err}");
    assert_eq!(get(&*s, id).await.checkpoint, Some(json!({"offset": 10})));
}
