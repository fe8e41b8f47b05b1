//! The store as the store-level cases call it: at instants pinned in 2030, as one worker
//! (`w1` on `host-a`) with a 30 s lease, with a backoff that has no jitter. Pinned times
//! make every backend owe the same answer; the backends' own test files use these too.

use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{Backoff, HandlerOutcome, Lease, NewTask, Task};
use tasktable_store::*;

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
        worker_groups: Vec::new(),
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

/// The outcomes of a task's ended attempts, oldest first.
pub async fn outcomes(store: &dyn Store, id: i64) -> Vec<tasktable_core::AttemptOutcome> {
    store
        .attempt_list(id)
        .await
        .unwrap()
        .iter()
        .map(|a| a.outcome)
        .collect()
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
            actor: tasktable_core::Actor::rust(),
            target,
            change,
            now: Some(at(5)),
            action: None,
        })
        .await
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

/// A handler's success with a small result.
pub fn ok() -> HandlerOutcome {
    HandlerOutcome::Succeeded {
        result: Some(json!({"ok": true})),
    }
}
