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
//! which runs every call of a store to its end whatever becomes of its caller, and logs
//! once when the database becomes unreachable and once when it answers again. Rules
//! (retry delays, which state an operation may start from) come from `tasktable-core` and
//! reach the store as parameters; the store only makes each transition atomic and fenced.
//!
//! Must not know: SQL, any particular database, and anything about how workers are
//! scheduled. The runtime and the server hold an `Arc<dyn Store>` and never open a
//! transaction themselves.

#![warn(missing_docs)]

mod action;
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
mod reachability;
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
pub use error::{StoreError, StoreResult, Unreachable};
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
    Reaped, WorkerBeatParams, WorkerDrainParams, WorkerLeaveParams, WorkerListParams,
    WorkerReapParams, WorkerStanding, WorkerStatus, MAX_WORKER_PAGE,
};

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tasktable_core::runs::Run;
use tasktable_core::worker::WorkerInfo;
use tasktable_core::{Attempt, Lease, Task, TaskId};
use tokio::sync::broadcast;

/// Storage for tasks. Every method is one atomic transition, unless it says which parts
/// of it commit on their own; methods that take a [`Lease`] apply only while the task
/// still runs under that lease's token and credential, and report otherwise instead of
/// failing.
///
/// Methods that depend on the time take `now: Option<DateTime<Utc>>`: `None` means the
/// database's clock, which is what production always uses; tests pin time with `Some`.
///
/// Parameters are checked against the store's own [`Limits`] before anything is written:
/// a call that fails with a client error ([`StoreError::is_client_error`]) changed
/// nothing.
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
    /// Safe to call from many processes at once. [`StoreError::Migration`] when one fails,
    /// or when the database's schema is newer than this tasktable knows.
    async fn migrate(&self) -> StoreResult<()>;

    /// The database's current time: the clock every `now: None` reads.
    async fn db_now(&self) -> StoreResult<DateTime<Utc>>;

    /// Creates tasks, all or none, in one transaction: each `pending`, or `held` when it
    /// asks to be. A task whose idempotency key already exists is not created; its
    /// existing id is returned with `created: false`. One answer per task, in order. An
    /// invalid task ([`StoreError::InvalidTask`]) or a payload over the size limit
    /// ([`StoreError::PayloadTooLarge`]) refuses the whole call. Wakes the tasks' queues.
    async fn task_submit(&self, params: SubmitParams) -> StoreResult<Vec<Submitted>>;

    /// Leases up to `limit` due tasks of one queue, in claim order (priority high to low,
    /// then `run_at`, then id). Claims nothing from a paused queue, and no more than a
    /// queue's policy allows. Each claimed task has its attempt counted, its lease token
    /// increased and a fresh credential drawn ([`Task::lease`] is what later writes
    /// present); its lease ends `lease_for` after `now`, or at its deadline if that comes
    /// first. Tasks that run once are claimed in one transaction; runs of multi-run tasks,
    /// which fill what they leave of `limit`, in another.
    async fn task_claim(&self, params: ClaimParams) -> StoreResult<Vec<Task>>;

    /// Ends the waits of retries for their previous workers that are over: the wait
    /// passed, or that worker is gone, draining or not in the registry. The task's own
    /// target applies again and its queue's workers are woken. How many tasks it freed
    /// (at most `limit`, 1 to [`MAX_AFFINITY_BATCH`]: call again while it returns
    /// `limit`).
    async fn task_release_affinity(&self, params: AffinityReleaseParams) -> StoreResult<u64>;

    /// Extends leases to `lease_for` after `now`, never past an attempt's deadline; one
    /// status per lease, in order: `Held` with the lease's new end, or why it no longer
    /// holds. A lease that ran out but that no rescuer has taken back yet is renewed.
    async fn task_renew(&self, params: RenewParams) -> StoreResult<Vec<LeaseStatus>>;

    /// Saves a checkpoint and/or progress under a lease; a lease that does not hold saves
    /// nothing, and the answer says why. The checkpoint outlives the attempt, for the
    /// next one to resume from. A document over the size limit is refused
    /// ([`StoreError::PayloadTooLarge`]).
    async fn task_checkpoint(&self, params: CheckpointParams) -> StoreResult<LeaseStatus>;

    /// Ends attempts: records each in the history and moves its task out of `running` as
    /// its plan says (a retry goes back to `pending`, or to `failed` with no attempts
    /// left). One flag per item, in order: `true` when applied, `false` when the lease
    /// was lost. The items of tasks that run once are written in one transaction, which
    /// wakes the queues of tasks due again at once; runs of multi-run tasks end one by
    /// one. A result over the size limit refuses the whole call before anything is
    /// written ([`StoreError::PayloadTooLarge`]).
    async fn task_finish(&self, params: FinishParams) -> StoreResult<Vec<bool>>;

    /// Running tasks whose lease expired (or whose attempt deadline passed) before `now`,
    /// oldest expiry first, at most `limit`. The caller decides each one's fate and ends
    /// it with [`Store::task_finish`] with `only_if_expired`.
    async fn task_list_expired(&self, params: ExpiredParams) -> StoreResult<Vec<Task>>;

    /// A task by id; `None` when no live task has it (retention may have archived it:
    /// [`Store::task_get_archived`]).
    async fn task_get(&self, id: TaskId) -> StoreResult<Option<Task>>;

    /// Tasks matching a filter, newest first, one page at a time. A page size outside 1
    /// to [`MAX_PAGE_SIZE`] is refused.
    async fn task_list(&self, params: ListParams) -> StoreResult<TaskPage>;

    /// How many tasks match a filter, counting no further than `cap`: an answer of `cap`
    /// means at least that many.
    async fn task_count(&self, params: CountParams) -> StoreResult<u64>;

    /// A task's attempt history, oldest first: one entry per ended attempt (a running
    /// attempt is on the task's row). Empty for an id no task has.
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

    /// Batches, newest first, a page at a time.
    async fn batch_list(&self, params: BatchListParams) -> StoreResult<Vec<Batch>>;

    /// A runner's save of progress and failures, fenced and renewing the lease like
    /// [`Store::task_renew`]; answers what operators asked since. A save whose lease
    /// does not hold changes nothing.
    async fn batch_save(&self, params: BatchSaveParams) -> StoreResult<BatchSaved>;

    /// Starts, pauses, stops or resumes a batch as [`tasktable_core::batch::BatchAction`]
    /// says; an action that does not apply is refused ([`StoreError::BatchRefused`]) and
    /// changes nothing, and an id that is no batch's is [`StoreError::NotFound`]. The
    /// task's part, if any (a start releases a waiting batch's task, a pause holds a
    /// queued one), is written in the same transaction as an operator's change would be.
    async fn batch_control(&self, params: BatchControlParams) -> StoreResult<Batch>;

    /// Changes a batch's error budget or data; data that may not change now is refused
    /// ([`StoreError::BatchRefused`]) and nothing changes, and an id that is no batch's
    /// is [`StoreError::NotFound`].
    async fn batch_update(&self, params: BatchUpdateParams) -> StoreResult<Batch>;

    /// The items of a batch that failed for good (up to
    /// [`tasktable_core::batch::FAILURES_KEPT`]), lowest index first.
    async fn batch_failures(&self, id: TaskId) -> StoreResult<Vec<ItemFailure>>;

    /// An operator's change to one task or to every task matching a filter. Rows in a
    /// state the change may not start from are left alone. For one task, that is an error
    /// ([`StoreError::NotFound`] or [`StoreError::IllegalTransition`]); for a filter, the
    /// count says how many changed. A filter's change runs in chunks of a few hundred rows,
    /// each its own transaction ([`bulk`] says what that guarantees). Each task's change,
    /// the history row of an attempt it ends and its event commit together; a retry, a
    /// release or a reschedule wakes the queues' workers. The change's values are checked
    /// first ([`StoreError::InvalidInput`], [`StoreError::PayloadTooLarge`]).
    async fn task_update(&self, params: UpdateParams) -> StoreResult<u64>;

    /// Pauses or resumes claiming from a queue. Running tasks are not affected. A resume
    /// wakes the queue's workers; a change of the flag is recorded in the event log.
    async fn queue_set_paused(&self, params: QueuePauseParams) -> StoreResult<()>;

    /// Sets what a queue allows its claims: cluster-wide limits on what runs, rates of
    /// starts, one task per worker, a fair share of long tasks
    /// ([`tasktable_core::policy`]). The default policy clears it, and the queue's
    /// claims go back to the hot path. A new rate or key rate starts with full buckets.
    /// A blank or overlong name, or a policy out of core's bounds, is refused
    /// ([`StoreError::InvalidInput`]).
    async fn queue_set_policy(&self, params: QueuePolicyParams) -> StoreResult<()>;

    /// Every queue that has tasks, a pause or a policy, with counts by state.
    async fn queue_list(&self) -> StoreResult<Vec<QueueInfo>>;

    /// Counts, throughput, success rate and latency percentiles per queue and kind over a
    /// window ending now (see [`stats`] for how it stays cheap on large tables). It rolls
    /// up the minutes that are due first. A window outside 1 minute to
    /// [`stats::MAX_WINDOW`] is refused.
    async fn stats(&self, params: StatsParams) -> StoreResult<Stats>;

    /// Saves a new schedule (see [`OnExisting`] for a name that exists). Its place is
    /// now: it fires from its first slot after the call. A spec core refuses is
    /// [`StoreError::InvalidSchedule`]; a template's payload over the size limit,
    /// [`StoreError::InvalidInput`]; a name taken, with [`OnExisting::Refuse`],
    /// [`StoreError::ScheduleExists`].
    async fn schedule_create(&self, params: CreateScheduleParams) -> StoreResult<Schedule>;

    /// A schedule by id or name; `None` when none has it.
    async fn schedule_get(&self, schedule: ScheduleRef) -> StoreResult<Option<Schedule>>;

    /// Every schedule, by name.
    async fn schedule_list(&self) -> StoreResult<Vec<Schedule>>;

    /// Changes a schedule; it takes effect from its next slot
    /// ([`ScheduleEdit::covered_from`](tasktable_core::schedule::ScheduleEdit::covered_from)).
    /// [`StoreError::ScheduleNotFound`] when none has the id or name,
    /// [`StoreError::ScheduleExists`] for a rename to a name taken, and
    /// [`StoreError::InvalidSchedule`] when core refuses the spec the edit leaves.
    async fn schedule_edit(&self, params: EditScheduleParams) -> StoreResult<Schedule>;

    /// Deletes a schedule. The tasks it fired stay, and keep its id.
    /// [`StoreError::ScheduleNotFound`] when none has the id or name.
    async fn schedule_delete(&self, params: DeleteScheduleParams) -> StoreResult<()>;

    /// Fires the slots of every schedule that is due at `now`, each schedule in a
    /// transaction of its own with its row locked: a slot fires once however many
    /// processes call this at the same time. At most `limit` schedules, soonest due
    /// first. Returns what fired. A schedule that cannot fire is skipped, so that it does
    /// not hold up the rest: the call fails only when one failed and none fired.
    async fn schedule_run_due(&self, params: RunDueParams) -> StoreResult<Vec<Fired>>;

    /// Fires a schedule's task at once, with `now` as its slot, whatever its recurrence,
    /// `enabled` flag and overlap policy say; its place among its slots is unchanged.
    /// [`StoreError::ScheduleNotFound`] when none has the id or name.
    async fn schedule_fire_now(&self, params: FireNowParams) -> StoreResult<Fired>;

    /// One batch of retention (see [`PurgeParams`]): callers repeat it until it returns
    /// fewer than `limit`. Statistics already rolled up survive; tasks whose minutes are
    /// not rolled up yet wait for the next call.
    async fn task_purge(&self, params: PurgeParams) -> StoreResult<Purged>;

    /// A task retention moved to the archive, with its attempts, oldest first; `None`
    /// when the archive does not hold it.
    async fn task_get_archived(&self, id: TaskId) -> StoreResult<Option<(Task, Vec<Attempt>)>>;

    /// Saves a worker's heartbeat (its facts, the database's now as its last sight of
    /// it; a gone worker comes back) and tells it whether to drain. A beat bound to a
    /// token ([`WorkerBeatParams::owner`]) that may not act as the id, or would pass its
    /// cap, is refused with [`StoreError::WorkerRefused`] and changes nothing.
    async fn worker_beat(&self, params: WorkerBeatParams) -> StoreResult<WorkerStatus>;

    /// Marks a worker gone at once, by the database's clock: it is shutting down. Nothing
    /// for an id the registry does not hold, or holds as gone already;
    /// [`StoreError::WorkerRefused`] when the caller's token may not act as the id.
    async fn worker_leave(&self, params: WorkerLeaveParams) -> StoreResult<()>;

    /// The workers in the registry, by id (a page of them when asked), each with the
    /// count of tasks it runs now.
    async fn worker_list(&self, params: WorkerListParams) -> StoreResult<Vec<WorkerInfo>>;

    /// One worker, gone or not, with the count of tasks it runs now; `None` when the
    /// registry does not hold the id.
    async fn worker_get(&self, id: String) -> StoreResult<Option<WorkerInfo>>;

    /// Asks a worker to drain, or releases it; `None` when no worker has the id.
    async fn worker_set_draining(
        &self,
        params: WorkerDrainParams,
    ) -> StoreResult<Option<WorkerInfo>>;

    /// Marks workers silent for `silence` gone and removes those gone for `forget_after`
    /// with no drain held for them, in one transaction; how many of each.
    async fn worker_reap(&self, params: WorkerReapParams) -> StoreResult<Reaped>;

    /// Workers not gone: the cluster's live nodes.
    async fn worker_count_live(&self) -> StoreResult<u64>;

    /// How the registry holds a worker id (`None`: not at all), in one read by key: what
    /// the server asks before it gives a pull worker's claim any task (its owner, its
    /// groups, whether it is draining).
    async fn worker_standing(&self, id: String) -> StoreResult<Option<WorkerStanding>>;

    /// Why a task waits, in core's words ([`tasktable_core::waiting`]): read from the
    /// task, its queue, the live workers (what each takes, handles and runs) and the
    /// queue's policy, at one moment and without locks. Empty when the task is not
    /// pending or there is no such task; a pending task has at least one reason.
    async fn task_waiting(
        &self,
        params: TaskWaitingParams,
    ) -> StoreResult<Vec<tasktable_core::waiting::WaitReason>>;

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
    /// newest first. A `limit` outside 1 to [`MAX_EVENT_LIST`] is refused.
    async fn event_list(&self, params: EventListParams) -> StoreResult<Vec<Event>>;

    /// A task's events, oldest first, whether the task is live or archived.
    async fn task_events(&self, id: TaskId) -> StoreResult<Vec<Event>>;

    /// One batch of the events' retention: deletes up to `limit` events that concern no
    /// task and are older than the age; how many went (call again while it is `limit`).
    /// A task's events go with the task ([`Store::task_purge`]).
    async fn event_prune(&self, params: EventPruneParams) -> StoreResult<u64>;

    /// Appends lines to a task's log under its lease (fenced like a checkpoint): each cut
    /// to [`MAX_LOG_LINE_BYTES`], 1 to [`MAX_LOG_LINES_PER_CALL`] a call (others are
    /// refused), and no more than [`MAX_LOG_LINES`] a task (the line that reaches it says
    /// so; later ones are dropped). A lease that does not hold appends nothing.
    async fn task_log(&self, params: LogParams) -> StoreResult<LeaseStatus>;

    /// A task's log, oldest first, whether the task is live or archived.
    async fn task_logs(&self, id: TaskId) -> StoreResult<Vec<LogLine>>;

    /// One read of what happened since `after` ([`feed`]): tasks submitted, attempts
    /// ended and events, above the cursor's ids and within its window, oldest first. A
    /// `limit` outside 1 to [`feed::MAX_FEED_ROWS`] is refused.
    async fn event_feed(&self, params: feed::FeedParams) -> StoreResult<feed::Feed>;

    /// The cursor of everything the database holds now: where a follower that wants
    /// only what happens from now on starts.
    async fn feed_head(&self) -> StoreResult<feed::FeedCursor>;

    /// A receiver of hints ([`Wake`]) that a queue may have due work, sent after the
    /// commits that may make tasks due. Delivery is best effort (a backend may not hear
    /// other processes' commits, and a receiver that lags loses hints): callers poll too.
    async fn subscribe(&self) -> StoreResult<broadcast::Receiver<Wake>>;
}
