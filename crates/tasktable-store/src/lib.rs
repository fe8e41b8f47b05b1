//! The storage contract of tasktable.
//!
//! Owns: the [`Store`] trait, which speaks in transitions (`task_claim`, `task_finish`,
//! `task_update`, ...), each atomic; the parameter and result types of those calls, and
//! the one place they are validated ([`Limits`], which makes them [`Checked`]);
//! [`StoreError`]; the backend-independent half of windowed statistics ([`stats`]:
//! per-minute rollups, histograms, percentiles; the SQL half comes through
//! [`stats::StatsSource`]); and the walk of a bulk operator change in short chunks
//! ([`bulk`]: backends supply one chunk, [`update_in_chunks`] walks the filter); the
//! schedule calls' types ([`schedule`]), the worker registry's ([`worker`]), the batch
//! calls' ([`batch`]), the event log's and task logs' ([`event`], with a task's
//! [`timeline`]), and the live feed with its [`feed::Follower`] ([`feed`]); [`Shielded`],
//! which runs every call of a store to its end whatever becomes of its caller. Rules
//! (retry delays, which state an operation may start from) come from `tasktable-core` and
//! reach the store as parameters; the store only makes each transition atomic and fenced.
//!
//! Must not know: SQL, any particular database, and anything about how workers are
//! scheduled. The runtime and the server hold an `Arc<dyn Store>` and never open a
//! transaction themselves.

pub mod batch;
pub mod bulk;
pub mod event;
pub mod feed;
#[doc(hidden)]
pub use tasktable_core as __core;
mod checked;
mod error;
mod filter;
mod params;
mod rows;
pub mod schedule;
pub mod shielded;
pub mod stats;
pub mod worker;

pub use batch::{
    Batch, BatchControlParams, BatchListParams, BatchSaveParams, BatchSaved, BatchUpdateParams,
    ItemFailure, MAX_BATCH_LIST,
};
pub use bulk::{update_in_chunks, ChunkedUpdate, UpdateChunkParams, DEFAULT_BULK_CHUNK_ROWS};
pub use checked::{Checked, Limits};
pub use error::{StoreError, StoreResult};
pub use event::{
    timeline, Event, EventFilter, EventListParams, EventPruneParams, LogLine, LogParams, NewEvent,
    TimelineEntry, MAX_EVENT_LIST, MAX_LOG_LINES, MAX_LOG_LINES_PER_CALL, MAX_LOG_LINE_BYTES,
};
pub use filter::{Target, TaskFilter};
pub use params::*;
pub use rows::*;
pub use schedule::{
    CreateScheduleParams, DeleteScheduleParams, EditScheduleParams, FireNowParams, Fired,
    FiredTask, OnExisting, RunDueParams, Schedule, ScheduleRef,
};
pub use shielded::Shielded;
pub use stats::{GroupStats, Percentiles, SeriesPoint, Stats, StatsParams, WindowTotals};
pub use worker::{
    Reaped, WorkerBeatParams, WorkerDrainParams, WorkerListParams, WorkerReapParams, WorkerStatus,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tasktable_core::runs::Run;
use tasktable_core::worker::WorkerInfo;
use tasktable_core::{Attempt, Lease, Task, TaskId};
use tokio::sync::broadcast;

/// Storage for tasks. Every method is one atomic transition; methods that take a
/// [`Lease`](tasktable_core::Lease) apply only while the task still runs under that
/// lease's token, and report otherwise instead of failing.
///
/// Methods that depend on the time take `now: Option<DateTime<Utc>>`: `None` means the
/// database's clock, which is what production always uses; tests pin time with `Some`.
#[async_trait]
pub trait Store: Send + Sync + std::fmt::Debug + 'static {
    /// A short name of the backend: `sqlite`, `postgres`, `mysql`.
    fn backend(&self) -> &'static str;

    /// Whether every call runs to its end even when its caller's future is dropped half
    /// way ([`Shielded`] stores do); [`Shielded::wrap`] leaves such a store as it is.
    fn runs_to_end(&self) -> bool {
        false
    }

    /// How many calls this store serves at once (its pool's connections): more only wait
    /// inside it. [`Shielded`] runs this many and queues the rest where a caller that
    /// goes away takes its call with it.
    fn capacity(&self) -> usize {
        shielded::MAX_IN_FLIGHT
    }

    /// Applies the migrations this version ships that the database has not seen yet.
    /// Safe to call from many processes at once.
    async fn migrate(&self) -> StoreResult<()>;

    /// The database's current time.
    async fn db_now(&self) -> StoreResult<DateTime<Utc>>;

    /// Creates tasks, all or none. A task whose idempotency key already exists is not
    /// created; its existing id is returned with `created: false`.
    async fn task_submit(&self, params: SubmitParams) -> StoreResult<Vec<Submitted>>;

    /// Leases up to `limit` due tasks of one queue, in claim order (priority high to low,
    /// then `run_at`, then id). Claims nothing from a paused queue, and no more than a
    /// queue's policy allows. Each claimed task has its attempt counted and its lease
    /// token increased.
    async fn task_claim(&self, params: ClaimParams) -> StoreResult<Vec<Task>>;

    /// Ends the waits of retries for their previous workers that are over: the wait
    /// passed, or the worker is gone from the registry. The task's own target applies
    /// again and its queue's workers are woken. How many tasks it freed (at most
    /// `limit`: call again while it returns `limit`).
    async fn task_release_affinity(&self, params: AffinityReleaseParams) -> StoreResult<u64>;

    /// Extends leases; one status per lease, in order.
    async fn task_renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>>;

    /// Saves a checkpoint and/or progress under a lease.
    async fn task_checkpoint(&self, params: CheckpointParams) -> StoreResult<LeaseStatus>;

    /// Ends attempts: records each in the history and moves its task out of `running`.
    /// One flag per item, in order: `true` when applied, `false` when the lease was lost.
    async fn task_finish(&self, params: FinishParams) -> StoreResult<Vec<bool>>;

    /// Running tasks whose lease expired (or whose attempt deadline passed) before `now`,
    /// oldest expiry first. The caller decides each one's fate and ends it with
    /// [`Store::task_finish`] with `only_if_expired`.
    async fn task_list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>>;

    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>>;

    /// Tasks matching a filter, newest first, one page at a time.
    async fn task_list(&self, params: ListParams) -> StoreResult<TaskPage>;

    /// How many tasks match a filter, counting no further than `cap`.
    async fn task_count(&self, params: CountParams) -> StoreResult<u64>;

    /// A task's attempt history, oldest first.
    async fn attempt_list(&self, task_id: TaskId) -> StoreResult<Vec<Attempt>>;

    /// A multi-run task's runs, by number (none for a task that runs once).
    async fn run_list(&self, task_id: TaskId) -> StoreResult<Vec<Run>>;

    /// Where a lease (of a task, or of a run of a multi-run task) stands, changing
    /// nothing: held; cancelled by an operator under this very token and credential;
    /// retargeted (an operator's new target took the task back from under it); or lost,
    /// which is also the answer to a credential that is not the claim's, so that a guess
    /// learns nothing. What a fenced write that missed answers.
    async fn lease_status(&self, lease: Lease) -> StoreResult<LeaseStatus>;

    /// A batch ([`batch`]), or `None` when the task is none or does not exist.
    async fn batch_get(&self, id: TaskId) -> StoreResult<Option<Batch>>;

    /// Batches, newest first.
    async fn batch_list(&self, params: BatchListParams) -> StoreResult<Vec<Batch>>;

    /// A runner's save of progress and failures, fenced and renewing the lease like
    /// [`Store::task_renew`]; answers what operators asked since. A save whose lease
    /// does not hold changes nothing.
    async fn batch_save(&self, params: BatchSaveParams) -> StoreResult<BatchSaved>;

    /// Starts, pauses, stops or resumes a batch as [`tasktable_core::batch::BatchAction`]
    /// says; an action that does not apply is refused (`BatchRefused`) and changes
    /// nothing.
    async fn batch_control(&self, params: BatchControlParams) -> StoreResult<Batch>;

    /// Changes a batch's error budget or data; data that may not change now is refused
    /// (`BatchRefused`) and nothing changes.
    async fn batch_update(&self, params: BatchUpdateParams) -> StoreResult<Batch>;

    /// The items of a batch that failed for good (up to
    /// [`tasktable_core::batch::FAILURES_KEPT`]), lowest index first.
    async fn batch_failures(&self, id: TaskId) -> StoreResult<Vec<ItemFailure>>;

    /// An operator's change to one task or to every task matching a filter. Rows in a
    /// state the change may not start from are left alone. For one task, that is an error
    /// ([`StoreError::NotFound`] or [`StoreError::IllegalTransition`]); for a filter, the
    /// count says how many changed. A filter's change runs in chunks of a few hundred rows,
    /// each its own transaction ([`bulk`] says what that guarantees).
    async fn task_update(&self, params: UpdateParams) -> StoreResult<u64>;

    /// Pauses or resumes claiming from a queue. Running tasks are not affected.
    async fn queue_set_paused(&self, params: QueuePauseParams) -> StoreResult<()>;

    /// Sets what a queue allows its claims: cluster-wide limits on what runs, rates of
    /// starts, one task per worker, a fair share of long tasks
    /// ([`tasktable_core::policy`]). The default policy clears it, and the queue's
    /// claims go back to the hot path.
    async fn queue_set_policy(&self, params: QueuePolicyParams) -> StoreResult<()>;

    /// Every queue that has tasks, a pause or a policy, with counts by state.
    async fn queue_list(&self) -> StoreResult<Vec<QueueInfo>>;

    /// Counts, throughput, success rate and latency percentiles per queue and kind over a
    /// window ending now (see [`stats`] for how it stays cheap on large tables).
    async fn stats(&self, params: StatsParams) -> StoreResult<Stats>;

    /// Saves a new schedule (see [`OnExisting`] for a name that exists). Its place is
    /// now: it fires from its first slot after the call.
    async fn schedule_create(&self, params: CreateScheduleParams) -> StoreResult<Schedule>;

    async fn schedule_get(&self, schedule: ScheduleRef) -> StoreResult<Option<Schedule>>;

    /// Every schedule, by name.
    async fn schedule_list(&self) -> StoreResult<Vec<Schedule>>;

    /// Changes a schedule; it takes effect from its next slot
    /// ([`ScheduleEdit::covered_from`](tasktable_core::schedule::ScheduleEdit::covered_from)).
    async fn schedule_edit(&self, params: EditScheduleParams) -> StoreResult<Schedule>;

    /// Deletes a schedule. The tasks it fired stay, and keep its id.
    async fn schedule_delete(&self, params: DeleteScheduleParams) -> StoreResult<()>;

    /// Fires the slots of every schedule that is due at `now`, each schedule in a
    /// transaction of its own with its row locked: a slot fires once however many
    /// processes call this at the same time. Returns what fired.
    async fn schedule_run_due(&self, params: RunDueParams) -> StoreResult<Vec<Fired>>;

    /// Fires a schedule's task at once, with `now` as its slot, whatever its recurrence,
    /// `enabled` flag and overlap policy say; its place among its slots is unchanged.
    async fn schedule_fire_now(&self, params: FireNowParams) -> StoreResult<Fired>;

    /// One batch of retention (see [`PurgeParams`]): callers repeat it until it returns
    /// fewer than `limit`. Statistics already rolled up survive; tasks whose minutes are
    /// not rolled up yet wait for the next call.
    async fn task_purge(&self, params: PurgeParams) -> StoreResult<Purged>;

    /// A task retention moved to the archive, with its attempts, oldest first.
    async fn task_get_archived(&self, id: TaskId) -> StoreResult<Option<(Task, Vec<Attempt>)>>;

    /// Saves a worker's heartbeat (its facts, the database's now as its last sight of
    /// it; a gone worker comes back) and tells it whether to drain.
    async fn worker_beat(&self, params: WorkerBeatParams) -> StoreResult<WorkerStatus>;

    /// Marks a worker gone at once: it is shutting down.
    async fn worker_leave(&self, id: String) -> StoreResult<()>;

    /// The workers in the registry, by id, each with the count of tasks it runs now.
    async fn worker_list(&self, params: WorkerListParams) -> StoreResult<Vec<WorkerInfo>>;

    /// Asks a worker to drain, or releases it; `None` when no worker has the id.
    async fn worker_set_draining(
        &self,
        params: WorkerDrainParams,
    ) -> StoreResult<Option<WorkerInfo>>;

    /// Marks silent workers gone and removes those gone long enough.
    async fn worker_reap(&self, params: WorkerReapParams) -> StoreResult<Reaped>;

    /// Workers not gone: the cluster's live nodes.
    async fn worker_count_live(&self) -> StoreResult<u64>;

    /// Whether the worker with this id is draining (`false` for an id the registry does
    /// not hold): what the server asks before it gives a pull worker's claim any task.
    async fn worker_draining(&self, id: String) -> StoreResult<bool>;

    /// The queues with pending tasks, by name: how a worker that takes every queue finds
    /// them.
    async fn queue_discover(&self) -> StoreResult<Vec<String>>;

    /// Whether `queue` is not paused and has a pending task of one of the kinds that is due
    /// now: one indexed read, so that claims waiting for work can learn cheaply, once for
    /// all of them, that a task became due by the clock (which sends no wake). A `true`
    /// does not promise the task can be claimed (a policy, a target or another claimer
    /// may stand in the way).
    async fn queue_has_due(&self, params: DueParams) -> StoreResult<bool>;

    /// A page of the event log ([`event`]): operators' changes and tasktable's own,
    /// newest first.
    async fn event_list(&self, params: EventListParams) -> StoreResult<Vec<Event>>;

    /// A task's events, oldest first, whether the task is live or archived.
    async fn task_events(&self, id: TaskId) -> StoreResult<Vec<Event>>;

    /// One batch of the events' retention: deletes up to `limit` events that concern no
    /// task and are older than the age; how many went (call again while it is `limit`).
    /// A task's events go with the task ([`Store::task_purge`]).
    async fn event_prune(&self, params: EventPruneParams) -> StoreResult<u64>;

    /// Appends lines to a task's log under its lease (fenced like a checkpoint): each cut
    /// to [`MAX_LOG_LINE_BYTES`], at most [`MAX_LOG_LINES_PER_CALL`] a call, and no more
    /// than [`MAX_LOG_LINES`] a task (the line that reaches it says so). A lease that
    /// does not hold appends nothing.
    async fn task_log(&self, params: LogParams) -> StoreResult<LeaseStatus>;

    /// A task's log, oldest first, whether the task is live or archived.
    async fn task_logs(&self, id: TaskId) -> StoreResult<Vec<LogLine>>;

    /// One read of what happened since `after` ([`feed`]): tasks submitted, attempts
    /// ended and events, above the cursor's ids and within its window, oldest first.
    async fn event_feed(&self, params: feed::FeedParams) -> StoreResult<feed::Feed>;

    /// The cursor of everything the database holds now: where a follower that wants
    /// only what happens from now on starts.
    async fn feed_head(&self) -> StoreResult<feed::FeedCursor>;

    /// Hints that a queue may have due work. Delivery is best effort: callers poll too.
    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>>;
}
