//! The run's own tables beside tasktable's. `chaos_effects` holds the side effects of
//! in-process chaos handlers, written the way a handler should write an effect it must
//! not repeat: in one statement that locks the task's row and inserts only while the row
//! still runs under the handler's fencing token. `chaos_heartbeat` is one row the
//! sampler updates to learn whether the database takes writes at all.
//!
//! Every effect row also records the token and state the row had at that moment (its
//! witness), so a late write that should have been refused shows up whatever the
//! handler believed. With `fenced: false` the handler skips the token test, which is how
//! a run shows that the stale-write check fires.

use sqlx::mysql::MySqlPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::sqlite::{SqliteConnectOptions, SqlitePoolOptions};
use sqlx::{MySqlPool, PgPool, SqlitePool};
use std::str::FromStr;
use std::time::Duration;

/// One row of `chaos_effects`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EffectRow {
    pub task: i64,
    pub token: i64,
    pub worker: String,
    /// The task row's `lease_token` and `state` when the effect was written.
    pub seen_token: Option<i64>,
    pub seen_state: Option<String>,
}

#[derive(Debug, Clone)]
pub enum Effects {
    Sqlite(SqlitePool),
    Postgres(PgPool),
    Mysql(MySqlPool),
}

const CREATE_SQLITE: &str = "CREATE TABLE IF NOT EXISTS chaos_effects (
    id INTEGER PRIMARY KEY AUTOINCREMENT, task_id INTEGER NOT NULL, token INTEGER NOT NULL,
    worker_id TEXT NOT NULL, seen_token INTEGER, seen_state TEXT)";
const CREATE_POSTGRES: &str = "CREATE TABLE IF NOT EXISTS chaos_effects (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY, task_id BIGINT NOT NULL,
    token BIGINT NOT NULL, worker_id TEXT NOT NULL, seen_token BIGINT, seen_state TEXT)";
const CREATE_MYSQL: &str = "CREATE TABLE IF NOT EXISTS chaos_effects (
    id BIGINT AUTO_INCREMENT PRIMARY KEY, task_id BIGINT NOT NULL, token BIGINT NOT NULL,
    worker_id VARCHAR(255) NOT NULL, seen_token BIGINT NULL, seen_state VARCHAR(32) NULL
    ) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4";

const HEARTBEAT: [&str; 2] = [
    "CREATE TABLE IF NOT EXISTS chaos_heartbeat (id INTEGER PRIMARY KEY, beats BIGINT NOT NULL)",
    "INSERT INTO chaos_heartbeat (id, beats) VALUES (1, 0)",
];
const BEAT: &str = "UPDATE chaos_heartbeat SET beats = beats + 1 WHERE id = 1";

const READ: &str =
    "SELECT task_id, token, worker_id, seen_token, seen_state FROM chaos_effects ORDER BY id";

/// Inserts the effect with its witness, in one statement that reads the task's row as it
/// is now and locks it: only while the row runs under the effect's token, unless the
/// fourth parameter (unfenced) is true. One statement, so a worker frozen in the middle of
/// it holds no lock on a server: the server finishes it alone.
const RECORD: &str = "INSERT INTO chaos_effects (task_id, token, worker_id, seen_token, seen_state)
    SELECT id, ?, ?, lease_token, state FROM tasktable_tasks
    WHERE id = ? AND (? OR (lease_token = ? AND state = 'running'))";
const RECORD_MYSQL: &str =
    "INSERT INTO chaos_effects (task_id, token, worker_id, seen_token, seen_state)
    SELECT id, ?, ?, lease_token, state FROM tasktable_tasks
    WHERE id = ? AND (? OR (lease_token = ? AND state = 'running')) FOR UPDATE";
const RECORD_POSTGRES: &str =
    "INSERT INTO chaos_effects (task_id, token, worker_id, seen_token, seen_state)
    SELECT id, $1, $2, lease_token, state FROM tasktable_tasks
    WHERE id = $3 AND ($4 OR (lease_token = $5 AND state = 'running')) FOR UPDATE";

/// Binds the parameters of [`RECORD`] (and its dialects) in order.
macro_rules! record {
    ($sql:expr, $task:expr, $token:expr, $worker:expr, $fenced:expr) => {
        sqlx::query($sql)
            .bind($token)
            .bind($worker)
            .bind($task)
            .bind(!$fenced)
            .bind($token)
    };
}

impl Effects {
    /// Connects; on SQLite a write waits up to `busy` for the file's write lock.
    pub async fn connect(url: &str, busy: Duration) -> Result<Effects, sqlx::Error> {
        let timeout = Duration::from_secs(5);
        if url.starts_with("postgres") {
            let pool = PgPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(timeout)
                .connect(url)
                .await?;
            Ok(Effects::Postgres(pool))
        } else if url.starts_with("mysql") {
            let pool = MySqlPoolOptions::new()
                .max_connections(4)
                .acquire_timeout(timeout)
                .connect(url)
                .await?;
            Ok(Effects::Mysql(pool))
        } else {
            let options = SqliteConnectOptions::from_str(url)?.busy_timeout(busy);
            let pool = SqlitePoolOptions::new()
                .max_connections(2)
                .acquire_timeout(Duration::from_secs(15))
                .connect_with(options)
                .await?;
            Ok(Effects::Sqlite(pool))
        }
    }

    pub async fn create_tables(&self) -> Result<(), sqlx::Error> {
        let create = match self {
            Effects::Sqlite(_) => CREATE_SQLITE,
            Effects::Postgres(_) => CREATE_POSTGRES,
            Effects::Mysql(_) => CREATE_MYSQL,
        };
        for sql in [create, HEARTBEAT[0], HEARTBEAT[1]] {
            self.execute(sql).await?;
        }
        Ok(())
    }

    /// One write to the heartbeat row: `Ok` when the database took it.
    pub async fn beat(&self) -> Result<(), sqlx::Error> {
        self.execute(BEAT).await
    }

    async fn execute(&self, sql: &str) -> Result<(), sqlx::Error> {
        match self {
            Effects::Sqlite(p) => sqlx::query(sql).execute(p).await.map(drop),
            Effects::Postgres(p) => sqlx::query(sql).execute(p).await.map(drop),
            Effects::Mysql(p) => sqlx::query(sql).execute(p).await.map(drop),
        }
    }

    /// Records the effect of the attempt under `token`; `Ok(false)` when `fenced` and the
    /// task no longer runs under that token (nothing was written).
    pub async fn record(
        &self,
        task: i64,
        token: i64,
        worker: &str,
        fenced: bool,
    ) -> Result<bool, sqlx::Error> {
        let inserted = match self {
            // BEGIN IMMEDIATE takes the write lock before the row is read, so the row read
            // is the row the insert commits against (SQLite has no FOR UPDATE).
            Effects::Sqlite(p) => {
                let mut tx = p.begin_with("BEGIN IMMEDIATE").await?;
                let done = record!(RECORD, task, token, worker, fenced)
                    .execute(&mut *tx)
                    .await?;
                tx.commit().await?;
                done.rows_affected()
            }
            Effects::Postgres(p) => record!(RECORD_POSTGRES, task, token, worker, fenced)
                .execute(p)
                .await?
                .rows_affected(),
            Effects::Mysql(p) => record!(RECORD_MYSQL, task, token, worker, fenced)
                .execute(p)
                .await?
                .rows_affected(),
        };
        Ok(inserted == 1)
    }

    pub async fn read_all(&self) -> Result<Vec<EffectRow>, sqlx::Error> {
        type Raw = (i64, i64, String, Option<i64>, Option<String>);
        let rows: Vec<Raw> = match self {
            Effects::Sqlite(p) => sqlx::query_as(READ).fetch_all(p).await?,
            Effects::Postgres(p) => sqlx::query_as(READ).fetch_all(p).await?,
            Effects::Mysql(p) => sqlx::query_as(READ).fetch_all(p).await?,
        };
        Ok(rows
            .into_iter()
            .map(|(task, token, worker, seen_token, seen_state)| EffectRow {
                task,
                token,
                worker,
                seen_token,
                seen_state,
            })
            .collect())
    }
}
