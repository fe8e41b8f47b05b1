//! Multi-run tasks at the store: runs go to distinct workers, never more than `at_once`
//! at a time, and the task follows its runs; each run's lease is fenced on its own,
//! expired runs are rescued and taken over from their checkpoints, and operators' changes
//! reach every run.

pub mod broadcast;
pub mod claim;
pub mod leases;
pub mod operator;

use crate::pinned::*;
use serde_json::json;
use tasktable_core::runs::{Run, Runs};
use tasktable_core::{HandlerOutcome, NewTask, Target, Task};
use tasktable_store::*;

/// A task of kind `k` that wants `runs`, with a backoff without jitter.
fn multi(runs: Runs) -> NewTask {
    NewTask::new("k", json!({"job": "everywhere"}))
        .backoff(no_jitter())
        .runs(runs)
}

/// `worker`'s claim (limit 10) at `secs`, in the groups given.
async fn claim_as(s: &dyn Store, worker: &str, worker_groups: &[&str], secs: i64) -> Vec<Task> {
    s.task_claim(ClaimParams {
        worker_id: worker.into(),
        worker_groups: worker_groups.iter().map(|g| g.to_string()).collect(),
        ..claim_params("default", &["k"], 10, at(secs))
    })
    .await
    .expect("claim")
}

/// `worker`'s claim, which must return exactly one run of `id`.
async fn one_run(s: &dyn Store, worker: &str, id: i64, secs: i64) -> Task {
    let mut got = claim_as(s, worker, &[], secs).await;
    assert_eq!(got.len(), 1, "{worker} gets one run: {got:?}");
    let t = got.pop().unwrap();
    assert_eq!(t.id, id);
    assert!(t.run.is_some(), "a claimed run says which it is");
    t
}

async fn runs_of(s: &dyn Store, id: i64) -> Vec<Run> {
    s.run_list(id).await.expect("runs")
}

fn ok() -> HandlerOutcome {
    HandlerOutcome::Succeeded {
        result: Some(json!("done")),
    }
}

fn error() -> HandlerOutcome {
    HandlerOutcome::Error {
        message: "try again".into(),
        retry_after: None,
    }
}

fn group(name: &str) -> Target {
    Target::Groups(vec![name.to_owned()])
}
