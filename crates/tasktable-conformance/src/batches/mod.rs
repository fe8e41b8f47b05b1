//! Batches at the store: the row a batch submit writes, the runner's fenced saves and
//! what they answer, operators' start, pause, stop and resume, edits of the budget and
//! the data, and retention.

pub mod control;
pub mod save;

use crate::pinned::*;
use serde_json::json;
use tasktable_core::batch::{BatchAction, BatchSpec};
use tasktable_core::{NewTask, Task};
use tasktable_store::*;

/// A batch task of kind `b` with `spec` and some data.
fn batch(spec: BatchSpec) -> NewTask {
    NewTask::new("b", json!({"list": "s3://bucket/users"}))
        .backoff(no_jitter())
        .batch(spec)
}

async fn the_batch(s: &dyn Store, id: i64) -> Batch {
    s.batch_get(id).await.expect("get").expect("a batch")
}

async fn act(s: &dyn Store, id: i64, action: BatchAction) -> StoreResult<Batch> {
    s.batch_control(BatchControlParams {
        actor: tasktable_core::Actor::rust(),
        id,
        action,
        now: Some(at(3)),
    })
    .await
}

/// The one batch task a claim at `secs` hands out.
async fn claim_batch(s: &dyn Store, secs: i64) -> Task {
    let mut got = claim(s, &["b"], 1, at(secs)).await;
    assert_eq!(got.len(), 1, "one batch claimed: {got:?}");
    got.pop().unwrap()
}

fn save(t: &Task, low_water: u64, errors: u64, failures: Vec<ItemFailure>) -> BatchSaveParams {
    BatchSaveParams {
        lease: t.lease(),
        low_water,
        end: None,
        errors,
        failures,
        items_per_second: Some(1234.5),
        lease_for: std::time::Duration::from_secs(30),
        data_version: 0,
        now: Some(at(2)),
    }
}

fn failure(item: u64, error: &str) -> ItemFailure {
    ItemFailure {
        item,
        error: error.into(),
        tries: 3,
        failed_at: None,
    }
}
