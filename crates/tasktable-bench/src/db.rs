//! Fresh databases for each scenario, the machine's commit ceiling measured on them, the
//! PostgreSQL write counters, and a fast bulk fill for the backlog scenario.

use crate::Backend;
use sqlx::{ConnectOptions, Connection, Executor};
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tasktable::Store;
use tasktable_testdb::TestDb;

/// A fresh, migrated database of the chosen backend, dropped (or deleted) afterwards.
#[derive(Debug)]
pub struct BenchDb {
    pub backend: Backend,
    db: TestDb,
}

impl BenchDb {
    pub async fn fresh(backend: Backend) -> Result<Self, String> {
        match TestDb::fresh(backend.name()).await {
            Some(db) => Ok(BenchDb { backend, db }),
            None => Err(format!(
                "{} is unreachable (set TASKTABLE_TEST_POSTGRES_URL)",
                backend.name()
            )),
        }
    }

    pub fn url(&self) -> &str {
        self.db.url()
    }

    /// A store with pools of its own, as a separate process would have.
    pub async fn store(&self) -> Arc<dyn Store> {
        self.db.store().await
    }

    /// The SQLite file's path.
    fn sqlite_path(&self) -> String {
        self.url().trim_start_matches("sqlite://").to_owned()
    }

    /// The commit ceiling of this machine, measured now on this database's server or disk.
    ///
    /// PostgreSQL: single-row `UPDATE` transactions per second from 8 connections, each on
    /// a row of its own (no lock waits), autocommit. SQLite: single-row `UPDATE` commits per
    /// second on one connection in WAL mode with the store's default `synchronous = FULL`.
    pub async fn ceiling(&self, secs: f64) -> f64 {
        match self.backend {
            Backend::Postgres => pg_ceiling(self.url(), secs).await,
            Backend::Sqlite => sqlite_ceiling(&self.sqlite_path(), secs).await,
        }
    }

    /// Write counters, on PostgreSQL only.
    pub async fn counters(&self) -> Option<PgCounters> {
        match self.backend {
            Backend::Postgres => Some(PgCounters::read(self.url()).await),
            Backend::Sqlite => None,
        }
    }

    /// Inserts `n` pending no-op tasks with one statement per 100,000, without the submit
    /// path: only for pre-filling a large backlog.
    pub async fn bulk_fill(&self, n: u64, kind: &str) {
        let mut left = n;
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(self.url())
                    .await
                    .expect("connect");
                while left > 0 {
                    let chunk = left.min(100_000);
                    sqlx::query(
                        "INSERT INTO tasktable_tasks (kind, queue, state, payload, priority, run_at, \
                         max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, \
                         backoff_jitter, created_at, updated_at) \
                         SELECT $1, 'default', 'pending', jsonb_build_object('i', g), 0, now(), 5, \
                         5000, 2.0, 3600000, 0.1, now(), now() FROM generate_series(1, $2) g",
                    )
                    .bind(kind)
                    .bind(chunk as i64)
                    .execute(&mut conn)
                    .await
                    .expect("bulk fill");
                    left -= chunk;
                }
                conn.execute("VACUUM ANALYZE tasktable_tasks")
                    .await
                    .expect("vacuum");
            }
            Backend::Sqlite => {
                let mut conn = sqlite_conn(&self.sqlite_path()).await;
                while left > 0 {
                    let chunk = left.min(100_000);
                    sqlx::query(
                        "WITH RECURSIVE g(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM g WHERE i < ?2) \
                         INSERT INTO tasktable_tasks (kind, queue, state, payload, priority, run_at, \
                         max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, \
                         backoff_jitter, created_at, updated_at) \
                         SELECT ?1, 'default', 'pending', json_object('i', i), 0, \
                         strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), 5, 5000, 2.0, 3600000, 0.1, \
                         strftime('%Y-%m-%dT%H:%M:%fZ', 'now'), strftime('%Y-%m-%dT%H:%M:%fZ', 'now') FROM g",
                    )
                    .bind(kind)
                    .bind(chunk as i64)
                    .execute(&mut conn)
                    .await
                    .expect("bulk fill");
                    left -= chunk;
                }
                conn.execute("ANALYZE").await.expect("analyze");
            }
        }
    }

    /// Refreshes the planner's statistics, as autovacuum's analyze would after a large
    /// load (the test server runs with `autovacuum = off`).
    pub async fn analyze(&self) {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(self.url())
                    .await
                    .expect("connect");
                conn.execute("ANALYZE").await.expect("analyze");
            }
            Backend::Sqlite => {
                let mut conn = sqlite_conn(&self.sqlite_path()).await;
                conn.execute("ANALYZE").await.expect("analyze");
            }
        }
    }

    /// `autovacuum` on the server (PostgreSQL).
    pub async fn autovacuum(&self) -> Option<String> {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(self.url()).await.ok()?;
                sqlx::query_scalar("SHOW autovacuum")
                    .fetch_one(&mut conn)
                    .await
                    .ok()
            }
            Backend::Sqlite => None,
        }
    }

    /// The plan of the claim's choice of rows, to show it reads the claim index.
    pub async fn claim_plan(&self) -> String {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(self.url())
                    .await
                    .expect("connect");
                let rows: Vec<String> = sqlx::query_scalar(
                    "EXPLAIN SELECT t.id FROM tasktable_tasks t WHERE t.state = 'pending' \
                     AND t.queue = 'default' AND t.run_at <= now() AND t.kind = ANY('{noop}'::text[]) \
                     ORDER BY t.priority DESC, t.run_at, t.id LIMIT 50 FOR UPDATE OF t SKIP LOCKED",
                )
                .fetch_all(&mut conn)
                .await
                .expect("explain");
                rows.join(" | ")
            }
            Backend::Sqlite => {
                let mut conn = sqlite_conn(&self.sqlite_path()).await;
                use sqlx::Row;
                let rows = sqlx::query(
                    "EXPLAIN QUERY PLAN SELECT id FROM tasktable_tasks \
                     WHERE state = 'pending' AND queue = 'default' AND run_at <= '9999' \
                     AND kind IN (SELECT value FROM json_each('[\"noop\"]')) \
                     ORDER BY priority DESC, run_at, id LIMIT 50",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap_or_default();
                let rows: Vec<String> = rows
                    .iter()
                    .filter_map(|r| r.try_get::<String, _>("detail").ok())
                    .collect();
                rows.join(" | ")
            }
        }
    }
}

async fn sqlite_conn(path: &str) -> sqlx::SqliteConnection {
    use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous};
    SqliteConnectOptions::from_str(&format!("sqlite://{path}"))
        .expect("sqlite url")
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Full)
        .busy_timeout(Duration::from_secs(10))
        .connect()
        .await
        .expect("open sqlite")
}

async fn pg_ceiling(url: &str, secs: f64) -> f64 {
    const CONNECTIONS: i32 = 8;
    let mut setup = sqlx::PgConnection::connect(url).await.expect("connect");
    setup
        .execute(
            "CREATE TABLE IF NOT EXISTS tasktable_bench_ceiling (id INT PRIMARY KEY, n BIGINT NOT NULL); \
             INSERT INTO tasktable_bench_ceiling SELECT g, 0 FROM generate_series(1, 8) g ON CONFLICT DO NOTHING",
        )
        .await
        .expect("ceiling table");
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut joins = Vec::new();
    for id in 1..=CONNECTIONS {
        let url = url.to_owned();
        joins.push(tokio::spawn(async move {
            let mut conn = sqlx::PgConnection::connect(&url).await.expect("connect");
            let mut n = 0u64;
            while Instant::now() < until {
                sqlx::query("UPDATE tasktable_bench_ceiling SET n = n + 1 WHERE id = $1")
                    .bind(id)
                    .execute(&mut conn)
                    .await
                    .expect("update");
                n += 1;
            }
            n
        }));
    }
    let mut total = 0;
    for j in joins {
        total += j.await.expect("ceiling task");
    }
    total as f64 / started.elapsed().as_secs_f64()
}

async fn sqlite_ceiling(db_path: &str, secs: f64) -> f64 {
    // A file of its own beside the store's, so the store's file is not touched.
    let path = format!("{db_path}.ceiling");
    let mut conn = sqlite_conn(&path).await;
    conn.execute(
        "CREATE TABLE IF NOT EXISTS ceiling (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); \
         INSERT OR IGNORE INTO ceiling VALUES (1, 0)",
    )
    .await
    .expect("ceiling table");
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut n = 0u64;
    while Instant::now() < until {
        sqlx::query("UPDATE ceiling SET n = n + 1 WHERE id = 1")
            .execute(&mut conn)
            .await
            .expect("update");
        n += 1;
    }
    n as f64 / started.elapsed().as_secs_f64()
}

/// PostgreSQL's WAL position and transaction id counter. Both are cluster-wide: writes
/// by other databases on the same server between two readings are counted too.
#[derive(Debug, Clone, Copy)]
pub struct PgCounters {
    pub wal_bytes: i64,
    pub xact_id: i64,
}

impl PgCounters {
    async fn read(url: &str) -> Self {
        let mut conn = sqlx::PgConnection::connect(url).await.expect("connect");
        let (wal_bytes, xact_id): (i64, i64) = sqlx::query_as(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint, \
             pg_current_xact_id()::text::bigint",
        )
        .fetch_one(&mut conn)
        .await
        .expect("counters");
        let _ = conn.close().await;
        PgCounters { wal_bytes, xact_id }
    }

    /// (write transactions, WAL bytes) since `before`, less this reading's own xid.
    pub fn since(&self, before: &PgCounters) -> (i64, i64) {
        (
            self.xact_id - before.xact_id - 1,
            self.wal_bytes - before.wal_bytes,
        )
    }
}

/// Backends of other databases busy on the same server right now (their writes would
/// show in the cluster-wide counters).
pub async fn pg_other_activity(url: &str) -> i64 {
    let Ok(mut conn) = sqlx::PgConnection::connect(url).await else {
        return -1;
    };
    sqlx::query_scalar(
        "SELECT count(*) FROM pg_stat_activity WHERE datname <> current_database() \
         AND state = 'active' AND backend_type = 'client backend'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap_or(-1)
}
