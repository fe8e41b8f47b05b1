//! tasktable's PostgreSQL store, for many workers in many processes on one database.
//!
//! Owns: the PostgreSQL schema and its migrations, the hot path's SQL (`queries/`: one
//! statement wherever the transition allows it; the same files in every backend, see
//! `tasktable_sql::hot`), the transactions in which the shared SQL layer
//! (`tasktable-sql`) runs everything else on Postgres, and the `tasktable_wake`
//! LISTEN/NOTIFY channel that wakes idle workers when work becomes due.
//!
//! Must not know: workers, handlers, HTTP, retry rules. It applies the plans the runtime
//! hands it, with the same semantics as the SQLite store (the conformance suite checks).
//!
//! Concurrency: claims pick rows with `FOR UPDATE SKIP LOCKED`, so workers never wait for
//! each other; every worker write is fenced by `(id, lease_token, state = 'running')`;
//! every time decision uses the database's clock (`now()`) unless the caller pins one.

#![warn(missing_docs)]

mod lease;
mod migrate;
mod sql;
mod submit;
mod wake;

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{Connection as _, PgConnection};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{NewTask, Task};
use tasktable_sql::{Backend, SqlStore};
use tasktable_store::*;
use tokio::sync::broadcast;

pub use lease::claim_statement;
pub use migrate::migrations;
/// The connection [`PgStore::submit_in`](SqlStore::submit_in) inserts on, inside the
/// caller's transaction.
pub use sqlx::postgres::PgConnection as Connection;
/// A write transaction that never goes back to the pool open (see [`PgBackend::Pool`](Backend::Pool)).
pub use tasktable_sqlx::Tx;

/// The NOTIFY channel; the payload is the queue that may have due work.
pub const WAKE_CHANNEL: &str = "tasktable_wake";

/// How long [`SqlStore::close`] waits for the wake-ups of committed submits to be sent.
pub const CLOSE_WAIT: Duration = Duration::from_secs(5);

/// How to connect to the database.
#[derive(Debug, Clone)]
pub struct PgConfig {
    /// `postgres://user:password@host:port/database`
    pub url: String,
    /// Pool size (the wake listener uses one more connection of its own); 10 by
    /// default, at least 1.
    pub max_connections: u32,
    /// Largest JSON document a call may carry (a payload, a result, a checkpoint,
    /// progress), in bytes; [`DEFAULT_MAX_PAYLOAD_BYTES`] (1 MiB) by default.
    pub max_payload_bytes: usize,
    /// Most rows one transaction of a bulk operator change locks
    /// (`tasktable_store::bulk`); 500 by default.
    pub bulk_chunk_rows: u32,
    /// A pooled connection idle this long is pinged before it is used again; 1 s by
    /// default. sqlx pings every connection as it goes back to the pool, so this only
    /// catches one the server closed while it sat idle (a restart); pinging before every
    /// use would cost a round trip per statement.
    pub idle_before_ping: Duration,
}

impl PgConfig {
    /// The defaults for the database at `url`, to adjust before [`SqlStore::connect`].
    pub fn new(url: impl Into<String>) -> Self {
        PgConfig {
            url: url.into(),
            max_connections: 10,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            bulk_chunk_rows: DEFAULT_BULK_CHUNK_ROWS,
            idle_before_ping: Duration::from_secs(1),
        }
    }
}

/// The PostgreSQL [`Store`]: [`SqlStore`] on [`PgBackend`]. Clones share the pool and
/// the wake listener.
pub type PgStore = SqlStore<PgBackend>;

/// What is PostgreSQL's own in [`PgStore`]: its pool, its hot path and its wake-ups.
#[derive(Debug, Clone)]
pub struct PgBackend {
    pool: PgPool,
    wake: Arc<wake::Waker>,
    notifier: Arc<wake::Notifier>,
    /// What calls may carry; every call's parameters are checked against it first.
    limits: Limits,
    bulk_chunk_rows: u32,
}

pub(crate) fn db(e: sqlx::Error) -> StoreError {
    tasktable_sqlx::store_error(e)
}

/// A duration (a lease, a delay) as whole microseconds, for `$n * interval '1
/// microsecond'`: capped as every store caps a span it adds to a time
/// ([`tasktable_core::stored::stored_span`]), so `now + duration` cannot overflow.
pub(crate) fn micros(d: Duration) -> i64 {
    tasktable_core::stored::stored_span(d).as_micros() as i64
}

impl PgBackend {
    /// Wakes idle workers of this process at once; other processes learn through NOTIFY.
    /// Duplicates are harmless: a woken worker just polls.
    pub(crate) fn wake_local<'a>(&self, queues: impl IntoIterator<Item = &'a str>) {
        let mut queues: Vec<&str> = queues.into_iter().collect();
        queues.sort_unstable();
        queues.dedup();
        for q in queues {
            self.wake.send_local(q);
        }
    }
}

#[async_trait]
impl Backend for PgBackend {
    const NAME: &'static str = "postgres";
    type Config = PgConfig;
    type Pool = PgPool;
    type Conn = PgConnection;

    async fn connect(config: PgConfig) -> StoreResult<Self> {
        let options = PgConnectOptions::from_str(&config.url)
            .map_err(|e| StoreError::InvalidInput(format!("bad PostgreSQL URL: {e}")))?
            .application_name("tasktable");
        tasktable_sqlx::first_connection(&options, &config.url)
            .await
            .map_err(|e| StoreError::Database(e.into()))?;
        let idle_before_ping = config.idle_before_ping;
        let pool = PgPoolOptions::new()
            .max_connections(config.max_connections.max(1))
            // Only a connection that sat idle is tested (PgConfig::idle_before_ping).
            .test_before_acquire(false)
            .before_acquire(move |conn, meta| {
                Box::pin(async move {
                    if meta.idle_for >= idle_before_ping {
                        conn.ping().await?;
                    }
                    Ok(true)
                })
            })
            .after_release(|conn, _| {
                Box::pin(async move { Ok(tasktable_sqlx::released_clean(conn)) })
            })
            .connect_with(options.clone())
            .await
            .map_err(db)?;
        Ok(PgBackend {
            pool,
            wake: Arc::new(wake::Waker::new(options)),
            notifier: Arc::default(),
            limits: Limits {
                max_payload_bytes: config.max_payload_bytes,
            },
            bulk_chunk_rows: config.bulk_chunk_rows,
        })
    }

    fn config(url: &str) -> PgConfig {
        PgConfig::new(url)
    }

    /// A `Transaction<Postgres>` derefs to a `PgConnection`. Idle workers are notified
    /// when that transaction commits. Keep the default READ COMMITTED isolation: under
    /// REPEATABLE READ a concurrent submit of the same idempotency key surfaces as an
    /// error instead of as `created: false`.
    async fn submit_in(
        conn: &mut PgConnection,
        tasks: &Checked<Vec<NewTask>>,
    ) -> StoreResult<Vec<Submitted>> {
        Ok(submit::insert(conn, tasks, None, submit::Wake::AtCommit)
            .await?
            .submitted)
    }

    fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Sends the wake-ups of the submits that have returned (waiting at most
    /// [`CLOSE_WAIT`] for them), stops the wake listener and closes the pool.
    async fn close(&self) {
        let _ = tokio::time::timeout(CLOSE_WAIT, self.notifier.settle()).await;
        self.wake.stop();
        self.pool.close().await;
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    fn bulk_chunk_rows(&self) -> u32 {
        self.bulk_chunk_rows
    }

    /// The pool's connections.
    fn capacity(&self) -> usize {
        self.pool.options().get_max_connections() as usize
    }

    async fn migrate(&self) -> StoreResult<()> {
        migrate::run(self).await
    }

    async fn db_now(&self) -> StoreResult<DateTime<Utc>> {
        // clock_timestamp(): outside a transaction now() would do too, but say what we mean.
        sqlx::query_scalar("SELECT clock_timestamp()")
            .fetch_one(&self.pool)
            .await
            .map_err(db)
    }

    /// No explicit transaction: the insert is one statement, so all or nothing, and the
    /// follow-up lookup of existing keys only reads committed rows. The wake-ups go out
    /// after it has committed, outside it (wake.rs, `Notifier`).
    async fn submit(&self, params: Checked<SubmitParams>) -> StoreResult<Vec<Submitted>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        let out =
            submit::insert(&mut conn, &params.tasks, params.now, submit::Wake::ByCaller).await?;
        drop(conn);
        self.notifier.committed(&self.pool, &out.due_queues);
        self.wake_local(out.due_queues.iter().map(String::as_str));
        Ok(out.submitted)
    }

    async fn insert_tasks(
        &self,
        tx: &mut Self::Write,
        tasks: &Checked<Vec<NewTask>>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Submitted>> {
        Ok(
            submit::insert(&mut tx.0, tasks, Some(now), submit::Wake::AtCommit)
                .await?
                .submitted,
        )
    }

    async fn claim(&self, params: &ClaimParams) -> StoreResult<Vec<Task>> {
        lease::claim(&self.pool, params).await
    }

    async fn renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        lease::renew(&self.pool, params).await
    }

    async fn checkpoint(&self, params: Checked<CheckpointParams>) -> StoreResult<LeaseStatus> {
        lease::checkpoint(&self.pool, params.into_inner()).await
    }

    async fn finish(&self, params: Checked<FinishParams>) -> StoreResult<Vec<bool>> {
        let (applied, due_queues) = lease::finish(&self.pool, params.into_inner()).await?;
        self.wake_local(due_queues.iter().map(String::as_str));
        Ok(applied)
    }

    async fn list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>> {
        lease::list_expired(&self.pool, params).await
    }

    /// NOTIFY, delivered when (and only if) the transaction commits.
    async fn announce(&self, tx: &mut Self::Write, wake: &[String]) -> StoreResult<()> {
        if !wake.is_empty() {
            sqlx::query("SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q")
                .bind(WAKE_CHANNEL)
                .bind(wake)
                .execute(&mut *tx.0)
                .await
                .map_err(db)?;
        }
        Ok(())
    }

    fn changed(&self, wake: &[String]) {
        self.wake_local(wake.iter().map(String::as_str));
    }

    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>> {
        Ok(self.wake.subscribe().await)
    }
}
