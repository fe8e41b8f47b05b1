//! The five scenarios of issue 6, the worker's memory at concurrency 100, and the cost of
//! windowed statistics on large tables (the bulk cancel is in `bulk.rs`).

use crate::cpu::CpuClock;
use crate::db::{pg_other_activity, BenchDb};
use crate::handlers::{micros_since, Noop, Timed};
use crate::report::{Report, Row};
use crate::{Backend, Scale};
use serde_json::json;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tasktable::store::stats::{floor_minute, StatsSource};
use tasktable::store::{ListParams, RenewParams, StatsParams, SubmitParams};
use tasktable::{
    NewTask, Rescuer, RescuerConfig, Store, TaskFilter, TaskState, Worker, WorkerEvent,
};
use tokio::sync::oneshot;

pub type BenchResult<T> = Result<T, String>;

/// What the scenarios share: the backend, the scales, the results so far.
#[derive(Debug)]
pub struct Ctx {
    pub backend: Backend,
    pub scale: Scale,
    pub report: Report,
    /// Run `ANALYZE` after pre-filling (the default; `--no-analyze` shows the planner
    /// without statistics).
    pub analyze: bool,
    /// The best drain rate measured in this run, for the latency scenario.
    pub best_drain: Option<f64>,
    /// Rows per transaction of a bulk change in the bulk scenario; the stores' default
    /// unless `--bulk-chunk` says otherwise.
    pub bulk_chunk: Option<u32>,
}

fn ms(d: f64) -> f64 {
    (d * 1000.0).round() / 1000.0
}

fn round(x: f64, places: i32) -> f64 {
    let f = 10f64.powi(places);
    (x * f).round() / f
}

/// The `q` quantile (0..=1) of `values`, sorted in place.
pub fn quantile(values: &mut [f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(|a, b| a.total_cmp(b));
    let i = ((values.len() as f64 - 1.0) * q).round() as usize;
    values[i.min(values.len() - 1)]
}

/// Submits `n` small tasks of `kind` through the normal submit path, 5,000 per call.
async fn prefill(store: &Arc<dyn Store>, n: u64, kind: &str) -> BenchResult<()> {
    let mut i = 0u64;
    while i < n {
        let chunk = (n - i).min(5000);
        let tasks = (i..i + chunk)
            .map(|j| NewTask::new(kind, json!({ "i": j })))
            .collect();
        store
            .task_submit(SubmitParams { tasks, now: None })
            .await
            .map_err(|e| e.to_string())?;
        i += chunk;
    }
    Ok(())
}

/// A fresh database holding `n` tasks of `kind` submitted through the normal path (then
/// analyzed, unless the run says not to), and a store on it.
async fn filled(ctx: &Ctx, n: u64, kind: &str) -> BenchResult<(BenchDb, Arc<dyn Store>)> {
    let db = BenchDb::fresh(ctx.backend).await?;
    let store = db.store().await;
    prefill(&store, n, kind).await?;
    if ctx.analyze {
        db.analyze().await;
    }
    Ok((db, store))
}

/// Count of tasks in `state` over all queues.
async fn count(store: &Arc<dyn Store>, state: TaskState) -> u64 {
    store
        .queue_list()
        .await
        .map(|qs| {
            qs.iter()
                .flat_map(|q| q.counts.iter())
                .filter(|(s, _)| *s == state)
                .map(|(_, n)| *n)
                .sum()
        })
        .unwrap_or(0)
}

async fn wait_count(store: &Arc<dyn Store>, state: TaskState, n: u64, every: Duration) {
    while count(store, state).await < n {
        tokio::time::sleep(every).await;
    }
}

/// Adds the PostgreSQL write counters of a measurement to a row.
fn add_pg(
    row: &mut Row,
    before: Option<crate::db::PgCounters>,
    after: Option<crate::db::PgCounters>,
    tasks: u64,
) {
    if let (Some(b), Some(a)) = (before, after) {
        let (xacts, wal) = a.since(&b);
        row.set(
            "write_xacts_per_task",
            round(xacts as f64 / tasks as f64, 3),
        );
        row.set("wal_bytes_per_task", round(wal as f64 / tasks as f64, 0));
    }
}

/// Adds the CPU a measurement cost per task: this process's (the worker's, and on SQLite
/// the database's too) and the local server's.
fn add_cpu(row: &mut Row, before: Option<&CpuClock>, after: Option<&CpuClock>, tasks: u64) {
    if let (Some(b), Some(a)) = (before, after) {
        let (own, server) = a.per_task(b, tasks);
        row.set("bench_cpu_us_per_task", round(own, 1));
        if let Some(server) = server {
            row.set("server_cpu_us_per_task", round(server, 1));
        }
    }
}

async fn other_activity(db: &BenchDb, row: &mut Row) {
    if db.backend == Backend::Postgres {
        row.set("other_active_backends", pg_other_activity(db.url()).await);
    }
}

/// MySQL: transactions `store` ran again since `before` because InnoDB aborted them.
fn add_retries(row: &mut Row, store: &Option<tasktable::mysql::MySqlStore>, before: Option<u64>) {
    if let (Some(s), Some(b)) = (store, before) {
        row.set("innodb_aborts_retried", s.db().deadlock_retries() - b);
    }
}

pub(crate) fn load_row(row: &mut Row) {
    row.set("loadavg_1m", crate::report::loadavg_1m());
}

/// Runs a worker with `register` applied until `until` resolves; returns its handle.
pub(crate) fn spawn_worker(worker: Worker) -> (oneshot::Sender<()>, tokio::task::JoinHandle<()>) {
    let (stop, stopped) = oneshot::channel::<()>();
    let handle = tokio::spawn(worker.run(async move {
        let _ = stopped.await;
    }));
    (stop, handle)
}

/// One drain: `n` pre-submitted no-op tasks, one worker with default settings at
/// `concurrency`; returns tasks/s.
async fn drain_case(ctx: &mut Ctx, n: u64, concurrency: usize, record: bool) -> BenchResult<f64> {
    let db = BenchDb::fresh(ctx.backend).await?;
    let (store, mysql) = db.store_with_retries().await;
    prefill(&store, n, "noop").await?;
    if ctx.analyze {
        db.analyze().await;
    }
    let ceiling = db.ceiling(ctx.scale.ceiling_secs).await;
    let mut row = Row::new("1 drain", format!("{n} tasks, concurrency {concurrency}"));
    load_row(&mut row);
    let noop = Noop::default();
    let worker = Worker::builder(store.clone())
        .concurrency(concurrency)
        .register(noop.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let before = db.counters().await;
    let retries = mysql.as_ref().map(|s| s.db().deadlock_retries());
    let cpu_before = CpuClock::read(db.backend, db.url());
    let started = Instant::now();
    let (stop, handle) = spawn_worker(worker);
    noop.wait_for(n).await;
    wait_count(&store, TaskState::Succeeded, n, Duration::from_millis(10)).await;
    let secs = started.elapsed().as_secs_f64();
    let cpu_after = CpuClock::read(db.backend, db.url());
    let after = db.counters().await;
    let _ = stop.send(());
    let _ = handle.await;
    // The ceiling drifts with the machine's other load: measure it on both sides.
    let ceiling_after = db.ceiling(ctx.scale.ceiling_secs).await;
    row.set("ceiling_before", round(ceiling, 0));
    row.set("ceiling_after", round(ceiling_after, 0));
    let ceiling = (ceiling + ceiling_after) / 2.0;
    let rate = n as f64 / secs;
    row.set("tasks_per_s", round(rate, 0));
    row.set("ceiling_commits_per_s", round(ceiling, 0));
    row.set("ratio_to_ceiling", round(rate / ceiling, 2));
    add_pg(&mut row, before, after, n);
    add_cpu(&mut row, cpu_before.as_ref(), cpu_after.as_ref(), n);
    add_retries(&mut row, &mysql, retries);
    other_activity(&db, &mut row).await;
    if let Some(av) = db.autovacuum().await {
        row.set("server_autovacuum", av);
    }
    if record {
        ctx.report.push(row);
    }
    Ok(rate)
}

pub async fn drain(ctx: &mut Ctx) -> BenchResult<()> {
    for n in ctx.scale.drain_sizes.clone() {
        for c in ctx.scale.drain_concurrency.clone() {
            let rate = drain_case(ctx, n, c, true).await?;
            ctx.best_drain = Some(ctx.best_drain.unwrap_or(0.0).max(rate));
        }
    }
    Ok(())
}

/// Latencies (s) of `calls` runs of `f`, spread over `clients` concurrent clients, and the
/// wall time of the whole.
async fn timed_calls<F, Fut>(calls: usize, clients: usize, f: F) -> BenchResult<(Vec<f64>, f64)>
where
    F: Fn(usize) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = BenchResult<()>> + Send,
{
    let f = Arc::new(f);
    let started = Instant::now();
    let mut joins = Vec::new();
    for c in 0..clients {
        let f = f.clone();
        joins.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut i = c;
            while i < calls {
                let t = Instant::now();
                f(i).await?;
                lat.push(t.elapsed().as_secs_f64());
                i += clients;
            }
            Ok::<_, String>(lat)
        }));
    }
    let mut all = Vec::with_capacity(calls);
    for j in joins {
        all.extend(j.await.map_err(|e| e.to_string())??);
    }
    Ok((all, started.elapsed().as_secs_f64()))
}

fn latency_fields(row: &mut Row, mut lat: Vec<f64>, wall: f64) {
    let n = lat.len();
    row.set("p50_ms", ms(quantile(&mut lat, 0.5) * 1000.0));
    row.set("p99_ms", ms(quantile(&mut lat, 0.99) * 1000.0));
    row.set("tasks_per_s", round(n as f64 / wall, 0));
}

pub async fn submit(ctx: &mut Ctx) -> BenchResult<()> {
    let db = BenchDb::fresh(ctx.backend).await?;
    let store = db.store().await;
    let calls = ctx.scale.submit_calls;
    let ceiling = db.ceiling(ctx.scale.ceiling_secs).await;

    // Each count of clients twice, side by side: what shielding costs a call
    // (tasktable_store::Shielded, as every part of tasktable holds its store).
    for (clients, shielded) in [(1usize, false), (1, true), (8, false), (8, true)] {
        let how = if shielded { ", shielded" } else { "" };
        let mut row = Row::new("2 submit", format!("single, {clients} client(s){how}"));
        load_row(&mut row);
        let s = if shielded {
            tasktable::store::Shielded::wrap(store.clone())
        } else {
            store.clone()
        };
        let before = db.counters().await;
        let cpu_before = CpuClock::read(db.backend, db.url());
        let (lat, wall) = timed_calls(calls, clients, move |i| {
            let s = s.clone();
            async move {
                s.task_submit(SubmitParams {
                    tasks: vec![NewTask::new("noop", json!({ "i": i }))],
                    now: None,
                })
                .await
                .map(drop)
                .map_err(|e| e.to_string())
            }
        })
        .await?;
        let cpu_after = CpuClock::read(db.backend, db.url());
        let after = db.counters().await;
        latency_fields(&mut row, lat, wall);
        row.set("ceiling_commits_per_s", round(ceiling, 0));
        add_pg(&mut row, before, after, calls as u64);
        add_cpu(
            &mut row,
            cpu_before.as_ref(),
            cpu_after.as_ref(),
            calls as u64,
        );
        ctx.report.push(row);
    }

    {
        let n = ctx.scale.bulk;
        let mut row = Row::new("2 submit", format!("one bulk submit of {n}"));
        load_row(&mut row);
        let tasks: Vec<NewTask> = (0..n)
            .map(|i| NewTask::new("noop", json!({ "i": i })))
            .collect();
        let before = db.counters().await;
        let cpu_before = CpuClock::read(db.backend, db.url());
        let t = Instant::now();
        store
            .task_submit(SubmitParams { tasks, now: None })
            .await
            .map_err(|e| e.to_string())?;
        let secs = t.elapsed().as_secs_f64();
        let cpu_after = CpuClock::read(db.backend, db.url());
        let after = db.counters().await;
        row.set("seconds", round(secs, 3));
        row.set("tasks_per_s", round(n as f64 / secs, 0));
        add_pg(&mut row, before, after, n as u64);
        add_cpu(&mut row, cpu_before.as_ref(), cpu_after.as_ref(), n as u64);
        ctx.report.push(row);
    }

    {
        let calls = calls / 2;
        let mut row = Row::new(
            "2 submit",
            "in the caller's transaction (UPDATE + submit + COMMIT), 1 client",
        );
        load_row(&mut row);
        let (lat, wall) = match ctx.backend {
            Backend::Postgres => {
                let pool = sqlx::postgres::PgPoolOptions::new()
                    .max_connections(2)
                    .connect(db.url())
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::query(
                    "CREATE TABLE bench_orders (id BIGINT PRIMARY KEY, paid BOOLEAN NOT NULL)",
                )
                .execute(&pool)
                .await
                .map_err(|e| e.to_string())?;
                sqlx::query(
                    "INSERT INTO bench_orders SELECT g, false FROM generate_series(0, $1) g",
                )
                .bind(calls as i64)
                .execute(&pool)
                .await
                .map_err(|e| e.to_string())?;
                timed_calls(calls, 1, move |i| {
                    let pool = pool.clone();
                    async move {
                        let mut tx = pool.begin().await.map_err(|e| e.to_string())?;
                        sqlx::query("UPDATE bench_orders SET paid = true WHERE id = $1")
                            .bind(i as i64)
                            .execute(&mut *tx)
                            .await
                            .map_err(|e| e.to_string())?;
                        tasktable::postgres::PgStore::submit_in(
                            &mut tx,
                            vec![NewTask::new("noop", json!({ "order": i }))],
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                        tx.commit().await.map_err(|e| e.to_string())
                    }
                })
                .await?
            }
            Backend::Mysql => {
                let pool = sqlx::mysql::MySqlPoolOptions::new()
                    .max_connections(2)
                    .connect(db.url())
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::query(
                    "CREATE TABLE bench_orders (id BIGINT PRIMARY KEY, paid BOOLEAN NOT NULL) \
                     ENGINE = InnoDB",
                )
                .execute(&pool)
                .await
                .map_err(|e| e.to_string())?;
                sqlx::query(&format!(
                    "INSERT INTO bench_orders SELECT i, false FROM {} n",
                    crate::db::mysql_numbers(0, calls as u64)
                ))
                .execute(&pool)
                .await
                .map_err(|e| e.to_string())?;
                timed_calls(calls, 1, move |i| {
                    let pool = pool.clone();
                    async move {
                        let mut tx = pool.begin().await.map_err(|e| e.to_string())?;
                        sqlx::query("UPDATE bench_orders SET paid = true WHERE id = ?")
                            .bind(i as i64)
                            .execute(&mut *tx)
                            .await
                            .map_err(|e| e.to_string())?;
                        tasktable::mysql::MySqlStore::submit_in(
                            &mut tx,
                            vec![NewTask::new("noop", json!({ "order": i }))],
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                        tx.commit().await.map_err(|e| e.to_string())
                    }
                })
                .await?
            }
            Backend::Sqlite => {
                let pool = sqlx::sqlite::SqlitePoolOptions::new()
                    .max_connections(1)
                    .connect_with(
                        std::str::FromStr::from_str(db.url())
                            .map(|o: sqlx::sqlite::SqliteConnectOptions| {
                                o.journal_mode(sqlx::sqlite::SqliteJournalMode::Wal)
                                    .synchronous(sqlx::sqlite::SqliteSynchronous::Full)
                                    .busy_timeout(Duration::from_secs(10))
                            })
                            .map_err(|e: sqlx::Error| e.to_string())?,
                    )
                    .await
                    .map_err(|e| e.to_string())?;
                sqlx::query(
                    "CREATE TABLE bench_orders (id INTEGER PRIMARY KEY, paid INTEGER NOT NULL)",
                )
                .execute(&pool)
                .await
                .map_err(|e| e.to_string())?;
                sqlx::query(
                    "WITH RECURSIVE g(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM g WHERE i < ?) \
                     INSERT INTO bench_orders SELECT i, 0 FROM g",
                )
                .bind(calls as i64)
                .execute(&pool)
                .await
                .map_err(|e| e.to_string())?;
                timed_calls(calls, 1, move |i| {
                    let pool = pool.clone();
                    async move {
                        let mut tx = pool
                            .begin_with("BEGIN IMMEDIATE")
                            .await
                            .map_err(|e| e.to_string())?;
                        sqlx::query("UPDATE bench_orders SET paid = 1 WHERE id = ?")
                            .bind(i as i64)
                            .execute(&mut *tx)
                            .await
                            .map_err(|e| e.to_string())?;
                        tasktable::sqlite::SqliteStore::submit_in(
                            &mut tx,
                            vec![NewTask::new("noop", json!({ "order": i }))],
                        )
                        .await
                        .map_err(|e| e.to_string())?;
                        tx.commit().await.map_err(|e| e.to_string())
                    }
                })
                .await?
            }
        };
        latency_fields(&mut row, lat, wall);
        ctx.report.push(row);
    }

    {
        let calls = calls / 2;
        let mut row = Row::new("2 submit", "duplicate idempotency key, 1 client");
        load_row(&mut row);
        store
            .task_submit(SubmitParams {
                tasks: vec![NewTask::new("noop", json!({})).idempotency_key("bench-dup")],
                now: None,
            })
            .await
            .map_err(|e| e.to_string())?;
        let s = store.clone();
        let before = db.counters().await;
        let (lat, wall) = timed_calls(calls, 1, move |_| {
            let s = s.clone();
            async move {
                let out = s
                    .task_submit(SubmitParams {
                        tasks: vec![NewTask::new("noop", json!({})).idempotency_key("bench-dup")],
                        now: None,
                    })
                    .await
                    .map_err(|e| e.to_string())?;
                if out[0].created {
                    return Err("a duplicate key created a task".into());
                }
                Ok(())
            }
        })
        .await?;
        let after = db.counters().await;
        latency_fields(&mut row, lat, wall);
        add_pg(&mut row, before, after, calls as u64);
        ctx.report.push(row);
    }
    Ok(())
}

/// A store that offers no wake-ups, so a worker on it polls only.
#[derive(Debug)]
struct PollingOnly(Arc<dyn Store>);

#[async_trait::async_trait]
impl Store for PollingOnly {
    fn backend(&self) -> &'static str {
        self.0.backend()
    }
    async fn migrate(&self) -> tasktable::StoreResult<()> {
        self.0.migrate().await
    }
    async fn db_now(&self) -> tasktable::StoreResult<chrono::DateTime<chrono::Utc>> {
        self.0.db_now().await
    }
    async fn task_submit(
        &self,
        p: SubmitParams,
    ) -> tasktable::StoreResult<Vec<tasktable::Submitted>> {
        self.0.task_submit(p).await
    }
    async fn task_claim(
        &self,
        p: tasktable::store::ClaimParams,
    ) -> tasktable::StoreResult<Vec<tasktable::Task>> {
        self.0.task_claim(p).await
    }
    async fn task_release_affinity(
        &self,
        p: tasktable::store::AffinityReleaseParams,
    ) -> tasktable::StoreResult<u64> {
        self.0.task_release_affinity(p).await
    }

    async fn task_renew(
        &self,
        p: RenewParams,
    ) -> tasktable::StoreResult<Vec<tasktable::store::LeaseStatus>> {
        self.0.task_renew(p).await
    }
    async fn task_checkpoint(
        &self,
        p: tasktable::store::CheckpointParams,
    ) -> tasktable::StoreResult<tasktable::store::LeaseStatus> {
        self.0.task_checkpoint(p).await
    }
    async fn task_log(
        &self,
        p: tasktable::store::LogParams,
    ) -> tasktable::StoreResult<tasktable::store::LeaseStatus> {
        self.0.task_log(p).await
    }
    async fn task_finish(
        &self,
        p: tasktable::store::FinishParams,
    ) -> tasktable::StoreResult<Vec<bool>> {
        self.0.task_finish(p).await
    }
    async fn task_list_expired(
        &self,
        p: tasktable::store::ExpiredParams,
    ) -> tasktable::StoreResult<Vec<tasktable::Task>> {
        self.0.task_list_expired(p).await
    }
    async fn task_get(
        &self,
        id: tasktable::TaskId,
    ) -> tasktable::StoreResult<Option<tasktable::Task>> {
        self.0.task_get(id).await
    }
    async fn task_list(&self, p: ListParams) -> tasktable::StoreResult<tasktable::store::TaskPage> {
        self.0.task_list(p).await
    }
    async fn task_count(&self, p: tasktable::store::CountParams) -> tasktable::StoreResult<u64> {
        self.0.task_count(p).await
    }
    async fn attempt_list(
        &self,
        id: tasktable::TaskId,
    ) -> tasktable::StoreResult<Vec<tasktable::Attempt>> {
        self.0.attempt_list(id).await
    }
    async fn task_update(&self, p: tasktable::store::UpdateParams) -> tasktable::StoreResult<u64> {
        self.0.task_update(p).await
    }
    async fn queue_set_paused(
        &self,
        p: tasktable::store::QueuePauseParams,
    ) -> tasktable::StoreResult<()> {
        self.0.queue_set_paused(p).await
    }
    async fn queue_set_policy(
        &self,
        p: tasktable::store::QueuePolicyParams,
    ) -> tasktable::StoreResult<()> {
        self.0.queue_set_policy(p).await
    }
    async fn queue_list(&self) -> tasktable::StoreResult<Vec<tasktable::store::QueueInfo>> {
        self.0.queue_list().await
    }
    async fn stats(
        &self,
        p: tasktable::store::StatsParams,
    ) -> tasktable::StoreResult<tasktable::store::Stats> {
        self.0.stats(p).await
    }
    async fn batch_save(
        &self,
        p: tasktable::store::BatchSaveParams,
    ) -> tasktable::StoreResult<tasktable::store::BatchSaved> {
        self.0.batch_save(p).await
    }
    tasktable::store::forward_maintenance_calls!(0);
    async fn subscribe(
        &self,
    ) -> tasktable::StoreResult<tokio::sync::broadcast::Receiver<tasktable::store::Wake>> {
        Err(tasktable::StoreError::InvalidInput(
            "polling only (benchmark)".into(),
        ))
    }
}

const LATENCY_CONCURRENCY: usize = 50;

async fn latency_case(ctx: &mut Ctx, db: &BenchDb, rate: f64, mode: &str) -> BenchResult<()> {
    let secs = ctx.scale.latency_secs;
    let total = (rate * secs).round() as usize;
    let base = db.store().await;
    // On PostgreSQL the producer has a store (pool and listener) of its own, as another
    // process would, so the worker learns of new tasks through NOTIFY, not in-process.
    // SQLite and MySQL have in-process wake-ups only: there the producer shares the
    // worker's store, except in "polling only" (MySQL), where it has a store of its own
    // as a producer in another process would.
    let producer = match (ctx.backend, mode) {
        (Backend::Postgres, _) | (Backend::Mysql, "polling only") => db.store().await,
        _ => base.clone(),
    };
    let worker_store: Arc<dyn Store> = if mode == "polling only" {
        Arc::new(PollingOnly(base.clone()))
    } else {
        base.clone()
    };
    let epoch = Instant::now();
    let timed = Timed {
        epoch,
        starts: Arc::new(Mutex::new(Vec::with_capacity(total))),
    };
    let worker = Worker::builder(worker_store)
        .concurrency(LATENCY_CONCURRENCY)
        .register(timed.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let mut events = worker.subscribe();
    let dones = Arc::new(Mutex::new(Vec::with_capacity(total)));
    let lagged = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let collector = {
        let dones = dones.clone();
        let lagged = lagged.clone();
        tokio::spawn(async move {
            loop {
                match events.recv().await {
                    Ok(WorkerEvent::Finished { task_id, .. }) => dones
                        .lock()
                        .expect("dones")
                        .push((task_id, micros_since(epoch))),
                    Ok(_) => {}
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        lagged.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
                    }
                    Err(_) => return,
                }
            }
        })
    };
    let (stop, handle) = spawn_worker(worker);
    // Idle at the start: let the worker's first claim round find nothing.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut row = Row::new("3 latency", format!("{rate:.0}/s, {mode}"));
    load_row(&mut row);
    let interval = Duration::from_secs_f64(1.0 / rate);
    let started = tokio::time::Instant::now();
    let mut joins = Vec::with_capacity(total);
    for i in 0..total {
        tokio::time::sleep_until(started + interval.mul_f64(i as f64)).await;
        let t = micros_since(epoch);
        let p = producer.clone();
        joins.push(tokio::spawn(async move {
            p.task_submit(SubmitParams {
                tasks: vec![NewTask::new("timed", json!({ "t": t }))],
                now: None,
            })
            .await
            .map(|_| (micros_since(epoch) - t) as f64 / 1000.0)
        }));
    }
    let offered = total as f64 / started.elapsed().as_secs_f64();
    let mut failed = 0;
    let mut submit_ms = Vec::with_capacity(total);
    for j in joins {
        match j.await {
            Ok(Ok(ms)) => submit_ms.push(ms),
            _ => failed += 1,
        }
    }
    let give_up = Instant::now() + Duration::from_secs(60);
    loop {
        let started_n = timed.starts.lock().expect("starts").len() + failed;
        let done_n = dones.lock().expect("dones").len() as u64
            + lagged.load(std::sync::atomic::Ordering::Relaxed)
            + failed as u64;
        if started_n >= total && done_n >= total as u64 {
            break;
        }
        if Instant::now() > give_up {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = stop.send(());
    let _ = handle.await;
    collector.abort();
    let starts = timed.starts.lock().expect("starts").clone();
    let done_at: std::collections::HashMap<_, _> =
        dones.lock().expect("dones").iter().copied().collect();
    let mut to_start: Vec<f64> = starts
        .iter()
        .map(|(_, s, b)| (b - s) as f64 / 1000.0)
        .collect();
    let mut to_done: Vec<f64> = starts
        .iter()
        .filter_map(|(id, s, _)| done_at.get(id).map(|d| (d - s) as f64 / 1000.0))
        .collect();
    row.set("offered_per_s", round(offered, 0));
    row.set("tasks", starts.len());
    row.set("submit_failed", failed);
    for (name, v) in [("start", &mut to_start), ("done", &mut to_done)] {
        for (q, label) in [(0.5, "p50"), (0.95, "p95"), (0.99, "p99")] {
            row.set(&format!("to_{name}_{label}_ms"), round(quantile(v, q), 2));
        }
    }
    row.set(
        "submit_call_p50_ms",
        round(quantile(&mut submit_ms, 0.5), 2),
    );
    row.set(
        "submit_call_p99_ms",
        round(quantile(&mut submit_ms, 0.99), 2),
    );
    row.set("concurrency", LATENCY_CONCURRENCY);
    ctx.report.push(row);
    Ok(())
}

pub async fn latency(ctx: &mut Ctx) -> BenchResult<()> {
    let half = match ctx.best_drain {
        Some(r) => r / 2.0,
        None => drain_case(ctx, ctx.scale.drain_sizes[0], 50, false).await? / 2.0,
    };
    let db = BenchDb::fresh(ctx.backend).await?;
    let modes: &[&str] = match ctx.backend {
        Backend::Postgres => &["notifications", "polling only"],
        Backend::Mysql => &["in-process wake-ups", "polling only"],
        Backend::Sqlite => &["in-process wake-ups"],
    };
    for &mode in modes {
        for rate in [100.0, 1000.0, half.round()] {
            latency_case(ctx, &db, rate, mode).await?;
        }
    }
    Ok(())
}

pub async fn backlog(ctx: &mut Ctx) -> BenchResult<()> {
    let mut rates = Vec::new();
    for backlog in ctx.scale.backlogs.clone() {
        let db = BenchDb::fresh(ctx.backend).await?;
        let t = Instant::now();
        db.bulk_fill(backlog, "noop").await;
        let fill_secs = t.elapsed().as_secs_f64();
        let plan = db.claim_plan().await;
        let (store, mysql) = db.store_with_retries().await;
        let ceiling = db.ceiling(ctx.scale.ceiling_secs).await;
        let k = backlog.min(ctx.scale.backlog_drain);
        let mut row = Row::new(
            "4 backlog",
            format!("{backlog} pending, drain {k}, concurrency 50"),
        );
        load_row(&mut row);
        let noop = Noop::default();
        let worker = Worker::builder(store.clone())
            .concurrency(50)
            .register(noop.clone())
            .build()
            .map_err(|e| e.to_string())?;
        let before = db.counters().await;
        let retries = mysql.as_ref().map(|s| s.db().deadlock_retries());
        let started = Instant::now();
        let (stop, handle) = spawn_worker(worker);
        noop.wait_for(k).await;
        let secs = started.elapsed().as_secs_f64();
        let after = db.counters().await;
        let _ = stop.send(());
        let _ = handle.await;
        let ceiling_after = db.ceiling(ctx.scale.ceiling_secs).await;
        let ceiling = (ceiling + ceiling_after) / 2.0;
        let rate = k as f64 / secs;
        rates.push(rate);
        row.set("tasks_per_s", round(rate, 0));
        row.set("ceiling_commits_per_s", round(ceiling, 0));
        row.set("ratio_to_ceiling", round(rate / ceiling, 2));
        row.set("fill_seconds", round(fill_secs, 1));
        add_pg(&mut row, before, after, k);
        add_retries(&mut row, &mysql, retries);
        row.set("claim_plan", plan);
        if rates.len() == 2 {
            row.set("rate_vs_small_backlog", round(rate / rates[0], 2));
        }
        ctx.report.push(row);
    }
    Ok(())
}

/// Starts this program as a separate worker process on `url`.
fn spawn_child(url: &str, kind: &str, concurrency: usize, lease_ms: u64) -> BenchResult<Child> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    Command::new(exe)
        .args([
            "child",
            "--url",
            url,
            "--kind",
            kind,
            "--concurrency",
            &concurrency.to_string(),
            "--lease-ms",
            &lease_ms.to_string(),
        ])
        .stdin(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())
}

/// (VmRSS, VmHWM) of a process, in MiB.
fn rss_mib(pid: u32) -> (f64, f64) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<f64>().ok())
            .map_or(f64::NAN, |kb| round(kb / 1024.0, 1))
    };
    (field("VmRSS:"), field("VmHWM:"))
}

pub async fn memory(ctx: &mut Ctx) -> BenchResult<()> {
    let n = ctx.scale.rss_tasks;
    let (db, store) = filled(ctx, n, "noop").await?;
    let mut row = Row::new(
        "1 drain",
        format!("{n} tasks, worker process, concurrency 100"),
    );
    load_row(&mut row);
    let started = Instant::now();
    let mut child = spawn_child(db.url(), "noop", 100, 0)?;
    wait_count(&store, TaskState::Succeeded, n, Duration::from_millis(50)).await;
    let secs = started.elapsed().as_secs_f64();
    let (rss, hwm) = rss_mib(child.id());
    let _ = child.kill();
    let _ = child.wait();
    row.set("tasks_per_s_incl_start", round(n as f64 / secs, 0));
    row.set("worker_rss_mib", rss);
    row.set("worker_peak_rss_mib", hwm);
    ctx.report.push(row);
    Ok(())
}

/// 1, 2 and 4 worker processes at the default concurrency (10) drain the same
/// pre-submitted no-op tasks from one database: where throughput stops growing, the
/// database is the limit. The clock runs from the first process's start to the last task
/// counted `succeeded`, so it includes the processes' start (tens of milliseconds).
pub async fn scale(ctx: &mut Ctx) -> BenchResult<()> {
    let n = ctx.scale.rss_tasks * 2;
    for processes in [1usize, 2, 4] {
        let (db, store) = filled(ctx, n, "noop").await?;
        let ceiling = db.ceiling(ctx.scale.ceiling_secs).await;
        let mut row = Row::new(
            "1 drain",
            format!("{n} tasks, {processes} worker processes, concurrency 10 each"),
        );
        load_row(&mut row);
        let before = db.counters().await;
        let started = Instant::now();
        let mut children = (0..processes)
            .map(|_| spawn_child(db.url(), "noop", 10, 0))
            .collect::<BenchResult<Vec<_>>>()?;
        wait_count(&store, TaskState::Succeeded, n, Duration::from_millis(10)).await;
        let secs = started.elapsed().as_secs_f64();
        let after = db.counters().await;
        for child in &mut children {
            let _ = child.kill();
            let _ = child.wait();
        }
        let ceiling_after = db.ceiling(ctx.scale.ceiling_secs).await;
        let ceiling = (ceiling + ceiling_after) / 2.0;
        let rate = n as f64 / secs;
        row.set("processes", processes as f64);
        row.set("tasks_per_s_incl_start", round(rate, 0));
        row.set("ceiling_commits_per_s", round(ceiling, 0));
        row.set("ratio_to_ceiling", round(rate / ceiling, 2));
        add_pg(&mut row, before, after, n);
        ctx.report.push(row);
    }
    Ok(())
}

pub async fn leases(ctx: &mut Ctx) -> BenchResult<()> {
    let n = ctx.scale.lease_tasks;
    let lease_for = ctx.scale.lease_for;
    let (db, store) = filled(ctx, n, "long").await?;
    let ceiling = db.ceiling(ctx.scale.ceiling_secs).await;
    let mut row = Row::new(
        "5 leases",
        format!(
            "{n} long tasks, lease {:?} (renewed every {:?})",
            lease_for,
            lease_for / 3
        ),
    );
    load_row(&mut row);
    let mut child = spawn_child(db.url(), "long", n as usize, lease_for.as_millis() as u64)?;
    let give_up = Instant::now() + Duration::from_secs(120);
    while count(&store, TaskState::Running).await < n {
        if Instant::now() > give_up {
            let _ = child.kill();
            return Err("the worker process did not claim every long task".into());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Renewals only: nothing else writes to this database while the tasks run.
    let before = db.counters().await;
    let window = ctx.scale.lease_window;
    tokio::time::sleep(window).await;
    let after = db.counters().await;
    let (rss, hwm) = rss_mib(child.id());

    // One renewal round as the lease keeper makes it (chunks of 500), timed here.
    let mut leases = Vec::new();
    let mut after_id = None;
    loop {
        let page = store
            .task_list(ListParams {
                filter: TaskFilter::default().state(TaskState::Running),
                after: after_id,
                limit: 1000,
                light: false,
            })
            .await
            .map_err(|e| e.to_string())?;
        leases.extend(page.tasks.iter().map(|t| t.lease()));
        match page.next {
            Some(next) => after_id = Some(next),
            None => break,
        }
    }
    let mut rounds = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        for chunk in leases.chunks(500) {
            store
                .task_renew(RenewParams {
                    leases: chunk.to_vec(),
                    lease_for,
                    now: None,
                })
                .await
                .map_err(|e| e.to_string())?;
        }
        rounds.push(t.elapsed().as_secs_f64());
    }
    let round_s = quantile(&mut rounds, 0.5);
    let period = (lease_for / 3).as_secs_f64();
    let commits_per_round = leases.len().div_ceil(500) as f64;
    row.set("renewal_round_ms", round(round_s * 1000.0, 2));
    row.set("renewal_busy_fraction", round(round_s / period, 4));
    row.set("renew_commits_per_s", round(commits_per_round / period, 2));
    row.set("renewed_rows_per_s", round(leases.len() as f64 / period, 0));
    row.set("ceiling_commits_per_s", round(ceiling, 0));
    row.set(
        "renew_commits_vs_ceiling",
        round(commits_per_round / period / ceiling, 5),
    );
    row.set(
        "renewed_rows_vs_ceiling",
        round(leases.len() as f64 / period / ceiling, 4),
    );
    if let (Some(b), Some(a)) = (before, after) {
        let (xacts, wal) = a.since(&b);
        let w = window.as_secs_f64();
        row.set("measured_write_xacts_per_s", round(xacts as f64 / w, 2));
        row.set("measured_wal_bytes_per_s", round(wal as f64 / w, 0));
        row.set(
            "measured_xacts_vs_ceiling",
            round(xacts as f64 / w / ceiling, 5),
        );
    }
    other_activity(&db, &mut row).await;
    row.set("worker_rss_mib", rss);
    row.set("worker_peak_rss_mib", hwm);
    ctx.report.push(row);

    // Kill the worker; a rescuer with default settings elsewhere takes its tasks back.
    let mut row = Row::new(
        "5 leases",
        format!("rescue after SIGKILL, {n} tasks, lease {lease_for:?}, rescuer every 5 s"),
    );
    load_row(&mut row);
    let _ = child.kill();
    let killed = Instant::now();
    let _ = child.wait();
    let last_renewal = store
        .task_list(ListParams {
            filter: TaskFilter::default().state(TaskState::Running),
            after: None,
            limit: 1,
            light: false,
        })
        .await
        .ok()
        .and_then(|p| p.tasks.first().and_then(|t| t.lease_expires_at));
    let db_now = store.db_now().await.map_err(|e| e.to_string())?;
    let (stop, stopped) = oneshot::channel::<()>();
    let rescuer = tokio::spawn(Rescuer::new(store.clone(), RescuerConfig::default()).run(
        async move {
            let _ = stopped.await;
        },
    ));
    let give_up = Instant::now() + lease_for + Duration::from_secs(30);
    while count(&store, TaskState::Running).await > 0 && Instant::now() < give_up {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = killed.elapsed().as_secs_f64();
    let _ = stop.send(());
    let _ = rescuer.await;
    let left = count(&store, TaskState::Running).await;
    row.set("seconds_to_rescue_all", round(secs, 2));
    if let Some(exp) = last_renewal {
        row.set(
            "lease_left_at_kill_s",
            round((exp - db_now).num_milliseconds() as f64 / 1000.0, 2),
        );
    }
    row.set("still_running", left);
    // The history is intact: every rescued task has its attempt recorded as expired.
    if let Some(id) = leases.first().map(|l| l.task_id) {
        let attempts = store.attempt_list(id).await.map_err(|e| e.to_string())?;
        row.set(
            "history_of_one",
            attempts
                .iter()
                .map(|a| a.outcome.as_str())
                .collect::<Vec<_>>()
                .join(","),
        );
    }
    ctx.report.push(row);
    Ok(())
}

/// The median time (ms) of `calls` calls of `f` made one after the other, and what the
/// last one returned.
async fn median_ms<T, F, Fut>(calls: usize, mut f: F) -> BenchResult<(f64, T)>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = BenchResult<T>>,
{
    let mut times = Vec::with_capacity(calls);
    let mut last = None;
    for _ in 0..calls.max(1) {
        let t = Instant::now();
        last = Some(f().await?);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok((quantile(&mut times, 0.5), last.expect("at least one call")))
}

/// The parts of a warm 24 h statistics call, timed apart through the stores' SQL half
/// (median ms of `calls` each): reading the window's rollup rows, aggregating the raw
/// rows after the last rolled-up minute, and counting the active tasks. The rest of a
/// call is the rollup check and summing in Rust.
async fn stats_parts<S: StatsSource>(store: S, calls: usize) -> BenchResult<[f64; 3]> {
    let err = |e: tasktable::StoreError| e.to_string();
    let now = store.stats_now(None).await.map_err(err)?;
    let rolled = store
        .stats_rolled_until()
        .await
        .map_err(err)?
        .unwrap_or(now);
    let from = floor_minute(now) - chrono::TimeDelta::minutes(24 * 60 - 1);
    let live_to = floor_minute(now) + chrono::TimeDelta::minutes(1);
    let (read, _) = median_ms(calls, || async {
        store
            .stats_read(from, rolled, None, None)
            .await
            .map_err(err)
    })
    .await?;
    let (raw, _) = median_ms(calls, || async {
        store
            .stats_aggregate(rolled.max(from), live_to, None, None)
            .await
            .map_err(err)
    })
    .await?;
    let (active, _) = median_ms(calls, || async {
        store.stats_active(now, None, None).await.map_err(err)
    })
    .await?;
    Ok([read, raw, active])
}

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(24 * 3600);
/// The queue the filtered statistics call asks for (one of the fill's three).
const STATS_QUEUE: &str = "emails";

/// Statistics on large tables: the first call (which rolls up the whole history once),
/// warm calls over 1 h and 24 h, a warm call filtered by queue, and `queue_list` (counts
/// over every row) for comparison, each on N finished tasks spread over the last 24 h.
pub async fn stats(ctx: &mut Ctx) -> BenchResult<()> {
    let calls = ctx.scale.stats_calls;
    // Per size: first call, warm 1 h, warm 24 h, warm 24 h one queue, queue_list (ms),
    // the rollup rows, and the three parts of a warm call (ms).
    let mut runs: Vec<(u64, [f64; 9])> = Vec::new();
    for n in ctx.scale.stats_sizes.clone() {
        let db = BenchDb::fresh(ctx.backend).await?;
        let t = Instant::now();
        db.finished_fill(n, DAY).await;
        let fill_secs = t.elapsed().as_secs_f64();
        let store = db.store().await;
        let mut row = Row::new(
            "6 stats",
            format!("{n} finished tasks over 24 h, 3 queues x 4 kinds"),
        );
        load_row(&mut row);
        let call = |p: StatsParams| {
            let s = store.clone();
            async move { s.stats(p).await.map_err(|e| e.to_string()) }
        };

        let t = Instant::now();
        call(StatsParams::window(HOUR)).await?;
        let first_ms = t.elapsed().as_secs_f64() * 1000.0;
        let rollup_rows = db.scalar("SELECT count(*) FROM tasktable_stats").await;

        let (warm_1h, _) = median_ms(calls, || call(StatsParams::window(HOUR))).await?;
        let (warm_24h, day) = median_ms(calls, || call(StatsParams::window(DAY))).await?;
        let (warm_queue, _) = median_ms(calls, || {
            call(StatsParams {
                queue: Some(STATS_QUEUE.to_owned()),
                ..StatsParams::window(DAY)
            })
        })
        .await?;
        let (queue_list, _) = median_ms(calls, || {
            let s = store.clone();
            async move { s.queue_list().await.map_err(|e| e.to_string()) }
        })
        .await?;
        let err = |e: tasktable::StoreError| e.to_string();
        let parts = match ctx.backend {
            Backend::Sqlite => {
                let s = tasktable::sqlite::SqliteStore::open(db.url())
                    .await
                    .map_err(err)?;
                stats_parts(s.stats_source(), calls).await?
            }
            Backend::Postgres => {
                let s = tasktable::postgres::PgStore::open(db.url())
                    .await
                    .map_err(err)?;
                stats_parts(s.stats_source(), calls).await?
            }
            Backend::Mysql => {
                let s = tasktable::mysql::MySqlStore::open(db.url())
                    .await
                    .map_err(err)?;
                stats_parts(s.stats_source(), calls).await?
            }
        };
        // What the warm calls still read raw: attempts after the rolled-up minutes.
        let raw_after_rollup = db
            .scalar(
                "SELECT count(*) FROM tasktable_attempts WHERE finished_at >= \
                 (SELECT rolled_until FROM tasktable_stats_rolled WHERE id = 1)",
            )
            .await;
        let (succeeded, failed) = day.groups.iter().fold((0, 0), |(s, f), g| {
            (s + g.window.succeeded, f + g.window.failed)
        });

        row.set("fill_seconds", round(fill_secs, 1));
        row.set("first_call_1h_ms", round(first_ms, 2));
        row.set("warm_1h_p50_ms", round(warm_1h, 2));
        row.set("warm_24h_p50_ms", round(warm_24h, 2));
        row.set("warm_24h_one_queue_p50_ms", round(warm_queue, 2));
        row.set("queue_list_p50_ms", round(queue_list, 2));
        row.set("part_read_rollups_24h_p50_ms", round(parts[0], 2));
        row.set("part_raw_tail_p50_ms", round(parts[1], 2));
        row.set("part_active_counts_p50_ms", round(parts[2], 2));
        row.set("calls_each", calls);
        row.set("rollup_rows", rollup_rows);
        row.set("raw_attempts_after_rollup", raw_after_rollup);
        // The fill as the statistics see it (the oldest minutes may have left the window).
        row.set("window_24h_succeeded", succeeded);
        row.set("window_24h_failed", failed);
        ctx.report.push(row);
        runs.push((
            n,
            [
                first_ms,
                warm_1h,
                warm_24h,
                warm_queue,
                queue_list,
                rollup_rows as f64,
                parts[0],
                parts[1],
                parts[2],
            ],
        ));
    }
    if let (Some((small, a)), Some((large, b))) = (runs.first(), runs.last()) {
        if large > small {
            let mut row = Row::new("6 stats", format!("ratio {large} / {small} tasks"));
            for (i, name) in [
                "first_call_1h",
                "warm_1h",
                "warm_24h",
                "warm_24h_one_queue",
                "queue_list",
                "rollup_rows",
                "part_read_rollups_24h",
                "part_raw_tail",
                "part_active_counts",
            ]
            .iter()
            .enumerate()
            {
                row.set(&format!("{name}_ratio"), round(b[i] / a[i], 2));
            }
            row.set("tasks_ratio", round(*large as f64 / *small as f64, 0));
            ctx.report.push(row);
        }
    }
    Ok(())
}
