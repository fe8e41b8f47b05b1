//! One step of a worker, [`Worker::run_once`] and the claim round inside it, against a
//! real SQLite database in a temporary file. Nothing here waits on the clock: a step
//! returns once its attempts' ends are written, and handlers that must keep their slots
//! wait on a gate the test opens.

use super::*;
use crate::{HandlerError, TaskContext};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use tasktable_core::{AttemptOutcome, NewTask, TaskId, TaskState};
use tasktable_sqlite::{SqliteConfig, SqliteStore};
use tasktable_store::{QueuePauseParams, SubmitParams};
use tokio::sync::Semaphore;

/// How long a step may take before the test fails instead of hanging.
const PATIENCE: Duration = Duration::from_secs(60);

struct Db {
    _dir: tempfile::TempDir,
    sqlite: SqliteStore,
    store: Arc<dyn Store>,
}

async fn database() -> Db {
    database_with(|_| {}).await
}

async fn database_with(adjust: impl FnOnce(&mut SqliteConfig)) -> Db {
    let dir = tempfile::tempdir().expect("temp dir");
    let mut config = SqliteConfig::new(dir.path().join("tasktable.db").display().to_string());
    adjust(&mut config);
    let sqlite = SqliteStore::connect(config).await.expect("open sqlite");
    sqlite.migrate().await.expect("migrate");
    Db {
        _dir: dir,
        store: Arc::new(sqlite.clone()),
        sqlite,
    }
}

async fn submit(store: &dyn Store, tasks: Vec<NewTask>) -> Vec<TaskId> {
    store
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .expect("submit")
        .iter()
        .map(|s| s.id)
        .collect()
}

async fn states(store: &dyn Store, ids: &[TaskId]) -> Vec<TaskState> {
    let mut states = Vec::new();
    for id in ids {
        states.push(store.task_get(*id).await.unwrap().expect("task").state);
    }
    states
}

fn count(states: &[TaskState], state: TaskState) -> usize {
    states.iter().filter(|s| **s == state).count()
}

async fn step(worker: &mut Worker) -> StoreResult<usize> {
    tokio::time::timeout(PATIENCE, worker.run_once())
        .await
        .expect("the step ends")
}

fn builder(store: &Arc<dyn Store>) -> WorkerBuilder {
    Worker::builder(store.clone()).rescue_interval(None)
}

/// Answers with its payload and counts its runs.
#[derive(Clone, Default)]
struct Echo {
    runs: Arc<AtomicUsize>,
}

impl Handler for Echo {
    const KIND: &'static str = "echo";
    type Payload = Value;
    type Output = Value;
    async fn run(&self, _ctx: TaskContext, payload: Value) -> Result<Value, HandlerError> {
        self.runs.fetch_add(1, Ordering::SeqCst);
        Ok(payload)
    }
}

struct TryAgain;

impl Handler for TryAgain {
    const KIND: &'static str = "try_again";
    type Payload = Value;
    type Output = ();
    async fn run(&self, _ctx: TaskContext, _payload: Value) -> Result<(), HandlerError> {
        Err(HandlerError::retry("the mail server is busy"))
    }
}

/// Answers with a string of `n` bytes.
struct Large;

impl Handler for Large {
    const KIND: &'static str = "large";
    type Payload = usize;
    type Output = String;
    async fn run(&self, _ctx: TaskContext, n: usize) -> Result<String, HandlerError> {
        Ok("x".repeat(n))
    }
}

/// Holds its slot until the test adds a permit to the gate.
struct Gated {
    gate: Arc<Semaphore>,
}

impl Handler for Gated {
    const KIND: &'static str = "gated";
    type Payload = Value;
    type Output = ();
    async fn run(&self, _ctx: TaskContext, _payload: Value) -> Result<(), HandlerError> {
        self.gate.acquire().await.expect("gate").forget();
        Ok(())
    }
}

#[tokio::test]
async fn a_step_on_an_empty_queue_claims_nothing() {
    let db = database().await;
    let echo = Echo::default();
    let mut worker = builder(&db.store).register(echo.clone()).build().unwrap();
    let mut events = worker.subscribe();

    assert_eq!(step(&mut worker).await.unwrap(), 0);
    assert_eq!(echo.runs.load(Ordering::SeqCst), 0);
    assert!(events.try_recv().is_err(), "no event without a task");
}

#[tokio::test]
async fn a_step_runs_a_due_task_and_records_its_success() {
    let db = database().await;
    let echo = Echo::default();
    let mut worker = builder(&db.store).register(echo.clone()).build().unwrap();
    let mut events = worker.subscribe();
    let ids = submit(&*db.store, vec![NewTask::new("echo", json!({"to": "ada"}))]).await;

    assert_eq!(step(&mut worker).await.unwrap(), 1);

    assert_eq!(echo.runs.load(Ordering::SeqCst), 1);
    let task = db.store.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Succeeded);
    assert_eq!(task.attempt, 1);
    assert_eq!(task.result, Some(json!({"to": "ada"})));
    let attempts = db.store.attempt_list(ids[0]).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Succeeded);
    assert_eq!(attempts[0].worker_id.as_deref(), Some(worker.id()));
    // The step returns after the attempt's end was written and announced.
    assert_eq!(
        events.try_recv().unwrap(),
        WorkerEvent::Claimed {
            task_id: ids[0],
            attempt: 1
        }
    );
    assert_eq!(
        events.try_recv().unwrap(),
        WorkerEvent::Finished {
            task_id: ids[0],
            outcome: AttemptOutcome::Succeeded,
            applied: true
        }
    );
}

#[tokio::test]
async fn a_retryable_error_sends_the_task_back_due_later_with_the_attempt_counted() {
    let db = database().await;
    let mut worker = builder(&db.store).register(TryAgain).build().unwrap();
    // Backoff of the first retry: 5 s, ±10 %.
    let ids = submit(&*db.store, vec![NewTask::new("try_again", json!({}))]).await;
    let before = db.store.db_now().await.unwrap();

    assert_eq!(step(&mut worker).await.unwrap(), 1);

    let task = db.store.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Pending);
    assert_eq!(task.attempt, 1);
    assert!(
        task.run_at >= before + chrono::Duration::milliseconds(4500),
        "run_at {} is not a backoff after {before}",
        task.run_at
    );
    assert_eq!(task.last_error.as_deref(), Some("the mail server is busy"));
    let attempts = db.store.attempt_list(ids[0]).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Error);
    // Not due again yet, by the database's clock.
    assert_eq!(step(&mut worker).await.unwrap(), 0);
}

#[tokio::test]
async fn a_result_larger_than_the_store_takes_is_recorded_as_an_error_that_says_so() {
    let db = database_with(|c| c.max_payload_bytes = 256).await;
    let mut worker = builder(&db.store).register(Large).build().unwrap();
    let ids = submit(&*db.store, vec![NewTask::new("large", json!(1000))]).await;

    assert_eq!(step(&mut worker).await.unwrap(), 1);

    let task = db.store.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Pending, "retried, not lost or stuck");
    assert_eq!(task.result, None);
    let attempts = db.store.attempt_list(ids[0]).await.unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Error);
    let error = attempts[0].error.as_deref().unwrap_or_default();
    assert!(
        error.contains("refused") && error.contains("the limit is 256"),
        "{error}"
    );
}

#[tokio::test]
async fn a_step_claims_nothing_from_a_paused_queue() {
    let db = database().await;
    let echo = Echo::default();
    let mut worker = builder(&db.store).register(echo.clone()).build().unwrap();
    let ids = submit(&*db.store, vec![NewTask::new("echo", json!(1))]).await;
    db.store
        .queue_set_paused(QueuePauseParams {
            actor: tasktable_core::Actor::rust(),
            queue: tasktable_core::task::DEFAULT_QUEUE.into(),
            paused: true,
        })
        .await
        .unwrap();

    assert_eq!(step(&mut worker).await.unwrap(), 0);

    assert_eq!(echo.runs.load(Ordering::SeqCst), 0);
    let task = db.store.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!((task.state, task.attempt), (TaskState::Pending, 0));
}

#[tokio::test]
async fn a_step_claims_no_more_than_the_workers_concurrency() {
    let db = database().await;
    let echo = Echo::default();
    let mut worker = builder(&db.store)
        .concurrency(2)
        .register(echo.clone())
        .build()
        .unwrap();
    let ids = submit(&*db.store, vec![NewTask::new("echo", json!(1)); 5]).await;

    assert_eq!(step(&mut worker).await.unwrap(), 2);
    let after_one = states(&*db.store, &ids).await;
    assert_eq!(count(&after_one, TaskState::Succeeded), 2);
    assert_eq!(count(&after_one, TaskState::Pending), 3);

    assert_eq!(step(&mut worker).await.unwrap(), 2);
    assert_eq!(step(&mut worker).await.unwrap(), 1);
    assert_eq!(step(&mut worker).await.unwrap(), 0);
    assert_eq!(echo.runs.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn a_step_claims_no_more_than_each_queues_limit_or_the_claim_batch() {
    let db = database().await;
    let mut worker = builder(&db.store)
        .concurrency(3)
        .queue("a", 2)
        .queue("b", 2)
        .register(Echo::default())
        .build()
        .unwrap();
    let in_a = submit(
        &*db.store,
        vec![NewTask::new("echo", json!(1)).queue("a"); 3],
    )
    .await;
    let in_b = submit(
        &*db.store,
        vec![NewTask::new("echo", json!(1)).queue("b"); 3],
    )
    .await;

    assert_eq!(step(&mut worker).await.unwrap(), 3);
    let done_a = count(&states(&*db.store, &in_a).await, TaskState::Succeeded);
    let done_b = count(&states(&*db.store, &in_b).await, TaskState::Succeeded);
    assert_eq!(done_a + done_b, 3);
    assert!(done_a <= 2 && done_b <= 2, "a: {done_a}, b: {done_b}");

    let mut one_at_a_time = Worker::builder(db.store.clone())
        .config(WorkerConfig {
            claim_batch: 1,
            rescue_interval: None,
            ..Default::default()
        })
        .queue("a", 10)
        .register(Echo::default())
        .build()
        .unwrap();
    assert_eq!(step(&mut one_at_a_time).await.unwrap(), 1);
}

#[tokio::test]
async fn a_claim_round_takes_only_the_slots_running_handlers_left_free() {
    let db = database().await;
    let gate = Arc::new(Semaphore::new(0));
    let worker = builder(&db.store)
        .concurrency(3)
        .register(Gated { gate: gate.clone() })
        .build()
        .unwrap();
    let mut ids = submit(&*db.store, vec![NewTask::new("gated", json!(1)); 2]).await;
    let services = Services::start(
        worker.store.clone(),
        worker.config.clone(),
        worker.handlers.clone(),
        worker.events.clone(),
    );
    let shared = &services.shared;
    let tracker = TaskTracker::new();
    let mut claimer = Claimer::new(shared);

    let first = claimer.round(shared, &tracker).await;
    assert_eq!((first.claimed, first.saturated), (2, false));

    ids.extend(submit(&*db.store, vec![NewTask::new("gated", json!(1)); 3]).await);
    let second = claimer.round(shared, &tracker).await;
    assert_eq!((second.claimed, second.saturated), (1, true));
    let third = claimer.round(shared, &tracker).await;
    assert_eq!((third.claimed, third.saturated), (0, true));
    assert_eq!(
        count(&states(&*db.store, &ids).await, TaskState::Running),
        3
    );

    gate.add_permits(3);
    tracker.close();
    tokio::time::timeout(PATIENCE, tracker.wait())
        .await
        .expect("handlers end");
    services.stop().await;
    let after = states(&*db.store, &ids).await;
    assert_eq!(count(&after, TaskState::Succeeded), 3);
    assert_eq!(count(&after, TaskState::Pending), 2);
}

#[tokio::test]
async fn a_failed_claim_is_returned_by_the_step() {
    let db = database().await;
    let mut worker = builder(&db.store)
        .register(Echo::default())
        .build()
        .unwrap();
    db.sqlite.close().await;

    assert!(step(&mut worker).await.is_err());
}
