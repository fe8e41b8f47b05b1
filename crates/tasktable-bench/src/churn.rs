//! The churn scenario: a steady stream of tasks submitted, run and finished for a long
//! time with retention on, and the size of the tables sampled as it goes. A table that
//! keeps finished tasks only for a while must stop growing once the first of them go:
//! deleted rows' space is reused (PostgreSQL's autovacuum, InnoDB's purge, SQLite's free
//! pages) rather than added to.
//!
//! On PostgreSQL the scenario starts a throwaway server of its own with the server's
//! default settings, because the size under churn is autovacuum's work and a test
//! server may run with it off. On SQLite it uses a fresh file, on MySQL/MariaDB a fresh
//! database on the test server.

use crate::bulk::{round2, window, Stream, Watched, CONCURRENCY, POLL};
use crate::db::BenchDb;
use crate::handlers::Noop;
use crate::report::Row;
use crate::scenarios::{BenchResult, Ctx};
use crate::Backend;
use serde_json::json;
use sqlx::{Connection, Row as _};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tasktable::retention::Retention;
use tasktable::{Store, Worker};

/// The stream's rate, tasks per second.
const PER_S: f64 = 500.0;
/// How long finished tasks are kept.
const KEEP: Duration = Duration::from_secs(60);

/// The database a churn runs on, and what keeps it alive.
enum ChurnDb {
    /// A throwaway PostgreSQL server (its directory goes with it).
    Server {
        db: Box<tasktable_dbserver::Database>,
        _dir: tempfile::TempDir,
    },
    Test(BenchDb),
}

impl ChurnDb {
    async fn start(backend: Backend) -> BenchResult<ChurnDb> {
        match backend {
            Backend::Postgres => {
                let dir = tasktable_dbserver::run_dir("tasktable-bench-")?;
                let db = tasktable_dbserver::Database::start(
                    tasktable_dbserver::Backend::Postgres,
                    dir.path(),
                )
                .await?;
                Ok(ChurnDb::Server {
                    db: Box::new(db),
                    _dir: dir,
                })
            }
            Backend::Sqlite | Backend::Mysql => Ok(ChurnDb::Test(BenchDb::fresh(backend).await?)),
        }
    }

    fn url(&self) -> &str {
        match self {
            ChurnDb::Server { db, .. } => db.url(),
            ChurnDb::Test(db) => db.url(),
        }
    }

    /// A store with a pool of its own, migrated.
    async fn store(&self) -> BenchResult<Arc<dyn Store>> {
        let store = tasktable::connect(self.url())
            .await
            .map_err(|e| e.to_string())?;
        store.migrate().await.map_err(|e| e.to_string())?;
        Ok(store)
    }
}

/// The size of the tasks table and of everything of tasktable's at one moment.
#[derive(Debug, Clone, Copy)]
struct Size {
    /// Seconds since the churn started.
    at: f64,
    /// `tasktable_tasks`: its rows, and its indexes (0 where the backend cannot tell
    /// them apart).
    tasks_bytes: u64,
    tasks_index_bytes: u64,
    /// Every tasktable table with its indexes (SQLite: the file, free pages included).
    total_bytes: u64,
    /// Rows in `tasktable_tasks`.
    rows: u64,
}

impl Size {
    /// From the four figures a query gave: table, indexes, total, rows.
    fn of(at: f64, [tasks, index, total, rows]: [i64; 4]) -> Size {
        let u = |v: i64| u64::try_from(v).unwrap_or(0);
        Size {
            at,
            tasks_bytes: u(tasks),
            tasks_index_bytes: u(index),
            total_bytes: u(total),
            rows: u(rows),
        }
    }
}

async fn measure(backend: Backend, url: &str, at: f64) -> BenchResult<Size> {
    let err = |e: sqlx::Error| e.to_string();
    match backend {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.map_err(err)?;
            let r = sqlx::query(
                "SELECT pg_table_size('tasktable_tasks'), pg_indexes_size('tasktable_tasks'), \
                 (SELECT sum(pg_total_relation_size(oid))::bigint FROM pg_class \
                  WHERE relkind = 'r' AND relname LIKE 'tasktable%'), \
                 (SELECT count(*) FROM tasktable_tasks)",
            )
            .fetch_one(&mut c)
            .await
            .map_err(err)?;
            Ok(Size::of(at, [r.get(0), r.get(1), r.get(2), r.get(3)]))
        }
        Backend::Mysql => {
            let mut c = sqlx::MySqlConnection::connect(url).await.map_err(err)?;
            // InnoDB's sizes are estimates refreshed by ANALYZE; refresh them first.
            sqlx::query("ANALYZE TABLE tasktable_tasks, tasktable_attempts")
                .execute(&mut c)
                .await
                .map_err(err)?;
            let r = sqlx::query(
                "SELECT CAST(SUM(CASE WHEN table_name = 'tasktable_tasks' THEN data_length END) \
                 AS SIGNED), \
                 CAST(SUM(CASE WHEN table_name = 'tasktable_tasks' THEN index_length END) \
                 AS SIGNED), CAST(SUM(data_length + index_length) AS SIGNED), \
                 (SELECT COUNT(*) FROM tasktable_tasks) \
                 FROM information_schema.tables \
                 WHERE table_schema = DATABASE() AND table_name LIKE 'tasktable%'",
            )
            .fetch_one(&mut c)
            .await
            .map_err(err)?;
            Ok(Size::of(at, [r.get(0), r.get(1), r.get(2), r.get(3)]))
        }
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url).await.map_err(err)?;
            let r = sqlx::query(
                "SELECT (SELECT page_count FROM pragma_page_count()) * \
                 (SELECT page_size FROM pragma_page_size()), \
                 (SELECT count(*) FROM tasktable_tasks)",
            )
            .fetch_one(&mut c)
            .await
            .map_err(err)?;
            Ok(Size::of(at, [0, 0, r.get(0), r.get(1)]))
        }
    }
}

/// The last size sampled at or before `at` seconds.
fn size_at(sizes: &[Size], at: f64) -> Size {
    sizes
        .iter()
        .rev()
        .find(|s| s.at <= at)
        .copied()
        .unwrap_or(sizes[0])
}

fn mib(bytes: u64) -> f64 {
    round2(bytes as f64 / (1024.0 * 1024.0))
}

pub async fn churn(ctx: &mut Ctx) -> BenchResult<()> {
    let (length, every) = (ctx.scale.churn, ctx.scale.churn_sample);
    let db = ChurnDb::start(ctx.backend).await?;
    let (store, producer_store) = match ctx.backend {
        // One process, one writer, as in a `tasktable serve` that runs the worker too.
        Backend::Sqlite => {
            let s = db.store().await?;
            (s.clone(), s)
        }
        Backend::Postgres | Backend::Mysql => (db.store().await?, db.store().await?),
    };
    let mut row = Row::new(
        "11 churn",
        format!(
            "{PER_S}/s for {} min, finished tasks kept {} s",
            length.as_secs() / 60,
            KEEP.as_secs()
        ),
    );
    crate::scenarios::load_row(&mut row);
    let epoch = Instant::now();
    let watched = Arc::new(Watched::new(store, epoch));
    let noop = Noop::default();
    let worker = Worker::builder(watched.clone())
        .concurrency(CONCURRENCY)
        .poll_interval(POLL)
        .retention(Retention {
            succeeded: Some(KEEP),
            failed: Some(KEEP),
            cancelled: Some(KEEP),
            archive: false,
            events: Some(KEEP),
        })
        .register(noop.clone())
        .build()
        .map_err(|e| e.to_string())?;
    let (stop_worker, worker) = crate::scenarios::spawn_worker(worker);
    let stream = Stream::start(producer_store, PER_S);

    let mut sizes = Vec::new();
    let mut next = tokio::time::Instant::now();
    loop {
        let at = epoch.elapsed().as_secs_f64();
        let size = measure(ctx.backend, db.url(), at).await?;
        eprintln!(
            "  churn {:>5.0} s: {} rows, tasks {} MiB + {} MiB of indexes, all {} MiB",
            at,
            size.rows,
            mib(size.tasks_bytes),
            mib(size.tasks_index_bytes),
            mib(size.total_bytes)
        );
        sizes.push(size);
        if at >= length.as_secs_f64() {
            break;
        }
        next += every;
        tokio::time::sleep_until(next).await;
    }
    let end = epoch.elapsed().as_secs_f64();
    let failed = stream.stop().await?;
    let _ = stop_worker.send(());
    let _ = worker.await;

    let ran = noop.ran.load(std::sync::atomic::Ordering::Relaxed);
    row.set("tasks_run", ran);
    row.set("stream_submits_failed", failed);
    let (third, last) = (end / 3.0, *sizes.last().expect("sampled"));
    let [a, b] = [size_at(&sizes, third), size_at(&sizes, 2.0 * third)];
    for (name, s) in [("one_third", a), ("two_thirds", b), ("end", last)] {
        row.set(&format!("{name}_rows"), s.rows);
        row.set(&format!("{name}_tasks_mib"), mib(s.tasks_bytes));
        row.set(&format!("{name}_tasks_index_mib"), mib(s.tasks_index_bytes));
        row.set(&format!("{name}_total_mib"), mib(s.total_bytes));
    }
    let peak = sizes.iter().map(|s| s.total_bytes).max().unwrap_or(0);
    row.set("peak_total_mib", mib(peak));
    // Growth over each later third: a table that stopped growing shows ~1.0 in the last.
    let ratio = |x: u64, y: u64| round2(x as f64 / y.max(1) as f64);
    row.set(
        "total_growth_second_third",
        ratio(b.total_bytes, a.total_bytes),
    );
    row.set(
        "total_growth_last_third",
        ratio(last.total_bytes, b.total_bytes),
    );
    row.set(
        "sizes",
        json!(sizes
            .iter()
            .map(|s| json!([
                s.at.round(),
                s.rows,
                s.tasks_bytes,
                s.tasks_index_bytes,
                s.total_bytes
            ]))
            .collect::<Vec<_>>()),
    );
    row.set(
        "sizes_columns",
        json!([
            "s",
            "rows",
            "tasks_bytes",
            "tasks_index_bytes",
            "total_bytes"
        ]),
    );
    let first = window(&mut row, "first_third", &watched, 0.0, third, false);
    let late = window(&mut row, "last_third", &watched, 2.0 * third, end, false);
    row.set("claim_p99_last_vs_first", round2(late[1] / first[1]));
    // Every task submitted in the run, less those still in flight at its end, ran.
    let expected = (PER_S * end) as u64;
    if ran * 100 < expected * 95 {
        return Err(format!("the worker ran {ran} of about {expected} tasks"));
    }
    ctx.report.push(row);
    Ok(())
}
