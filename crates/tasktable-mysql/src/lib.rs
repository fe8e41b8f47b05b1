//! tasktable's MySQL and MariaDB store, for many workers in many processes on one
//! database. Needs MySQL 8.0.17+ or MariaDB 10.6+, for `SKIP LOCKED` and for a binary
//! collation without trailing-space padding.
//!
//! Owns: the MySQL schema and its migrations, the hot path's SQL (`queries/`, the same
//! files in every backend, see `tasktable_sql::hot`), the transactions in which the shared
//! SQL layer (`tasktable-sql`) runs everything else on InnoDB, the retry of transactions
//! InnoDB aborts under contention (deadlocks, lock wait timeouts), and the in-process
//! wake-ups.
//!
//! Must not know: workers, handlers, HTTP, the retry rules of tasks (it retries only its
//! own aborted transactions). It applies the plans the runtime hands it, with the same
//! semantics as the SQLite and PostgreSQL stores (the conformance suite checks).
//!
//! Concurrency: a claim selects rows `FOR UPDATE SKIP LOCKED` through the claim index and
//! then updates exactly those rows, in one transaction, because MySQL has no
//! `UPDATE ... RETURNING`; workers never wait for each other. Every worker write is
//! fenced by `(id, lease_token, state = 'running')`. Every session runs READ COMMITTED in
//! UTC, and every time decision uses the database's clock (`UTC_TIMESTAMP(6)`) unless the
//! caller pins one. InnoDB resolves a deadlock by aborting one transaction (error 1213)
//! and gives up on a lock after `innodb_lock_wait_timeout` (error 1205); the store runs
//! such a transaction again after a short jittered pause, so callers never see either.
//!
//! Cancellation: sqlx's MySQL driver can lose its place in a reply when a statement is
//! dropped half way through a transaction, so a `MySqlStore`'s calls must run to their
//! end: use it through `tasktable_store::Shielded` (`tasktable::connect`, the worker, the
//! server and the client apply it; wrap a store you call directly with
//! `Shielded::wrap`).
//!
//! Wake-ups: MySQL has no LISTEN/NOTIFY. As on SQLite, writes that make work due wake
//! the idle workers of this process at once; workers in other processes find the work on
//! their next poll (`poll_interval`).

#![warn(missing_docs)]

mod clock;
mod finish;
mod lease;
mod migrate;
mod retry;
mod sql;
mod submit;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::mysql::{MySqlConnectOptions, MySqlPool, MySqlPoolOptions};
use sqlx::{Executor, MySqlConnection};
use std::future::Future;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{FinishAction, NewTask, Task};
use tasktable_sql::{Backend, Commit, Connect, SqlStore};
use tasktable_store::*;
use tokio::sync::broadcast;

pub use migrate::migrations;
/// The connection [`MySqlStore::submit_in`](SqlStore::submit_in) inserts on, inside the
/// caller's transaction.
pub use sqlx::mysql::MySqlConnection as Connection;
/// A write transaction that never goes back to the pool open (see [`MySqlBackend::Pool`](Backend::Pool)).
pub use tasktable_sqlx::Tx;

/// How to connect to the database.
#[derive(Debug, Clone)]
pub struct MySqlConfig {
    /// `mysql://user:password@host:port/database` (`mariadb://` works too).
    pub url: String,
    /// Pool size; 10 by default, at least 1.
    pub max_connections: u32,
    /// Largest JSON document a call may carry (a payload, a result, a checkpoint,
    /// progress), in bytes; [`DEFAULT_MAX_PAYLOAD_BYTES`] (1 MiB) by default. It must
    /// fit in the server's `max_allowed_packet` with 64 KiB to spare, or the connect is
    /// refused ([`StoreError::InvalidInput`]).
    pub max_payload_bytes: usize,
    /// `innodb_lock_wait_timeout` for the store's sessions, in whole seconds (at least 1);
    /// `None` keeps the server's (50 s unless configured). A write that waits longer is
    /// rolled back and run again.
    pub lock_wait_timeout: Option<Duration>,
    /// Most rows one transaction of a bulk operator change locks
    /// (`tasktable_store::bulk`); 500 by default, 1,000 at most.
    pub bulk_chunk_rows: u32,
    /// On MariaDB, how long one of the store's sessions may sit idle inside a
    /// transaction before the server ends the session (`idle_transaction_timeout`, whole
    /// seconds); 2 s by default, `None` keeps the server's (no limit). A store call sends
    /// its statements back to back, so such a session belongs to a process that froze
    /// mid-call (a stopped VM, a long pause), and its row locks would keep the rescuer
    /// from taking that process's tasks back until it woke. Ending it rolls the call
    /// back, which its fencing makes safe. MySQL has no such setting: there a frozen
    /// process holds its locks until it wakes or its connection dies.
    pub idle_transaction_timeout: Option<Duration>,
}

impl MySqlConfig {
    /// The defaults for the database at `url`, to adjust before [`SqlStore::connect`].
    pub fn new(url: impl Into<String>) -> Self {
        MySqlConfig {
            url: url.into(),
            max_connections: 10,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            lock_wait_timeout: None,
            bulk_chunk_rows: DEFAULT_BULK_CHUNK_ROWS,
            idle_transaction_timeout: Some(Duration::from_secs(2)),
        }
    }
}

/// The MySQL and MariaDB [`Store`]: [`SqlStore`] on [`MySqlBackend`]. Clones share the
/// pool, the wake channel and the retry counter.
pub type MySqlStore = SqlStore<MySqlBackend>;

/// What is MySQL's own in [`MySqlStore`]: its pool, its hot path, and the retry of
/// transactions InnoDB aborts.
#[derive(Debug, Clone)]
pub struct MySqlBackend {
    pool: MySqlPool,
    wake: broadcast::Sender<Wake>,
    /// What calls may carry; every call's parameters are checked against it first.
    limits: Limits,
    /// Largest value (a result, an error text) one statement may carry: the server's
    /// `max_allowed_packet` less room for the rest of the statement.
    max_value_bytes: usize,
    retries: Arc<AtomicU64>,
    bulk_chunk_rows: u32,
    /// The queues found with no targeted task waiting (`lease::UntargetedQueues`).
    untargeted: Arc<lease::UntargetedQueues>,
}

pub(crate) fn db(e: sqlx::Error) -> StoreError {
    tasktable_sqlx::store_error(e)
}

/// Room left in a packet for everything in a statement beside its one large value.
const PACKET_MARGIN: usize = 64 * 1024;

impl MySqlBackend {
    /// How many times this store (and its clones) ran a transaction again because InnoDB
    /// aborted it with a deadlock (1213) or a lock wait timeout (1205).
    pub fn deadlock_retries(&self) -> u64 {
        self.retries.load(Ordering::Relaxed)
    }

    /// Runs `op` (one whole transaction) again while InnoDB aborts it under contention.
    pub(crate) async fn retrying<T, F, Fut>(&self, what: &'static str, op: F) -> StoreResult<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = StoreResult<T>>,
    {
        retry::run(&self.retries, what, op).await
    }

    /// Wakes idle workers of this process. Duplicates are harmless: a woken worker polls.
    pub(crate) fn wake_local<'a>(&self, queues: impl IntoIterator<Item = &'a str>) {
        let mut queues: Vec<&str> = queues.into_iter().collect();
        queues.sort_unstable();
        queues.dedup();
        for q in queues {
            // No receivers is fine: nobody is idle in this process.
            let _ = self.wake.send(Wake {
                queue: q.to_owned(),
            });
        }
    }
}

/// Sets up every new session of the pool. sqlx already sets the time zone to UTC; it is
/// set again here because leases depend on it, though every query uses `UTC_TIMESTAMP`
/// and DATETIME columns, which no session zone shifts. READ COMMITTED lets the claim
/// unlock the rows it reads and skips, and lets each statement see rows committed since
/// the transaction began. Strict mode turns a value the column cannot hold into an error
/// instead of a silent truncation.
async fn prepare_session(conn: &mut MySqlConnection, session: Session) -> Result<(), sqlx::Error> {
    let mut set = String::from(
        "SET time_zone = '+00:00', \
         sql_mode = CONCAT_WS(',', NULLIF(@@SESSION.sql_mode, ''), 'STRICT_TRANS_TABLES')",
    );
    if let Some(secs) = session.lock_wait_secs {
        set.push_str(&format!(", innodb_lock_wait_timeout = {secs}"));
    }
    conn.execute(set.as_str()).await?;
    conn.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        .await?;
    if let Some(secs) = session.idle_transaction_secs {
        let set = format!("SET SESSION idle_transaction_timeout = {secs}");
        match conn.execute(set.as_str()).await {
            // MySQL has no such variable: 1193, unknown system variable.
            Err(sqlx::Error::Database(e))
                if e.try_downcast_ref::<sqlx::mysql::MySqlDatabaseError>()
                    .is_some_and(|e| e.number() == 1193) => {}
            other => {
                other?;
            }
        }
    }
    Ok(())
}

/// The settings every session of the pool gets.
#[derive(Debug, Clone, Copy)]
struct Session {
    lock_wait_secs: Option<u64>,
    idle_transaction_secs: Option<u64>,
}

#[async_trait]
impl Backend for MySqlBackend {
    const NAME: &'static str = "mysql";
    type Config = MySqlConfig;
    type Pool = MySqlPool;
    type Conn = MySqlConnection;

    /// Fails with [`StoreError::InvalidInput`] when `max_payload_bytes` does not fit in
    /// the server's `max_allowed_packet`: the server would drop the connection on such a
    /// submit instead of answering it.
    async fn connect(config: MySqlConfig) -> StoreResult<Self> {
        let options = MySqlConnectOptions::from_str(&config.url)
            .map_err(|e| StoreError::InvalidInput(format!("bad MySQL URL: {e}")))?;
        tasktable_sqlx::first_connection(&options, &config.url)
            .await
            .map_err(|e| StoreError::Database(e.into()))?;
        let session = Session {
            lock_wait_secs: config.lock_wait_timeout.map(|d| d.as_secs().max(1)),
            idle_transaction_secs: config.idle_transaction_timeout.map(|d| d.as_secs().max(1)),
        };
        let pool = MySqlPoolOptions::new()
            .max_connections(config.max_connections.max(1))
            .after_connect(move |conn, _| Box::pin(prepare_session(conn, session)))
            .after_release(|conn, _| {
                Box::pin(async move { Ok(tasktable_sqlx::released_clean(conn)) })
            })
            .connect_with(options)
            .await
            .map_err(db)?;
        let packet: u64 = sqlx::query_scalar("SELECT @@max_allowed_packet")
            .fetch_one(&pool)
            .await
            .map_err(db)?;
        let max_value_bytes = usize::try_from(packet)
            .unwrap_or(usize::MAX)
            .saturating_sub(PACKET_MARGIN);
        if config.max_payload_bytes > max_value_bytes {
            pool.close().await;
            return Err(StoreError::InvalidInput(format!(
                "max_payload_bytes is {} but the server's max_allowed_packet ({packet} bytes) \
                 leaves room for {max_value_bytes}; raise max_allowed_packet on the server \
                 or lower max_payload_bytes",
                config.max_payload_bytes
            )));
        }
        let (wake, _) = broadcast::channel(1024);
        Ok(MySqlBackend {
            pool,
            wake,
            limits: Limits {
                max_payload_bytes: config.max_payload_bytes,
            },
            max_value_bytes,
            retries: Arc::new(AtomicU64::new(0)),
            bulk_chunk_rows: config.bulk_chunk_rows,
            untargeted: Arc::default(),
        })
    }

    fn config(url: &str) -> MySqlConfig {
        MySqlConfig::new(url)
    }

    /// A `Transaction<MySql>` derefs to a `MySqlConnection`. Idle workers find these
    /// tasks on their next poll. Works under READ COMMITTED and REPEATABLE READ. A
    /// deadlock here aborts the caller's whole transaction, so it is returned (as
    /// [`StoreError::Database`]) for the caller to retry, not retried here.
    async fn submit_in(
        conn: &mut MySqlConnection,
        tasks: &Checked<Vec<NewTask>>,
    ) -> StoreResult<Vec<Submitted>> {
        Ok(submit::insert(conn, tasks, None).await?.submitted)
    }

    fn pool(&self) -> &MySqlPool {
        &self.pool
    }

    async fn close(&self) {
        self.pool.close().await;
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    /// At most [`Sql::MAX_IN_LIST`](tasktable_sql::Sql::MAX_IN_LIST): each chunk's id list is
    /// one statement.
    fn bulk_chunk_rows(&self) -> u32 {
        self.bulk_chunk_rows.min(sql::MAX_IN_LIST as u32)
    }

    /// The pool's connections.
    fn capacity(&self) -> usize {
        self.pool.options().get_max_connections() as usize
    }

    async fn migrate(&self) -> StoreResult<()> {
        migrate::run(&self.pool).await
    }

    async fn db_now(&self) -> StoreResult<DateTime<Utc>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        clock::db_now(&mut conn).await
    }

    async fn submit(&self, params: Checked<SubmitParams>) -> StoreResult<Vec<Submitted>> {
        let p = &params;
        let out = self
            .transact("submit", |mut tx| async move {
                let out = submit::insert(&mut tx.0, &p.tasks, p.now).await?;
                Ok((tx, out))
            })
            .await?;
        // Committed: claims look for targeted tasks again before anyone is woken.
        for t in p.tasks.iter().filter(|t| !t.target.is_any()) {
            self.untargeted.forget(&t.queue);
        }
        self.wake_local(out.due_queues.iter().map(String::as_str));
        Ok(out.submitted)
    }

    async fn insert_tasks(
        &self,
        tx: &mut Self::Write,
        tasks: &Checked<Vec<NewTask>>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Submitted>> {
        // Committed with the caller's transaction, after which `changed` forgets.
        Ok(submit::insert(&mut tx.0, tasks, Some(now)).await?.submitted)
    }

    async fn claim(&self, params: &ClaimParams) -> StoreResult<Vec<Task>> {
        if params.limit == 0 || params.kinds.is_empty() {
            return Ok(Vec::new());
        }
        let p = params;
        self.transact("claim", |mut tx| async move {
            let tasks = lease::claim(&mut tx.0, p, &self.untargeted).await?;
            Ok((tx, tasks))
        })
        .await
    }

    async fn renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        if params.leases.is_empty() {
            return Ok(Vec::new());
        }
        let p = &params;
        self.transact("renew", |mut tx| async move {
            let statuses = lease::renew(&mut tx.0, p).await?;
            Ok((tx, statuses))
        })
        .await
    }

    async fn checkpoint(&self, params: Checked<CheckpointParams>) -> StoreResult<LeaseStatus> {
        let p = &params;
        self.retrying("checkpoint", || async move {
            let mut conn = self.pool.acquire().await.map_err(db)?;
            lease::checkpoint(&mut conn, p).await
        })
        .await
    }

    async fn finish(&self, params: Checked<FinishParams>) -> StoreResult<Vec<bool>> {
        if params.items.is_empty() {
            return Ok(Vec::new());
        }
        let rows = lease::finish_rows(&params, self.max_value_bytes)?;
        let (rows, p) = (&rows, &params);
        let (applied, due_queues) = self
            .transact("finish", |mut tx| async move {
                let out = finish::finish(&mut tx.0, rows, p).await?;
                Ok((tx, out))
            })
            .await?;
        // A task with an affinity back in pending now waits, targeted, for its worker.
        if params.items.iter().any(|i| {
            matches!(
                i.plan.action,
                FinishAction::Retry { .. } | FinishAction::Requeue { .. }
            )
        }) {
            self.untargeted.forget_all();
        }
        self.wake_local(due_queues.iter().map(String::as_str));
        Ok(applied)
    }

    async fn list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>> {
        lease::list_expired(&self.pool, params).await
    }

    /// Runs `work` again whole while InnoDB aborts it under contention (a deadlock, a
    /// lock wait timeout).
    async fn transact<T, F, Fut>(&self, what: &'static str, mut work: F) -> StoreResult<T>
    where
        T: Send,
        F: FnMut(Self::Write) -> Fut + Send,
        Fut: Future<Output = StoreResult<(Self::Write, T)>> + Send,
    {
        let mut tried = 0;
        loop {
            tried += 1;
            let once = async {
                let tx = Connect::write(self).await?;
                let (tx, out) = work(tx).await?;
                tx.commit().await?;
                Ok(out)
            };
            match once.await {
                Err(e) if retry::again(&self.retries, what, &e, tried).await => {}
                other => return other,
            }
        }
    }

    /// Wakes this process's workers. A change may have made a task wait for a worker (a
    /// new target, the end of an affinity's wait): claims look for targeted tasks again
    /// first.
    fn changed(&self, wake: &[String]) {
        self.untargeted.forget_all();
        self.wake_local(wake.iter().map(String::as_str));
    }

    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>> {
        Ok(self.wake.subscribe())
    }
}
