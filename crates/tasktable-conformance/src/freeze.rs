//! A real store with a switch that freezes its worker-side writes, to play a worker that
//! stalls (a long GC pause, a stopped VM) while the database and other workers go on. It
//! also counts the claims and the batch saves that reach the database, for tests of what
//! waiting costs and of what goes on while a save waits.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use tasktable_core::{Attempt, Task, TaskId};
use tasktable_store::*;
use tokio::sync::{broadcast, watch};

#[derive(Debug)]
pub struct Freezable {
    inner: Arc<dyn Store>,
    frozen: watch::Sender<bool>,
    finishes_frozen: watch::Sender<bool>,
    /// Claim calls that went through, for tests to wait on.
    claims: watch::Sender<u64>,
    /// Batch saves sent on to the database (answered or not), for tests to wait on.
    saves: watch::Sender<u64>,
}

impl Freezable {
    pub fn new(inner: Arc<dyn Store>) -> Arc<Self> {
        Arc::new(Freezable {
            inner,
            frozen: watch::Sender::new(false),
            finishes_frozen: watch::Sender::new(false),
            claims: watch::Sender::new(0),
            saves: watch::Sender::new(0),
        })
    }

    /// From now on renewals, checkpoints and finishes wait until [`Freezable::thaw`].
    pub fn freeze(&self) {
        self.frozen.send_replace(true);
    }

    /// From now on only finishes wait until [`Freezable::thaw`]: a database that is slow
    /// to record results while claims still go through.
    pub fn freeze_finishes(&self) {
        self.finishes_frozen.send_replace(true);
    }

    /// Lets everything but finishes through again, and keeps finishes waiting: a worker
    /// whose database came back while the end of an attempt is still stuck in its retry.
    pub fn thaw_all_but_finishes(&self) {
        self.finishes_frozen.send_replace(true);
        self.frozen.send_replace(false);
    }

    /// How many claim calls went through this store, now and as it grows.
    pub fn claims(&self) -> watch::Receiver<u64> {
        self.claims.subscribe()
    }

    /// How many batch saves this store has sent on to the database, now and as it grows.
    pub fn saves(&self) -> watch::Receiver<u64> {
        self.saves.subscribe()
    }

    pub fn thaw(&self) {
        self.frozen.send_replace(false);
        self.finishes_frozen.send_replace(false);
    }

    async fn wait_thawed(&self) {
        let mut rx = self.frozen.subscribe();
        let _ = rx.wait_for(|frozen| !*frozen).await;
    }
}

#[async_trait]
impl Store for Freezable {
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    async fn migrate(&self) -> StoreResult<()> {
        self.inner.migrate().await
    }
    async fn db_now(&self) -> StoreResult<DateTime<Utc>> {
        self.inner.db_now().await
    }
    async fn task_submit(&self, p: SubmitParams) -> StoreResult<Vec<Submitted>> {
        self.inner.task_submit(p).await
    }
    async fn task_claim(&self, p: ClaimParams) -> StoreResult<Vec<Task>> {
        self.wait_thawed().await;
        self.claims.send_modify(|n| *n += 1);
        self.inner.task_claim(p).await
    }
    async fn task_release_affinity(&self, p: AffinityReleaseParams) -> StoreResult<u64> {
        self.inner.task_release_affinity(p).await
    }

    async fn task_renew(&self, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        self.wait_thawed().await;
        self.inner.task_renew(p).await
    }
    async fn task_checkpoint(&self, p: CheckpointParams) -> StoreResult<LeaseStatus> {
        self.wait_thawed().await;
        self.inner.task_checkpoint(p).await
    }
    async fn task_log(&self, p: LogParams) -> StoreResult<LeaseStatus> {
        self.wait_thawed().await;
        self.inner.task_log(p).await
    }
    async fn task_finish(&self, p: FinishParams) -> StoreResult<Vec<bool>> {
        self.wait_thawed().await;
        let mut rx = self.finishes_frozen.subscribe();
        let _ = rx.wait_for(|frozen| !*frozen).await;
        self.inner.task_finish(p).await
    }
    async fn batch_save(&self, p: BatchSaveParams) -> StoreResult<BatchSaved> {
        self.wait_thawed().await;
        self.saves.send_modify(|n| *n += 1);
        self.inner.batch_save(p).await
    }
    async fn task_list_expired(&self, p: ExpiredParams) -> StoreResult<Vec<Task>> {
        self.inner.task_list_expired(p).await
    }
    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        self.inner.task_get(id).await
    }
    async fn task_list(&self, p: ListParams) -> StoreResult<TaskPage> {
        self.inner.task_list(p).await
    }
    async fn task_count(&self, p: CountParams) -> StoreResult<u64> {
        self.inner.task_count(p).await
    }
    async fn attempt_list(&self, id: TaskId) -> StoreResult<Vec<Attempt>> {
        self.inner.attempt_list(id).await
    }
    async fn task_update(&self, p: UpdateParams) -> StoreResult<u64> {
        self.inner.task_update(p).await
    }
    async fn queue_set_paused(&self, p: QueuePauseParams) -> StoreResult<()> {
        self.inner.queue_set_paused(p).await
    }

    async fn queue_set_policy(&self, p: QueuePolicyParams) -> StoreResult<()> {
        self.inner.queue_set_policy(p).await
    }
    async fn queue_list(&self) -> StoreResult<Vec<QueueInfo>> {
        self.inner.queue_list().await
    }
    async fn stats(&self, params: StatsParams) -> StoreResult<Stats> {
        self.inner.stats(params).await
    }
    tasktable_store::forward_maintenance_calls!(inner);
    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>> {
        self.inner.subscribe().await
    }
}
