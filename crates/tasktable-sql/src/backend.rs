//! What a backend provides: the part of a store that differs between databases.
//!
//! A backend implements [`Backend`]: how it connects and closes, its hot path (submit,
//! claim, renew, checkpoint, finish, the rescuer's scan: one or two hand-written
//! statements each, `queries/*.sql`), how a write transaction runs ([`Backend::transact`],
//! which MySQL runs again when InnoDB aborts it), and how workers are woken when a change
//! commits ([`Backend::announce`], [`Backend::changed`]). [`SqlStore`](crate::SqlStore)
//! is the `Store` written once on top of it. The backend sees parameters a limit applies
//! to only as [`Checked`] values.

use crate::runs::Ended;
use crate::{Commit, Connect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::future::Future;
use tasktable_core::{NewTask, Task};
use tasktable_store::{
    Checked, CheckpointParams, ClaimParams, ExpiredParams, FinishParams, LeaseStatus, Limits,
    RenewParams, StoreResult, SubmitParams, Submitted, Wake,
};
use tokio::sync::broadcast;

/// The part of a store that differs between databases.
#[async_trait]
pub trait Backend: Connect + Clone + std::fmt::Debug + Sized + 'static {
    /// `sqlite`, `postgres`, `mysql`.
    const NAME: &'static str;

    /// How to connect ([`SqlStore::connect`](crate::SqlStore::connect)).
    type Config: Send + 'static;

    /// What [`SqlStore::pool`](crate::SqlStore::pool) hands callers that run queries of
    /// their own beside tasktable's. Begin a transaction on it with `tasktable_sqlx::Tx`
    /// rather than sqlx's own `begin()`: sqlx hands a connection whose `BEGIN` was cut off
    /// back to the pool inside a transaction, where tasktable's next writes on it would run
    /// and be lost.
    type Pool: Send + Sync;

    /// The connection [`SqlStore::submit_in`](crate::SqlStore::submit_in) inserts on,
    /// inside a transaction the caller holds.
    type Conn: Send;

    /// Connects, so an unreachable server fails here. Does not migrate.
    async fn connect(config: Self::Config) -> StoreResult<Self>;

    /// The default settings for `url`.
    fn config(url: &str) -> Self::Config;

    /// Inserts tasks inside the caller's transaction on `conn`; they commit or roll back
    /// with it.
    async fn submit_in(
        conn: &mut Self::Conn,
        tasks: &Checked<Vec<NewTask>>,
    ) -> StoreResult<Vec<Submitted>>;

    /// The connections behind [`SqlStore::pool`](crate::SqlStore::pool).
    fn pool(&self) -> &Self::Pool;

    /// Sends what must go out before the connections close, then closes them.
    async fn close(&self);

    /// What calls may carry: the store's configuration.
    fn limits(&self) -> Limits;

    /// Rows per transaction of a bulk change.
    fn bulk_chunk_rows(&self) -> u32;

    /// How many calls the store serves at once ([`Store::capacity`](tasktable_store::Store::capacity)).
    fn capacity(&self) -> usize;

    /// Applies the migrations this version ships that the database lacks, serialised
    /// against other migrators the database's way.
    async fn migrate(&self) -> StoreResult<()>;

    /// The database's current time, read on a connection of its own, at the precision
    /// the backend stores ([`Store::db_now`](tasktable_store::Store::db_now)).
    async fn db_now(&self) -> StoreResult<DateTime<Utc>>;

    /// The hot-path submit of tasks that run once and are no batch.
    async fn submit(&self, params: Checked<SubmitParams>) -> StoreResult<Vec<Submitted>>;

    /// Inserts tasks inside a write transaction, at `now`: they commit or roll back with
    /// the rest of it. Workers are woken by [`change`].
    async fn insert_tasks(
        &self,
        tx: &mut Self::Write,
        tasks: &Checked<Vec<NewTask>>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Submitted>>;

    /// The hot-path claim, which takes nothing from a paused or limited queue and no run
    /// of a multi-run task.
    async fn claim(&self, params: &ClaimParams) -> StoreResult<Vec<Task>>;

    /// Renews leases of tasks that run once.
    async fn renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>>;

    /// The hot-path save of a checkpoint and progress of a task that runs once, fenced
    /// by its lease; a missed fence answers why (`lease_rows.sql`).
    async fn checkpoint(&self, params: Checked<CheckpointParams>) -> StoreResult<LeaseStatus>;

    /// Ends attempts of tasks that run once.
    async fn finish(&self, params: Checked<FinishParams>) -> StoreResult<Vec<bool>>;

    /// The rescuer's scan of tasks that run once: running tasks whose lease ended at
    /// `now`, oldest expiry first (`task_list_expired.sql`). Expired runs of multi-run
    /// tasks are the shared layer's ([`crate::runs::list_expired`]).
    async fn list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>>;

    /// Runs `work` in a write transaction of its own and commits it; what `work` returns
    /// comes back once the commit succeeded. Every write transaction off the hot path
    /// goes through here. `work` gets the transaction and hands it back with its answer;
    /// a backend may run it again whole (MySQL, when InnoDB aborts it with a deadlock or
    /// a lock wait timeout), so it must do nothing outside the transaction: wake-ups and
    /// caches come after, from the answer. `what` names it in logs.
    async fn transact<T, F, Fut>(&self, what: &'static str, mut work: F) -> StoreResult<T>
    where
        T: Send,
        F: FnMut(Self::Write) -> Fut + Send,
        Fut: Future<Output = StoreResult<(Self::Write, T)>> + Send,
    {
        let _ = what;
        let tx = self.write().await?;
        let (tx, out) = work(tx).await?;
        tx.commit().await?;
        Ok(out)
    }

    /// Inside a change's transaction, just before it commits: tells other processes'
    /// workers of the queues in `wake` (PostgreSQL's NOTIFY, delivered only if the
    /// transaction commits). Nothing by default: other processes poll.
    async fn announce(&self, tx: &mut Self::Write, wake: &[String]) -> StoreResult<()> {
        let _ = (tx, wake);
        Ok(())
    }

    /// After a change committed: wakes this process's idle workers of the queues in
    /// `wake`, and forgets what the backend's own caches knew of the tasks.
    fn changed(&self, wake: &[String]);

    /// Wake-ups naming queues that may have due work: this process's changes, and on
    /// PostgreSQL other processes' too
    /// ([`Store::subscribe`](tasktable_store::Store::subscribe)).
    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>>;
}

/// What a change did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Changed {
    /// How many rows the change applied to: the `u64` an operator's change answers.
    pub count: u64,
    /// The queues whose workers should look for due tasks once the change commits,
    /// sorted, each once; empty unless the change may make tasks due.
    pub wake: Vec<String>,
}

/// What a change answers, among the rest: the queues whose workers should look for due
/// tasks once it commits.
pub trait Wakes: Send {
    /// The queues to wake, each once; empty when no task may have become due.
    fn wake(&self) -> &[String];
}

impl Wakes for Changed {
    fn wake(&self) -> &[String] {
        &self.wake
    }
}

impl Wakes for Ended {
    fn wake(&self) -> &[String] {
        self.wake.as_slice()
    }
}

impl<T: Send> Wakes for (T, Changed) {
    fn wake(&self) -> &[String] {
        &self.1.wake
    }
}

/// Runs `work`, a change that may make tasks due, through [`Backend::transact`]:
/// announced inside the transaction, and this process's workers woken once it
/// committed.
pub async fn change<B, T, F, Fut>(b: &B, what: &'static str, mut work: F) -> StoreResult<T>
where
    B: Backend,
    T: Wakes,
    F: FnMut(B::Write) -> Fut + Send,
    Fut: Future<Output = StoreResult<(B::Write, T)>> + Send,
{
    let out = b
        .transact(what, |tx| {
            let done = work(tx);
            async move {
                let (mut tx, out) = done.await?;
                b.announce(&mut tx, out.wake()).await?;
                Ok((tx, out))
            }
        })
        .await?;
    b.changed(out.wake());
    Ok(out)
}
