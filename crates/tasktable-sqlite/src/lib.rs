//! tasktable's embedded store: one SQLite file in WAL mode.
//!
//! Owns: the SQLite schema and its migrations, the hot path's SQL (`queries/`: submit,
//! claim, renew, checkpoint, finish, rescue; the same files in every backend, see
//! `tasktable_sql::hot`), and the transactions in which the shared SQL layer
//! (`tasktable-sql`) runs everything else on SQLite.
//!
//! Must not know: workers, handlers, HTTP. It applies the plans the runtime hands it.
//!
//! SQLite has one writer at a time. Inside one process every write goes through a single
//! connection, so writers queue in Rust instead of spinning on the file lock; every write
//! transaction starts with `BEGIN IMMEDIATE`, so a writer in another process waits for
//! the lock (up to `busy_timeout`) instead of failing when it upgrades a read. Reads use a
//! separate pool and never wait for writers (WAL). Submits, claims, renewals, checkpoints
//! and finishes that wait at the same moment share one transaction and one commit (see
//! `group`).

#![warn(missing_docs)]

mod group;
mod lease;
mod sql;
mod submit;
pub mod time;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use futures::future::BoxFuture;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{Sqlite, SqliteConnection};
use std::str::FromStr;
use std::time::Duration;
use tasktable_core::{NewTask, Task};
use tasktable_sql::{Backend, Commit, Connect, SqlStore};
use tasktable_sqlx::Tx;
use tasktable_store::*;
use tokio::sync::{broadcast, mpsc};

/// The connection [`SqliteStore::submit_in`](SqlStore::submit_in) inserts on, inside the
/// caller's transaction.
pub use sqlx::sqlite::SqliteConnection as Connection;

/// How to open the database.
#[derive(Debug, Clone)]
pub struct SqliteConfig {
    /// `sqlite://path/to/file.db` or a plain path.
    pub url: String,
    /// Connections for reads (writes always use one); 4 by default, at least 1.
    pub read_connections: u32,
    /// How long a writer waits for another process's write lock; 10 s by default.
    pub busy_timeout: Duration,
    /// `true` (the default) syncs the WAL on every commit, so an acknowledged submit
    /// survives a power cut; `false` trades that for speed (`synchronous = NORMAL`).
    pub sync_every_commit: bool,
    /// Largest JSON document a call may carry (a payload, a result, a checkpoint,
    /// progress), in bytes; [`DEFAULT_MAX_PAYLOAD_BYTES`] (1 MiB) by default.
    pub max_payload_bytes: usize,
    /// Most rows one transaction of a bulk operator change holds the writer for
    /// (`tasktable_store::bulk`); 500 by default.
    pub bulk_chunk_rows: u32,
}

impl SqliteConfig {
    /// The defaults for the database at `url`, to adjust before
    /// [`SqlStore::connect`]; the file is created if missing.
    pub fn new(url: impl Into<String>) -> Self {
        SqliteConfig {
            url: url.into(),
            read_connections: 4,
            busy_timeout: Duration::from_secs(10),
            sync_every_commit: true,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            bulk_chunk_rows: DEFAULT_BULK_CHUNK_ROWS,
        }
    }
}

/// The SQLite [`Store`]: [`SqlStore`] on [`SqliteBackend`].
pub type SqliteStore = SqlStore<SqliteBackend>;

/// The writer's pool (one connection) and the readers' pool, for callers that want to
/// look at the database next to tasktable ([`SqlStore::pool`]).
#[derive(Debug, Clone)]
pub struct SqlitePools {
    /// The one connection every write of the store goes through: a transaction of your
    /// own on it holds up the store's writes until it ends. Open one with
    /// [`Tx::begin`](tasktable_sqlx::Tx::begin) and `Some("BEGIN IMMEDIATE")`, so that
    /// it cannot fail half way when it upgrades to a writer.
    pub writer: SqlitePool,
    /// The readers (`read_connections` of them), which never wait for writers (WAL).
    pub reader: SqlitePool,
}

/// What is SQLite's own in [`SqliteStore`]: its writer, its readers and its hot path.
#[derive(Debug, Clone)]
pub struct SqliteBackend {
    pools: SqlitePools,
    group: mpsc::UnboundedSender<group::Job>,
    wake: broadcast::Sender<Wake>,
    /// What calls may carry; every call's parameters are checked against it first.
    limits: Limits,
    bulk_chunk_rows: u32,
}

pub(crate) fn db(e: sqlx::Error) -> StoreError {
    tasktable_sqlx::store_error(e)
}

impl SqliteBackend {
    pub(crate) async fn begin_write(&self) -> StoreResult<Tx<Sqlite>> {
        Tx::begin(&self.pools.writer, Some("BEGIN IMMEDIATE"))
            .await
            .map_err(db)
    }

    /// Runs `write` in the next group transaction (see `group`); its result comes back once
    /// that transaction has committed.
    pub(crate) async fn write<T, F>(&self, write: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        let stopped = || StoreError::Database("the SQLite writer has stopped".into());
        let (job, answer) = group::Job::new(write);
        self.group.send(job).map_err(|_| stopped())?;
        answer.await.map_err(|_| stopped())?
    }

    pub(crate) fn wake(&self, queue: &str) {
        // No receivers is fine: nobody is idle in this process.
        let _ = self.wake.send(Wake {
            queue: queue.to_owned(),
        });
    }
}

/// The database's clock, read inside the transaction that uses it.
pub(crate) async fn db_now(conn: &mut SqliteConnection) -> StoreResult<DateTime<Utc>> {
    let s: String = sqlx::query_scalar("SELECT strftime(?, 'now')")
        .bind(time::SQL_FORMAT)
        .fetch_one(conn)
        .await
        .map_err(db)?;
    time::from_text(&s)
}

pub(crate) async fn now_or_db(
    conn: &mut SqliteConnection,
    now: Option<DateTime<Utc>>,
) -> StoreResult<DateTime<Utc>> {
    match now {
        Some(t) => Ok(time::truncate(t)),
        None => db_now(conn).await,
    }
}

#[async_trait]
impl Backend for SqliteBackend {
    const NAME: &'static str = "sqlite";
    type Config = SqliteConfig;
    type Pool = SqlitePools;
    type Conn = SqliteConnection;

    async fn connect(config: SqliteConfig) -> StoreResult<Self> {
        let url = if config.url.starts_with("sqlite:") {
            config.url.clone()
        } else {
            format!("sqlite://{}", config.url)
        };
        let options = SqliteConnectOptions::from_str(&url)
            .map_err(|e| StoreError::InvalidInput(format!("bad SQLite URL {url:?}: {e}")))?
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(if config.sync_every_commit {
                SqliteSynchronous::Full
            } else {
                SqliteSynchronous::Normal
            })
            .busy_timeout(config.busy_timeout)
            .foreign_keys(true);
        let writer = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            .connect_with(options.clone())
            .await
            .map_err(db)?;
        let reader = SqlitePoolOptions::new()
            .max_connections(config.read_connections.max(1))
            .connect_with(options.read_only(false))
            .await
            .map_err(db)?;
        let (wake, _) = broadcast::channel(1024);
        Ok(SqliteBackend {
            group: group::start(writer.clone()),
            pools: SqlitePools { writer, reader },
            wake,
            limits: Limits {
                max_payload_bytes: config.max_payload_bytes,
            },
            bulk_chunk_rows: config.bulk_chunk_rows,
        })
    }

    fn config(url: &str) -> SqliteConfig {
        SqliteConfig::new(url)
    }

    /// Start that transaction with `BEGIN IMMEDIATE` (`pool.begin_with("BEGIN
    /// IMMEDIATE")`) so it cannot fail to upgrade to a writer half-way. Idle workers find
    /// these tasks on their next poll.
    async fn submit_in(
        conn: &mut SqliteConnection,
        tasks: &Checked<Vec<NewTask>>,
    ) -> StoreResult<Vec<Submitted>> {
        submit::insert(conn, tasks, None).await
    }

    fn pool(&self) -> &SqlitePools {
        &self.pools
    }

    /// Closes both pools.
    async fn close(&self) {
        self.pools.writer.close().await;
        self.pools.reader.close().await;
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    fn bulk_chunk_rows(&self) -> u32 {
        self.bulk_chunk_rows
    }

    /// A full group of writes (which share one commit) and a read on every reader.
    fn capacity(&self) -> usize {
        group::MAX_GROUP + self.pools.reader.options().get_max_connections() as usize
    }

    async fn migrate(&self) -> StoreResult<()> {
        // One write transaction for all of it: a concurrent migrator waits on the lock and
        // then finds the work done.
        let mut tx = Connect::write(self).await?;
        tasktable_sql::migrate::apply(&mut tx, &tasktable_sql::backend_migrations!()).await?;
        tx.commit().await
    }

    async fn db_now(&self) -> StoreResult<DateTime<Utc>> {
        let mut conn = self.pools.reader.acquire().await.map_err(db)?;
        db_now(&mut conn).await
    }

    async fn submit(&self, params: Checked<SubmitParams>) -> StoreResult<Vec<Submitted>> {
        let SubmitParams { tasks, now } = params.into_inner();
        let tasks = std::sync::Arc::new(tasks);
        let out = {
            let tasks = tasks.clone();
            self.write(move |conn| Box::pin(async move { submit::insert(conn, &tasks, now).await }))
                .await?
        };
        let mut queues: Vec<&str> = tasks.iter().map(|t| t.queue.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        for q in queues {
            self.wake(q);
        }
        Ok(out)
    }

    async fn insert_tasks(
        &self,
        tx: &mut Self::Write,
        tasks: &Checked<Vec<NewTask>>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Submitted>> {
        submit::insert(&mut tx.0, tasks, Some(now)).await
    }

    async fn claim(&self, params: &ClaimParams) -> StoreResult<Vec<Task>> {
        lease::claim(self, params).await
    }

    async fn renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        lease::renew(self, params).await
    }

    async fn checkpoint(&self, params: Checked<CheckpointParams>) -> StoreResult<LeaseStatus> {
        lease::checkpoint(self, params.into_inner()).await
    }

    async fn finish(&self, params: Checked<FinishParams>) -> StoreResult<Vec<bool>> {
        lease::finish(self, params.into_inner()).await
    }

    async fn list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>> {
        let mut conn = self.pools.reader.acquire().await.map_err(db)?;
        lease::list_expired(&mut conn, params).await
    }

    /// Wakes this process's workers. A change's transaction is its own: the writer goes
    /// back to the pool between the chunks of a bulk change, and the pool hands it out
    /// first come, first served, so the claims and finishes that queued behind one chunk
    /// run before the next.
    fn changed(&self, wake: &[String]) {
        for queue in wake {
            self.wake(queue);
        }
    }

    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>> {
        Ok(self.wake.subscribe())
    }
}
