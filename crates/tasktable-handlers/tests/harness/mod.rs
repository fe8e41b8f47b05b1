//! A real worker on a real SQLite file, for driving a handler end to end and reading the
//! task rows and attempt history it leaves. Waits on worker events, never on the clock.

use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{Attempt, AttemptOutcome, Backoff, NewTask, Task};
use tasktable_runtime::{Worker, WorkerBuilder, WorkerConfig, WorkerEvent};
use tasktable_sqlite::SqliteStore;
use tasktable_store::{Store, SubmitParams};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

/// How long any one wait may take before the test fails; generous for a loaded machine.
pub const PATIENCE: Duration = Duration::from_secs(60);

/// Retries come back at once, so attempt histories build up fast.
pub fn instant_retry() -> Backoff {
    Backoff {
        initial: Duration::ZERO,
        multiplier: 1.0,
        max: Duration::ZERO,
        jitter: 0.0,
    }
}

pub struct Harness {
    pub store: Arc<dyn Store>,
    events: broadcast::Receiver<WorkerEvent>,
    /// Events received while waiting for another task's, kept for later waits.
    backlog: Vec<WorkerEvent>,
    stop: CancellationToken,
    join: tokio::task::JoinHandle<()>,
    _dir: tempfile::TempDir,
}

impl Harness {
    /// A migrated store in a fresh temp file and a running worker with the handlers that
    /// `register` adds. `stop_grace` is how long a stopped handler may wind down.
    pub async fn start(
        stop_grace: Duration,
        register: impl FnOnce(WorkerBuilder) -> WorkerBuilder,
    ) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
        let store = SqliteStore::open(&url).await.expect("open sqlite");
        store.migrate().await.expect("migrate");
        let store: Arc<dyn Store> = Arc::new(store);
        let config = WorkerConfig {
            // Renewed every second, so an operator's cancel reaches a handler quickly.
            lease_for: Duration::from_secs(3),
            poll_interval: Duration::from_millis(50),
            rescue_interval: None,
            stop_grace,
            ..WorkerConfig::default()
        };
        let worker = register(Worker::builder(store.clone()).config(config))
            .build()
            .expect("worker");
        let events = worker.subscribe();
        let stop = CancellationToken::new();
        let join = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
        Harness {
            store,
            events,
            backlog: Vec::new(),
            stop,
            join,
            _dir: dir,
        }
    }

    pub async fn submit(&self, task: NewTask) -> i64 {
        self.store
            .task_submit(SubmitParams {
                tasks: vec![task],
                now: None,
            })
            .await
            .expect("submit")[0]
            .id
    }

    /// Waits for the next worker event about task `id` that `pred` accepts.
    pub async fn event(&mut self, id: i64, pred: impl Fn(&WorkerEvent) -> bool) -> WorkerEvent {
        let wanted = |e: &WorkerEvent| event_task(e) == Some(id) && pred(e);
        if let Some(at) = self.backlog.iter().position(wanted) {
            return self.backlog.remove(at);
        }
        let wait = async {
            loop {
                let e = self.events.recv().await.expect("worker events");
                if wanted(&e) {
                    return e;
                }
                self.backlog.push(e);
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("no awaited event for task {id} within {PATIENCE:?}"))
    }

    /// Waits for attempts of task `id` to end until the task is finished (succeeded,
    /// failed or cancelled); returns its row then.
    pub async fn settled(&mut self, id: i64) -> Task {
        loop {
            self.event(id, is_finished).await;
            let task = self.task(id).await;
            if task.state.is_finished() {
                return task;
            }
        }
    }

    pub async fn task(&self, id: i64) -> Task {
        self.store.task_get(id).await.expect("get").expect("task")
    }

    pub async fn attempts(&self, id: i64) -> Vec<Attempt> {
        self.store.attempt_list(id).await.expect("attempts")
    }

    pub async fn outcomes(&self, id: i64) -> Vec<AttemptOutcome> {
        self.attempts(id).await.iter().map(|a| a.outcome).collect()
    }

    pub async fn shutdown(self) {
        self.stop.cancel();
        tokio::time::timeout(PATIENCE, self.join)
            .await
            .expect("worker stops")
            .expect("worker task");
    }
}

pub fn is_finished(e: &WorkerEvent) -> bool {
    matches!(e, WorkerEvent::Finished { .. })
}

fn event_task(e: &WorkerEvent) -> Option<i64> {
    match e {
        WorkerEvent::Claimed { task_id, .. }
        | WorkerEvent::Finished { task_id, .. }
        | WorkerEvent::Stopped { task_id, .. }
        | WorkerEvent::Renewed { task_id, .. } => Some(*task_id),
        _ => None,
    }
}
