//! Fresh databases for each scenario, the machine's commit ceiling measured on them, the
//! PostgreSQL write counters, and fast bulk fills for the backlog and stats scenarios.

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
                "{} is unreachable (set {})",
                backend.name(),
                match backend {
                    Backend::Mysql => "TASKTABLE_TEST_MYSQL_URL",
                    _ => "TASKTABLE_TEST_POSTGRES_URL",
                }
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

    /// A store as [`store`](Self::store) makes it, and on MySQL the same store typed, for
    /// its count of transactions InnoDB aborted and it ran again.
    pub async fn store_with_retries(
        &self,
    ) -> (Arc<dyn Store>, Option<tasktable::mysql::MySqlStore>) {
        match self.backend {
            Backend::Mysql => {
                let store = tasktable::mysql::MySqlStore::open(self.url())
                    .await
                    .expect("open mysql");
                (Arc::new(store.clone()), Some(store))
            }
            Backend::Sqlite | Backend::Postgres => (self.store().await, None),
        }
    }

    /// The SQLite file's path.
    fn sqlite_path(&self) -> String {
        self.url().trim_start_matches("sqlite://").to_owned()
    }

    /// The commit ceiling of this machine, measured now on this database's server or disk.
    ///
    /// PostgreSQL and MySQL: single-row `UPDATE` transactions per second from 8
    /// connections, each on a row of its own (no lock waits), autocommit. SQLite:
    /// single-row `UPDATE` commits per second on one connection in WAL mode with the
    /// store's default `synchronous = FULL`.
    pub async fn ceiling(&self, secs: f64) -> f64 {
        match self.backend {
            Backend::Postgres => pg_ceiling(self.url(), secs).await,
            Backend::Mysql => mysql_ceiling(self.url(), secs).await,
            Backend::Sqlite => sqlite_ceiling(&self.sqlite_path(), secs).await,
        }
    }

    /// Write counters, on PostgreSQL only.
    pub async fn counters(&self) -> Option<PgCounters> {
        match self.backend {
            Backend::Postgres => Some(PgCounters::read(self.url()).await),
            Backend::Sqlite | Backend::Mysql => None,
        }
    }

    /// Runs statements (one per string) on a connection of their own.
    async fn exec(&self, statements: &[&str]) {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(self.url())
                    .await
                    .expect("connect");
                for sql in statements {
                    conn.execute(*sql)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                }
            }
            Backend::Mysql => {
                let mut conn = sqlx::MySqlConnection::connect(self.url())
                    .await
                    .expect("connect");
                for sql in statements {
                    conn.execute(*sql)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                }
            }
            Backend::Sqlite => {
                let mut conn = sqlite_conn(&self.sqlite_path()).await;
                for sql in statements {
                    conn.execute(*sql)
                        .await
                        .unwrap_or_else(|e| panic!("{sql}: {e}"));
                }
            }
        }
    }

    /// One integer a query returns (the same SQL on every backend).
    pub async fn scalar(&self, sql: &str) -> i64 {
        match self.backend {
            Backend::Postgres => {
                let mut conn = sqlx::PgConnection::connect(self.url())
                    .await
                    .expect("connect");
                sqlx::query_scalar(sql).fetch_one(&mut conn).await
            }
            Backend::Mysql => {
                let mut conn = sqlx::MySqlConnection::connect(self.url())
                    .await
                    .expect("connect");
                sqlx::query_scalar(sql).fetch_one(&mut conn).await
            }
            Backend::Sqlite => {
                let mut conn = sqlite_conn(&self.sqlite_path()).await;
                sqlx::query_scalar(sql).fetch_one(&mut conn).await
            }
        }
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
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
            Backend::Mysql => {
                let mut conn = sqlx::MySqlConnection::connect(self.url())
                    .await
                    .expect("connect");
                let mut next = 1u64;
                while left > 0 {
                    let chunk = left.min(100_000);
                    sqlx::query(&format!(
                        "INSERT INTO tasktable_tasks (kind, queue, state, payload, priority, run_at, \
                         max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, \
                         backoff_jitter, created_at, updated_at) \
                         SELECT ?, 'default', 'pending', JSON_OBJECT('i', g.i), 0, UTC_TIMESTAMP(6), \
                         5, 5000, 2.0, 3600000, 0.1, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6) FROM {} g",
                        mysql_numbers(next, next + chunk - 1)
                    ))
                    .bind(kind)
                    .execute(&mut conn)
                    .await
                    .expect("bulk fill");
                    left -= chunk;
                    next += chunk;
                }
                conn.execute("ANALYZE TABLE tasktable_tasks")
                    .await
                    .expect("analyze");
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
    /// load (the test server runs with `autovacuum = off`). InnoDB keeps its statistics
    /// up to date by itself after large changes; `ANALYZE TABLE` makes it happen now.
    pub async fn analyze(&self) {
        match self.backend {
            Backend::Postgres | Backend::Sqlite => self.exec(&["ANALYZE"]).await,
            Backend::Mysql => {
                self.exec(&["ANALYZE TABLE tasktable_tasks, tasktable_attempts"])
                    .await
            }
        }
    }

    /// Inserts `n` finished tasks (one in ten failed, the rest succeeded) and one attempt
    /// row each, spread evenly over the `span` before now, in 3 queues and 4 kinds, with
    /// one statement per 100,000 rows per table. The columns are those the stores' finish
    /// writes: the task row ends `succeeded` or `failed` with `started_at`/`finished_at`,
    /// and the attempt row is copied from it (queue, kind, due time = `run_at`, the state
    /// it left the task in). Queue wait is 0-1 s and run time 0-3 s, so both histograms
    /// fill several buckets. The planner's statistics are refreshed at the end.
    pub async fn finished_fill(&self, n: u64, span: Duration) {
        let end = chrono::Utc::now();
        let step_us = (span.as_micros() as u64 / n.max(1)).max(1) as i64;
        let n_i = n as i64;
        let mut done = 0u64;
        let mut last_id = 0i64;
        while done < n {
            let chunk = (n - done).min(100_000);
            let (lo, hi) = ((done + 1) as i64, (done + chunk) as i64);
            match self.backend {
                Backend::Postgres => {
                    let mut conn = sqlx::PgConnection::connect(self.url())
                        .await
                        .expect("connect");
                    sqlx::query(&format!(
                        "INSERT INTO {TASK_COLUMNS} \
                         SELECT {kind}, {queue}, {state}, jsonb_build_object('i', g), NULL::jsonb, 0, \
                             fin - (({run}) + ({wait})) * interval '1 millisecond', 1, \
                             CASE WHEN {failed} THEN 1 ELSE 5 END, 5000, 2.0, 3600000, 0.1, 1, \
                             'bench-worker', 'bench-host', \
                             CASE WHEN {failed} THEN 'bench: failed' END, \
                             fin - (({run}) + ({wait})) * interval '1 millisecond', fin, \
                             fin - ({run}) * interval '1 millisecond', fin \
                         FROM (SELECT g, $1::timestamptz - ($2 - g) * $3 * interval '1 microsecond' \
                               AS fin FROM generate_series($4::bigint, $5::bigint) g) s \
                         ORDER BY g",
                        kind = FILL_KIND.replace("{div}", "/"),
                        queue = FILL_QUEUE,
                        state = FILL_STATE,
                        failed = FILL_FAILED,
                        run = FILL_RUN_MS,
                        wait = FILL_WAIT_MS,
                    ))
                    .bind(end)
                    .bind(n_i)
                    .bind(step_us)
                    .bind(lo)
                    .bind(hi)
                    .execute(&mut conn)
                    .await
                    .expect("fill tasks");
                    sqlx::query(&format!("{ATTEMPTS_FROM_TASKS} WHERE id > $1"))
                        .bind(last_id)
                        .execute(&mut conn)
                        .await
                        .expect("fill attempts");
                    last_id = sqlx::query_scalar("SELECT max(id) FROM tasktable_tasks")
                        .fetch_one(&mut conn)
                        .await
                        .expect("max id");
                }
                Backend::Mysql => {
                    let mut conn = sqlx::MySqlConnection::connect(self.url())
                        .await
                        .expect("connect");
                    sqlx::query(&format!(
                        "INSERT INTO {TASK_COLUMNS} \
                         SELECT {kind}, {queue}, {state}, JSON_OBJECT('i', g), NULL, 0, \
                             fin - INTERVAL ((({run}) + ({wait})) * 1000) MICROSECOND, 1, \
                             CASE WHEN {failed} THEN 1 ELSE 5 END, 5000, 2.0, 3600000, 0.1, 1, \
                             'bench-worker', 'bench-host', \
                             CASE WHEN {failed} THEN 'bench: failed' END, \
                             fin - INTERVAL ((({run}) + ({wait})) * 1000) MICROSECOND, fin, \
                             fin - INTERVAL (({run}) * 1000) MICROSECOND, fin \
                         FROM (SELECT n.i AS g, \
                               CAST(? AS DATETIME(6)) - INTERVAL ((? - n.i) * ?) MICROSECOND AS fin \
                               FROM {numbers} n) s \
                         ORDER BY g",
                        kind = FILL_KIND.replace("{div}", "DIV"),
                        queue = FILL_QUEUE,
                        state = FILL_STATE,
                        failed = FILL_FAILED,
                        run = FILL_RUN_MS,
                        wait = FILL_WAIT_MS,
                        numbers = mysql_numbers(lo as u64, hi as u64),
                    ))
                    .bind(end.naive_utc())
                    .bind(n_i)
                    .bind(step_us)
                    .execute(&mut conn)
                    .await
                    .expect("fill tasks");
                    sqlx::query(&format!("{ATTEMPTS_FROM_TASKS} WHERE id > ?"))
                        .bind(last_id)
                        .execute(&mut conn)
                        .await
                        .expect("fill attempts");
                    last_id = sqlx::query_scalar("SELECT MAX(id) FROM tasktable_tasks")
                        .fetch_one(&mut conn)
                        .await
                        .expect("max id");
                }
                Backend::Sqlite => {
                    let mut conn = sqlite_conn(&self.sqlite_path()).await;
                    // Times are the store's fixed-format UTC text with milliseconds.
                    let at = |ms: &str| {
                        format!("strftime('%Y-%m-%dT%H:%M:%fZ', ({ms}) / 1000.0, 'unixepoch')")
                    };
                    let due = at(&format!("fin_ms - ({FILL_RUN_MS}) - ({FILL_WAIT_MS})"));
                    sqlx::query(&format!(
                        "WITH RECURSIVE n(g) AS (SELECT ?4 UNION ALL SELECT g + 1 FROM n WHERE g < ?5) \
                         INSERT INTO {TASK_COLUMNS} \
                         SELECT {kind}, {queue}, {state}, json_object('i', g), NULL, 0, {due}, 1, \
                             CASE WHEN {failed} THEN 1 ELSE 5 END, 5000, 2.0, 3600000, 0.1, 1, \
                             'bench-worker', 'bench-host', \
                             CASE WHEN {failed} THEN 'bench: failed' END, \
                             {due}, {fin}, {started}, {fin} \
                         FROM (SELECT g, ?1 - (?2 - g) * ?3 / 1000 AS fin_ms FROM n) s \
                         ORDER BY g",
                        kind = FILL_KIND.replace("{div}", "/"),
                        queue = FILL_QUEUE,
                        state = FILL_STATE,
                        failed = FILL_FAILED,
                        fin = at("fin_ms"),
                        started = at(&format!("fin_ms - ({FILL_RUN_MS})")),
                    ))
                    .bind(end.timestamp_millis())
                    .bind(n_i)
                    .bind(step_us)
                    .bind(lo)
                    .bind(hi)
                    .execute(&mut conn)
                    .await
                    .expect("fill tasks");
                    sqlx::query(&format!("{ATTEMPTS_FROM_TASKS} WHERE id > ?"))
                        .bind(last_id)
                        .execute(&mut conn)
                        .await
                        .expect("fill attempts");
                    last_id = sqlx::query_scalar("SELECT max(id) FROM tasktable_tasks")
                        .fetch_one(&mut conn)
                        .await
                        .expect("max id");
                }
            }
            done += chunk;
        }
        match self.backend {
            // What autovacuum would do after such a load: the visibility map (index-only
            // scans) and the planner's statistics.
            Backend::Postgres => {
                self.exec(&["VACUUM ANALYZE tasktable_tasks, tasktable_attempts"])
                    .await
            }
            Backend::Mysql | Backend::Sqlite => self.analyze().await,
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
            Backend::Sqlite | Backend::Mysql => None,
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
            Backend::Mysql => {
                use sqlx::Row;
                let mut conn = sqlx::MySqlConnection::connect(self.url())
                    .await
                    .expect("connect");
                // The store's claim (queries/task_claim_select.sql) with one kind.
                let rows = sqlx::query(
                    "EXPLAIN SELECT id FROM tasktable_tasks FORCE INDEX (tasktable_tasks_claim) \
                     WHERE state = 'pending' AND queue = 'default' AND run_at <= UTC_TIMESTAMP(6) \
                     AND kind IN ('noop') ORDER BY priority DESC, run_at, id LIMIT 50 \
                     FOR UPDATE SKIP LOCKED",
                )
                .fetch_all(&mut conn)
                .await
                .unwrap_or_default();
                let field = |r: &sqlx::mysql::MySqlRow, name: &str| {
                    r.try_get_unchecked::<Option<String>, _>(name)
                        .ok()
                        .flatten()
                        .unwrap_or_default()
                };
                let rows: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        format!(
                            "type {}, key {}, rows {}, {}",
                            field(r, "type"),
                            field(r, "key"),
                            r.try_get::<Option<u64>, _>("rows")
                                .ok()
                                .flatten()
                                .map_or_else(|| field(r, "rows"), |n| n.to_string()),
                            field(r, "Extra")
                        )
                    })
                    .collect();
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

/// The task columns the fills write, in the order of their `SELECT`s.
const TASK_COLUMNS: &str = "tasktable_tasks (kind, queue, state, payload, result, priority, \
    run_at, attempt, max_attempts, backoff_initial_ms, backoff_multiplier, backoff_max_ms, \
    backoff_jitter, lease_token, worker_id, worker_host, last_error, created_at, updated_at, \
    started_at, finished_at)";
/// The stats fill's shape, as SQL over the row number `g` (`{div}`: integer division).
const FILL_QUEUE: &str = "CASE g % 3 WHEN 0 THEN 'default' WHEN 1 THEN 'emails' ELSE 'reports' END";
const FILL_KIND: &str =
    "CASE (g {div} 3) % 4 WHEN 0 THEN 'noop' WHEN 1 THEN 'send' WHEN 2 THEN 'render' ELSE 'sync' END";
const FILL_FAILED: &str = "g % 10 = 0";
const FILL_STATE: &str = "CASE WHEN g % 10 = 0 THEN 'failed' ELSE 'succeeded' END";
const FILL_RUN_MS: &str = "(g * 7919) % 3000";
const FILL_WAIT_MS: &str = "(g * 104729) % 1000";
/// The attempt rows of finished tasks, as every store's finish writes them: copied from
/// the task row it left (outcome and `task_state` its end state, `due_at` its `run_at`).
const ATTEMPTS_FROM_TASKS: &str = "INSERT INTO tasktable_attempts (task_id, attempt, \
    worker_id, worker_host, started_at, finished_at, outcome, error, queue, kind, due_at, \
    task_state) \
    SELECT id, attempt, worker_id, worker_host, started_at, finished_at, state, last_error, \
    queue, kind, run_at, state FROM tasktable_tasks";

/// The integers `lo..=hi` as a MySQL derived table with column `i`: a cross join of
/// digit tables, because MySQL and MariaDB stop recursive CTEs at 1,000 rows by default
/// (`cte_max_recursion_depth`, `max_recursive_iterations`).
pub fn mysql_numbers(lo: u64, hi: u64) -> String {
    let digits = "(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 \
                  UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 \
                  UNION ALL SELECT 8 UNION ALL SELECT 9)";
    let count = hi + 1 - lo;
    let mut places = 1;
    while 10u64.pow(places) < count {
        places += 1;
    }
    let tables: Vec<String> = (0..places).map(|p| format!("{digits} d{p}")).collect();
    let sum: Vec<String> = (0..places)
        .map(|p| format!("{} * d{p}.d", 10u64.pow(p)))
        .collect();
    format!(
        "(SELECT i FROM (SELECT {lo} + {} AS i FROM {}) x WHERE i <= {hi})",
        sum.join(" + "),
        tables.join(", ")
    )
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

/// The commit ceiling of the PostgreSQL or MySQL database at `url`, measured as
/// [`BenchDb::ceiling`] measures it (a table of its own in that database).
pub async fn ceiling_of(url: &str, secs: f64) -> f64 {
    if url.starts_with("mysql:") || url.starts_with("mariadb:") {
        mysql_ceiling(url, secs).await
    } else {
        pg_ceiling(url, secs).await
    }
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

async fn mysql_ceiling(url: &str, secs: f64) -> f64 {
    const CONNECTIONS: i32 = 8;
    let mut setup = sqlx::MySqlConnection::connect(url).await.expect("connect");
    setup
        .execute(
            "CREATE TABLE IF NOT EXISTS tasktable_bench_ceiling (id INT PRIMARY KEY, \
             n BIGINT NOT NULL) ENGINE = InnoDB",
        )
        .await
        .expect("ceiling table");
    setup
        .execute(
            "INSERT IGNORE INTO tasktable_bench_ceiling VALUES \
             (1, 0), (2, 0), (3, 0), (4, 0), (5, 0), (6, 0), (7, 0), (8, 0)",
        )
        .await
        .expect("ceiling rows");
    let until = Instant::now() + Duration::from_secs_f64(secs);
    let started = Instant::now();
    let mut joins = Vec::new();
    for id in 1..=CONNECTIONS {
        let url = url.to_owned();
        joins.push(tokio::spawn(async move {
            // Autocommit (the session default): each UPDATE is a transaction of its own.
            let mut conn = sqlx::MySqlConnection::connect(&url).await.expect("connect");
            let mut n = 0u64;
            while Instant::now() < until {
                sqlx::query("UPDATE tasktable_bench_ceiling SET n = n + 1 WHERE id = ?")
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
