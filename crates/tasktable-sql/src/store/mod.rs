//! [`SqlStore`]: the one `Store` of the three databases, over what a [`Backend`]
//! provides.
//!
//! Every call's parameters are checked against the store's [`Limits`] first. Calls of
//! the hot path go to the backend, unless they concern a limited queue or a multi-run
//! task: [`claim`] and [`finish`] choose the lane. Every other call is this crate's
//! queries, reads on a read connection and writes in a transaction of their own through
//! [`Backend::transact`], workers woken once it commits ([`crate::backend::change`]).
//!
//! The path of a claim: `task_claim` → [`claim::claim`] → the backend's hot claim (one
//! statement on PostgreSQL and SQLite, a locking read and an update on MySQL, from
//! `queries/task_claim*.sql`) → the runs' claim when it came back short and the queue may
//! have open multi-run tasks. Its end: `task_finish` → [`finish::finish`] → the
//! backend's finish (a fenced update of the task and an insert of its attempt's history
//! row, for many tasks at once) or, for runs, [`crate::runs::finish_in`].

pub mod claim;
pub mod finish;
mod lanes;
#[cfg(test)]
mod lanes_fake;
mod store_impl;

use crate::limits::LimitedQueues;
use crate::runs::OpenRuns;
use crate::stats::SqlStats;
use crate::Backend;
use std::sync::Arc;
use tasktable_core::NewTask;
use tasktable_store::{Limits, StoreResult, Submitted};

/// The `Store` of a SQL database: [`crate::Backend`]'s hot path and transactions, and
/// this crate's queries for the rest. Clones share the backend's connections and what
/// the store remembers of its queues.
#[derive(Debug, Clone)]
pub struct SqlStore<B: Backend> {
    db: B,
    /// The queues found limited by a policy, claimed off the hot path.
    limited: Arc<LimitedQueues>,
    /// What this store knows of open multi-run tasks.
    open_runs: Arc<OpenRuns>,
}

impl<B: Backend> SqlStore<B> {
    /// Connects, so an unreachable server fails here. Does not migrate.
    pub async fn connect(config: B::Config) -> StoreResult<Self> {
        Ok(Self::on(B::connect(config).await?))
    }

    /// Connects by URL (or, for SQLite, a path) with the default settings.
    pub async fn open(url: &str) -> StoreResult<Self> {
        Self::connect(B::config(url)).await
    }

    /// The store of a backend already connected.
    pub fn on(db: B) -> Self {
        SqlStore {
            db,
            limited: Arc::default(),
            open_runs: Arc::default(),
        }
    }

    /// Submits tasks inside a transaction the caller holds on `conn`, so they commit or
    /// roll back with the caller's own writes (what the backend's `Backend::submit_in`
    /// says about isolation and wake-ups holds).
    pub async fn submit_in(conn: &mut B::Conn, tasks: Vec<NewTask>) -> StoreResult<Vec<Submitted>> {
        let tasks = Limits::default().tasks(tasks)?;
        B::submit_in(conn, &tasks).await
    }

    /// The backend's connections, for callers that want to run their own queries next to
    /// tasktable's (see the backend's docs for how to begin a transaction on them).
    pub fn pool(&self) -> &B::Pool {
        self.db.pool()
    }

    /// The backend, for what only it has (MySQL's count of transactions run again).
    pub fn db(&self) -> &B {
        &self.db
    }

    /// Sends what must go out first (PostgreSQL's wake-ups of committed submits), then
    /// closes the connections.
    pub async fn close(&self) {
        self.db.close().await;
    }

    /// The SQL half of statistics (`StatsSource`) on this store, for callers that time
    /// its parts.
    pub fn stats_source(&self) -> SqlStats<'_, B> {
        SqlStats(&self.db)
    }
}
