//! The real worker runtime on each backend: claims, leases, rescue, shutdown, outcomes.
//! Tests wait on worker events and handler signals, never on fixed sleeps; the only
//! waiting on the clock is for leases to expire, which is what is under test.

use crate::freeze::Freezable;
use crate::Backend;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::{AttemptOutcome, Backoff, NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::{broadcast, mpsc, Notify};
use tokio_util::sync::CancellationToken;

pub use crate::refusal_cases::one_refused_result_never_sends_other_tasks_back;

pub(crate) const PATIENCE: Duration = Duration::from_secs(90);

pub(crate) fn instant_retry() -> Backoff {
    Backoff {
        initial: Duration::ZERO,
        multiplier: 1.0,
        max: Duration::ZERO,
        jitter: 0.0,
    }
}

pub(crate) struct Running {
    stop: CancellationToken,
    join: tokio::task::JoinHandle<()>,
}

impl Running {
    pub(crate) async fn shutdown(self) {
        self.stop.cancel();
        tokio::time::timeout(PATIENCE, self.join)
            .await
            .expect("worker shuts down")
            .expect("worker task");
    }
}

pub(crate) fn start(worker: Worker) -> Running {
    let stop = CancellationToken::new();
    let join = tokio::spawn(worker.run(stop.clone().cancelled_owned()));
    Running { stop, join }
}

pub(crate) fn fast(store: Arc<dyn Store>) -> WorkerBuilder {
    Worker::builder(store)
        .poll_interval(Duration::from_millis(50))
        .rescue_interval(None)
}

pub(crate) async fn wait_event(
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

pub(crate) fn finished(id: i64) -> impl Fn(&WorkerEvent) -> bool {
    move |e| matches!(e, WorkerEvent::Finished { task_id, .. } if *task_id == id)
}

pub(crate) async fn submit(store: &dyn Store, task: NewTask) -> i64 {
    store
        .task_submit(SubmitParams {
            tasks: vec![task],
            now: None,
        })
        .await
        .expect("submit")[0]
        .id
}

pub(crate) async fn get(store: &dyn Store, id: i64) -> tasktable_core::Task {
    store.task_get(id).await.unwrap().expect("task")
}

pub(crate) async fn outcomes(store: &dyn Store, id: i64) -> Vec<AttemptOutcome> {
    store
        .attempt_list(id)
        .await
        .unwrap()
        .iter()
        .map(|a| a.outcome)
        .collect()
}

// ---------------------------------------------------------------------------------------

struct Count {
    runs: Arc<Mutex<HashMap<i64, u32>>>,
    total: Arc<AtomicUsize>,
    target: usize,
    all_done: Arc<Notify>,
}

impl Handler for Count {
    const KIND: &'static str = "count";
    type Payload = u32;
    type Output = ();
    async fn run(&self, ctx: TaskContext, _n: u32) -> Result<(), HandlerError> {
        *self.runs.lock().unwrap().entry(ctx.task_id()).or_default() += 1;
        if self.total.fetch_add(1, Ordering::SeqCst) + 1 == self.target {
            self.all_done.notify_one();
        }
        Ok(())
    }
}

pub async fn four_workers_run_each_of_2000_tasks_exactly_once(db: &impl Backend) {
    const N: usize = 2000;
    let submitter = db.store().await;
    for chunk in (0..N as u32).collect::<Vec<_>>().chunks(500) {
        let tasks = chunk
            .iter()
            .map(|i| NewTask::new("count", json!(i)))
            .collect();
        submitter
            .task_submit(SubmitParams { tasks, now: None })
            .await
            .unwrap();
    }
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let total = Arc::new(AtomicUsize::new(0));
    let all_done = Arc::new(Notify::new());
    let mut workers = Vec::new();
    for w in 0..4 {
        let handler = Count {
            runs: runs.clone(),
            total: total.clone(),
            target: N,
            all_done: all_done.clone(),
        };
        let worker = fast(db.store().await)
            .identity(WorkerIdentity::named(format!("drain-{w}")))
            .concurrency(8)
            .register(handler)
            .build()
            .unwrap();
        workers.push(start(worker));
    }
    tokio::time::timeout(PATIENCE * 2, all_done.notified())
        .await
        .expect("all tasks ran");
    for w in workers {
        w.shutdown().await;
    }
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), N, "every task ran");
    assert!(
        runs.values().all(|n| *n == 1),
        "no task ran twice: {:?}",
        runs.iter().filter(|(_, n)| **n > 1).collect::<Vec<_>>()
    );
    let queues = submitter.queue_list().await.unwrap();
    assert_eq!(queues[0].counts, vec![(TaskState::Succeeded, N as u64)]);
    let mut by_worker: HashMap<String, usize> = HashMap::new();
    let mut after = None;
    loop {
        let page = submitter
            .task_list(ListParams {
                filter: TaskFilter::default(),
                after,
                limit: MAX_PAGE_SIZE,
                light: false,
            })
            .await
            .unwrap();
        for t in &page.tasks {
            assert_eq!(t.attempt, 1);
            *by_worker.entry(t.worker_id.clone().unwrap()).or_default() += 1;
        }
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    assert_eq!(by_worker.values().sum::<usize>(), N);
}

// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
struct Job {
    steps: u32,
}

/// Works through `steps`, checkpointing each. The "frozen" worker's copy stops after the
/// first checkpoint and waits for the test; the healthy one runs to the end.
struct Resumable {
    frozen_role: Option<FrozenRole>,
}

struct FrozenRole {
    checkpointed: mpsc::UnboundedSender<()>,
    go_on: Arc<Notify>,
    late_write: mpsc::UnboundedSender<String>,
}

impl Handler for Resumable {
    const KIND: &'static str = "resumable";
    type Payload = Job;
    type Output = serde_json::Value;
    async fn run(&self, ctx: TaskContext, job: Job) -> Result<serde_json::Value, HandlerError> {
        let start: u32 = ctx.checkpoint::<u32>()?.unwrap_or(0);
        if let Some(role) = &self.frozen_role {
            ctx.save_checkpoint(&5u32).await?;
            role.checkpointed.send(()).unwrap();
            role.go_on.notified().await;
            let late = ctx.save_checkpoint(&99u32).await;
            role.late_write.send(format!("{late:?}")).unwrap();
            return Ok(json!({"resumed_from": start, "by": "frozen"}));
        }
        for step in start..job.steps {
            ctx.save_checkpoint(&(step + 1)).await?;
        }
        Ok(json!({"resumed_from": start, "by": "healthy"}))
    }
}

pub async fn frozen_worker_loses_its_task_to_one_that_resumes_from_the_checkpoint(
    db: &impl Backend,
) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("resumable", json!({"steps": 10})).backoff(instant_retry()),
    )
    .await;

    let frozen_store = Freezable::new(db.store().await);
    let (cp_tx, mut cp_rx) = mpsc::unbounded_channel();
    let (late_tx, mut late_rx) = mpsc::unbounded_channel();
    let go_on = Arc::new(Notify::new());
    let role = FrozenRole {
        checkpointed: cp_tx,
        go_on: go_on.clone(),
        late_write: late_tx,
    };
    let a = fast(frozen_store.clone())
        .identity(WorkerIdentity::named("frozen"))
        .lease_for(Duration::from_secs(1))
        .register(Resumable {
            frozen_role: Some(role),
        })
        .build()
        .unwrap();
    let mut a_events = a.subscribe();
    let a = start(a);
    tokio::time::timeout(PATIENCE, cp_rx.recv())
        .await
        .expect("first checkpoint")
        .unwrap();
    frozen_store.freeze();

    let b = fast(db.store().await)
        .identity(WorkerIdentity::named("healthy"))
        .rescue_interval(Some(Duration::from_millis(100)))
        .register(Resumable { frozen_role: None })
        .build()
        .unwrap();
    let mut b_events = b.subscribe();
    let b = start(b);
    let done = wait_event(&mut b_events, "the healthy worker to finish", finished(id)).await;
    assert_eq!(
        done,
        WorkerEvent::Finished {
            task_id: id,
            outcome: AttemptOutcome::Succeeded,
            applied: true
        }
    );

    frozen_store.thaw();
    wait_event(&mut a_events, "the frozen worker to learn it lost the lease", |e| {
        matches!(e, WorkerEvent::Stopped { task_id, reason: StopReason::LeaseLost } if *task_id == id)
    })
    .await;
    go_on.notify_one();
    let late = tokio::time::timeout(PATIENCE, late_rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        late.contains("Stopped(LeaseLost)"),
        "the late checkpoint is refused: {late}"
    );
    a.shutdown().await;
    b.shutdown().await;

    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(
        t.result,
        Some(json!({"resumed_from": 5, "by": "healthy"})),
        "resumed from the frozen worker's checkpoint"
    );
    assert_eq!(
        t.checkpoint,
        Some(json!(10)),
        "the late checkpoint changed nothing"
    );
    assert_eq!(t.attempt, 2);
    let history = store.attempt_list(id).await.unwrap();
    let summary: Vec<_> = history
        .iter()
        .map(|a| (a.worker_id.clone().unwrap(), a.outcome))
        .collect();
    assert_eq!(
        summary,
        vec![
            ("frozen".to_string(), AttemptOutcome::LeaseExpired),
            ("healthy".to_string(), AttemptOutcome::Succeeded)
        ]
    );
    // The frozen worker's complete, had it sent one, is refused too (its credential is
    // not known here; `stale_token_writes_change_nothing` fences a full stale lease).
    let stale = tasktable_core::Lease {
        task_id: id,
        token: 1,
        credential: None,
    };
    let plan = tasktable_core::outcome::FinishPlan::for_handler(
        tasktable_core::HandlerOutcome::Succeeded {
            result: Some(json!("stale")),
        },
        1,
        &Backoff::default(),
        0.5,
    );
    let applied = store
        .task_finish(FinishParams {
            items: vec![FinishItem { lease: stale, plan }],
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(applied, vec![false]);
    assert_eq!(get(&*store, id).await.result, t.result);
}

// ---------------------------------------------------------------------------------------

/// Says when each attempt starts and returns only when the test lets that attempt go.
struct Gated {
    started: mpsc::UnboundedSender<u32>,
    go: Arc<Mutex<HashMap<u32, Arc<Notify>>>>,
}

impl Gated {
    fn gate(&self, attempt: u32) -> Arc<Notify> {
        self.go.lock().unwrap().entry(attempt).or_default().clone()
    }
}

impl Handler for Gated {
    const KIND: &'static str = "gated";
    type Payload = ();
    type Output = ();
    async fn run(&self, ctx: TaskContext, _: ()) -> Result<(), HandlerError> {
        let gate = self.gate(ctx.attempt());
        self.started.send(ctx.attempt()).unwrap();
        gate.notified().await;
        Ok(())
    }
}

/// A worker cut off from its database while an attempt ends loses that lease; once the
/// database is back it may claim the same task again before the old attempt's end has
/// been written (and refused). Dropping the old attempt must not drop the new one's
/// lease: the new attempt is renewed for as long as it runs, and succeeds.
pub async fn a_task_claimed_again_keeps_its_new_lease_while_the_old_attempt_ends(
    db: &impl Backend,
) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("gated", json!(null)).backoff(instant_retry()),
    )
    .await;
    let lease = Duration::from_millis(600);
    let frozen = Freezable::new(db.store().await);
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let handler = Gated {
        started: started_tx,
        go: Arc::default(),
    };
    let gates = handler.go.clone();
    let gate = |attempt| gates.lock().unwrap().entry(attempt).or_default().clone();
    let w = fast(frozen.clone())
        .lease_for(lease)
        .register(handler)
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    let first = tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap();
    assert_eq!(first, Some(1));

    // The database goes away; attempt 1 returns and its end waits to be written.
    frozen.freeze();
    gate(1).notify_one();
    let rescuer = Rescuer::new(store.clone(), RescuerConfig::default());
    let mut rescued = 0;
    while rescued == 0 {
        let expiry = get(&*store, id).await.lease_expires_at.expect("leased");
        rescued = rescuer
            .run_once(Some(expiry + chrono::Duration::milliseconds(1)))
            .await
            .unwrap();
    }

    // The database is back for claims and renewals; the same worker takes the task again
    // while attempt 1's end is still on its way.
    frozen.thaw_all_but_finishes();
    let second = tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap();
    assert_eq!(second, Some(2));
    frozen.thaw();
    let old_end = wait_event(&mut events, "attempt 1's end to be refused", finished(id)).await;
    assert!(
        matches!(old_end, WorkerEvent::Finished { applied: false, .. }),
        "{old_end:?}"
    );

    // Three lease lengths with attempt 2 running: its lease must have been renewed, so a
    // rescue now finds nothing to take back.
    tokio::time::sleep(lease * 3).await;
    assert_eq!(
        rescuer.run_once(None).await.unwrap(),
        0,
        "attempt 2's lease ran out"
    );
    gate(2).notify_one();
    let new_end = wait_event(&mut events, "attempt 2's end", finished(id)).await;
    assert_eq!(
        new_end,
        WorkerEvent::Finished {
            task_id: id,
            outcome: AttemptOutcome::Succeeded,
            applied: true
        }
    );
    w.shutdown().await;
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::LeaseExpired, AttemptOutcome::Succeeded]
    );
}

// ---------------------------------------------------------------------------------------

/// Never finishes on its own; optionally saves a checkpoint first and says so.
struct Hang {
    started: mpsc::UnboundedSender<i64>,
}

impl Handler for Hang {
    const KIND: &'static str = "hang";
    type Payload = serde_json::Value;
    type Output = ();
    async fn run(&self, ctx: TaskContext, payload: serde_json::Value) -> Result<(), HandlerError> {
        if let Some(cp) = payload.get("checkpoint") {
            ctx.save_checkpoint(cp).await?;
        }
        let _ = self.started.send(ctx.task_id());
        std::future::pending::<()>().await;
        Ok(())
    }
}

pub async fn timeouts_count_attempts_and_end_failed(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("hang", json!({}))
            .timeout(Duration::from_millis(200))
            .max_attempts(2)
            .backoff(instant_retry()),
    )
    .await;
    let (tx, _rx) = mpsc::unbounded_channel();
    let w = fast(db.store().await)
        .register(Hang { started: tx })
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    for attempt in 1..=2 {
        let e = wait_event(&mut events, "a timed-out attempt", finished(id)).await;
        assert_eq!(
            e,
            WorkerEvent::Finished {
                task_id: id,
                outcome: AttemptOutcome::TimedOut,
                applied: true
            },
            "attempt {attempt}"
        );
    }
    w.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(
        (t.state, t.attempt),
        (TaskState::Failed, 2),
        "never an endless loop"
    );
    assert_eq!(t.last_error.as_deref(), Some("timed out"));
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::TimedOut, AttemptOutcome::TimedOut]
    );
}

pub async fn lease_expiry_is_rescued_with_the_attempt_counted(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("hang", json!({}))
            .backoff(instant_retry())
            .max_attempts(1),
    )
    .await;
    let frozen = Freezable::new(db.store().await);
    let (tx, mut started) = mpsc::unbounded_channel();
    let w = fast(frozen.clone())
        .lease_for(Duration::from_millis(600))
        .register(Hang { started: tx })
        .build()
        .unwrap();
    let w = start(w);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap()
        .unwrap();
    frozen.freeze();
    let rescuer = Rescuer::new(store.clone(), RescuerConfig::default());
    // Rescue at the database time just past the lease, rather than waiting for it. A
    // renewal already in flight when the worker froze may still move the lease once, so
    // read it again until the rescue takes the task.
    let mut rescued = 0;
    let mut after_expiry = None;
    while rescued == 0 {
        let expiry = get(&*store, id).await.lease_expires_at.expect("leased");
        let now = expiry + chrono::Duration::milliseconds(1);
        after_expiry = Some(now);
        rescued = rescuer.run_once(Some(now)).await.unwrap();
    }
    assert_eq!(
        rescuer.run_once(after_expiry).await.unwrap(),
        0,
        "a second rescuer finds nothing"
    );
    frozen.thaw();
    w.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(
        (t.state, t.attempt),
        (TaskState::Failed, 1),
        "the only attempt was spent on the expired lease"
    );
    assert_eq!(t.last_error.as_deref(), Some("lease expired"));
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::LeaseExpired]
    );
}

pub async fn graceful_shutdown_releases_without_spending_an_attempt(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(
        &*store,
        NewTask::new("hang", json!({"checkpoint": {"row": 42}})),
    )
    .await;
    let (tx, mut started) = mpsc::unbounded_channel();
    let w = fast(db.store().await)
        .shutdown_grace(Duration::from_millis(100))
        .register(Hang { started: tx })
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap()
        .unwrap();
    w.shutdown().await;
    let e = wait_event(&mut events, "the release", finished(id)).await;
    assert_eq!(
        e,
        WorkerEvent::Finished {
            task_id: id,
            outcome: AttemptOutcome::Interrupted,
            applied: true
        }
    );
    let t = get(&*store, id).await;
    assert_eq!(
        (t.state, t.attempt),
        (TaskState::Pending, 0),
        "no attempt spent"
    );
    assert_eq!(t.checkpoint, Some(json!({"row": 42})), "checkpoint kept");
    assert!(
        t.run_at <= store.db_now().await.unwrap(),
        "due again at once"
    );
    assert_eq!(
        outcomes(&*store, id).await,
        vec![AttemptOutcome::Interrupted]
    );
}

// ---------------------------------------------------------------------------------------

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Script {
    Ok,
    Permanent,
    SnoozeOnce,
    Cancel,
    PanicOnce,
    Retry,
}

struct Scripted;

impl Handler for Scripted {
    const KIND: &'static str = "scripted";
    type Payload = Script;
    type Output = serde_json::Value;
    async fn run(
        &self,
        ctx: TaskContext,
        script: Script,
    ) -> Result<serde_json::Value, HandlerError> {
        match script {
            Script::Ok => Ok(json!({"attempt": ctx.attempt()})),
            Script::Permanent => Err(HandlerError::permanent("invalid address")),
            Script::SnoozeOnce if ctx.checkpoint::<bool>()?.is_none() => {
                ctx.save_checkpoint(&true).await?;
                Err(HandlerError::snooze(Duration::from_millis(10)))
            }
            Script::SnoozeOnce => Ok(json!({"attempt": ctx.attempt()})),
            Script::Cancel => Err(HandlerError::cancel("order was withdrawn")),
            Script::PanicOnce if ctx.attempt() == 1 => panic!("index out of bounds"),
            Script::PanicOnce => Ok(json!({"attempt": ctx.attempt()})),
            Script::Retry => Err(std::io::Error::other("connection reset").into()),
        }
    }
}

async fn run_scripted(db: &impl Backend, tasks: Vec<NewTask>) -> (Arc<dyn Store>, Vec<i64>) {
    let store = db.store().await;
    let ids: Vec<i64> = store
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    let w = fast(db.store().await).register(Scripted).build().unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    for id in &ids {
        while !get(&*store, *id).await.state.is_finished() {
            wait_event(&mut events, "a scripted task", finished(*id)).await;
        }
    }
    w.shutdown().await;
    (store, ids)
}

pub async fn panicking_handler_fails_only_its_attempt(db: &impl Backend) {
    let tasks = vec![
        NewTask::new("scripted", json!("panic_once")).backoff(instant_retry()),
        NewTask::new("scripted", json!("ok")),
    ];
    let (store, ids) = run_scripted(db, tasks).await;
    let panicky = get(&*store, ids[0]).await;
    assert_eq!((panicky.state, panicky.attempt), (TaskState::Succeeded, 2));
    let history = store.attempt_list(ids[0]).await.unwrap();
    assert_eq!(history[0].outcome, AttemptOutcome::Error);
    assert!(
        history[0]
            .error
            .as_deref()
            .unwrap()
            .contains("handler panicked: index out of bounds"),
        "{:?}",
        history[0].error
    );
    assert_eq!(get(&*store, ids[1]).await.state, TaskState::Succeeded);
}

pub async fn handler_outcomes_move_tasks_as_documented(db: &impl Backend) {
    let tasks = vec![
        NewTask::new("scripted", json!("ok")),
        NewTask::new("scripted", json!("permanent")).max_attempts(5),
        NewTask::new("scripted", json!("snooze_once")),
        NewTask::new("scripted", json!("cancel")),
        NewTask::new("scripted", json!({"not": "a script"})),
        NewTask::new("scripted", json!("retry"))
            .max_attempts(3)
            .backoff(instant_retry()),
    ];
    let (store, ids) = run_scripted(db, tasks).await;
    let t = get(&*store, ids[0]).await;
    assert_eq!(
        (t.state, t.result),
        (TaskState::Succeeded, Some(json!({"attempt": 1})))
    );
    let t = get(&*store, ids[1]).await;
    assert_eq!(
        (t.state, t.attempt, t.last_error.as_deref()),
        (TaskState::Failed, 1, Some("invalid address")),
        "permanent: no retry"
    );
    let t = get(&*store, ids[2]).await;
    assert_eq!(
        (t.state, t.result),
        (TaskState::Succeeded, Some(json!({"attempt": 1}))),
        "snooze spent no attempt"
    );
    assert_eq!(
        outcomes(&*store, ids[2]).await,
        vec![AttemptOutcome::Snoozed, AttemptOutcome::Succeeded]
    );
    let t = get(&*store, ids[3]).await;
    assert_eq!(
        (t.state, t.last_error.as_deref()),
        (TaskState::Cancelled, Some("order was withdrawn"))
    );
    let t = get(&*store, ids[4]).await;
    assert_eq!(t.state, TaskState::Failed);
    assert!(t
        .last_error
        .unwrap()
        .contains("payload does not fit handler scripted"));
    let t = get(&*store, ids[5]).await;
    assert_eq!(
        (t.state, t.attempt, t.last_error.as_deref()),
        (TaskState::Failed, 3, Some("connection reset"))
    );
}

// ---------------------------------------------------------------------------------------

struct WaitForStop {
    started: mpsc::UnboundedSender<i64>,
    stopped: mpsc::UnboundedSender<StopReason>,
}

impl Handler for WaitForStop {
    const KIND: &'static str = "wait_for_stop";
    type Payload = ();
    type Output = ();
    async fn run(&self, ctx: TaskContext, _: ()) -> Result<(), HandlerError> {
        let _ = self.started.send(ctx.task_id());
        let reason = ctx.stopped().await;
        let _ = self.stopped.send(reason);
        Ok(())
    }
}

pub async fn cancelling_a_running_task_signals_its_handler(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(&*store, NewTask::new("wait_for_stop", json!(null))).await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (stopped_tx, mut stopped) = mpsc::unbounded_channel();
    let w = fast(db.store().await)
        .lease_for(Duration::from_millis(600))
        .register(WaitForStop {
            started: started_tx,
            stopped: stopped_tx,
        })
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap()
        .unwrap();
    let changed = store
        .task_update(UpdateParams {
            target: Target::Id(id),
            change: Change::Cancel,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(changed, 1);
    let reason = tokio::time::timeout(PATIENCE, stopped.recv())
        .await
        .expect("handler signalled")
        .unwrap();
    assert_eq!(reason, StopReason::Cancelled);
    let e = wait_event(&mut events, "the stop", |e| {
        matches!(e, WorkerEvent::Stopped { .. })
    })
    .await;
    assert_eq!(
        e,
        WorkerEvent::Stopped {
            task_id: id,
            reason: StopReason::Cancelled
        }
    );
    w.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Cancelled);
    assert_eq!(outcomes(&*store, id).await, vec![AttemptOutcome::Cancelled]);
}

// ---------------------------------------------------------------------------------------

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

pub async fn paused_queue_stops_workers_and_resume_restarts_them(db: &impl Backend) {
    let store = db.store().await;
    store
        .queue_set_paused(QueuePauseParams {
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

/// A worker claims its next tasks while the ends of the last ones are being written, but
/// never more than one concurrency ahead: with the store's completions stalled, it holds
/// at most twice its concurrency in leases, and once they go through every task runs
/// exactly once.
pub async fn claims_run_ahead_of_a_stalled_completer_by_one_concurrency_at_most(db: &impl Backend) {
    const N: usize = 20;
    const CONCURRENCY: usize = 3;
    let submitter = db.store().await;
    let tasks = (0..N as u32)
        .map(|i| NewTask::new("count", json!(i)))
        .collect();
    submitter
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap();
    let store = Freezable::new(db.store().await);
    store.freeze_finishes();
    let runs = Arc::new(Mutex::new(HashMap::new()));
    let all_done = Arc::new(Notify::new());
    let worker = fast(store.clone())
        .concurrency(CONCURRENCY)
        .register(Count {
            runs: runs.clone(),
            total: Arc::new(AtomicUsize::new(0)),
            target: N,
            all_done: all_done.clone(),
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let w = start(worker);
    for n in 0..2 * CONCURRENCY {
        wait_event(&mut events, &format!("claim {}", n + 1), |e| {
            matches!(e, WorkerEvent::Claimed { .. })
        })
        .await;
    }
    // Twenty polls' worth of chances to claim more; a bounded wait is the only way to
    // see that something does not happen.
    let more = tokio::time::timeout(Duration::from_secs(1), async {
        loop {
            if let Ok(WorkerEvent::Claimed { .. }) = events.recv().await {
                return;
            }
        }
    })
    .await;
    assert!(more.is_err(), "claimed beyond twice the concurrency");
    let running = submitter
        .task_list(ListParams {
            filter: TaskFilter::default().state(TaskState::Running),
            after: None,
            limit: 100,
            light: false,
        })
        .await
        .unwrap();
    assert_eq!(
        running.tasks.len(),
        2 * CONCURRENCY,
        "leases held while stalled"
    );

    store.thaw();
    tokio::time::timeout(PATIENCE, all_done.notified())
        .await
        .expect("all ran once completions went through");
    w.shutdown().await;
    let runs = runs.lock().unwrap().clone();
    assert_eq!(runs.len(), N);
    assert!(runs.values().all(|n| *n == 1), "no task ran twice");
    let queues = submitter.queue_list().await.unwrap();
    assert_eq!(queues[0].counts, vec![(TaskState::Succeeded, N as u64)]);
}
