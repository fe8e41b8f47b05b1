//! The parameters and results of the schedule calls of [`Store`](crate::Store).
//!
//! The rules (which slots fire, where an edit leaves a schedule) are core's
//! ([`tasktable_core::schedule`]); a store keeps schedules and fires each slot in one
//! transaction with the schedule's row locked, so however many schedulers run, a slot
//! fires once.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;
use tasktable_core::schedule::{ScheduleEdit, ScheduleSpec, SlotSpan};
use tasktable_core::Actor;
use tasktable_core::TaskId;

/// A schedule as stored: its spec, and where it is among its slots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// Its id, which the tasks it fires keep (`schedule_id`) after it is deleted.
    pub id: i64,
    /// What it fires and when: name, recurrence, task template, policies, `enabled`.
    #[serde(flatten)]
    pub spec: ScheduleSpec,
    /// Every slot at or before this time has been fired or settled by a policy.
    pub covered_until: DateTime<Utc>,
    /// When it is next due; `None` while disabled, or when it never fires again.
    pub next_run_at: Option<DateTime<Utc>>,
    /// The last task it fired, and that task's slot.
    pub last_task_id: Option<TaskId>,
    /// The slot `last_task_id` was fired for.
    pub last_slot_at: Option<DateTime<Utc>>,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// Its last edit or firing.
    pub updated_at: DateTime<Utc>,
}

/// A schedule by id or by its unique name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ScheduleRef {
    /// Its [`Schedule::id`].
    Id(i64),
    /// Its name, which is never a number, so that a path's segment is one or the other.
    Name(String),
}

impl fmt::Display for ScheduleRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ScheduleRef::Id(id) => write!(f, "{id}"),
            ScheduleRef::Name(name) => write!(f, "{name:?}"),
        }
    }
}

/// How [`Store::schedule_create`](crate::Store::schedule_create) treats a name that
/// exists.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnExisting {
    /// Refuse ([`StoreError::ScheduleExists`](crate::StoreError::ScheduleExists)).
    Refuse,
    /// Bring the stored schedule to the spec, except its `enabled` flag, which stays
    /// as an operator left it: schedules declared in code are upserted at every start-up.
    Update,
}

/// A new schedule ([`Store::schedule_create`](crate::Store::schedule_create)).
#[derive(Debug, Clone)]
pub struct CreateScheduleParams {
    /// What it fires and when, checked by [`Limits::schedule`](crate::Limits::schedule).
    pub spec: ScheduleSpec,
    /// What to do when a schedule of that name exists.
    pub on_existing: OnExisting,
    /// Who asks: the event log records it.
    pub actor: Actor,
    /// The creation's time: its first slot is the first after it; `None`: the
    /// database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// A change to a schedule ([`Store::schedule_edit`](crate::Store::schedule_edit)).
#[derive(Debug, Clone)]
pub struct EditScheduleParams {
    /// Which schedule.
    pub schedule: ScheduleRef,
    /// The fields to change; an empty edit changes nothing and records nothing.
    pub edit: ScheduleEdit,
    /// Who asks: the event log records it, with the names of the fields changed.
    pub actor: Actor,
    /// The edit's time, from which an enable or a new recurrence starts; `None`: the
    /// database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// Deleting a schedule ([`Store::schedule_delete`](crate::Store::schedule_delete)); the
/// tasks it fired stay.
#[derive(Debug, Clone)]
pub struct DeleteScheduleParams {
    /// Which schedule.
    pub schedule: ScheduleRef,
    /// Who asks: the event log records it.
    pub actor: Actor,
}

/// A scheduler's round ([`Store::schedule_run_due`](crate::Store::schedule_run_due)).
#[derive(Debug, Clone)]
pub struct RunDueParams {
    /// Schedules fired per call at the most.
    pub limit: u32,
    /// Schedules due at or before this time fire; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// Firing one schedule at once
/// ([`Store::schedule_fire_now`](crate::Store::schedule_fire_now)).
#[derive(Debug, Clone)]
pub struct FireNowParams {
    /// Which schedule.
    pub schedule: ScheduleRef,
    /// Who asks: the task's `created_by` and the event log record it.
    pub actor: Actor,
    /// The firing's time, which is also its slot (kept to the millisecond); `None`: the
    /// database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// What one firing of a schedule did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Fired {
    /// Which schedule fired ([`Schedule::id`]).
    pub schedule_id: i64,
    /// The schedule's name when it fired.
    pub name: String,
    /// The tasks fired, oldest slot first.
    pub tasks: Vec<FiredTask>,
    /// Slots the overlap policy skipped, because the previous slot's task was unfinished.
    pub skipped: Vec<DateTime<Utc>>,
    /// How many of `tasks`, the first, are missed slots fired late: slots more than
    /// [`ON_TIME`](tasktable_core::schedule::ON_TIME) old when the schedule fired, which
    /// its `missed` policy let through.
    #[serde(default)]
    pub caught_up: usize,
    /// The missed slots the schedule's `missed` policy left unfired, counted up to
    /// [`SLOTS_COUNTED`](tasktable_core::schedule::SLOTS_COUNTED).
    #[serde(default)]
    pub missed_skipped: SlotSpan,
}

/// One slot fired, and its task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct FiredTask {
    /// The slot: the instant the recurrence gave, and the task's first `run_at`.
    pub slot_at: DateTime<Utc>,
    /// The slot's task: the one created, or the one that already held its key.
    pub task_id: TaskId,
    /// `false` when the slot's task existed already (its idempotency key was taken).
    pub created: bool,
}

/// Inside an `impl Store for Wrapper`, the schedule, retention, worker registry, run and batch
/// reads and operator calls (not a batch's save, a worker's write) passed on to the
/// store in the field `$inner` unchanged: for wrappers that watch or break some other calls. (Written
/// as `#[async_trait]` writes methods, since that attribute runs before this expands.)
#[macro_export]
macro_rules! forward_maintenance_calls {
    ($inner:tt) => {
        $crate::forward_maintenance_calls!(@one $inner, schedule_create(p: $crate::CreateScheduleParams) -> $crate::Schedule);
        $crate::forward_maintenance_calls!(@one $inner, schedule_get(s: $crate::ScheduleRef) -> Option<$crate::Schedule>);
        $crate::forward_maintenance_calls!(@one $inner, schedule_list() -> Vec<$crate::Schedule>);
        $crate::forward_maintenance_calls!(@one $inner, schedule_edit(p: $crate::EditScheduleParams) -> $crate::Schedule);
        $crate::forward_maintenance_calls!(@one $inner, schedule_delete(p: $crate::DeleteScheduleParams) -> ());
        $crate::forward_maintenance_calls!(@one $inner, schedule_run_due(p: $crate::RunDueParams) -> Vec<$crate::Fired>);
        $crate::forward_maintenance_calls!(@one $inner, schedule_fire_now(p: $crate::FireNowParams) -> $crate::Fired);
        $crate::forward_maintenance_calls!(@one $inner, task_purge(p: $crate::PurgeParams) -> $crate::Purged);
        $crate::forward_maintenance_calls!(@one $inner, task_get_archived(id: $crate::__core::TaskId) -> Option<($crate::__core::Task, Vec<$crate::__core::Attempt>)>);
        $crate::forward_maintenance_calls!(@one $inner, worker_beat(p: $crate::WorkerBeatParams) -> $crate::WorkerStatus);
        $crate::forward_maintenance_calls!(@one $inner, worker_leave(p: $crate::WorkerLeaveParams) -> ());
        $crate::forward_maintenance_calls!(@one $inner, worker_get(id: String) -> Option<$crate::__core::worker::WorkerInfo>);
        $crate::forward_maintenance_calls!(@one $inner, worker_list(p: $crate::WorkerListParams) -> Vec<$crate::__core::worker::WorkerInfo>);
        $crate::forward_maintenance_calls!(@one $inner, worker_set_draining(p: $crate::WorkerDrainParams) -> Option<$crate::__core::worker::WorkerInfo>);
        $crate::forward_maintenance_calls!(@one $inner, worker_reap(p: $crate::WorkerReapParams) -> $crate::Reaped);
        $crate::forward_maintenance_calls!(@one $inner, worker_count_live() -> u64);
        $crate::forward_maintenance_calls!(@one $inner, worker_standing(id: String) -> Option<$crate::WorkerStanding>);
        $crate::forward_maintenance_calls!(@one $inner, queue_discover() -> Vec<String>);
        $crate::forward_maintenance_calls!(@one $inner, task_waiting(p: $crate::TaskWaitingParams) -> Vec<$crate::__core::waiting::WaitReason>);
        $crate::forward_maintenance_calls!(@one $inner, queue_has_due(p: $crate::DueParams) -> bool);
        $crate::forward_maintenance_calls!(@one $inner, run_list(id: $crate::__core::TaskId) -> Vec<$crate::__core::runs::Run>);
        $crate::forward_maintenance_calls!(@one $inner, lease_status(lease: $crate::__core::Lease) -> $crate::LeaseStatus);
        $crate::forward_maintenance_calls!(@one $inner, batch_get(id: $crate::__core::TaskId) -> Option<$crate::Batch>);
        $crate::forward_maintenance_calls!(@one $inner, batch_list(p: $crate::BatchListParams) -> Vec<$crate::Batch>);
        $crate::forward_maintenance_calls!(@one $inner, batch_control(p: $crate::BatchControlParams) -> $crate::Batch);
        $crate::forward_maintenance_calls!(@one $inner, batch_update(p: $crate::BatchUpdateParams) -> $crate::Batch);
        $crate::forward_maintenance_calls!(@one $inner, batch_failures(id: $crate::__core::TaskId) -> Vec<$crate::ItemFailure>);
        $crate::forward_maintenance_calls!(@one $inner, event_list(p: $crate::EventListParams) -> Vec<$crate::Event>);
        $crate::forward_maintenance_calls!(@one $inner, task_events(id: $crate::__core::TaskId) -> Vec<$crate::Event>);
        $crate::forward_maintenance_calls!(@one $inner, event_prune(p: $crate::EventPruneParams) -> u64);
        $crate::forward_maintenance_calls!(@one $inner, event_feed(p: $crate::feed::FeedParams) -> $crate::feed::Feed);
        $crate::forward_maintenance_calls!(@one $inner, feed_head() -> $crate::feed::FeedCursor);
        $crate::forward_maintenance_calls!(@one $inner, task_logs(id: $crate::__core::TaskId) -> Vec<$crate::LogLine>);
    };
    (@one $inner:tt, $name:ident($($arg:ident: $ty:ty)?) -> $out:ty) => {
        fn $name<'life0, 'async_trait>(
            &'life0 self,
            $($arg: $ty)?
        ) -> ::std::pin::Pin<
            Box<dyn ::std::future::Future<Output = $crate::StoreResult<$out>> + Send + 'async_trait>,
        >
        where
            'life0: 'async_trait,
            Self: 'async_trait,
        {
            Box::pin(async move { self.$inner.$name($($arg)?).await })
        }
    };
}
