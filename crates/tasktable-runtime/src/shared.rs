//! What the parts of a running worker share: the store, the configuration, the handlers,
//! the completer, the attempts in flight, and the stream of [`WorkerEvent`]s. The worker
//! builds it; the claim loop, the executors and the lease keeper use it, and none of them
//! depends on the worker.

use crate::completer::CompleterHandle;
use crate::config::WorkerConfig;
use crate::context::{StopReason, TaskContext};
use crate::handler::ErasedHandler;
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use tasktable_core::{AttemptOutcome, TaskId};
use tasktable_store::Store;
use tokio::sync::{broadcast, Notify, Semaphore};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// What a worker did, for tests and instrumentation. Subscribe with
/// [`Worker::subscribe`](crate::Worker::subscribe) before
/// [`Worker::run`](crate::Worker::run). New kinds of event may come in later versions.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WorkerEvent {
    /// The handler of a claimed task starts. A task claimed ahead of a free slot and given
    /// back before it started has no `Claimed`, only its `Finished` (outcome
    /// `interrupted`) or `Stopped`.
    Claimed {
        /// The task whose handler starts.
        task_id: TaskId,
        /// The attempt's number, from 1.
        attempt: u32,
    },
    /// The attempt ended; `applied` is false when the lease was lost before the end was
    /// recorded, so the outcome was dropped.
    Finished {
        /// The task whose attempt ended.
        task_id: TaskId,
        /// The outcome recorded (an error that names the refusal when the store would
        /// not take the planned one), or, when not `applied`, the one that was planned.
        outcome: AttemptOutcome,
        /// Whether the store recorded the end under the attempt's lease.
        applied: bool,
    },
    /// The handler was told to stop and its outcome will not be recorded.
    Stopped {
        /// The task whose handler was told to stop.
        task_id: TaskId,
        /// Why: a lost lease, a cancel or a new target (shutdown ends an attempt as
        /// `Finished`, outcome `interrupted`).
        reason: StopReason,
    },
    /// The database renewed the lease of a running attempt, until `expires_at` (never
    /// past the attempt's deadline).
    Renewed {
        /// The task whose lease was renewed.
        task_id: TaskId,
        /// The attempt the lease belongs to.
        attempt: u32,
        /// When the lease now ends, by the database's clock.
        expires_at: Option<DateTime<Utc>>,
    },
    /// A heartbeat reached the registry; `draining` is what it answered.
    Beat {
        /// Whether an operator asked this worker to drain: it claims nothing new until
        /// released.
        draining: bool,
    },
}

/// State the claim loop, executors and lease keeper share.
pub(crate) struct Shared {
    pub store: Arc<dyn Store>,
    pub config: WorkerConfig,
    pub handlers: HashMap<String, Arc<dyn ErasedHandler>>,
    pub completer: CompleterHandle,
    /// Slots for attempts whose handler is done and whose end is being recorded (the
    /// worker's concurrency, and one more for each task claimed ahead whose end is not
    /// yet recorded, at most the claim-ahead limit: so the ends of a whole claim fit in
    /// one write): the claim loop runs ahead of the completer by at most this much, so
    /// no lease waits on a long queue of completions. With the running and the waiting
    /// tasks, a worker holds at most `2 x (concurrency + ahead_limit)` leases, and
    /// `2 x concurrency` when it claims nothing ahead.
    pub recording: Arc<Semaphore>,
    /// The recording slots added for tasks claimed ahead (see [`Shared::add_recording`]).
    recording_extra: AtomicUsize,
    pub capacity_freed: Notify,
    /// An operator asked this worker to drain (the registry said so at its last beat).
    pub draining: AtomicBool,
    /// Tasks claimed ahead of a free slot and waiting for one (see [`crate::claimer`]).
    pub waiting: AtomicUsize,
    /// How long handlers run, which decides how far ahead the claimer may claim.
    pub run_time: RunTime,
    /// Cancelled when the worker's graceful shutdown begins: tasks still waiting for a slot
    /// are given back, and running handlers are told (`TaskContext::shutting_down`).
    pub unstarted: CancellationToken,
    events: broadcast::Sender<WorkerEvent>,
    active: Mutex<HashMap<TaskId, (TaskContext, Instant)>>,
}

impl Shared {
    pub fn new(
        store: Arc<dyn Store>,
        config: WorkerConfig,
        handlers: HashMap<String, Arc<dyn ErasedHandler>>,
        completer: CompleterHandle,
        events: broadcast::Sender<WorkerEvent>,
    ) -> Self {
        Shared {
            recording: Arc::new(Semaphore::new(config.concurrency)),
            recording_extra: AtomicUsize::new(0),
            store,
            config,
            handlers,
            completer,
            capacity_freed: Notify::new(),
            draining: AtomicBool::new(false),
            waiting: AtomicUsize::new(0),
            run_time: RunTime::default(),
            unstarted: CancellationToken::new(),
            events,
            active: Mutex::new(HashMap::new()),
        }
    }
    /// Adds a recording slot for a task claimed ahead, unless the claim-ahead limit's
    /// worth are there already; says whether it did (the task then takes it away again
    /// with [`Shared::remove_recording`] once its end is recorded).
    pub fn add_recording(&self) -> bool {
        let limit = crate::config::ahead_limit(self.config.concurrency);
        let added = self
            .recording_extra
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| {
                (n < limit).then_some(n + 1)
            })
            .is_ok();
        if added {
            self.recording.add_permits(1);
        }
        added
    }

    /// Takes away the recording slot `permit` held, added by [`Shared::add_recording`].
    pub fn remove_recording(&self, permit: tokio::sync::OwnedSemaphorePermit) {
        permit.forget();
        self.recording_extra.fetch_sub(1, Ordering::Relaxed);
    }

    pub fn emit(&self, event: WorkerEvent) {
        let _ = self.events.send(event);
    }
    pub fn activate(&self, ctx: &TaskContext) {
        self.active
            .lock()
            .expect("active")
            .insert(ctx.task_id(), (ctx.clone(), Instant::now()));
    }
    /// Forgets the attempt of `ctx`, unless the task has been claimed here again since:
    /// an attempt whose lease was lost while its end was being written can still be
    /// ending when the same task runs here under a new lease, which must stay renewed.
    pub fn deactivate(&self, ctx: &TaskContext) {
        let mut active = self.active.lock().expect("active");
        if active
            .get(&ctx.task_id())
            .is_some_and(|(current, _)| current.lease() == ctx.lease())
        {
            active.remove(&ctx.task_id());
        }
    }
    pub fn mark_renewed(&self, id: TaskId, at: Instant) {
        if let Some(entry) = self.active.lock().expect("active").get_mut(&id) {
            entry.1 = entry.1.max(at);
        }
    }
    pub fn active_snapshot(&self) -> Vec<(TaskContext, Instant)> {
        self.active
            .lock()
            .expect("active")
            .values()
            .cloned()
            .collect()
    }
    pub fn active_count(&self) -> usize {
        self.active.lock().expect("active").len()
    }
}

/// A moving mean of how long handlers ran (each new run weighs an eighth), kept in
/// microseconds; none until a handler has run.
#[derive(Debug)]
pub(crate) struct RunTime {
    micros: AtomicU64,
}

const NONE_YET: u64 = u64::MAX;

impl Default for RunTime {
    fn default() -> Self {
        RunTime {
            micros: AtomicU64::new(NONE_YET),
        }
    }
}

impl RunTime {
    /// Adds one run. Concurrent calls may lose one of their updates, which a moving mean
    /// can afford.
    pub fn record(&self, ran_for: std::time::Duration) {
        let new = u64::try_from(ran_for.as_micros()).unwrap_or(NONE_YET - 1);
        let mean = match self.micros.load(Ordering::Relaxed) {
            NONE_YET => new,
            old => {
                let (old, new) = (old as i128, new as i128);
                (old + (new - old) / 8) as u64
            }
        };
        self.micros.store(mean, Ordering::Relaxed);
    }

    /// Handlers have been seen to run at least `d` (a task claimed ahead waited that long
    /// for a slot): the mean is raised to it, so the worker stops claiming ahead until
    /// short runs bring it down again.
    pub fn slowed(&self, d: std::time::Duration) {
        let d = u64::try_from(d.as_micros()).unwrap_or(NONE_YET - 1);
        let _ = self
            .micros
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |m| match m {
                NONE_YET => Some(d),
                m => (m < d).then_some(d),
            });
    }

    pub fn mean(&self) -> Option<std::time::Duration> {
        match self.micros.load(Ordering::Relaxed) {
            NONE_YET => None,
            m => Some(std::time::Duration::from_micros(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::RunTime;
    use std::time::Duration;

    #[test]
    fn the_mean_starts_unknown_and_follows_runs_by_an_eighth() {
        let r = RunTime::default();
        assert_eq!(r.mean(), None);
        r.record(Duration::from_micros(800));
        assert_eq!(r.mean(), Some(Duration::from_micros(800)));
        r.record(Duration::from_micros(0));
        assert_eq!(r.mean(), Some(Duration::from_micros(700)));
        r.record(Duration::from_micros(1_500));
        assert_eq!(r.mean(), Some(Duration::from_micros(800)));
        r.slowed(Duration::from_secs(1));
        assert_eq!(r.mean(), Some(Duration::from_secs(1)));
        r.slowed(Duration::from_millis(1));
        assert_eq!(r.mean(), Some(Duration::from_secs(1)), "only ever raised");
    }
}
