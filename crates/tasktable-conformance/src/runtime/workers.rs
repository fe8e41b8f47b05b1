//! Real workers in the registry: each registers before its first claim, beats while it
//! runs and leaves when it stops; a drained worker claims nothing new (after a restart
//! too) until released; a worker that takes every queue runs tasks of queues it was
//! never told of.

use super::{fast, finished, start, submit, wait_event, PATIENCE};
use crate::Backend;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::worker::{Queues, WorkerState};
use tasktable_core::{NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;

struct Job;

impl Handler for Job {
    const KIND: &'static str = "job";
    type Payload = serde_json::Value;
    type Output = ();
    async fn run(&self, _: TaskContext, _: serde_json::Value) -> Result<(), HandlerError> {
        Ok(())
    }
}

fn worker(store: Arc<dyn Store>, id: &str) -> Worker {
    fast(store)
        .identity(WorkerIdentity::named(id))
        .group("blue")
        .heartbeat_interval(Duration::from_millis(100))
        .register(Job)
        .build()
        .unwrap()
}

async fn state_of(store: &dyn Store, id: &str) -> WorkerState {
    store
        .worker_list(WorkerListParams {
            include_gone: true,
            ..Default::default()
        })
        .await
        .unwrap()
        .into_iter()
        .find(|w| w.facts.id == id)
        .map(|w| w.state)
        .unwrap_or_else(|| panic!("{id} is registered"))
}

/// Waits for `n` heartbeats that answered `draining`.
async fn beats(rx: &mut tokio::sync::broadcast::Receiver<WorkerEvent>, n: usize, draining: bool) {
    for _ in 0..n {
        wait_event(
            rx,
            "a heartbeat",
            |e| matches!(e, WorkerEvent::Beat { draining: d } if *d == draining),
        )
        .await;
    }
}

pub async fn a_drained_worker_claims_nothing_new_even_after_a_restart_until_released(
    db: &impl Backend,
) {
    let store = db.store().await;
    let w = worker(db.store().await, "rw-1");
    let mut rx = w.subscribe();
    let running = start(w);
    beats(&mut rx, 1, false).await;
    let info = store
        .worker_list(WorkerListParams::default())
        .await
        .unwrap();
    assert_eq!(info.len(), 1, "registered while it runs");
    assert_eq!(info[0].facts.groups, vec!["blue"]);
    assert_eq!(info[0].facts.queues, Queues::Listed(vec!["default".into()]));
    let id = submit(&*store, NewTask::new("job", serde_json::json!({}))).await;
    wait_event(&mut rx, "the first task", finished(id)).await;

    store
        .worker_set_draining(WorkerDrainParams {
            actor: tasktable_core::Actor::rust(),
            id: "rw-1".into(),
            draining: true,
        })
        .await
        .unwrap()
        .unwrap();
    // Two beats that saw the drain: a claim round that began before the first may still
    // be under way when it arrives, and would take a task submitted then.
    beats(&mut rx, 2, true).await;
    let held = submit(&*store, NewTask::new("job", serde_json::json!({}))).await;
    // Three more beats, each followed by claim rounds that found the worker draining.
    beats(&mut rx, 3, true).await;
    let task = store.task_get(held).await.unwrap().unwrap();
    assert_eq!(
        task.state,
        TaskState::Pending,
        "a draining worker claims nothing"
    );
    running.shutdown().await;
    assert_eq!(
        state_of(&*store, "rw-1").await,
        WorkerState::Gone,
        "it left when it stopped"
    );

    // Restarted under the same id: still drained.
    let w = worker(db.store().await, "rw-1");
    let mut rx = w.subscribe();
    let running = start(w);
    beats(&mut rx, 3, true).await;
    let task = store.task_get(held).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Pending, "a restart keeps the drain");
    assert_eq!(state_of(&*store, "rw-1").await, WorkerState::Draining);

    store
        .worker_set_draining(WorkerDrainParams {
            actor: tasktable_core::Actor::rust(),
            id: "rw-1".into(),
            draining: false,
        })
        .await
        .unwrap()
        .unwrap();
    tokio::time::timeout(PATIENCE, async {
        wait_event(&mut rx, "the held task", finished(held)).await;
    })
    .await
    .expect("released, it runs the task");
    running.shutdown().await;
}

pub async fn a_worker_taking_every_queue_runs_tasks_of_queues_it_was_never_told_of(
    db: &impl Backend,
) {
    let store = db.store().await;
    let w = fast(db.store().await)
        .all_queues()
        .register(Job)
        .build()
        .unwrap();
    let mut rx = w.subscribe();
    let before = submit(
        &*store,
        NewTask::new("job", serde_json::json!({})).queue("made-before"),
    )
    .await;
    let running = start(w);
    wait_event(&mut rx, "a task of a queue that existed", finished(before)).await;
    for queue in ["default", "reports", "emails-eu"] {
        let id = submit(
            &*store,
            NewTask::new("job", serde_json::json!({})).queue(queue),
        )
        .await;
        wait_event(&mut rx, queue, finished(id)).await;
    }
    let me = store
        .worker_list(WorkerListParams::default())
        .await
        .unwrap();
    assert_eq!(me.len(), 1);
    assert_eq!(me[0].facts.queues, Queues::All);
    running.shutdown().await;
}
