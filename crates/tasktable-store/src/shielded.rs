//! A store whose calls run to their end whatever becomes of their callers.
//!
//! A caller's future can be dropped at any await: an HTTP client hangs up and the server
//! drops its handler, a `tokio::time::timeout` runs out, a `select!` takes another
//! branch, a task is aborted. A store call dropped half way can leave its work half done
//! (a transaction started but not ended, a commit whose wake-ups were not sent, a cache
//! not updated), and the database drivers are not safe there either: a connection can go
//! back to its pool inside a transaction nobody will end, or out of step with the server.
//! [`Shielded`] drives each call in its caller's task, as a plain call would be driven,
//! and when the caller drops it before it ends, moves the rest of it to a task of its own:
//! dropping the caller's future only drops the wait, and the call still commits or rolls
//! back, wakes whom it wakes and returns its connections clean.
//!
//! A call that has not started may still be given up: no more calls run at once than the
//! store serves at once ([`Store::capacity`], its pool's connections), and a caller waits
//! for its turn in its own future, so one dropped while it waits leaves nothing behind.
//! Without that bound, clients that send requests and hang up at once would pile up work
//! the server must finish before it can answer anyone else. A claim whose caller went
//! away by the time it committed gives its tasks back at once, their attempts refunded.
//!
//! The stores `tasktable::connect` opens are shielded, and so is the store every part
//! that holds one is given (the worker, the HTTP server, the client), so a store built by
//! hand is shielded where it is used; pass one shielded store to every part so that they
//! share one bound. A call costs a turn at a semaphore; only a call cut off costs a task.
//!
//! Every call's result also tells whether the database answers: a shielded store logs
//! one WARN `database unreachable` when calls start failing because the database cannot
//! be reached ([`StoreError::is_unreachable`]), and one INFO `database reachable again`
//! when one succeeds afterwards, so one shared store means one pair of lines per outage.

use crate::reachability::Reachability;
use crate::*;
use futures::future::BoxFuture;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::Instrument;

/// The most calls a [`Shielded`] store runs at once, whatever the store's
/// [`capacity`](Store::capacity); more wait for a turn.
pub const MAX_IN_FLIGHT: usize = 256;

/// How long a call waits for its turn before it fails, as long as sqlx waits for a pooled
/// connection: calls queue here instead of at the pool, and an outage still fails them
/// within about the same time, as [`Unreachable`].
pub const TURN_WAIT: Duration = Duration::from_secs(30);

/// A [`Store`] that runs every call of the store it wraps to its end ([module
/// docs](self)).
#[derive(Debug, Clone)]
pub struct Shielded {
    store: Arc<dyn Store>,
    turns: Arc<Semaphore>,
    reach: Arc<Reachability>,
}

/// What becomes of the result of a call whose caller went away.
type Unheard<T> = Box<dyn FnOnce(Arc<dyn Store>, T) -> BoxFuture<'static, ()> + Send>;

impl Shielded {
    /// `store`, shielded; a store whose calls already run to their end comes back as it
    /// is, so every part that holds a store may shield it without stacking shields.
    pub fn wrap(store: Arc<dyn Store>) -> Arc<dyn Store> {
        Shielded::wrap_with(store, None)
    }

    /// [`wrap`](Self::wrap) for a store opened from `url`: its lines about an unreachable
    /// database name the URL, its password hidden.
    pub fn wrap_at(store: Arc<dyn Store>, url: &str) -> Arc<dyn Store> {
        Shielded::wrap_with(store, Some(url))
    }

    fn wrap_with(store: Arc<dyn Store>, url: Option<&str>) -> Arc<dyn Store> {
        if store.runs_to_end() {
            return store;
        }
        let turns = store.capacity().clamp(1, MAX_IN_FLIGHT);
        Arc::new(Shielded {
            reach: Arc::new(Reachability::new(store.backend(), url)),
            store,
            turns: Arc::new(Semaphore::new(turns)),
        })
    }

    /// Waits for a turn, then runs `call` on the wrapped store to its end.
    async fn run<T, F>(&self, call: impl FnOnce(Arc<dyn Store>) -> F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: Future<Output = StoreResult<T>> + Send + 'static,
    {
        self.run_or(call, Box::new(|_, _| Box::pin(async {}))).await
    }

    /// [`run`](Self::run), and when the caller has gone by the time the call succeeds,
    /// hands its result to `unheard` instead of dropping it.
    async fn run_or<T, F>(
        &self,
        call: impl FnOnce(Arc<dyn Store>) -> F,
        unheard: Unheard<T>,
    ) -> StoreResult<T>
    where
        T: Send + 'static,
        F: Future<Output = StoreResult<T>> + Send + 'static,
    {
        let seen = self.reach.seen();
        let turn = match tokio::time::timeout(TURN_WAIT, self.turns.clone().acquire_owned()).await {
            Ok(Ok(turn)) => turn,
            Ok(Err(_)) => {
                return Err(StoreError::Database(
                    "the store is closed to new calls".into(),
                ))
            }
            Err(_) => {
                let waited: StoreResult<T> = Err(StoreError::unreachable(NoTurn));
                self.reach.observe(seen, &waited);
                return waited;
            }
        };
        let result = ToEnd {
            call: Some(Box::pin(call(self.store.clone()))),
            store: self.store.clone(),
            turn: Some(turn),
            unheard: Some(unheard),
            polling: false,
        }
        .await;
        self.reach.observe(seen, &result);
        result
    }
}

/// No turn at the store came within [`TURN_WAIT`]: every call the store serves at once
/// waited that long on the database.
#[derive(Debug, thiserror::Error)]
#[error("no turn at the store for {} s: every connection is busy (a slow or unreachable database)", TURN_WAIT.as_secs())]
struct NoTurn;

/// A store call driven in its caller's task that, dropped before it ends, finishes on a
/// task of its own (its turn held until then) and hands its result to `unheard`.
struct ToEnd<T: Send + 'static> {
    call: Option<BoxFuture<'static, StoreResult<T>>>,
    store: Arc<dyn Store>,
    turn: Option<OwnedSemaphorePermit>,
    unheard: Option<Unheard<T>>,
    /// Set while the call is being polled: a call dropped then has panicked, and is not
    /// polled again.
    polling: bool,
}

impl<T: Send + 'static> Future for ToEnd<T> {
    type Output = StoreResult<T>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<StoreResult<T>> {
        let this = &mut *self;
        let Some(call) = this.call.as_mut() else {
            return Poll::Pending;
        };
        this.polling = true;
        let polled = call.as_mut().poll(cx);
        this.polling = false;
        if polled.is_ready() {
            this.call = None;
            this.turn = None;
        }
        polled
    }
}

impl<T: Send + 'static> Drop for ToEnd<T> {
    fn drop(&mut self) {
        let (Some(call), Some(unheard)) = (self.call.take(), self.unheard.take()) else {
            return;
        };
        if self.polling || std::thread::panicking() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (store, turn) = (self.store.clone(), self.turn.take());
        let rest = async move {
            if let Ok(value) = call.await {
                unheard(store, value).await;
            }
            drop(turn);
        };
        runtime.spawn(rest.in_current_span());
    }
}

/// Gives back the tasks of a claim whose caller went away before it heard of them (an
/// HTTP client that hung up), as a worker gives back a task it never started: at once,
/// the attempt refunded, rather than when leases nobody holds run out.
async fn give_back(store: Arc<dyn Store>, tasks: Vec<Task>) {
    if tasks.is_empty() {
        return;
    }
    let items = tasks
        .iter()
        .map(|t| FinishItem {
            lease: t.lease(),
            plan: FinishPlan::unheard(),
        })
        .collect();
    let params = FinishParams {
        items,
        only_if_expired: false,
        now: None,
    };
    if let Err(e) = store.task_finish(params).await {
        tracing::warn!(error = %e, tasks = tasks.len(), "tasks claimed for a caller that went away wait for their leases to run out");
    }
}

#[async_trait]
impl Store for Shielded {
    fn backend(&self) -> &'static str {
        self.store.backend()
    }

    fn runs_to_end(&self) -> bool {
        true
    }

    fn capacity(&self) -> usize {
        self.store.capacity()
    }

    /// Only subscribes: nothing to leave half done.
    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>> {
        self.store.subscribe().await
    }

    async fn migrate(&self) -> StoreResult<()> {
        self.run(move |s| async move { s.migrate().await }).await
    }

    async fn db_now(&self) -> StoreResult<DateTime<Utc>> {
        self.run(move |s| async move { s.db_now().await }).await
    }

    async fn task_submit(&self, params: SubmitParams) -> StoreResult<Vec<Submitted>> {
        self.run(move |s| async move { s.task_submit(params).await })
            .await
    }

    /// A claim whose caller went away gives its tasks back at once, their attempts
    /// refunded, rather than leaving them to the rescuer when their leases run out.
    async fn task_claim(&self, params: ClaimParams) -> StoreResult<Vec<Task>> {
        let unheard: Unheard<Vec<Task>> =
            Box::new(|store, tasks| Box::pin(give_back(store, tasks)));
        self.run_or(move |s| async move { s.task_claim(params).await }, unheard)
            .await
    }

    async fn task_release_affinity(&self, params: AffinityReleaseParams) -> StoreResult<u64> {
        self.run(move |s| async move { s.task_release_affinity(params).await })
            .await
    }

    async fn task_renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        self.run(move |s| async move { s.task_renew(params).await })
            .await
    }

    async fn task_checkpoint(&self, params: CheckpointParams) -> StoreResult<LeaseStatus> {
        self.run(move |s| async move { s.task_checkpoint(params).await })
            .await
    }

    async fn task_finish(&self, params: FinishParams) -> StoreResult<Vec<bool>> {
        self.run(move |s| async move { s.task_finish(params).await })
            .await
    }

    async fn task_list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>> {
        self.run(move |s| async move { s.task_list_expired(params).await })
            .await
    }

    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        self.run(move |s| async move { s.task_get(id).await }).await
    }

    async fn task_list(&self, params: ListParams) -> StoreResult<TaskPage> {
        self.run(move |s| async move { s.task_list(params).await })
            .await
    }

    async fn task_count(&self, params: CountParams) -> StoreResult<u64> {
        self.run(move |s| async move { s.task_count(params).await })
            .await
    }

    async fn attempt_list(&self, task_id: TaskId) -> StoreResult<Vec<Attempt>> {
        self.run(move |s| async move { s.attempt_list(task_id).await })
            .await
    }

    async fn run_list(&self, task_id: TaskId) -> StoreResult<Vec<Run>> {
        self.run(move |s| async move { s.run_list(task_id).await })
            .await
    }

    async fn lease_status(&self, lease: Lease) -> StoreResult<LeaseStatus> {
        self.run(move |s| async move { s.lease_status(lease).await })
            .await
    }

    async fn batch_get(&self, id: TaskId) -> StoreResult<Option<Batch>> {
        self.run(move |s| async move { s.batch_get(id).await })
            .await
    }

    async fn batch_list(&self, params: BatchListParams) -> StoreResult<Vec<Batch>> {
        self.run(move |s| async move { s.batch_list(params).await })
            .await
    }

    async fn batch_save(&self, params: BatchSaveParams) -> StoreResult<BatchSaved> {
        self.run(move |s| async move { s.batch_save(params).await })
            .await
    }

    async fn batch_control(&self, params: BatchControlParams) -> StoreResult<Batch> {
        self.run(move |s| async move { s.batch_control(params).await })
            .await
    }

    async fn batch_update(&self, params: BatchUpdateParams) -> StoreResult<Batch> {
        self.run(move |s| async move { s.batch_update(params).await })
            .await
    }

    async fn batch_failures(&self, id: TaskId) -> StoreResult<Vec<ItemFailure>> {
        self.run(move |s| async move { s.batch_failures(id).await })
            .await
    }

    async fn task_update(&self, params: UpdateParams) -> StoreResult<u64> {
        self.run(move |s| async move { s.task_update(params).await })
            .await
    }

    async fn queue_set_paused(&self, params: QueuePauseParams) -> StoreResult<()> {
        self.run(move |s| async move { s.queue_set_paused(params).await })
            .await
    }

    async fn queue_set_policy(&self, params: QueuePolicyParams) -> StoreResult<()> {
        self.run(move |s| async move { s.queue_set_policy(params).await })
            .await
    }

    async fn queue_list(&self) -> StoreResult<Vec<QueueInfo>> {
        self.run(move |s| async move { s.queue_list().await }).await
    }

    async fn stats(&self, params: StatsParams) -> StoreResult<Stats> {
        self.run(move |s| async move { s.stats(params).await })
            .await
    }

    async fn schedule_create(&self, params: CreateScheduleParams) -> StoreResult<Schedule> {
        self.run(move |s| async move { s.schedule_create(params).await })
            .await
    }

    async fn schedule_get(&self, schedule: ScheduleRef) -> StoreResult<Option<Schedule>> {
        self.run(move |s| async move { s.schedule_get(schedule).await })
            .await
    }

    async fn schedule_list(&self) -> StoreResult<Vec<Schedule>> {
        self.run(move |s| async move { s.schedule_list().await })
            .await
    }

    async fn schedule_edit(&self, params: EditScheduleParams) -> StoreResult<Schedule> {
        self.run(move |s| async move { s.schedule_edit(params).await })
            .await
    }

    async fn schedule_delete(&self, params: DeleteScheduleParams) -> StoreResult<()> {
        self.run(move |s| async move { s.schedule_delete(params).await })
            .await
    }

    async fn schedule_run_due(&self, params: RunDueParams) -> StoreResult<Vec<Fired>> {
        self.run(move |s| async move { s.schedule_run_due(params).await })
            .await
    }

    async fn schedule_fire_now(&self, params: FireNowParams) -> StoreResult<Fired> {
        self.run(move |s| async move { s.schedule_fire_now(params).await })
            .await
    }

    async fn task_purge(&self, params: PurgeParams) -> StoreResult<Purged> {
        self.run(move |s| async move { s.task_purge(params).await })
            .await
    }

    async fn task_get_archived(&self, id: TaskId) -> StoreResult<Option<(Task, Vec<Attempt>)>> {
        self.run(move |s| async move { s.task_get_archived(id).await })
            .await
    }

    async fn worker_beat(&self, params: WorkerBeatParams) -> StoreResult<WorkerStatus> {
        self.run(move |s| async move { s.worker_beat(params).await })
            .await
    }

    async fn worker_leave(&self, params: WorkerLeaveParams) -> StoreResult<()> {
        self.run(move |s| async move { s.worker_leave(params).await })
            .await
    }

    async fn worker_get(&self, id: String) -> StoreResult<Option<WorkerInfo>> {
        self.run(move |s| async move { s.worker_get(id).await })
            .await
    }

    async fn worker_list(&self, params: WorkerListParams) -> StoreResult<Vec<WorkerInfo>> {
        self.run(move |s| async move { s.worker_list(params).await })
            .await
    }

    async fn worker_set_draining(
        &self,
        params: WorkerDrainParams,
    ) -> StoreResult<Option<WorkerInfo>> {
        self.run(move |s| async move { s.worker_set_draining(params).await })
            .await
    }

    async fn worker_reap(&self, params: WorkerReapParams) -> StoreResult<Reaped> {
        self.run(move |s| async move { s.worker_reap(params).await })
            .await
    }

    async fn worker_standing(&self, id: String) -> StoreResult<Option<WorkerStanding>> {
        self.run(move |s| async move { s.worker_standing(id).await })
            .await
    }

    async fn worker_count_live(&self) -> StoreResult<u64> {
        self.run(move |s| async move { s.worker_count_live().await })
            .await
    }

    async fn task_waiting(
        &self,
        params: TaskWaitingParams,
    ) -> StoreResult<Vec<tasktable_core::waiting::WaitReason>> {
        self.run(move |s| async move { s.task_waiting(params).await })
            .await
    }

    async fn queue_discover(&self) -> StoreResult<Vec<String>> {
        self.run(move |s| async move { s.queue_discover().await })
            .await
    }

    async fn queue_has_due(&self, params: DueParams) -> StoreResult<bool> {
        self.run(move |s| async move { s.queue_has_due(params).await })
            .await
    }

    async fn event_list(&self, params: EventListParams) -> StoreResult<Vec<Event>> {
        self.run(move |s| async move { s.event_list(params).await })
            .await
    }

    async fn task_events(&self, id: TaskId) -> StoreResult<Vec<Event>> {
        self.run(move |s| async move { s.task_events(id).await })
            .await
    }

    async fn event_prune(&self, params: EventPruneParams) -> StoreResult<u64> {
        self.run(move |s| async move { s.event_prune(params).await })
            .await
    }

    async fn task_log(&self, params: LogParams) -> StoreResult<LeaseStatus> {
        self.run(move |s| async move { s.task_log(params).await })
            .await
    }

    async fn task_logs(&self, id: TaskId) -> StoreResult<Vec<LogLine>> {
        self.run(move |s| async move { s.task_logs(id).await })
            .await
    }

    async fn event_feed(&self, params: feed::FeedParams) -> StoreResult<feed::Feed> {
        self.run(move |s| async move { s.event_feed(params).await })
            .await
    }

    async fn feed_head(&self) -> StoreResult<feed::FeedCursor> {
        self.run(move |s| async move { s.feed_head().await }).await
    }
}
