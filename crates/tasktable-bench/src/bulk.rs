//! The bulk and purge scenarios: an operator cancels a backlog of 100,000 scheduled tasks
//! through `task_update` (bulk), or retention deletes 1,000,000 finished tasks in
//! batches (purge), while a worker drains a steady stream of other tasks in the same
//! queue. The worker's claim latency and finish throughput while the operation runs,
//! against the same in the seconds just before it.

use crate::db::BenchDb;
use crate::handlers::Noop;
use crate::report::Row;
use crate::scenarios::{quantile, BenchResult, Ctx};
use crate::Backend;
use serde_json::json;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tasktable::store::{
    AffinityReleaseParams, CheckpointParams, ClaimParams, ExpiredParams, FinishParams, LeaseStatus,
    ListParams, QueueInfo, QueuePauseParams, QueuePolicyParams, RenewParams, Stats, StatsParams,
    SubmitParams, TaskPage, UpdateParams, Wake,
};
use tasktable::{
    Attempt, Change, NewTask, Store, StoreResult, Submitted, Target, Task, TaskFilter, TaskId,
    Worker,
};

/// The stream the worker drains while the cancel runs, in tasks per second, submitted
/// open-loop (one task a call, on the clock), and the worker's concurrency.
const STREAM_PER_S: f64 = 500.0;
pub const CONCURRENCY: usize = 20;
/// The worker's poll: on MySQL, where a producer in another process wakes no one, it is
/// how the worker hears of the stream.
pub const POLL: Duration = Duration::from_millis(50);
/// Before the measured window, so the worker's first claims and the producer settle.
const WARM_UP: Duration = Duration::from_secs(2);
/// The window just before the cancel that it is compared with.
const BEFORE: Duration = Duration::from_secs(5);

/// Calls of one kind as (start, seconds since the scenario's epoch; duration, ms; tasks).
type Calls = Mutex<Vec<(f64, f64, u64)>>;

/// The worker's store, timing its claims and counting the tasks its finishes applied.
#[derive(Debug)]
pub struct Watched {
    inner: Arc<dyn Store>,
    epoch: Instant,
    claims: Calls,
    finishes: Calls,
}

impl Watched {
    pub fn new(inner: Arc<dyn Store>, epoch: Instant) -> Self {
        Watched {
            inner,
            epoch,
            claims: Mutex::new(Vec::new()),
            finishes: Mutex::new(Vec::new()),
        }
    }

    fn record(&self, calls: &Calls, started: Instant, tasks: u64) {
        let at = started.duration_since(self.epoch).as_secs_f64();
        let ms = started.elapsed().as_secs_f64() * 1000.0;
        calls.lock().expect("calls").push((at, ms, tasks));
    }
}

#[async_trait::async_trait]
impl Store for Watched {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn migrate(&self) -> StoreResult<()> {
        self.inner.migrate().await
    }
    async fn db_now(&self) -> StoreResult<chrono::DateTime<chrono::Utc>> {
        self.inner.db_now().await
    }
    async fn task_submit(&self, p: SubmitParams) -> StoreResult<Vec<Submitted>> {
        self.inner.task_submit(p).await
    }
    async fn task_claim(&self, p: ClaimParams) -> StoreResult<Vec<Task>> {
        let started = Instant::now();
        let out = self.inner.task_claim(p).await;
        let n = out.as_ref().map_or(0, |t| t.len() as u64);
        self.record(&self.claims, started, n);
        out
    }
    async fn task_release_affinity(&self, p: AffinityReleaseParams) -> StoreResult<u64> {
        self.inner.task_release_affinity(p).await
    }

    async fn task_renew(&self, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        self.inner.task_renew(p).await
    }
    async fn task_checkpoint(&self, p: CheckpointParams) -> StoreResult<LeaseStatus> {
        self.inner.task_checkpoint(p).await
    }
    async fn task_log(&self, p: tasktable::store::LogParams) -> StoreResult<LeaseStatus> {
        self.inner.task_log(p).await
    }
    async fn task_finish(&self, p: FinishParams) -> StoreResult<Vec<bool>> {
        let started = Instant::now();
        let out = self.inner.task_finish(p).await;
        let n = out
            .as_ref()
            .map_or(0, |a| a.iter().filter(|x| **x).count() as u64);
        self.record(&self.finishes, started, n);
        out
    }
    async fn task_list_expired(&self, p: ExpiredParams) -> StoreResult<Vec<Task>> {
        self.inner.task_list_expired(p).await
    }
    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        self.inner.task_get(id).await
    }
    async fn task_list(&self, p: ListParams) -> StoreResult<TaskPage> {
        self.inner.task_list(p).await
    }
    async fn task_count(&self, p: tasktable::store::CountParams) -> StoreResult<u64> {
        self.inner.task_count(p).await
    }
    async fn attempt_list(&self, id: TaskId) -> StoreResult<Vec<Attempt>> {
        self.inner.attempt_list(id).await
    }
    async fn task_update(&self, p: UpdateParams) -> StoreResult<u64> {
        self.inner.task_update(p).await
    }
    async fn queue_set_paused(&self, p: QueuePauseParams) -> StoreResult<()> {
        self.inner.queue_set_paused(p).await
    }

    async fn queue_set_policy(&self, p: QueuePolicyParams) -> StoreResult<()> {
        self.inner.queue_set_policy(p).await
    }
    async fn queue_list(&self) -> StoreResult<Vec<QueueInfo>> {
        self.inner.queue_list().await
    }
    async fn stats(&self, p: StatsParams) -> StoreResult<Stats> {
        self.inner.stats(p).await
    }
    async fn batch_save(
        &self,
        p: tasktable::store::BatchSaveParams,
    ) -> StoreResult<tasktable::store::BatchSaved> {
        self.inner.batch_save(p).await
    }
    tasktable::store::forward_maintenance_calls!(inner);
    async fn subscribe(&self) -> StoreResult<tokio::sync::broadcast::Receiver<Wake>> {
        self.inner.subscribe().await
    }
}

/// The stores of the worker, of the producer and of the operator. SQLite: one store, as
/// in a `tasktable serve` that runs the worker too (one process, one writer). Elsewhere
/// each has a store (and pool) of its own, as separate processes would, so the worker's
/// claims never queue for a connection behind the producer's submits. `chunk` overrides
/// the rows a bulk change takes per transaction.
async fn stores(db: &BenchDb, chunk: Option<u32>) -> BenchResult<[Arc<dyn Store>; 3]> {
    let err = |e: tasktable::StoreError| e.to_string();
    Ok(match db.backend {
        Backend::Sqlite => {
            let mut config = tasktable::sqlite::SqliteConfig::new(db.url());
            config.bulk_chunk_rows = chunk.unwrap_or(config.bulk_chunk_rows);
            let store: Arc<dyn Store> = Arc::new(
                tasktable::sqlite::SqliteStore::connect(config)
                    .await
                    .map_err(err)?,
            );
            [store.clone(), store.clone(), store]
        }
        Backend::Postgres => {
            let mut config = tasktable::postgres::PgConfig::new(db.url());
            config.bulk_chunk_rows = chunk.unwrap_or(config.bulk_chunk_rows);
            let operator = tasktable::postgres::PgStore::connect(config)
                .await
                .map_err(err)?;
            [db.store().await, db.store().await, Arc::new(operator)]
        }
        Backend::Mysql => {
            let mut config = tasktable::mysql::MySqlConfig::new(db.url());
            config.bulk_chunk_rows = chunk.unwrap_or(config.bulk_chunk_rows);
            let operator = tasktable::mysql::MySqlStore::connect(config)
                .await
                .map_err(err)?;
            [db.store().await, db.store().await, Arc::new(operator)]
        }
    })
}

/// An open-loop stream of no-op tasks, one a call on the clock, each call on a task of
/// its own so a slow submit never holds the next one back.
#[derive(Debug)]
pub struct Stream {
    producing: Arc<AtomicBool>,
    producer: tokio::task::JoinHandle<u64>,
}

impl Stream {
    pub fn start(store: Arc<dyn Store>, per_s: f64) -> Stream {
        let producing = Arc::new(AtomicBool::new(true));
        let flag = producing.clone();
        let producer = tokio::spawn(async move {
            let interval = Duration::from_secs_f64(1.0 / per_s);
            let started = tokio::time::Instant::now();
            let (mut k, mut failed) = (0u32, 0u64);
            let mut calls = Vec::new();
            while flag.load(Ordering::Relaxed) {
                tokio::time::sleep_until(started + interval * k).await;
                let s = store.clone();
                calls.push(tokio::spawn(async move {
                    s.task_submit(SubmitParams {
                        tasks: vec![NewTask::new("noop", json!({}))],
                        now: None,
                    })
                    .await
                    .is_ok()
                }));
                k += 1;
                // Join the calls that ended, so a long stream holds only those running.
                if calls.len() >= 4096 {
                    let (ended, running) = calls.into_iter().partition(|c| c.is_finished());
                    failed += failures(ended).await;
                    calls = running;
                }
            }
            failed + failures(calls).await
        });
        Stream {
            producing,
            producer,
        }
    }

    /// Stops the stream and waits for its calls; how many of them failed.
    pub async fn stop(self) -> BenchResult<u64> {
        self.producing.store(false, Ordering::Relaxed);
        self.producer.await.map_err(|e| e.to_string())
    }
}

/// How many of `calls` failed, once each has ended.
async fn failures(calls: Vec<tokio::task::JoinHandle<bool>>) -> u64 {
    let mut failed = 0;
    for c in calls {
        if !matches!(c.await, Ok(true)) {
            failed += 1;
        }
    }
    failed
}

/// Claim latency and finish throughput in `[from, to)`. A claim counts when it ran in the
/// window at all (`overlap`) or only when it ran wholly inside it; a finish counts in the
/// window it ended in.
pub fn window(
    row: &mut Row,
    name: &str,
    w: &Watched,
    from: f64,
    to: f64,
    overlap: bool,
) -> [f64; 4] {
    let claims = w.claims.lock().expect("claims");
    let mut lat: Vec<f64> = claims
        .iter()
        .filter(|c| {
            let end = c.0 + c.1 / 1000.0;
            if overlap {
                c.0 < to && end >= from
            } else {
                c.0 >= from && end < to
            }
        })
        .map(|c| c.1)
        .collect();
    let n = lat.len();
    let p50 = quantile(&mut lat, 0.5);
    let p99 = quantile(&mut lat, 0.99);
    let max = lat.last().copied().unwrap_or(f64::NAN);
    let finished: u64 = w
        .finishes
        .lock()
        .expect("finishes")
        .iter()
        .filter(|f| {
            let end = f.0 + f.1 / 1000.0;
            end >= from && end < to
        })
        .map(|f| f.2)
        .sum();
    let per_s = finished as f64 / (to - from);
    row.set(&format!("{name}_claims"), n);
    row.set(&format!("{name}_claim_p50_ms"), round2(p50));
    row.set(&format!("{name}_claim_p99_ms"), round2(p99));
    row.set(&format!("{name}_claim_max_ms"), round2(max));
    row.set(&format!("{name}_finished_per_s"), per_s.round());
    [p50, p99, max, per_s]
}

pub fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// What runs beside the worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// An operator's bulk cancel of a scheduled backlog.
    Cancel,
    /// Retention deleting finished tasks, batch after batch.
    Purge,
}

pub async fn bulk(ctx: &mut Ctx, op: Operation) -> BenchResult<()> {
    let n = match op {
        Operation::Cancel => ctx.scale.bulk_cancel,
        Operation::Purge => ctx.scale.purge,
    };
    let db = BenchDb::fresh(ctx.backend).await?;
    let [store, producer_store, operator] = stores(&db, ctx.bulk_chunk).await?;
    match op {
        Operation::Cancel => {
            let hour = Duration::from_secs(3600);
            let mut i = 0u64;
            while i < n {
                let chunk = (n - i).min(5000);
                let tasks = (i..i + chunk)
                    .map(|j| NewTask::new("backlog", json!({ "i": j })).delay(hour))
                    .collect();
                store
                    .task_submit(SubmitParams { tasks, now: None })
                    .await
                    .map_err(|e| e.to_string())?;
                i += chunk;
            }
        }
        // Finished over the day before now, so all but the last minute or two are past
        // the statistics' watermark and go.
        Operation::Purge => db.finished_fill(n, Duration::from_secs(86_400)).await,
    }
    if ctx.analyze {
        db.analyze().await;
    }
    let mut row = match op {
        Operation::Cancel => Row::new(
            "7 bulk",
            format!("cancel {n} scheduled tasks while a worker drains {STREAM_PER_S}/s"),
        ),
        Operation::Purge => Row::new(
            "10 purge",
            format!("purge {n} finished tasks while a worker drains {STREAM_PER_S}/s"),
        ),
    };
    crate::scenarios::load_row(&mut row);

    let epoch = Instant::now();
    let watched = Arc::new(Watched::new(store.clone(), epoch));
    let worker = Worker::builder(watched.clone())
        .concurrency(CONCURRENCY)
        .poll_interval(POLL)
        .register(Noop::default())
        .build()
        .map_err(|e| e.to_string())?;
    let (stop_worker, worker) = crate::scenarios::spawn_worker(worker);
    let stream = Stream::start(producer_store, STREAM_PER_S);

    tokio::time::sleep(WARM_UP).await;
    let before_from = epoch.elapsed().as_secs_f64();
    tokio::time::sleep(BEFORE).await;
    let cancel_from = epoch.elapsed().as_secs_f64();
    let changed = match op {
        Operation::Cancel => operator
            .task_update(UpdateParams {
                actor: tasktable::Actor::rust(),
                target: Target::Filter(TaskFilter::default().kind("backlog")),
                change: Change::Cancel,
                now: None,
                action: None,
            })
            .await
            .map_err(|e| e.to_string())?,
        Operation::Purge => {
            let policy = tasktable::retention::Retention {
                succeeded: Some(Duration::ZERO),
                failed: Some(Duration::ZERO),
                ..Default::default()
            };
            let retainer = tasktable::Retainer::new(
                operator.clone(),
                tasktable::RetentionConfig {
                    policy,
                    ..Default::default()
                },
            );
            retainer
                .run_once(None, |_, _| {})
                .await
                .map_err(|e| e.to_string())?
                .total()
        }
    };
    let cancel_to = epoch.elapsed().as_secs_f64();
    let failed = stream.stop().await?;
    let _ = stop_worker.send(());
    let _ = worker.await;

    let secs = cancel_to - cancel_from;
    let verb = match op {
        Operation::Cancel => "cancelled",
        Operation::Purge => "purged",
    };
    row.set(verb, changed);
    row.set(&format!("{verb}_seconds"), round2(secs));
    row.set(&format!("{verb}_per_s"), (changed as f64 / secs).round());
    row.set(
        "bulk_chunk_rows",
        ctx.bulk_chunk
            .map_or_else(|| json!("default"), |c| json!(c)),
    );
    let before = window(
        &mut row,
        "before",
        &watched,
        before_from,
        cancel_from,
        false,
    );
    let during = window(&mut row, "during", &watched, cancel_from, cancel_to, true);
    for (k, name) in ["claim_p50", "claim_p99", "claim_max", "finished_per_s"]
        .iter()
        .enumerate()
    {
        row.set(
            &format!("{name}_during_vs_before"),
            round2(during[k] / before[k]),
        );
    }
    row.set("stream_submits_failed", failed);
    // A purge leaves the tasks of the last minute or two, which statistics still read
    // raw, and takes the stream's tasks that finished early in a long sweep.
    let expected = match op {
        Operation::Cancel => changed == n,
        Operation::Purge => changed * 100 >= n * 95,
    };
    if !expected {
        return Err(format!("the {verb} took {changed} of {n} tasks"));
    }
    ctx.report.push(row);
    Ok(())
}
