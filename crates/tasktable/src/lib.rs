//! tasktable: a durable, distributed task system in which every task is a row in a SQL
//! table.
//!
//! This facade is what Rust users depend on. It owns only the wiring: choosing a backend
//! from a URL ([`connect`]) and a [`Client`] for submitting, querying and intervening.
//! Everything else is re-exported from the crates that own it: the domain
//! ([`tasktable_core`]), the storage contract ([`store`]), the backends, and the worker
//! runtime ([`Worker`], [`Handler`], [`BatchHandler`], [`Rescuer`]).
//!
//! It must not grow logic of its own: a rule belongs in core, a transition in the store,
//! and a behaviour of workers in the runtime.
//!
//! # A first task
//!
//! A handler per task kind, a store, a task submitted, and a worker that runs it. Here
//! the worker takes one step ([`Worker::run_once`]); a service runs it until a shutdown
//! signal instead ([`Worker::run`]).
//!
//! ```
//! use tasktable::{Client, Handler, HandlerError, NewTask, TaskContext, TaskState, Worker};
//!
//! struct SendEmail;
//!
//! impl Handler for SendEmail {
//!     const KIND: &'static str = "send_email";
//!     type Payload = String; // any serde type
//!     type Output = ();      // stored as the task's result
//!
//!     async fn run(&self, ctx: TaskContext, to: String) -> Result<(), HandlerError> {
//!         // Any error is retryable (`?` works); HandlerError::permanent fails at once,
//!         // HandlerError::snooze runs again later without spending an attempt.
//!         let sent_before: Option<bool> = ctx.checkpoint()?;
//!         if sent_before.is_none() {
//!             smtp_send(&to).await?;
//!             ctx.save_checkpoint(&true).await?; // fenced by this attempt's lease
//!         }
//!         Ok(())
//!     }
//! }
//! # async fn smtp_send(_to: &str) -> std::io::Result<()> { Ok(()) }
//!
//! #[tokio::main]
//! async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! #   let dir = tempfile::tempdir()?;
//! #   let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
//!     let store = tasktable::connect(&url).await?; // sqlite://tasks.db, postgres://...
//!     store.migrate().await?;
//!
//!     let client = Client::new(store.clone());
//!     let task = client
//!         .submit(NewTask::new("send_email", "ada@example.com".into()).max_attempts(8))
//!         .await?;
//!
//!     let mut worker = Worker::builder(store).concurrency(20).register(SendEmail).build()?;
//!     let claimed = worker.run_once().await?; // one claim round, run to its end
//!     assert_eq!(claimed, 1);
//!     let task = client.get(task.id).await?.expect("the task exists");
//!     assert_eq!(task.state, TaskState::Succeeded);
//!     Ok(())
//! }
//! ```
//!
//! # Features
//!
//! `sqlite`, `postgres` and `mysql` (all on by default) each bring a backend, re-exported
//! as [`sqlite`], [`postgres`] and [`mysql`]; [`connect`] refuses a URL whose backend the
//! build leaves out.

#![warn(missing_docs)]

mod client;

pub use client::Client;
pub use tasktable_core::{
    batch, event, outcome, policy, retention, schedule, state, target, worker, Actor, ActorKind,
    Attempt, AttemptOutcome, Backoff, EventKind, Lease, NewTask, Operation, Task, TaskId,
    TaskState,
};
/// What workers record for monitoring (Prometheus series names).
pub use tasktable_runtime::metrics;
pub use tasktable_runtime::trace;
/// What a batch item came to ([`BatchHandler::item`]).
pub use tasktable_runtime::Item as BatchItem;
/// Runs tasks in this process: claims them from its queues, runs their handlers, renews
/// their leases and records how each attempt ended.
///
/// ```
/// use std::time::Duration;
/// use tasktable::{Client, Handler, HandlerError, TaskContext, Worker, WorkerEvent};
///
/// struct Double;
///
/// impl Handler for Double {
///     const KIND: &'static str = "double";
///     type Payload = u64;
///     type Output = u64;
///
///     async fn run(&self, _ctx: TaskContext, n: u64) -> Result<u64, HandlerError> {
///         Ok(2 * n)
///     }
/// }
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
/// let store = tasktable::connect(&url).await?;
/// store.migrate().await?;
/// let client = Client::new(store.clone());
/// let id = client.submit(Client::task::<Double>(&21)?.queue("math")).await?.id;
///
/// let worker = Worker::builder(store)
///     .concurrency(20)
///     .queue("math", 20) // naming a queue replaces `default`
///     .lease_for(Duration::from_secs(30))
///     .register(Double)
///     .build()?;
/// let mut events = worker.subscribe();
/// // Runs until the future resolves, then shuts down gracefully. A service passes
/// // `tasktable::shutdown_signal()` (SIGTERM or SIGINT); this one stops after one task.
/// worker
///     .run(async move {
///         while let Ok(event) = events.recv().await {
///             if matches!(event, WorkerEvent::Finished { .. }) {
///                 break;
///             }
///         }
///     })
///     .await;
///
/// let task = client.get(id).await?.expect("the task exists");
/// assert_eq!(task.result, Some(serde_json::json!(42)));
/// # Ok(())
/// # }
/// ```
pub use tasktable_runtime::Worker;
pub use tasktable_runtime::{
    shutdown_signal, BatchContext, BatchHandler, ContextError, Handler, HandlerError, QueueConfig,
    Rescuer, RescuerConfig, Retainer, RetentionConfig, Scheduler, SchedulerConfig, StopReason,
    TaskContext, WorkerBuilder, WorkerConfig, WorkerError, WorkerEvent, WorkerIdentity,
};
pub use tasktable_store as store;
pub use tasktable_store::{Change, Store, StoreError, StoreResult, Submitted, Target, TaskFilter};

/// The MySQL and MariaDB store (feature `mysql`), for [`MySqlStore::submit_in`] and
/// settings [`connect`] leaves at their defaults.
///
/// [`MySqlStore::submit_in`]: tasktable_mysql::MySqlStore
#[cfg(feature = "mysql")]
pub use tasktable_mysql as mysql;
/// The PostgreSQL store (feature `postgres`), for [`PgStore::submit_in`] and settings
/// [`connect`] leaves at their defaults.
///
/// [`PgStore::submit_in`]: tasktable_postgres::PgStore
#[cfg(feature = "postgres")]
pub use tasktable_postgres as postgres;
/// The embedded SQLite store (feature `sqlite`), for [`SqliteStore::submit_in`] and
/// settings [`connect`] leaves at their defaults.
///
/// [`SqliteStore::submit_in`]: tasktable_sqlite::SqliteStore
#[cfg(feature = "sqlite")]
pub use tasktable_sqlite as sqlite;

use std::sync::Arc;

/// Opens the store a URL names: `sqlite://file.db` (or a plain path),
/// `postgres://user@host/db`, or `mysql://user@host/db` (`mariadb://` too), with the
/// backend's default settings. Does not migrate; call [`Store::migrate`] when you want
/// to (it is safe from many processes at once).
///
/// The store is [shielded](store::Shielded): a call whose caller is dropped half way (a
/// timeout, a `select!`, an aborted task) still runs to its commit or rollback. Should the
/// database become unreachable later, the store logs it once (`database unreachable`,
/// naming `url` with its password hidden) and once more when a call succeeds again.
///
/// ```
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// let path = dir.path().join("tasks.db");
/// let store = tasktable::connect(&format!("sqlite://{}", path.display())).await?;
/// store.migrate().await?; // a new file is created and migrated
/// assert!(store.queue_list().await?.is_empty());
/// # Ok(())
/// # }
/// ```
///
/// A server's database is reached the same way:
///
/// ```no_run
/// # async fn f() -> tasktable::StoreResult<()> {
/// let store = tasktable::connect("postgres://app@db.internal/tasks").await?;
/// # Ok(())
/// # }
/// ```
///
/// # Errors
///
/// [`StoreError::InvalidInput`] for a scheme it does not know, a backend this build
/// leaves out or a malformed URL; [`StoreError::Database`] when the database cannot be
/// reached (a server is given up on after 5 s, with the cause).
pub async fn connect(url: &str) -> StoreResult<Arc<dyn Store>> {
    open(url)
        .await
        .map(|store| store::Shielded::wrap_at(store, url))
}

async fn open(url: &str) -> StoreResult<Arc<dyn Store>> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(tasktable_postgres::PgStore::open(url).await?));
        #[cfg(not(feature = "postgres"))]
        return Err(StoreError::InvalidInput(
            "this build has no PostgreSQL support (feature `postgres`)".into(),
        ));
    }
    if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        #[cfg(feature = "mysql")]
        return Ok(Arc::new(tasktable_mysql::MySqlStore::open(url).await?));
        #[cfg(not(feature = "mysql"))]
        return Err(StoreError::InvalidInput(
            "this build has no MySQL support (feature `mysql`)".into(),
        ));
    }
    if let Some((scheme, _)) = url
        .split_once("://")
        .filter(|_| !url.starts_with("sqlite:"))
    {
        // The scheme only: the rest may hold a password.
        return Err(StoreError::InvalidInput(format!(
            "unsupported database URL scheme {scheme:?}: use sqlite://path, \
             postgres://user@host/db or mysql://user@host/db (mariadb:// too)"
        )));
    }
    #[cfg(feature = "sqlite")]
    return Ok(Arc::new(tasktable_sqlite::SqliteStore::open(url).await?));
    #[cfg(not(feature = "sqlite"))]
    Err(StoreError::InvalidInput(
        "this build has no SQLite support (feature `sqlite`)".into(),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_unknown_scheme_is_refused_with_the_supported_ones() {
        let err = connect("ftp://host/db").await.unwrap_err();
        assert!(matches!(err, StoreError::InvalidInput(_)), "{err}");
        for scheme in ["sqlite://", "postgres://", "mysql://", "mariadb://"] {
            assert!(err.to_string().contains(scheme), "{err}");
        }
    }

    #[cfg(feature = "mysql")]
    #[tokio::test]
    async fn a_mariadb_url_opens_the_mysql_store() {
        let err = connect("mariadb://root@127.0.0.1:no-port/db")
            .await
            .unwrap_err();
        assert!(err.to_string().contains("bad MySQL URL"), "{err}");
    }
}
