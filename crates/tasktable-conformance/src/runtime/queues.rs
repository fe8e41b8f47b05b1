//! Queues under a worker: the concurrency limits of each queue and of the worker hold, a
//! queue's policy holds across workers, a paused queue is not worked until it is resumed,
//! and an idle worker wakes on a submit.

use super::outcomes::Scripted;
use super::{fast, finished, get, start, submit, wait_event, PATIENCE};
use crate::Backend;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::Notify;

#[derive(Default)]
struct Gauges {
    now: HashMap<String, usize>,
    max: HashMap<String, usize>,
    total_now: usize,
    total_max: usize,
    done: usize,
}

struct Busy {
    gauges: Arc<Mutex<Gauges>>,
    all_done: Arc<Notify>,
    target: usize,
}

impl Handler for Busy {
    const KIND: &'static str = "busy";
    type Payload = ();
    type Output = ();
    async fn run(&self, ctx: TaskContext, _: ()) -> Result<(), HandlerError> {
        {
            let mut g = self.gauges.lock().unwrap();
            let q = ctx.queue().to_owned();
            let now = {
                let n = g.now.entry(q.clone()).or_default();
                *n += 1;
                *n
            };
            let max = g.max.entry(q).or_default();
            *max = (*max).max(now);
            g.total_now += 1;
            g.total_max = g.total_max.max(g.total_now);
        }
        // Simulated work, so that tasks overlap.
        tokio::time::sleep(Duration::from_millis(15)).await;
        let mut g = self.gauges.lock().unwrap();
        *g.now.get_mut(ctx.queue()).unwrap() -= 1;
        g.total_now -= 1;
        g.done += 1;
        if g.done == self.target {
            self.all_done.notify_one();
        }
        Ok(())
    }
}

pub async fn concurrency_limits_are_never_exceeded(db: &impl Backend) {
    let store = db.store().await;
    let tasks = (0..60)
        .map(|i| {
            NewTask::new("busy", json!(null)).queue(if i % 2 == 0 { "narrow" } else { "wide" })
        })
        .collect();
    store
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap();
    let gauges = Arc::new(Mutex::new(Gauges::default()));
    let all_done = Arc::new(Notify::new());
    let w = fast(db.store().await)
        .concurrency(5)
        .queue("narrow", 2)
        .queue("wide", 10)
        .register(Busy {
            gauges: gauges.clone(),
            all_done: all_done.clone(),
            target: 60,
        })
        .build()
        .unwrap();
    let w = start(w);
    tokio::time::timeout(PATIENCE, all_done.notified())
        .await
        .expect("all ran");
    w.shutdown().await;
    let g = gauges.lock().unwrap();
    assert!(
        g.max["narrow"] <= 2,
        "narrow queue ran {} at once",
        g.max["narrow"]
    );
    assert!(g.total_max <= 5, "worker ran {} at once", g.total_max);
    assert!(g.total_max >= 2, "tasks did run side by side");
}

/// Three workers, each on a store of its own, on a queue whose policy lets two tasks run
/// anywhere at once: never more than two run, and all of them do.
pub async fn a_queue_policy_limits_every_worker_together(db: &impl Backend) {
    let store = db.store().await;
    store
        .queue_set_policy(QueuePolicyParams {
            actor: tasktable_core::Actor::rust(),
            queue: "shared".into(),
            policy: tasktable_core::policy::QueuePolicy {
                max_running: Some(2),
                ..Default::default()
            },
        })
        .await
        .unwrap();
    let tasks = (0..24)
        .map(|_| NewTask::new("busy", json!(null)).queue("shared"))
        .collect();
    store
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap();
    let gauges = Arc::new(Mutex::new(Gauges::default()));
    let all_done = Arc::new(Notify::new());
    let mut workers = Vec::new();
    for _ in 0..3 {
        let w = fast(db.store().await)
            .concurrency(4)
            .queue("shared", 4)
            .register(Busy {
                gauges: gauges.clone(),
                all_done: all_done.clone(),
                target: 24,
            })
            .build()
            .unwrap();
        workers.push(start(w));
    }
    tokio::time::timeout(PATIENCE, all_done.notified())
        .await
        .expect("all ran");
    for w in workers {
        w.shutdown().await;
    }
    let g = gauges.lock().unwrap();
    assert_eq!(g.done, 24);
    assert!(g.max["shared"] <= 2, "{} ran at once", g.max["shared"]);
}

pub async fn paused_queue_stops_workers_and_resume_restarts_them(db: &impl Backend) {
    let store = db.store().await;
    store
        .queue_set_paused(QueuePauseParams {
            actor: tasktable_core::Actor::rust(),
            queue: "paused".into(),
            paused: true,
        })
        .await
        .unwrap();
    let held_back = submit(
        &*store,
        NewTask::new("scripted", json!("ok")).queue("paused"),
    )
    .await;
    let other = submit(&*store, NewTask::new("scripted", json!("ok")).queue("open")).await;
    let w = fast(store.clone())
        .queue("paused", 1)
        .queue("open", 1)
        .register(Scripted)
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    // Each claim round asks every queue, so once `other` ran, `paused` was asked too.
    wait_event(&mut events, "the open queue's task", finished(other)).await;
    let t = get(&*store, held_back).await;
    assert_eq!((t.state, t.attempt), (TaskState::Pending, 0));
    store
        .queue_set_paused(QueuePauseParams {
            actor: tasktable_core::Actor::rust(),
            queue: "paused".into(),
            paused: false,
        })
        .await
        .unwrap();
    let e = wait_event(&mut events, "the resumed queue's task", finished(held_back)).await;
    assert!(matches!(
        e,
        WorkerEvent::Finished {
            outcome: AttemptOutcome::Succeeded,
            ..
        }
    ));
    w.shutdown().await;
}

pub async fn idle_worker_wakes_on_submit_without_waiting_for_a_poll(db: &impl Backend) {
    let store = db.store().await;
    let first = submit(&*store, NewTask::new("scripted", json!("ok"))).await;
    let w = Worker::builder(store.clone())
        .poll_interval(Duration::from_secs(3600))
        .rescue_interval(None)
        .register(Scripted)
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    wait_event(&mut events, "the first task", finished(first)).await;
    // The worker is idle now, with an hour until its next poll.
    let second = submit(&*store, NewTask::new("scripted", json!("ok"))).await;
    let e = tokio::time::timeout(
        Duration::from_secs(20),
        wait_event(&mut events, "the second task", finished(second)),
    )
    .await
    .expect("a notification woke the worker");
    assert!(matches!(e, WorkerEvent::Finished { applied: true, .. }));
    w.shutdown().await;
}
