//! What a backend provides, and the `Store` written once on top of it.
//!
//! A backend implements [`Backend`]: the hot path (submit, claim, renew, checkpoint,
//! finish, the rescuer's scan), and how an operator's change commits and wakes workers
//! (its default methods run each change in a write transaction of its own; MySQL
//! overrides them to run a transaction InnoDB aborts again). [`impl_store!`](crate::impl_store) then implements `Store` and
//! `ChunkedUpdate` for it: every call's parameters checked against the store's
//! [`Limits`] first, and every call off the hot path answered by this crate's queries.
//! (A macro, because no crate may implement another crate's trait for every type that
//! implements a third.) The backend sees parameters a limit applies to only as
//! [`Checked`] values.

use crate::batches;
use crate::limits::{self, LimitedClaim, LimitedQueues};
use crate::runs::{self, Ended, OpenRuns};
use crate::update::{self, Changed};
use crate::{query, Commit, Connect};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tasktable_core::Lease;
use tasktable_core::{NewTask, Task, TaskId};
use tasktable_store::{
    Batch, BatchControlParams, BatchSaveParams, BatchSaved, BatchUpdateParams, Checked,
    CheckpointParams, ClaimParams, ExpiredParams, FinishItem, FinishParams, LeaseStatus, Limits,
    QueuePauseParams, QueuePolicyParams, RenewParams, StoreResult, SubmitParams, Submitted,
    UpdateChunkParams, UpdateParams, Wake,
};
use tokio::sync::broadcast;

/// The part of a store that differs between databases.
#[async_trait]
pub trait Backend: Connect + std::fmt::Debug + Sized + 'static {
    /// `sqlite`, `postgres`, `mysql`.
    const NAME: &'static str;

    /// What calls may carry: the store's configuration.
    fn limits(&self) -> Limits;

    /// Rows per transaction of a bulk change.
    fn bulk_chunk_rows(&self) -> u32;

    /// How many calls the store serves at once ([`Store::capacity`](tasktable_store::Store::capacity)).
    fn capacity(&self) -> usize;

    /// Applies the migrations this version ships that the database lacks, serialised
    /// against other migrators the database's way.
    async fn migrate(&self) -> StoreResult<()>;

    async fn db_now(&self) -> StoreResult<DateTime<Utc>>;

    async fn submit(&self, params: Checked<SubmitParams>) -> StoreResult<Vec<Submitted>>;

    /// Inserts tasks inside a write transaction, at `now`: they commit or roll back with
    /// the rest of it. Workers are woken by [`Backend::commit_change`].
    async fn insert_tasks(
        &self,
        tx: &mut Self::Write,
        tasks: &Checked<Vec<NewTask>>,
        now: DateTime<Utc>,
    ) -> StoreResult<Vec<Submitted>>;

    /// The hot-path claim, which takes nothing from a paused or limited queue.
    async fn claim(&self, params: &ClaimParams) -> StoreResult<Vec<Task>>;

    /// The queues this store found limited ([`limits::LimitedQueues`]).
    fn limited_queues(&self) -> &LimitedQueues;

    /// Runs [`limits::claim`], the claim of a limited queue.
    async fn claim_limited(&self, params: &ClaimParams) -> StoreResult<LimitedClaim> {
        limits::claim(self, params).await
    }

    /// Runs [`limits::set_policy`] in a write transaction of its own; a queue whose
    /// policy is cleared has its workers woken.
    async fn set_policy(&self, params: &Checked<QueuePolicyParams>) -> StoreResult<()> {
        let mut tx = self.write().await?;
        limits::set_policy(&mut tx, params).await?;
        let wake = if params.policy.is_limited() {
            Vec::new()
        } else {
            vec![params.queue.clone()]
        };
        self.commit_change(tx, Changed { count: 1, wake }).await?;
        Ok(())
    }

    /// What this store knows of open multi-run tasks ([`runs::OpenRuns`]).
    fn open_runs(&self) -> &OpenRuns;

    /// Submits tasks some of which want several runs or are batches: inserts them as
    /// [`Backend::submit`] does, then marks those ([`runs::mark_submitted`],
    /// [`batches::mark_submitted`]), in one write transaction.
    async fn submit_runs(&self, params: &Checked<SubmitParams>) -> StoreResult<Vec<Submitted>> {
        let mut tx = self.write().await?;
        let now = crate::Exec::now(&mut tx, params.now).await?;
        let mut resolved = params.tasks.clone();
        let aimed = runs::resolve_broadcasts(&mut tx, &mut resolved).await?;
        let tasks = self.limits().tasks(resolved)?;
        let submitted = self.insert_tasks(&mut tx, &tasks, now).await?;
        runs::mark_submitted(&mut tx, &tasks, &submitted, &aimed, now).await?;
        batches::mark_submitted(&mut tx, &tasks, &submitted, now).await?;
        let mut wake: Vec<String> = tasks.iter().map(|t| t.queue.clone()).collect();
        wake.sort();
        wake.dedup();
        let count = submitted.len() as u64;
        self.commit_change(tx, Changed { count, wake }).await?;
        Ok(submitted)
    }

    /// Runs [`batches::save_in`] in a write transaction of its own.
    async fn save_batch(&self, params: &BatchSaveParams) -> StoreResult<BatchSaved> {
        let mut tx = self.write().await?;
        let saved = batches::save_in(&mut tx, params).await?;
        tx.commit().await?;
        Ok(saved)
    }

    /// Runs [`batches::control_in`] in a write transaction of its own, waking the
    /// queue's workers when the batch became due.
    async fn control_batch(&self, params: &BatchControlParams) -> StoreResult<Batch> {
        let mut tx = self.write().await?;
        let (batch, changed) = batches::control_in(&mut tx, params).await?;
        self.commit_change(tx, changed).await?;
        Ok(batch)
    }

    /// Runs [`batches::update_in`] in a write transaction of its own, new data checked
    /// as an operator's payload edit is.
    async fn update_batch(&self, mut params: BatchUpdateParams) -> StoreResult<Batch> {
        if let Some(data) = params.data.take() {
            let checked = self.limits().update(UpdateParams {
                target: tasktable_store::Target::Id(params.id),
                change: tasktable_core::Change::EditPayload { payload: data },
                actor: params.actor.clone(),
                now: None,
            })?;
            if let tasktable_core::Change::EditPayload { payload } = checked.into_inner().change {
                params.data = Some(payload);
            }
        }
        let mut tx = self.write().await?;
        let batch = batches::update_in(&mut tx, &params).await?;
        tx.commit().await?;
        Ok(batch)
    }

    /// Runs [`runs::claim_in`] in a write transaction of its own.
    async fn claim_runs(&self, params: &ClaimParams) -> StoreResult<Vec<Task>> {
        let mut tx = self.write().await?;
        let tasks = runs::claim_in(&mut tx, params).await?;
        tx.commit().await?;
        Ok(tasks)
    }

    /// Runs [`runs::renew_in`] in a write transaction of its own.
    async fn renew_run(
        &self,
        lease: &Lease,
        run: u32,
        lease_for: Duration,
        now: Option<DateTime<Utc>>,
    ) -> StoreResult<LeaseStatus> {
        let mut tx = self.write().await?;
        let status = runs::renew_in(&mut tx, lease, run, lease_for, now).await?;
        tx.commit().await?;
        Ok(status)
    }

    /// Runs [`runs::checkpoint_in`] in a write transaction of its own.
    async fn checkpoint_run(
        &self,
        params: &Checked<CheckpointParams>,
        run: u32,
    ) -> StoreResult<LeaseStatus> {
        let mut tx = self.write().await?;
        let status = runs::checkpoint_in(&mut tx, params, run).await?;
        tx.commit().await?;
        Ok(status)
    }

    /// Runs [`runs::finish_in`] in a write transaction of its own; a task that wants
    /// more runs has its queue's workers woken.
    async fn finish_run(
        &self,
        item: &FinishItem,
        run: u32,
        only_if_expired: bool,
        now: Option<DateTime<Utc>>,
    ) -> StoreResult<Ended> {
        let mut tx = self.write().await?;
        let ended = runs::finish_in(&mut tx, item, run, only_if_expired, now).await?;
        let wake = ended.wake.iter().cloned().collect();
        self.commit_change(tx, Changed { count: 1, wake }).await?;
        Ok(ended)
    }

    async fn renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>>;

    async fn checkpoint(&self, params: Checked<CheckpointParams>) -> StoreResult<LeaseStatus>;

    async fn finish(&self, params: Checked<FinishParams>) -> StoreResult<Vec<bool>>;

    async fn list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>>;

    /// Commits an operator's change, and wakes the workers of the queues it made due
    /// (`changed.wake`) the backend's way; how many tasks changed.
    async fn commit_change(&self, tx: Self::Write, changed: Changed) -> StoreResult<u64>;

    /// Runs [`update::one`] in a write transaction of its own and commits it.
    async fn change_one(&self, id: TaskId, params: &Checked<UpdateParams>) -> StoreResult<u64> {
        let mut tx = self.write().await?;
        let changed = update::one(&mut tx, id, params).await?;
        self.commit_change(tx, changed).await
    }

    /// Runs [`update::chunk`] the same way.
    async fn change_chunk(&self, params: &Checked<&UpdateChunkParams<'_>>) -> StoreResult<u64> {
        let mut tx = self.write().await?;
        let changed = update::chunk(&mut tx, params).await?;
        self.commit_change(tx, changed).await
    }

    /// Runs [`query::set_paused`] the same way; a resumed queue's workers are woken.
    async fn set_paused(&self, params: QueuePauseParams) -> StoreResult<()> {
        let mut tx = self.write().await?;
        query::set_paused(&mut tx, &params).await?;
        let wake = if params.paused {
            Vec::new()
        } else {
            vec![params.queue]
        };
        self.commit_change(tx, Changed { count: 1, wake }).await?;
        Ok(())
    }

    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>>;
}

/// What the expansion of [`impl_store!`](crate::impl_store) names.
#[doc(hidden)]
pub mod __private {
    pub use crate::batches;
    pub use crate::feed as sqlfeed;
    pub use crate::limits::{self, LimitedClaim};
    pub use crate::runs;
    pub use crate::stats::SqlStats;
    pub use crate::Exec as _;
    pub use crate::{
        affinity, events, logs, query, retention, schedules, workers, Backend, Connect,
    };
    pub use async_trait::async_trait;
    pub use chrono::{DateTime, Utc};
    pub use tasktable_core::runs::Run;
    pub use tasktable_core::worker::WorkerInfo;
    pub use tasktable_core::{Attempt, Lease, Task, TaskId};
    pub use tasktable_store::*;
    pub use tokio::sync::broadcast;
}

/// Implements `Store` and `ChunkedUpdate` for a type that implements
/// [`Backend`](crate::Backend): see [`crate::backend`].
#[macro_export]
macro_rules! impl_store {
    ($store:ty) => {
        const _: () = {
            use $crate::backend::__private::*;

            impl $store {
                /// The SQL half of statistics (`StatsSource`) on this store, for callers
                /// that time its parts.
                pub fn stats_source(&self) -> SqlStats<'_, Self> {
                    SqlStats(self)
                }

                /// The claim of tasks that run once: the hot path, unless the queue is
                /// known to be limited; a hot-path claim that finds nothing asks whether
                /// the queue has become limited (at most once per `limits::RECHECK`).
                async fn claim_single(&self, params: &ClaimParams) -> StoreResult<Vec<Task>> {
                    let limited = self.limited_queues();
                    if limited.contains(&params.queue) {
                        match Backend::claim_limited(self, params).await? {
                            LimitedClaim::Claimed(tasks) => return Ok(tasks),
                            LimitedClaim::NotLimited => limited.forget(&params.queue),
                        }
                    }
                    let tasks = Backend::claim(self, params).await?;
                    if !tasks.is_empty() || !limited.due_for_check(&params.queue) {
                        return Ok(tasks);
                    }
                    if !limits::is_limited(&mut self.read().await?, &params.queue).await? {
                        limited.found_free(&params.queue);
                        return Ok(tasks);
                    }
                    limited.remember(&params.queue);
                    match Backend::claim_limited(self, params).await? {
                        LimitedClaim::Claimed(tasks) => Ok(tasks),
                        LimitedClaim::NotLimited => Ok(Vec::new()),
                    }
                }
            }

            #[async_trait]
            impl Store for $store {
                fn backend(&self) -> &'static str {
                    <$store as Backend>::NAME
                }

                fn capacity(&self) -> usize {
                    Backend::capacity(self)
                }

                async fn migrate(&self) -> StoreResult<()> {
                    Backend::migrate(self).await
                }

                async fn db_now(&self) -> StoreResult<DateTime<Utc>> {
                    Backend::db_now(self).await
                }

                /// Tasks that want several runs go through the shared layer's submit
                /// (`runs::mark_submitted`); the rest through the backend's.
                async fn task_submit(&self, params: SubmitParams) -> StoreResult<Vec<Submitted>> {
                    let params = self.limits().submit(params)?;
                    if params
                        .tasks
                        .iter()
                        .all(|t| t.runs.is_none() && t.rearm.is_none() && t.batch.is_none())
                    {
                        return Backend::submit(self, params).await;
                    }
                    let submitted = Backend::submit_runs(self, &params).await?;
                    for t in params.tasks.iter().filter(|t| t.runs.is_some()) {
                        self.open_runs().stir(&t.queue);
                    }
                    Ok(submitted)
                }

                /// The hot path, unless the queue is known to be limited; a hot-path claim
                /// that finds nothing asks whether the queue has become limited (at most
                /// once per `limits::RECHECK`).
                /// Runs of open multi-run tasks fill what the claim of single tasks left
                /// (when this store may expect some: `runs::OpenRuns`).
                async fn task_claim(&self, params: ClaimParams) -> StoreResult<Vec<Task>> {
                    let mut tasks = self.claim_single(&params).await?;
                    let room = params.limit.saturating_sub(tasks.len() as u32);
                    let open = self.open_runs();
                    if room == 0
                        || !open.due(&params.queue, &params.worker_id, params.now.is_some())
                    {
                        return Ok(tasks);
                    }
                    let mut read = self.read().await?;
                    let now = read.now(params.now).await?;
                    let any = runs::any_open(&mut read, &params.queue, now).await?;
                    drop(read);
                    if !any {
                        open.found_none(&params.queue);
                        return Ok(tasks);
                    }
                    let more = Backend::claim_runs(
                        self,
                        &ClaimParams {
                            limit: room,
                            ..params.clone()
                        },
                    )
                    .await?;
                    if more.is_empty() {
                        open.found_nothing_for(&params.queue, &params.worker_id);
                        return Ok(tasks);
                    }
                    tasks.extend(more);
                    tasks.sort_by(Task::claim_order);
                    Ok(tasks)
                }

                async fn run_list(&self, task_id: TaskId) -> StoreResult<Vec<Run>> {
                    runs::list(&mut self.read().await?, task_id).await
                }

                async fn lease_status(&self, lease: Lease) -> StoreResult<LeaseStatus> {
                    query::lease_status(&mut self.read().await?, &lease).await
                }

                async fn batch_get(&self, id: TaskId) -> StoreResult<Option<Batch>> {
                    batches::get(&mut self.read().await?, id).await
                }

                async fn batch_list(&self, params: BatchListParams) -> StoreResult<Vec<Batch>> {
                    batches::list(&mut self.read().await?, &params).await
                }

                async fn batch_save(&self, params: BatchSaveParams) -> StoreResult<BatchSaved> {
                    Backend::save_batch(self, &params).await
                }

                async fn batch_control(&self, params: BatchControlParams) -> StoreResult<Batch> {
                    Backend::control_batch(self, &params).await
                }

                async fn batch_update(&self, params: BatchUpdateParams) -> StoreResult<Batch> {
                    Backend::update_batch(self, params).await
                }

                async fn batch_failures(&self, id: TaskId) -> StoreResult<Vec<ItemFailure>> {
                    batches::failures(&mut self.read().await?, id).await
                }

                async fn task_release_affinity(
                    &self,
                    params: AffinityReleaseParams,
                ) -> StoreResult<u64> {
                    affinity::release(self, &self.limits().affinity_release(params)?).await
                }

                /// Leases of runs are renewed one by one on their runs' rows; the rest
                /// by the backend, in one call.
                async fn task_renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
                    if params.leases.iter().all(|l| l.run.is_none()) {
                        return Backend::renew(self, params).await;
                    }
                    let (of_runs, single): (Vec<(usize, Lease)>, Vec<(usize, Lease)>) = params
                        .leases
                        .iter()
                        .copied()
                        .enumerate()
                        .partition(|(_, l)| l.run.is_some());
                    let mut out = vec![LeaseStatus::Lost; params.leases.len()];
                    if !single.is_empty() {
                        let renewed = Backend::renew(
                            self,
                            RenewParams {
                                leases: single.iter().map(|(_, l)| *l).collect(),
                                ..params.clone()
                            },
                        )
                        .await?;
                        for ((i, _), status) in single.iter().zip(renewed) {
                            out[*i] = status;
                        }
                    }
                    for (i, lease) in of_runs {
                        let run = lease.run.expect("partitioned by run");
                        out[i] =
                            Backend::renew_run(self, &lease, run, params.lease_for, params.now)
                                .await?;
                    }
                    Ok(out)
                }

                async fn task_checkpoint(
                    &self,
                    params: CheckpointParams,
                ) -> StoreResult<LeaseStatus> {
                    let params = self.limits().checkpoint(params)?;
                    match params.lease.run {
                        Some(run) => Backend::checkpoint_run(self, &params, run).await,
                        None => Backend::checkpoint(self, params).await,
                    }
                }

                /// Ends of runs go one by one to their runs' rows (`runs::finish_in`);
                /// the rest to the backend, in one call.
                async fn task_finish(&self, params: FinishParams) -> StoreResult<Vec<bool>> {
                    let params = self.limits().finish(params)?;
                    if params.items.iter().all(|i| i.lease.run.is_none()) {
                        return Backend::finish(self, params).await;
                    }
                    let mut out = vec![false; params.items.len()];
                    let mut single = Vec::new();
                    let mut at = Vec::new();
                    for (i, item) in params.items.iter().enumerate() {
                        match item.lease.run {
                            Some(run) => {
                                let ended = Backend::finish_run(
                                    self,
                                    item,
                                    run,
                                    params.only_if_expired,
                                    params.now,
                                )
                                .await?;
                                out[i] = ended.applied;
                                if let Some(queue) = &ended.wake {
                                    self.open_runs().stir(queue);
                                }
                            }
                            None => {
                                single.push(item.clone());
                                at.push(i);
                            }
                        }
                    }
                    if !single.is_empty() {
                        let rest = self.limits().finish(FinishParams {
                            items: single,
                            only_if_expired: params.only_if_expired,
                            now: params.now,
                        })?;
                        for (i, applied) in at.into_iter().zip(Backend::finish(self, rest).await?) {
                            out[i] = applied;
                        }
                    }
                    Ok(out)
                }

                /// Expired tasks and expired runs, oldest expiry first.
                async fn task_list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>> {
                    let limit = params.limit;
                    let now = params.now;
                    let mut expired = Backend::list_expired(self, params).await?;
                    expired.extend(runs::list_expired(&mut self.read().await?, limit, now).await?);
                    expired.sort_by_key(|t| t.lease_expires_at);
                    expired.truncate(limit as usize);
                    Ok(expired)
                }

                async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
                    query::get(&mut self.read().await?, id).await
                }

                async fn task_list(&self, params: ListParams) -> StoreResult<TaskPage> {
                    let params = self.limits().list(params)?;
                    query::list(&mut self.read().await?, &params).await
                }

                async fn task_count(&self, params: CountParams) -> StoreResult<u64> {
                    let params = self.limits().count(params)?;
                    query::count(&mut self.read().await?, &params).await
                }

                async fn attempt_list(&self, task_id: TaskId) -> StoreResult<Vec<Attempt>> {
                    query::attempts(&mut self.read().await?, task_id).await
                }

                async fn task_update(&self, params: UpdateParams) -> StoreResult<u64> {
                    let params = self.limits().update(params)?;
                    match &params.target {
                        Target::Id(id) => self.change_one(*id, &params).await,
                        Target::Filter(filter) => {
                            let rows = self.bulk_chunk_rows();
                            update_in_chunks(
                                self,
                                filter,
                                &params.change,
                                &params.actor,
                                params.now,
                                rows,
                            )
                            .await
                        }
                    }
                }

                async fn queue_set_paused(&self, params: QueuePauseParams) -> StoreResult<()> {
                    Backend::set_paused(self, params).await
                }

                async fn queue_set_policy(&self, params: QueuePolicyParams) -> StoreResult<()> {
                    let params = self.limits().queue_policy(params)?;
                    Backend::set_policy(self, &params).await?;
                    if !params.policy.is_limited() {
                        self.limited_queues().forget(&params.queue);
                    }
                    Ok(())
                }

                async fn queue_list(&self) -> StoreResult<Vec<QueueInfo>> {
                    query::queues(&mut self.read().await?).await
                }

                async fn stats(&self, params: StatsParams) -> StoreResult<Stats> {
                    stats::compute(&SqlStats(self), &params).await
                }

                async fn schedule_create(
                    &self,
                    params: CreateScheduleParams,
                ) -> StoreResult<Schedule> {
                    schedules::create(self, params).await
                }

                async fn schedule_get(
                    &self,
                    schedule: ScheduleRef,
                ) -> StoreResult<Option<Schedule>> {
                    schedules::get(&mut self.read().await?, &schedule).await
                }

                async fn schedule_list(&self) -> StoreResult<Vec<Schedule>> {
                    schedules::list(&mut self.read().await?).await
                }

                async fn schedule_edit(&self, params: EditScheduleParams) -> StoreResult<Schedule> {
                    schedules::edit(self, params).await
                }

                async fn schedule_delete(&self, params: DeleteScheduleParams) -> StoreResult<()> {
                    schedules::delete(self, params).await
                }

                async fn schedule_run_due(&self, params: RunDueParams) -> StoreResult<Vec<Fired>> {
                    schedules::run_due(self, params).await
                }

                async fn schedule_fire_now(&self, params: FireNowParams) -> StoreResult<Fired> {
                    schedules::fire_now(self, params).await
                }

                async fn task_purge(&self, params: PurgeParams) -> StoreResult<Purged> {
                    retention::purge(self, &self.limits().purge(params)?).await
                }

                async fn task_get_archived(
                    &self,
                    id: TaskId,
                ) -> StoreResult<Option<(Task, Vec<Attempt>)>> {
                    retention::archived(&mut self.read().await?, id).await
                }

                async fn worker_beat(&self, params: WorkerBeatParams) -> StoreResult<WorkerStatus> {
                    workers::beat(self, &self.limits().worker_beat(params)?).await
                }

                async fn worker_leave(&self, id: String) -> StoreResult<()> {
                    workers::leave(self, &id).await
                }

                async fn worker_list(
                    &self,
                    params: WorkerListParams,
                ) -> StoreResult<Vec<WorkerInfo>> {
                    workers::list(&mut self.read().await?, &params).await
                }

                async fn worker_set_draining(
                    &self,
                    params: WorkerDrainParams,
                ) -> StoreResult<Option<WorkerInfo>> {
                    workers::set_draining(self, &params).await
                }

                async fn worker_reap(&self, params: WorkerReapParams) -> StoreResult<Reaped> {
                    workers::reap(self, &self.limits().worker_reap(params)?).await
                }

                async fn worker_count_live(&self) -> StoreResult<u64> {
                    workers::count_live(&mut self.read().await?).await
                }

                async fn queue_discover(&self) -> StoreResult<Vec<String>> {
                    workers::discover(&mut self.read().await?).await
                }

                async fn queue_has_due(&self, params: DueParams) -> StoreResult<bool> {
                    query::has_due(&mut self.read().await?, &params).await
                }

                async fn event_list(&self, params: EventListParams) -> StoreResult<Vec<Event>> {
                    events::list(&mut self.read().await?, &params).await
                }

                /// The live table's, or, for a task retention archived, the archive's.
                async fn task_events(&self, id: TaskId) -> StoreResult<Vec<Event>> {
                    let mut read = self.read().await?;
                    let live = events::of_task(&mut read, id, false).await?;
                    if !live.is_empty() || query::get(&mut read, id).await?.is_some() {
                        return Ok(live);
                    }
                    events::of_task(&mut read, id, true).await
                }

                async fn task_log(&self, params: LogParams) -> StoreResult<LeaseStatus> {
                    logs::append(self, &params).await
                }

                /// The live table's, or, for a task retention archived, the archive's.
                async fn task_logs(&self, id: TaskId) -> StoreResult<Vec<LogLine>> {
                    let mut read = self.read().await?;
                    let live = logs::of_task(&mut read, id, false).await?;
                    if !live.is_empty() || query::get(&mut read, id).await?.is_some() {
                        return Ok(live);
                    }
                    logs::of_task(&mut read, id, true).await
                }

                async fn event_feed(&self, params: feed::FeedParams) -> StoreResult<feed::Feed> {
                    sqlfeed::read(&mut self.read().await?, &params).await
                }

                async fn feed_head(&self) -> StoreResult<feed::FeedCursor> {
                    sqlfeed::head(&mut self.read().await?).await
                }

                async fn event_prune(&self, params: EventPruneParams) -> StoreResult<u64> {
                    events::prune(self, &params).await
                }

                async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>> {
                    Backend::subscribe(self).await
                }
            }

            #[async_trait]
            impl ChunkedUpdate for $store {
                /// Read without locks (on SQLite, on a reader connection, so the writer is
                /// not held while the planner's index is read).
                async fn task_ids_matching(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskId>> {
                    query::ids_matching(&mut self.read().await?, filter).await
                }

                async fn task_update_chunk(
                    &self,
                    params: &UpdateChunkParams<'_>,
                ) -> StoreResult<u64> {
                    self.change_chunk(&self.limits().chunk(params)?).await
                }
            }
        };
    };
}
