//! A fake of the lanes [`super::claim`] and [`super::finish`] route between, which
//! records the calls it gets: the routing's unit tests. (Not of the store: the lanes
//! themselves are tested on real databases by the conformance suite.)

use super::claim::ClaimLanes;
use super::finish::LeaseLanes;
use crate::limits::LimitedClaim;
use crate::runs::Ended;
use async_trait::async_trait;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use std::sync::Mutex;
use std::time::Duration;
use tasktable_core::{Lease, Task, TaskId};
use tasktable_store::{
    Checked, CheckpointParams, ClaimParams, FinishItem, FinishParams, LeaseStatus, RenewParams,
    StoreResult,
};

/// What each lane answers; every call is recorded as a line (`"runs 2"`, `"finish 1,2"`).
#[derive(Debug, Default)]
pub struct Fake {
    hot: Vec<i64>,
    limited: Option<Vec<i64>>,
    open_runs: Vec<i64>,
    open_but_none: bool,
    /// The task whose writes under a lease are refused (its lease lost).
    refused: Option<i64>,
    calls: Mutex<Vec<String>>,
}

impl Fake {
    /// The hot claim finds these tasks.
    pub fn hot(mut self, ids: &[i64]) -> Self {
        self.hot = ids.to_vec();
        self
    }

    /// The queue has a policy, and its claim finds these tasks.
    pub fn limited(mut self, ids: &[i64]) -> Self {
        self.limited = Some(ids.to_vec());
        self
    }

    /// The queue has open multi-run tasks, and a claim of runs finds these.
    pub fn open_runs(mut self, ids: &[i64]) -> Self {
        self.open_runs = ids.to_vec();
        self
    }

    /// The queue has open multi-run tasks, none of which the worker may start a run of.
    pub fn open_but_none_for_this_worker(mut self) -> Self {
        self.open_but_none = true;
        self
    }

    /// Writes under the lease of task `id` find it lost.
    pub fn refuse(mut self, id: i64) -> Self {
        self.refused = Some(id);
        self
    }

    pub fn calls(&self) -> Vec<String> {
        self.calls.lock().expect("not poisoned").clone()
    }

    /// The calls so far, forgotten.
    pub fn take_calls(&self) -> Vec<String> {
        std::mem::take(&mut *self.calls.lock().expect("not poisoned"))
    }

    fn record(&self, call: String) {
        self.calls.lock().expect("not poisoned").push(call);
    }

    fn held(&self, id: TaskId) -> bool {
        self.refused != Some(id)
    }

    fn status(&self, id: TaskId) -> LeaseStatus {
        if self.held(id) {
            LeaseStatus::Held { expires_at: None }
        } else {
            LeaseStatus::Lost
        }
    }
}

fn ids(leases: impl Iterator<Item = TaskId>) -> String {
    leases
        .map(|id| id.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[async_trait]
impl ClaimLanes for Fake {
    async fn hot(&self, p: &ClaimParams) -> StoreResult<Vec<Task>> {
        self.record("hot".into());
        Ok(self
            .hot
            .iter()
            .take(p.limit as usize)
            .map(|&id| task(id))
            .collect())
    }

    async fn limited(&self, p: &ClaimParams) -> StoreResult<LimitedClaim> {
        self.record("limited".into());
        Ok(match &self.limited {
            Some(ids) => LimitedClaim::Claimed(
                ids.iter()
                    .take(p.limit as usize)
                    .map(|&id| task(id))
                    .collect(),
            ),
            None => LimitedClaim::NotLimited,
        })
    }

    async fn is_limited(&self, _queue: &str) -> StoreResult<bool> {
        self.record("is_limited".into());
        Ok(self.limited.is_some())
    }

    async fn any_open(&self, _p: &ClaimParams) -> StoreResult<bool> {
        self.record("any_open".into());
        Ok(!self.open_runs.is_empty() || self.open_but_none)
    }

    async fn runs(&self, p: &ClaimParams) -> StoreResult<Vec<Task>> {
        self.record(format!("runs {}", p.limit));
        Ok(self
            .open_runs
            .iter()
            .take(p.limit as usize)
            .map(|&id| task(id))
            .collect())
    }
}

#[async_trait]
impl LeaseLanes for Fake {
    async fn renew(&self, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        self.record(format!("renew {}", ids(p.leases.iter().map(|l| l.task_id))));
        Ok(p.leases.iter().map(|l| self.status(l.task_id)).collect())
    }

    async fn renew_run(
        &self,
        lease: &Lease,
        run: u32,
        _lease_for: Duration,
        _now: Option<DateTime<Utc>>,
    ) -> StoreResult<LeaseStatus> {
        self.record(format!("renew_run {}/{run}", lease.task_id));
        Ok(self.status(lease.task_id))
    }

    async fn checkpoint(&self, p: Checked<CheckpointParams>) -> StoreResult<LeaseStatus> {
        self.record(format!("checkpoint {}", p.lease.task_id));
        Ok(self.status(p.lease.task_id))
    }

    async fn checkpoint_run(
        &self,
        p: &Checked<CheckpointParams>,
        run: u32,
    ) -> StoreResult<LeaseStatus> {
        self.record(format!("checkpoint_run {}/{run}", p.lease.task_id));
        Ok(self.status(p.lease.task_id))
    }

    async fn finish(&self, p: Checked<FinishParams>) -> StoreResult<Vec<bool>> {
        self.record(format!(
            "finish {}",
            ids(p.items.iter().map(|i| i.lease.task_id))
        ));
        Ok(p.items.iter().map(|i| self.held(i.lease.task_id)).collect())
    }

    /// Every run it ends leaves room for another run of its task, in queue `q`.
    async fn finish_run(
        &self,
        item: &FinishItem,
        run: u32,
        _only_if_expired: bool,
        _now: Option<DateTime<Utc>>,
    ) -> StoreResult<Ended> {
        let id = item.lease.task_id;
        self.record(format!("finish_run {}/{run}", id));
        let applied = self.held(id);
        Ok(Ended {
            applied,
            wake: applied.then(|| "q".to_owned()),
        })
    }
}

pub fn t0() -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap()
}

/// A claim from queue `q` by worker `w`.
pub fn claim_params() -> ClaimParams {
    ClaimParams {
        queue: "q".into(),
        kinds: vec!["k".into()],
        limit: 1,
        worker_id: "w".into(),
        worker_host: "h".into(),
        worker_groups: Vec::new(),
        lease_for: Duration::from_secs(30),
        now: None,
    }
}

/// A task of queue `q` as a claim returns it; tasks claim in the order of their ids.
pub fn task(id: i64) -> Task {
    let backoff = serde_json::to_value(tasktable_core::Backoff::default()).expect("a backoff");
    serde_json::from_value(json!({
        "id": id, "kind": "k", "queue": "q", "state": "running", "payload": null,
        "result": null, "checkpoint": null, "progress": null, "key": null,
        "idempotency_key": null, "priority": 0, "run_at": t0(),
        "attempt": 1, "max_attempts": 3, "timeout_ms": null, "worker_id": "w",
        "worker_host": "h", "last_error": null, "created_at": t0(), "updated_at": t0(),
        "started_at": t0(), "finished_at": null, "backoff": backoff, "lease_token": 1,
    }))
    .expect("a task")
}

pub fn lease(id: i64, run: Option<u32>) -> Lease {
    Lease {
        task_id: id,
        token: 1,
        credential: None,
        run,
    }
}
