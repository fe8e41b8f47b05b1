//! Multi-run tasks with real workers: twenty workers of a group, five to a store, run a
//! task that wants six copies three at a time; the runs go to six distinct members,
//! never more than three at once, and none to a worker outside the group.

use super::{fast, get, start, submit, PATIENCE};
use crate::targets::groups;
use crate::Backend;
use serde_json::json;
use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tasktable_core::runs::{RunState, Runs};
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_runtime::*;
use tokio::sync::{mpsc, Semaphore};

/// Counts the runs going, says who started, and holds each run until the test lets one
/// go.
struct Gated {
    name: String,
    going: Arc<AtomicUsize>,
    peak: Arc<AtomicUsize>,
    started: mpsc::UnboundedSender<String>,
    gate: Arc<Semaphore>,
}

impl Handler for Gated {
    const KIND: &'static str = "copy";
    type Payload = serde_json::Value;
    type Output = String;
    async fn run(&self, _: TaskContext, _: serde_json::Value) -> Result<String, HandlerError> {
        let now = self.going.fetch_add(1, Ordering::SeqCst) + 1;
        self.peak.fetch_max(now, Ordering::SeqCst);
        let _ = self.started.send(self.name.clone());
        self.gate
            .acquire()
            .await
            .expect("the gate stays open")
            .forget();
        self.going.fetch_sub(1, Ordering::SeqCst);
        Ok(self.name.clone())
    }
}

pub async fn six_copies_run_on_six_members_of_the_group_never_more_than_three_at_once(
    db: &impl Backend,
) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("copy", json!(null))
            .target(groups(&["g"]))
            .runs(Runs::copies(6).at_once(3)),
    )
    .await;
    let going = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let gate = Arc::new(Semaphore::new(0));
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (done_tx, mut done) = mpsc::unbounded_channel();
    let mut stores = Vec::new();
    for _ in 0..5 {
        stores.push(db.store().await);
    }
    let mut running = Vec::new();
    let names: Vec<String> = (1..=20)
        .map(|i| format!("member-{i}"))
        .chain(["outsider-1".to_owned(), "outsider-2".to_owned()])
        .collect();
    for (i, name) in names.iter().enumerate() {
        let mut b = fast(stores[i % stores.len()].clone())
            .identity(WorkerIdentity::named(name.clone()))
            .concurrency(2)
            .register(Gated {
                name: name.clone(),
                going: going.clone(),
                peak: peak.clone(),
                started: started_tx.clone(),
                gate: gate.clone(),
            });
        if name.starts_with("member") {
            b = b.group("g");
        }
        let w = b.build().unwrap();
        let mut events = w.subscribe();
        let tx = done_tx.clone();
        tokio::spawn(async move {
            while let Ok(e) = events.recv().await {
                if let WorkerEvent::Finished {
                    task_id,
                    applied: true,
                    ..
                } = e
                {
                    let _ = tx.send(task_id);
                }
            }
        });
        running.push(start(w));
    }
    let mut ran = Vec::new();
    // Three start; each run let go makes room for one more, until six have started.
    for _ in 0..3 {
        ran.push(next_start(&mut started).await);
    }
    for _ in 3..6 {
        gate.add_permits(1);
        ran.push(next_start(&mut started).await);
    }
    gate.add_permits(3);
    let mut finished = 0;
    while finished < 6 {
        let task_id = tokio::time::timeout(PATIENCE, done.recv())
            .await
            .expect("every run ends")
            .expect("events");
        assert_eq!(task_id, id);
        finished += 1;
    }
    for w in running {
        w.shutdown().await;
    }
    assert_eq!(
        peak.load(Ordering::SeqCst),
        3,
        "never more than three at once"
    );
    assert!(started.try_recv().is_err(), "no seventh run: {ran:?}");
    let distinct: HashSet<&String> = ran.iter().collect();
    assert_eq!(distinct.len(), 6, "six distinct workers: {ran:?}");
    assert!(ran.iter().all(|n| n.starts_with("member")), "{ran:?}");
    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    let runs = store.run_list(id).await.unwrap();
    assert_eq!(runs.len(), 6);
    assert!(runs
        .iter()
        .all(|r| r.state == RunState::Ended(AttemptOutcome::Succeeded)
            && r.result == Some(json!(r.worker_id))));
}

async fn next_start(started: &mut mpsc::UnboundedReceiver<String>) -> String {
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .expect("a run starts")
        .expect("handlers")
}
