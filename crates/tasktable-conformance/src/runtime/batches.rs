//! Batches with real workers: every index runs and the offset ends at N, failed items
//! are retried and spend the budget, an open-ended batch ends where its handler says,
//! the rate limit holds, a pause and a stop are seen within two seconds, a worker's
//! shutdown winds a batch down and a restart repeats nothing, the pre-start
//! hook has its own timeout, and a worker frozen mid-batch is taken over by another,
//! which repeats at most the window and skips nothing.

use super::{fast, finished, get, start, submit, wait_event, PATIENCE};
use crate::Backend;
use serde_json::json;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::batch::{BatchAction, BatchSpec, BatchStatus};
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// What the items did, per index.
#[derive(Default)]
struct Ledger {
    /// Successful ends per index.
    done: Vec<AtomicU32>,
    going: AtomicUsize,
    peak: AtomicUsize,
    total: AtomicU64,
    starts: Mutex<Vec<Instant>>,
}

impl Ledger {
    fn new(n: usize) -> Arc<Self> {
        Arc::new(Ledger {
            done: (0..n).map(|_| AtomicU32::new(0)).collect(),
            ..Ledger::default()
        })
    }
}

/// How [`Items`] treats an index.
#[derive(Clone, Copy)]
enum Plan {
    /// Multiples of 101 fail once; 1234 fails for good at once; 2345 fails every try.
    Failing,
    /// Indices from this one are past the end.
    EndsAt(u64),
    /// Every item succeeds after a moment.
    Slow(Duration),
    /// Every item succeeds at once.
    Quick,
}

struct Items {
    ledger: Arc<Ledger>,
    plan: Plan,
    /// Told the count of items done after every hundredth.
    progress: Option<mpsc::UnboundedSender<u64>>,
    /// The pre-start hook waits this long.
    prestart: Duration,
    tries: Arc<Mutex<std::collections::HashMap<u64, u32>>>,
}

impl Items {
    fn new(ledger: Arc<Ledger>, plan: Plan) -> Self {
        Items {
            ledger,
            plan,
            progress: None,
            prestart: Duration::ZERO,
            tries: Arc::default(),
        }
    }
}

#[derive(serde::Deserialize)]
struct Data {
    #[allow(dead_code)]
    list: String,
}

impl BatchHandler for Items {
    const KIND: &'static str = "items";
    type Data = Data;

    async fn prestart(&self, _: &BatchContext, _: &Data) -> Result<(), HandlerError> {
        tokio::time::sleep(self.prestart).await;
        Ok(())
    }

    async fn item(&self, _: &BatchContext, index: u64, _: &Data) -> Result<Item, HandlerError> {
        let l = &self.ledger;
        let now = l.going.fetch_add(1, Ordering::SeqCst) + 1;
        l.peak.fetch_max(now, Ordering::SeqCst);
        l.starts.lock().unwrap().push(Instant::now());
        let tries = {
            let mut t = self.tries.lock().unwrap();
            let n = t.entry(index).or_default();
            *n += 1;
            *n
        };
        let answer = match self.plan {
            Plan::Failing if index == 1234 => Err(HandlerError::permanent("no such user")),
            Plan::Failing if index == 2345 => Err(HandlerError::retry("timeout")),
            Plan::Failing if index % 101 == 0 && tries == 1 => Err(HandlerError::retry("blip")),
            Plan::EndsAt(end) if index >= end => Ok(Item::PastEnd),
            Plan::Slow(d) => {
                tokio::time::sleep(d).await;
                Ok(Item::Done)
            }
            _ => {
                tokio::task::yield_now().await;
                Ok(Item::Done)
            }
        };
        if matches!(answer, Ok(Item::Done)) {
            l.done[index as usize].fetch_add(1, Ordering::SeqCst);
            let total = l.total.fetch_add(1, Ordering::SeqCst) + 1;
            if total % 100 == 0 {
                if let Some(p) = &self.progress {
                    let _ = p.send(total);
                }
            }
        }
        l.going.fetch_sub(1, Ordering::SeqCst);
        answer
    }
}

fn batch(spec: BatchSpec) -> NewTask {
    NewTask::new("items", json!({"list": "users"}))
        .backoff(super::instant_retry())
        .batch(spec)
}

async fn the_batch(s: &dyn Store, id: i64) -> Batch {
    s.batch_get(id).await.unwrap().expect("a batch")
}

async fn act(s: &dyn Store, id: i64, action: BatchAction) -> Batch {
    s.batch_control(BatchControlParams {
        actor: tasktable_core::Actor::rust(),
        id,
        action,
        now: None,
    })
    .await
    .unwrap()
}

pub async fn every_index_runs_once_and_failed_items_spend_the_budget(db: &impl Backend) {
    let store = db.store().await;
    let n = 3000;
    let spec = BatchSpec::items(n)
        .parallelism(16)
        .error_budget(2)
        .item_retries(2, Duration::from_millis(1));
    let id = submit(&*store, batch(spec).held(true)).await;
    let ledger = Ledger::new(n as usize);
    let mut worker = fast(store.clone())
        .register_batch(Items::new(ledger.clone(), Plan::Failing))
        .build()
        .unwrap();
    assert_eq!(
        worker.run_once().await.unwrap(),
        0,
        "a held batch waits for its start"
    );
    let mut events = worker.subscribe();
    let running = start(worker);
    assert_eq!(
        act(&*store, id, BatchAction::Start).await.status,
        BatchStatus::Queued
    );
    wait_event(&mut events, "the batch ends", finished(id)).await;
    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Succeeded, "{t:?}");
    assert_eq!(t.result, Some(json!({"items": n, "errors": 2})));
    for (i, count) in ledger.done.iter().enumerate() {
        let want = u32::from(![1234, 2345].contains(&i));
        assert_eq!(count.load(Ordering::SeqCst), want, "item {i}");
    }
    assert!(
        ledger.peak.load(Ordering::SeqCst) <= 16,
        "parallelism holds"
    );
    let b = the_batch(&*store, id).await;
    assert_eq!(
        (b.low_water, b.errors, b.status),
        (n, 2, BatchStatus::Succeeded)
    );
    let failures: Vec<(u64, u32)> = store
        .batch_failures(id)
        .await
        .unwrap()
        .iter()
        .map(|f| (f.item, f.tries))
        .collect();
    assert_eq!(
        failures,
        [(1234, 1), (2345, 3)],
        "a permanent error is not retried"
    );
    running.shutdown().await;
}

pub async fn an_exhausted_budget_fails_the_batch_with_its_offset_kept(db: &impl Backend) {
    let store = db.store().await;
    let spec = BatchSpec::items(3000)
        .parallelism(4)
        .error_budget(1)
        .item_retries(1, Duration::ZERO);
    let id = submit(&*store, batch(spec).max_attempts(1)).await;
    let ledger = Ledger::new(3000);
    let worker = fast(store.clone())
        .register_batch(Items::new(ledger.clone(), Plan::Failing))
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let running = start(worker);
    wait_event(&mut events, "the batch fails", finished(id)).await;
    let b = the_batch(&*store, id).await;
    assert_eq!(b.status, BatchStatus::Failed);
    assert_eq!(
        b.errors, 2,
        "the second failure (item 2345) is one too many"
    );
    assert!(
        (2346..3000).contains(&b.low_water),
        "the offset is kept past the items done: {}",
        b.low_water
    );
    assert!(b
        .task
        .last_error
        .unwrap()
        .contains("error budget of 1 spent"));
    // An operator raises the budget and resumes: it goes on from the offset to the end.
    store
        .batch_update(BatchUpdateParams {
            actor: tasktable_core::Actor::rust(),
            id,
            error_budget: Some(5),
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(
        act(&*store, id, BatchAction::Resume).await.status,
        BatchStatus::Queued
    );
    wait_event(&mut events, "the batch ends", finished(id)).await;
    let b = the_batch(&*store, id).await;
    assert_eq!((b.status, b.low_water), (BatchStatus::Succeeded, 3000));
    running.shutdown().await;
}

pub async fn an_open_ended_batch_ends_where_its_handler_says(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(&*store, batch(BatchSpec::open_ended().parallelism(8))).await;
    let ledger = Ledger::new(100_000);
    let worker = fast(store.clone())
        .register_batch(Items::new(ledger.clone(), Plan::EndsAt(777)))
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let running = start(worker);
    wait_event(&mut events, "the batch ends", finished(id)).await;
    assert_eq!(
        get(&*store, id).await.result,
        Some(json!({"items": 777, "errors": 0}))
    );
    assert_eq!(the_batch(&*store, id).await.end, Some(777));
    assert!(ledger.done[..777]
        .iter()
        .all(|c| c.load(Ordering::SeqCst) == 1));
    running.shutdown().await;
}

pub async fn the_rate_limit_holds_within_the_buckets_burst(db: &impl Backend) {
    let store = db.store().await;
    let (n, rate) = (60u64, 40u32);
    let id = submit(
        &*store,
        batch(BatchSpec::items(n).parallelism(8).rate(rate)),
    )
    .await;
    let ledger = Ledger::new(n as usize);
    let worker = fast(store.clone())
        .register_batch(Items::new(ledger.clone(), Plan::Quick))
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let running = start(worker);
    wait_event(&mut events, "the batch ends", finished(id)).await;
    let starts = ledger.starts.lock().unwrap().clone();
    assert_eq!(starts.len() as u64, n);
    // Over any span, at most rate x span + burst items start (the burst is 4 here).
    let burst = tasktable_core::batch::TokenBucket::new(rate, 0.0).burst();
    for (i, first) in starts.iter().enumerate() {
        for (j, later) in starts.iter().enumerate().skip(i) {
            let span = later.duration_since(*first).as_secs_f64();
            let started = (j - i + 1) as f64;
            assert!(
                started <= f64::from(rate) * span + burst + 1.0,
                "{started} items started within {span:.3} s"
            );
        }
    }
    running.shutdown().await;
}

pub async fn a_pause_and_a_stop_are_seen_within_two_seconds_and_a_resume_goes_on(
    db: &impl Backend,
) {
    let store = db.store().await;
    let n = 1_000_000;
    let id = submit(&*store, batch(BatchSpec::items(n).parallelism(4).rate(500))).await;
    let ledger = Ledger::new(n as usize);
    let (tx, mut progress) = mpsc::unbounded_channel();
    let worker = fast(store.clone())
        .register_batch(Items {
            progress: Some(tx),
            ..Items::new(ledger.clone(), Plan::Quick)
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let running = start(worker);
    for action in [BatchAction::Pause, BatchAction::Stop] {
        tokio::time::timeout(PATIENCE, progress.recv())
            .await
            .expect("items run")
            .unwrap();
        let asked = Instant::now();
        act(&*store, id, action).await;
        wait_event(&mut events, "the runner gives the batch back", finished(id)).await;
        let seen = asked.elapsed();
        assert!(
            seen < Duration::from_secs(2),
            "{action:?} seen after {seen:?}"
        );
        let b = the_batch(&*store, id).await;
        let want = match action {
            BatchAction::Pause => (BatchStatus::Paused, TaskState::Held),
            _ => (BatchStatus::Stopped, TaskState::Cancelled),
        };
        assert_eq!((b.status, b.task.state), want);
        let done = ledger.total.load(Ordering::SeqCst);
        assert!(
            b.low_water > 0 && b.low_water <= done,
            "{} of {done}",
            b.low_water
        );
        act(&*store, id, BatchAction::Resume).await;
        while progress.try_recv().is_ok() {}
    }
    let outcomes = super::outcomes(&*store, id).await;
    assert_eq!(
        outcomes,
        [AttemptOutcome::Paused, AttemptOutcome::Cancelled],
        "a pause gives the attempt back, a stop ends it"
    );
    // The resumed batch runs again; stop it for good.
    tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .expect("items run after the resume")
        .unwrap();
    act(&*store, id, BatchAction::Stop).await;
    wait_event(&mut events, "the runner stops", finished(id)).await;
    running.shutdown().await;
}

/// A worker told to shut down (with a long grace) starts no item after it, lets the items
/// in flight end, saves the mark and gives the batch back pending, `interrupted`, without
/// spending an attempt; the worker after it goes on from the mark and repeats nothing.
pub async fn a_shutdown_winds_a_batch_down_and_the_next_worker_repeats_nothing(db: &impl Backend) {
    let store = db.store().await;
    let n = 1_000_000;
    let parallelism = 4;
    let spec = BatchSpec::items(n).parallelism(parallelism).rate(500);
    let id = submit(&*store, batch(spec).max_attempts(1)).await;
    let ledger = Ledger::new(n as usize);
    let worker_with = |progress| {
        fast(store.clone())
            .shutdown_grace(PATIENCE)
            .register_batch(Items {
                progress: Some(progress),
                ..Items::new(ledger.clone(), Plan::Slow(Duration::from_millis(20)))
            })
            .build()
            .unwrap()
    };
    let (tx, mut progress) = mpsc::unbounded_channel();
    let running = start(worker_with(tx));
    tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .expect("items run")
        .unwrap();
    let told = Instant::now();
    running.shutdown().await;
    let late = ledger
        .starts
        .lock()
        .unwrap()
        .iter()
        .filter(|at| **at > told)
        .count();
    assert!(
        late <= parallelism as usize,
        "{late} items started after the shutdown began"
    );
    let b = the_batch(&*store, id).await;
    assert_eq!(b.task.state, TaskState::Pending, "given back, due again");
    assert_eq!(b.task.attempt, 0, "the attempt is not spent");
    let done = ledger.total.load(Ordering::SeqCst);
    assert_eq!(
        b.low_water, done,
        "every item that ended is in the saved mark"
    );
    assert_eq!(
        super::outcomes(&*store, id).await,
        [AttemptOutcome::Interrupted]
    );

    let (tx, mut progress) = mpsc::unbounded_channel();
    let worker = worker_with(tx);
    let mut events = worker.subscribe();
    let running = start(worker);
    while tokio::time::timeout(PATIENCE, progress.recv())
        .await
        .expect("items run after the restart")
        .unwrap()
        < done + 200
    {}
    act(&*store, id, BatchAction::Stop).await;
    wait_event(&mut events, "the runner stops", finished(id)).await;
    running.shutdown().await;
    let twice: Vec<usize> = (0..n as usize)
        .filter(|i| ledger.done[*i].load(Ordering::SeqCst) > 1)
        .collect();
    assert!(twice.is_empty(), "items done twice: {twice:?}");
}

pub async fn the_prestart_hook_has_its_own_timeout(db: &impl Backend) {
    let store = db.store().await;
    let with_hook_timeout = |ms| {
        batch(BatchSpec::items(10).prestart_timeout(Duration::from_millis(ms))).max_attempts(1)
    };
    let ledger = Ledger::new(10);
    let worker = fast(store.clone())
        .register_batch(Items {
            prestart: Duration::from_millis(300),
            ..Items::new(ledger.clone(), Plan::Quick)
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let running = start(worker);
    // A hook within its timeout runs before the items.
    let within = submit(&*store, with_hook_timeout(60_000)).await;
    wait_event(&mut events, "the batch ends", finished(within)).await;
    assert_eq!(get(&*store, within).await.state, TaskState::Succeeded);
    // One that outlasts it fails the attempt before any item runs.
    let before = ledger.total.load(Ordering::SeqCst);
    let past = submit(&*store, with_hook_timeout(50)).await;
    wait_event(&mut events, "the batch ends", finished(past)).await;
    let t = get(&*store, past).await;
    assert_eq!(t.state, TaskState::Failed);
    assert!(t.last_error.unwrap().contains("pre-start hook timed out"));
    assert_eq!(ledger.total.load(Ordering::SeqCst), before, "no item ran");
    running.shutdown().await;
}

pub async fn a_frozen_worker_is_taken_over_repeating_at_most_the_window(db: &impl Backend) {
    use crate::freeze::Freezable;
    let store = db.store().await;
    let (n, window) = (6000u64, 200u64);
    let id = submit(
        &*store,
        batch(BatchSpec::items(n).parallelism(8).window(window)),
    )
    .await;
    let ledger = Ledger::new(n as usize);
    let frozen_store = Freezable::new(db.store().await);
    let (tx, mut progress) = mpsc::unbounded_channel();
    let frozen = fast(frozen_store.clone())
        .identity(WorkerIdentity::named("frozen"))
        .lease_for(Duration::from_secs(1))
        .register_batch(Items {
            progress: Some(tx),
            ..Items::new(ledger.clone(), Plan::Slow(Duration::from_micros(200)))
        })
        .build()
        .unwrap();
    let mut frozen_events = frozen.subscribe();
    let frozen = start(frozen);
    loop {
        let done = tokio::time::timeout(PATIENCE, progress.recv())
            .await
            .expect("items run")
            .unwrap();
        if done >= 1000 {
            break;
        }
    }
    frozen_store.freeze();
    let taker = fast(store.clone())
        .identity(WorkerIdentity::named("taker"))
        .lease_for(Duration::from_secs(1))
        .rescue_interval(Some(Duration::from_millis(100)))
        .register_batch(Items::new(ledger.clone(), Plan::Quick))
        .build()
        .unwrap();
    let mut taker_events = taker.subscribe();
    let taker = start(taker);
    wait_event(&mut taker_events, "the taker ends the batch", finished(id)).await;
    assert_eq!(get(&*store, id).await.state, TaskState::Succeeded);
    let counts: Vec<u32> = ledger
        .done
        .iter()
        .map(|c| c.load(Ordering::SeqCst))
        .collect();
    assert!(counts.iter().all(|c| *c >= 1), "no item is skipped");
    let repeated: u64 = counts.iter().map(|c| u64::from(c - 1)).sum();
    assert!(
        repeated <= window,
        "{repeated} items repeated, window {window}"
    );
    assert_eq!(
        super::outcomes(&*store, id).await,
        [AttemptOutcome::LeaseExpired, AttemptOutcome::Succeeded]
    );
    let total = ledger.total.load(Ordering::SeqCst);
    frozen_store.thaw();
    wait_event(&mut frozen_events, "the frozen worker hears it lost the batch", |e| {
        matches!(e, WorkerEvent::Stopped { task_id, reason: StopReason::LeaseLost } if *task_id == id)
    })
    .await;
    assert_eq!(
        ledger.total.load(Ordering::SeqCst),
        total,
        "the frozen worker ran no item after it woke"
    );
    frozen.shutdown().await;
    taker.shutdown().await;
}
