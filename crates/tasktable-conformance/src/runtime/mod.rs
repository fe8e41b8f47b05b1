//! The real worker runtime on each backend: claims, leases, rescue, shutdown, outcomes.
//! Tests wait on worker events and handler signals, never on fixed sleeps; the only
//! waiting on the clock is for leases to expire, which is what is under test.

pub mod batches;
pub mod drain;
pub mod leases;
pub mod outcomes;
pub mod queues;
pub mod refusal;
pub mod runs;
pub mod saving;
pub mod schedules;
pub mod takeover;
pub mod targets;
pub mod workers;

use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{Backoff, NewTask};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(90);

fn instant_retry() -> Backoff {
    Backoff {
        initial: Duration::ZERO,
        multiplier: 1.0,
        max: Duration::ZERO,
        jitter: 0.0,
    }
}

struct Running {
    stop: CancellationToken,
    join: tokio::task::JoinHandle<()>,
}

impl Running {
    async fn shutdown(self) {
        self.stop.cancel();
        tokio::time::timeout(PATIENCE, self.join)
            .await
            .expect("worker shuts down")
            .expect("worker task");
    }
}

fn start(worker: Worker) -> Running {
    let stop = CancellationToken::new();
    let join = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
    Running { stop, join }
}

fn fast(store: Arc<dyn Store>) -> WorkerBuilder {
    Worker::builder(store)
        .poll_interval(Duration::from_millis(50))
        .rescue_interval(None)
}

async fn wait_event(
    rx: &mut broadcast::Receiver<WorkerEvent>,
    what: &str,
    pred: impl Fn(&WorkerEvent) -> bool,
) -> WorkerEvent {
    tokio::time::timeout(PATIENCE, async {
        loop {
            match rx.recv().await {
                Ok(e) if pred(&e) => return e,
                Ok(_) => continue,
                Err(e) => panic!("event stream broke while waiting for {what}: {e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

fn finished(id: i64) -> impl Fn(&WorkerEvent) -> bool {
    move |e| matches!(e, WorkerEvent::Finished { task_id, .. } if *task_id == id)
}

async fn submit(store: &dyn Store, task: NewTask) -> i64 {
    submit_all(store, vec![task]).await[0]
}

/// Submits `tasks` in one call, due by the database's clock; their ids in order.
async fn submit_all(store: &dyn Store, tasks: Vec<NewTask>) -> Vec<i64> {
    store
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .expect("submit")
        .iter()
        .map(|s| s.id)
        .collect()
}

async fn get(store: &dyn Store, id: i64) -> tasktable_core::Task {
    store.task_get(id).await.unwrap().expect("task")
}

use crate::pinned::outcomes;
