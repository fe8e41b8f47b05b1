//! `Store` and `ChunkedUpdate` for [`SqlStore`]: each call checked, then routed (the
//! claim and a lease's writes by [`super::claim`] and [`super::finish`]) or answered by
//! this crate's queries. Grouped by noun as the trait is.

use super::{claim, finish, SqlStore};
use crate::feed as sqlfeed;
use crate::stats::SqlStats;
use crate::{affinity, batches, events, logs, query, retention, runs, schedules, workers, Backend};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tasktable_core::runs::Run;
use tasktable_core::worker::WorkerInfo;
use tasktable_core::{Attempt, Lease, Task, TaskId};
use tasktable_store::*;
use tokio::sync::broadcast;

#[async_trait]
impl<B: Backend> Store for SqlStore<B> {
    fn backend(&self) -> &'static str {
        B::NAME
    }

    fn capacity(&self) -> usize {
        self.db.capacity()
    }

    async fn migrate(&self) -> StoreResult<()> {
        self.db.migrate().await
    }

    async fn db_now(&self) -> StoreResult<DateTime<Utc>> {
        self.db.db_now().await
    }

    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>> {
        self.db.subscribe().await
    }

    // Tasks: the hot path and its lanes.

    /// Tasks that want several runs, or are batches, go through the shared layer's
    /// submit, which marks them; the rest through the backend's.
    async fn task_submit(&self, params: SubmitParams) -> StoreResult<Vec<Submitted>> {
        let params = self.db.limits().submit(params)?;
        if params
            .tasks
            .iter()
            .all(|t| t.runs.is_none() && t.rearm.is_none() && t.batch.is_none())
        {
            return self.db.submit(params).await;
        }
        let submitted = self.submit_marked(&params).await?;
        for t in params.tasks.iter().filter(|t| t.runs.is_some()) {
            self.open_runs.stir(&t.queue);
        }
        Ok(submitted)
    }

    async fn task_claim(&self, params: ClaimParams) -> StoreResult<Vec<Task>> {
        claim::claim(self, &self.limited, &self.open_runs, &params).await
    }

    async fn task_renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        finish::renew(self, params).await
    }

    async fn task_checkpoint(&self, params: CheckpointParams) -> StoreResult<LeaseStatus> {
        finish::checkpoint(self, self.db.limits().checkpoint(params)?).await
    }

    async fn task_finish(&self, params: FinishParams) -> StoreResult<Vec<bool>> {
        let params = self.db.limits().finish(params)?;
        finish::finish(self, &self.open_runs, params).await
    }

    /// Expired tasks and expired runs, oldest expiry first.
    async fn task_list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>> {
        let (limit, now) = (params.limit, params.now);
        let mut expired = self.db.list_expired(params).await?;
        expired.extend(runs::list_expired(&mut self.db.read().await?, limit, now).await?);
        expired.sort_by_key(|t| t.lease_expires_at);
        expired.truncate(limit as usize);
        Ok(expired)
    }

    async fn task_release_affinity(&self, params: AffinityReleaseParams) -> StoreResult<u64> {
        affinity::release(&self.db, &self.db.limits().affinity_release(params)?).await
    }

    async fn lease_status(&self, lease: Lease) -> StoreResult<LeaseStatus> {
        query::lease_status(&mut self.db.read().await?, &lease).await
    }

    async fn task_log(&self, params: LogParams) -> StoreResult<LeaseStatus> {
        logs::append(&self.db, &params).await
    }

    // Tasks: what operators read and change.

    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        query::get(&mut self.db.read().await?, id).await
    }

    async fn task_list(&self, params: ListParams) -> StoreResult<TaskPage> {
        let params = self.db.limits().list(params)?;
        query::list(&mut self.db.read().await?, &params).await
    }

    async fn task_count(&self, params: CountParams) -> StoreResult<u64> {
        let params = self.db.limits().count(params)?;
        query::count(&mut self.db.read().await?, &params).await
    }

    async fn attempt_list(&self, task_id: TaskId) -> StoreResult<Vec<Attempt>> {
        query::attempts(&mut self.db.read().await?, task_id).await
    }

    async fn run_list(&self, task_id: TaskId) -> StoreResult<Vec<Run>> {
        runs::list(&mut self.db.read().await?, task_id).await
    }

    async fn task_update(&self, params: UpdateParams) -> StoreResult<u64> {
        let params = self.db.limits().update(params)?;
        match &params.target {
            Target::Id(id) => self.change_one(*id, &params).await,
            Target::Filter(filter) => {
                let rows = self.db.bulk_chunk_rows();
                let (change, actor) = (&params.change, &params.actor);
                let action = match &params.action {
                    Some(key) => key.clone(),
                    None => tasktable_store::bulk::new_action_key(),
                };
                update_in_chunks(self, filter, change, actor, params.now, rows, &action).await
            }
        }
    }

    async fn task_purge(&self, params: PurgeParams) -> StoreResult<Purged> {
        retention::purge(&self.db, &self.db.limits().purge(params)?).await
    }

    async fn task_get_archived(&self, id: TaskId) -> StoreResult<Option<(Task, Vec<Attempt>)>> {
        retention::archived(&mut self.db.read().await?, id).await
    }

    /// The live table's, or, for a task retention archived, the archive's.
    async fn task_events(&self, id: TaskId) -> StoreResult<Vec<Event>> {
        let mut read = self.db.read().await?;
        let live = events::of_task(&mut read, id, false).await?;
        if !live.is_empty() || query::get(&mut read, id).await?.is_some() {
            return Ok(live);
        }
        events::of_task(&mut read, id, true).await
    }

    /// The live table's, or, for a task retention archived, the archive's.
    async fn task_logs(&self, id: TaskId) -> StoreResult<Vec<LogLine>> {
        let mut read = self.db.read().await?;
        let live = logs::of_task(&mut read, id, false).await?;
        if !live.is_empty() || query::get(&mut read, id).await?.is_some() {
            return Ok(live);
        }
        logs::of_task(&mut read, id, true).await
    }

    async fn stats(&self, params: StatsParams) -> StoreResult<Stats> {
        stats::compute(&SqlStats(&self.db), &params).await
    }

    // Batches.

    async fn batch_get(&self, id: TaskId) -> StoreResult<Option<Batch>> {
        batches::get(&mut self.db.read().await?, id).await
    }

    async fn batch_list(&self, params: BatchListParams) -> StoreResult<Vec<Batch>> {
        batches::list(&mut self.db.read().await?, &params).await
    }

    async fn batch_save(&self, params: BatchSaveParams) -> StoreResult<BatchSaved> {
        self.save_batch(&params).await
    }

    async fn batch_control(&self, params: BatchControlParams) -> StoreResult<Batch> {
        self.control_batch(&params).await
    }

    async fn batch_update(&self, params: BatchUpdateParams) -> StoreResult<Batch> {
        self.update_batch(params).await
    }

    async fn batch_failures(&self, id: TaskId) -> StoreResult<Vec<ItemFailure>> {
        batches::failures(&mut self.db.read().await?, id).await
    }

    // Queues.

    async fn queue_set_paused(&self, params: QueuePauseParams) -> StoreResult<()> {
        self.set_paused(&params).await
    }

    async fn queue_set_policy(&self, params: QueuePolicyParams) -> StoreResult<()> {
        self.set_policy(&self.db.limits().queue_policy(params)?)
            .await
    }

    async fn queue_list(&self) -> StoreResult<Vec<QueueInfo>> {
        query::queues(&mut self.db.read().await?).await
    }

    async fn task_waiting(
        &self,
        params: TaskWaitingParams,
    ) -> StoreResult<Vec<tasktable_core::waiting::WaitReason>> {
        crate::waiting::task_waiting(&mut self.db.read().await?, &params).await
    }

    async fn queue_discover(&self) -> StoreResult<Vec<String>> {
        workers::discover(&mut self.db.read().await?).await
    }

    async fn queue_has_due(&self, params: DueParams) -> StoreResult<bool> {
        query::has_due(&mut self.db.read().await?, &params).await
    }

    // Schedules.

    async fn schedule_create(&self, params: CreateScheduleParams) -> StoreResult<Schedule> {
        schedules::create(&self.db, params).await
    }

    async fn schedule_get(&self, schedule: ScheduleRef) -> StoreResult<Option<Schedule>> {
        schedules::get(&mut self.db.read().await?, &schedule).await
    }

    async fn schedule_list(&self) -> StoreResult<Vec<Schedule>> {
        schedules::list(&mut self.db.read().await?).await
    }

    async fn schedule_edit(&self, params: EditScheduleParams) -> StoreResult<Schedule> {
        schedules::edit(&self.db, params).await
    }

    async fn schedule_delete(&self, params: DeleteScheduleParams) -> StoreResult<()> {
        schedules::delete(&self.db, params).await
    }

    async fn schedule_run_due(&self, params: RunDueParams) -> StoreResult<Vec<Fired>> {
        schedules::run_due(&self.db, params).await
    }

    async fn schedule_fire_now(&self, params: FireNowParams) -> StoreResult<Fired> {
        schedules::fire_now(&self.db, params).await
    }

    // Workers.

    async fn worker_beat(&self, params: WorkerBeatParams) -> StoreResult<WorkerStatus> {
        workers::beat(&self.db, &self.db.limits().worker_beat(params)?).await
    }

    async fn worker_leave(&self, params: WorkerLeaveParams) -> StoreResult<()> {
        workers::leave(&self.db, &params).await
    }

    async fn worker_list(&self, params: WorkerListParams) -> StoreResult<Vec<WorkerInfo>> {
        let params = self.db.limits().worker_list(params)?;
        workers::list(&mut self.db.read().await?, &params).await
    }

    async fn worker_get(&self, id: String) -> StoreResult<Option<WorkerInfo>> {
        workers::get(&mut self.db.read().await?, &id).await
    }

    async fn worker_set_draining(
        &self,
        params: WorkerDrainParams,
    ) -> StoreResult<Option<WorkerInfo>> {
        workers::set_draining(&self.db, &params).await
    }

    async fn worker_reap(&self, params: WorkerReapParams) -> StoreResult<Reaped> {
        workers::reap(&self.db, &self.db.limits().worker_reap(params)?).await
    }

    async fn worker_count_live(&self) -> StoreResult<u64> {
        workers::count_live(&mut self.db.read().await?).await
    }

    async fn worker_standing(&self, id: String) -> StoreResult<Option<WorkerStanding>> {
        workers::standing_in(&mut self.db.read().await?, &id, false).await
    }

    // Events.

    async fn event_list(&self, params: EventListParams) -> StoreResult<Vec<Event>> {
        events::list(&mut self.db.read().await?, &params).await
    }

    async fn event_prune(&self, params: EventPruneParams) -> StoreResult<u64> {
        events::prune(&self.db, &params).await
    }

    async fn event_feed(&self, params: feed::FeedParams) -> StoreResult<feed::Feed> {
        sqlfeed::read(&mut self.db.read().await?, &params).await
    }

    async fn feed_head(&self) -> StoreResult<feed::FeedCursor> {
        sqlfeed::head(&mut self.db.read().await?).await
    }
}

#[async_trait]
impl<B: Backend> ChunkedUpdate for SqlStore<B> {
    /// Read without locks (on SQLite, on a reader connection, so the writer is not held
    /// while the planner's index is read).
    async fn task_ids_matching(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskId>> {
        query::ids_matching(&mut self.db.read().await?, filter).await
    }

    async fn task_update_chunk(&self, params: &UpdateChunkParams<'_>) -> StoreResult<u64> {
        self.change_chunk(&self.db.limits().chunk(params)?).await
    }
}
