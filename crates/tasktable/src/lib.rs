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

mod client;

pub use client::Client;
pub use tasktable_core::{
    batch, event, outcome, policy, retention, schedule, state, target, worker, Actor, ActorKind,
    Attempt, AttemptOutcome, Backoff, EventKind, Lease, NewTask, Operation, Task, TaskId,
    TaskState,
};
/// What workers record for monitoring (Prometheus series names).
pub use tasktable_runtime::metrics;
/// What a batch item came to ([`BatchHandler::item`]).
pub use tasktable_runtime::Item as BatchItem;
pub use tasktable_runtime::{
    shutdown_signal, BatchContext, BatchHandler, ContextError, Handler, HandlerError, QueueConfig,
    Rescuer, RescuerConfig, Retainer, RetentionConfig, Scheduler, SchedulerConfig, StopReason,
    TaskContext, Worker, WorkerBuilder, WorkerConfig, WorkerError, WorkerEvent, WorkerIdentity,
};
pub use tasktable_store as store;
pub use tasktable_store::{Change, Store, StoreError, StoreResult, Submitted, Target, TaskFilter};

#[cfg(feature = "mysql")]
pub use tasktable_mysql as mysql;
#[cfg(feature = "postgres")]
pub use tasktable_postgres as postgres;
#[cfg(feature = "sqlite")]
pub use tasktable_sqlite as sqlite;

use std::sync::Arc;

/// Opens the store a URL names: `sqlite://file.db` (or a plain path),
/// `postgres://user@host/db`, or `mysql://user@host/db` (`mariadb://` too). Does not
/// migrate; call [`Store::migrate`] when you want to.
///
/// The store is [shielded](store::Shielded): a call whose caller is dropped half way (a
/// timeout, a `select!`, an aborted task) still runs to its commit or rollback.
pub async fn connect(url: &str) -> StoreResult<Arc<dyn Store>> {
    open(url).await.map(store::Shielded::wrap)
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
