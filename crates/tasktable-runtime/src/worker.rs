//! The worker: its builder, one step ([`Worker::run_once`]), the run of claim rounds
//! with the services beside them, and shutdown.

use crate::batch::{BatchHandler, Batched};
use crate::claimer::{self, Claimer};
use crate::config::{QueueConfig, WorkerConfig, WorkerError};
use crate::context::StopReason;
use crate::handler::{ErasedHandler, Handler, Typed};
use crate::identity::WorkerIdentity;
use crate::metrics;
use crate::rescuer::{Rescuer, RescuerConfig};
use crate::retention::{Retainer, RetentionConfig};
use crate::scheduler::{Scheduler, SchedulerConfig};
use crate::shared::{Shared, WorkerEvent};
use crate::{completer, lease_keeper, registry};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tasktable_store::{Store, StoreResult};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// Builds a [`Worker`]: [`Worker::builder`], the settings that differ from
/// [`WorkerConfig`]'s defaults, at least one handler, then [`WorkerBuilder::build`].
pub struct WorkerBuilder {
    store: Arc<dyn Store>,
    config: WorkerConfig,
    handlers: HashMap<String, Arc<dyn ErasedHandler>>,
}

impl std::fmt::Debug for WorkerBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WorkerBuilder")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl WorkerBuilder {
    /// Replaces the whole configuration, undoing the settings made before it (not the
    /// handlers): call it first, then the setters that adjust it.
    pub fn config(mut self, config: WorkerConfig) -> Self {
        self.config = config;
        self
    }
    /// The worker's id and host ([`WorkerConfig::identity`]); a stable id keeps an
    /// operator's drain across restarts.
    pub fn identity(mut self, identity: WorkerIdentity) -> Self {
        self.config.identity = identity;
        self
    }
    /// Most tasks running at once over all queues ([`WorkerConfig::concurrency`],
    /// default 10); also the limit of the `default` queue when no queue is named.
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n;
        self
    }
    /// Takes tasks from `name`, at most `concurrency` at once (and never more than the
    /// worker's own concurrency over all queues). Naming any queue replaces the `default`
    /// queue: name it too to keep it.
    pub fn queue(mut self, name: impl Into<String>, concurrency: usize) -> Self {
        self.config.queues.push(QueueConfig {
            name: name.into(),
            concurrency,
        });
        self
    }
    /// The lease length ([`WorkerConfig::lease_for`], default 30 s, at least 300 ms);
    /// leases are renewed every third of it.
    pub fn lease_for(mut self, d: Duration) -> Self {
        self.config.lease_for = d;
        self
    }
    /// Time between claim rounds when no wake-up arrives ([`WorkerConfig::poll_interval`],
    /// default 1 s, ±20 %): how late a worker finds tasks that became due by the clock or
    /// were submitted where no wake-up reaches it.
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.config.poll_interval = d;
        self
    }
    /// How long running handlers may go on after the shutdown signal
    /// ([`WorkerConfig::shutdown_grace`], default 10 s) before their tasks are released
    /// as interrupted.
    pub fn shutdown_grace(mut self, d: Duration) -> Self {
        self.config.shutdown_grace = d;
        self
    }
    /// How often this worker's [`Rescuer`](crate::Rescuer) scans
    /// ([`WorkerConfig::rescue_interval`], default 5 s); `None` runs none here, leaving
    /// rescue to other processes.
    pub fn rescue_interval(mut self, d: Option<Duration>) -> Self {
        self.config.rescue_interval = d;
        self
    }
    /// How long finished tasks are kept (see [`Retainer`](crate::Retainer)).
    pub fn retention(mut self, policy: tasktable_core::retention::Retention) -> Self {
        self.config.retention = policy;
        self
    }
    /// How often this worker's [`Scheduler`](crate::Scheduler) looks for due schedules
    /// ([`WorkerConfig::schedule_interval`], default 1 s); `None` runs none here, and
    /// then no schedule may be declared.
    pub fn schedule_interval(mut self, d: Option<Duration>) -> Self {
        self.config.schedule_interval = d;
        self
    }
    /// Declares a schedule in code: saved when the worker starts, and brought to this
    /// spec if it exists, except its `enabled` flag (see [`Scheduler`](crate::Scheduler)).
    pub fn schedule(mut self, spec: tasktable_core::schedule::ScheduleSpec) -> Self {
        self.config.schedules.push(spec);
        self
    }
    /// Also takes every other queue that has work (see [`WorkerConfig::all_queues`]).
    pub fn all_queues(mut self) -> Self {
        self.config.all_queues = true;
        self
    }
    /// Adds this worker to a group (shown in the registry).
    pub fn group(mut self, name: impl Into<String>) -> Self {
        self.config.groups.push(name.into());
        self
    }
    /// Time between heartbeats to the worker registry.
    pub fn heartbeat_interval(mut self, d: Duration) -> Self {
        self.config.heartbeat_interval = d;
        self
    }
    /// How long another worker may go without a heartbeat before this one marks it gone
    /// (at least twice the heartbeat interval).
    pub fn worker_silence(mut self, d: Duration) -> Self {
        self.config.worker_silence = d;
        self
    }
    /// Runs tasks of `H::KIND` with `handler`; a later handler of the same kind, batch
    /// or not, replaces it.
    pub fn register<H: Handler>(mut self, handler: H) -> Self {
        self.handlers
            .insert(H::KIND.to_owned(), Arc::new(Typed(handler)));
        self
    }

    /// Runs batches of `H::KIND` with `handler` (docs/batches.md); like
    /// [`WorkerBuilder::register`], it replaces an earlier handler of the same kind.
    pub fn register_batch<H: BatchHandler>(mut self, handler: H) -> Self {
        self.handlers
            .insert(H::KIND.to_owned(), Arc::new(Batched(handler)));
        self
    }

    /// Checks the configuration and builds the worker, which claims nothing until it
    /// runs. With no queue named, it takes the `default` queue (unless it takes every
    /// queue).
    ///
    /// # Errors
    ///
    /// [`WorkerError::Config`] for a setting no worker can run with, or when no handler
    /// is registered.
    pub fn build(self) -> Result<Worker, WorkerError> {
        let config = self.config.validate()?;
        if self.handlers.is_empty() {
            return Err(WorkerError::Config("register at least one handler".into()));
        }
        let (events, _) = broadcast::channel(4096);
        Ok(Worker {
            store: self.store,
            config,
            handlers: self.handlers,
            events,
        })
    }
}

/// Claims tasks from its queues and runs them with the registered handlers. While it
/// runs ([`Worker::run`]) it also renews its tasks' leases, writes the ends of attempts
/// in batches, beats to the worker registry (and obeys an operator's drain), and runs a
/// [`Rescuer`](crate::Rescuer), a [`Scheduler`](crate::Scheduler) and, when its
/// retention removes anything, a [`Retainer`](crate::Retainer), as its
/// [`WorkerConfig`] says.
pub struct Worker {
    store: Arc<dyn Store>,
    config: WorkerConfig,
    handlers: HashMap<String, Arc<dyn ErasedHandler>>,
    events: broadcast::Sender<WorkerEvent>,
}

impl std::fmt::Debug for Worker {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Worker")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Worker {
    /// A worker on `store`, [shielded](tasktable_store::Shielded) so that no call it
    /// makes is cut off half way.
    pub fn builder(store: Arc<dyn Store>) -> WorkerBuilder {
        WorkerBuilder {
            store: tasktable_store::Shielded::wrap(store),
            config: WorkerConfig::default(),
            handlers: HashMap::new(),
        }
    }

    /// This worker's id ([`WorkerIdentity::id`]), as the registry and its tasks'
    /// `worker_id` show it.
    pub fn id(&self) -> &str {
        &self.config.identity.id
    }

    /// Writes this worker's row in the registry now, as its first heartbeat does (`run`
    /// beats again before its first claim), for a process that says it is ready only
    /// once its worker can be seen there, as `tasktable serve` does.
    pub async fn register(&self) -> StoreResult<()> {
        self.store
            .worker_beat(tasktable_store::WorkerBeatParams {
                facts: crate::config::facts(&self.config, self.handlers.keys()),
                address: None,
                starting: true,
                now: None,
                owner: None,
                max_live_per_owner: None,
            })
            .await
            .map(drop)
    }

    /// Events from now on. Subscribe before [`Worker::run`] to see them all; a receiver
    /// that falls 4,096 events behind loses the oldest (`RecvError::Lagged`).
    pub fn subscribe(&self) -> broadcast::Receiver<WorkerEvent> {
        self.events.subscribe()
    }

    /// One step of the worker, with no loop around it: claims once from each queue (no
    /// more than its limits allow, as every round of [`Worker::run`] does), runs the
    /// handlers of the tasks claimed, and returns once each attempt's end has been
    /// written, or found lost, with the number of tasks claimed. `0` means nothing was
    /// due: the queues are empty, paused, or hold only tasks due later.
    ///
    /// Leases are renewed while the handlers run; rescue is not part of the step (see
    /// [`Rescuer::run_once`]). When a claim fails, the tasks the other queues gave are
    /// still run to the end, and then the first failure is returned.
    pub async fn run_once(&mut self) -> StoreResult<usize> {
        let services = Services::start(
            self.store.clone(),
            self.config.clone(),
            self.handlers.clone(),
            self.events.clone(),
        );
        let tracker = TaskTracker::new();
        let round = Claimer::new(&services.shared)
            .round(&services.shared, &tracker)
            .await;
        tracker.close();
        tracker.wait().await;
        services.stop().await;
        match round.failed {
            Some(e) => Err(e),
            None => Ok(round.claimed),
        }
    }

    /// Runs until `shutdown` resolves, then shuts down gracefully: stops claiming, lets
    /// running handlers finish within `shutdown_grace`, and releases the rest as
    /// interrupted (no attempt spent, checkpoint kept).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        metrics::describe();
        let services = Services::start(self.store, self.config, self.handlers, self.events);
        let shared = &services.shared;
        let stop_services = CancellationToken::new();
        let rescuer = shared.config.rescue_interval.map(|interval| {
            let r = Rescuer::new(
                shared.store.clone(),
                RescuerConfig {
                    interval,
                    worker_silence: shared.config.worker_silence,
                    forget_workers_after: shared.config.forget_workers_after,
                    ..Default::default()
                },
            );
            tokio::spawn(r.run(stop_services.clone().cancelled_owned()))
        });
        let scheduler = shared.config.schedule_interval.map(|interval| {
            let s = Scheduler::new(
                shared.store.clone(),
                SchedulerConfig {
                    interval,
                    declared: shared.config.schedules.clone(),
                    ..Default::default()
                },
            );
            tokio::spawn(s.run(stop_services.clone().cancelled_owned()))
        });
        let policy = shared.config.retention;
        let retainer = (!policy.is_empty()).then(|| {
            let r = Retainer::new(
                shared.store.clone(),
                RetentionConfig {
                    policy,
                    ..Default::default()
                },
            );
            tokio::spawn(r.run(stop_services.clone().cancelled_owned()))
        });
        // Registered before the first claim, so a worker drained before a restart
        // claims nothing.
        if let Err(e) = registry::beat(shared, true).await {
            metrics::store_error(metrics::Call::Heartbeat);
            if !e.is_unreachable() {
                tracing::warn!(error = %e, "worker heartbeat failed");
            }
        }
        let heartbeat = tokio::spawn(registry::run(shared.clone(), stop_services.clone()));
        let tracker = TaskTracker::new();
        let id = shared.config.identity.id.clone();
        tracing::info!(worker = %id, "worker started");

        claimer::run(shared, &tracker, shutdown).await;

        // Graceful shutdown: tasks claimed ahead and not started go back at once.
        shared.unstarted.cancel();
        let deadline = Instant::now() + shared.config.shutdown_grace;
        while shared.active_count() > 0 {
            tokio::select! {
                _ = shared.capacity_freed.notified() => {}
                _ = tokio::time::sleep_until(deadline) => break,
            }
        }
        for (ctx, _) in shared.active_snapshot() {
            ctx.stop(StopReason::Shutdown);
        }
        tracker.close();
        tracker.wait().await;
        stop_services.cancel();
        for service in [rescuer, scheduler, retainer, Some(heartbeat)]
            .into_iter()
            .flatten()
        {
            let _ = service.await;
        }
        if let Err(e) = shared.store.worker_leave(id.clone().into()).await {
            tracing::warn!(error = %e, "could not mark this worker gone in the registry");
        }
        services.stop().await;
        tracing::info!(worker = %id, "worker stopped");
    }
}

/// What a worker runs beside its claims for as long as it runs: the shared state, the
/// completer that writes attempts' ends, and the lease keeper.
struct Services {
    shared: Arc<Shared>,
    completer: JoinHandle<()>,
    keeper: JoinHandle<()>,
    stop_keeper: CancellationToken,
}

impl Services {
    fn start(
        store: Arc<dyn Store>,
        config: WorkerConfig,
        handlers: HashMap<String, Arc<dyn ErasedHandler>>,
        events: broadcast::Sender<WorkerEvent>,
    ) -> Self {
        let (completer_handle, completer) =
            completer::start(store.clone(), config.finish_batch, config.lease_for);
        let shared = Arc::new(Shared::new(
            store,
            config,
            handlers,
            completer_handle,
            events,
        ));
        let stop_keeper = CancellationToken::new();
        let keeper = tokio::spawn(lease_keeper::run(shared.clone(), stop_keeper.clone()));
        Services {
            shared,
            completer,
            keeper,
            stop_keeper,
        }
    }

    /// Stops renewing, then lets the completer write what it still holds. Call once no
    /// executor is left: the completer ends when the last handle to the shared state is
    /// gone.
    async fn stop(self) {
        let Services {
            shared,
            completer,
            keeper,
            stop_keeper,
        } = self;
        stop_keeper.cancel();
        let _ = keeper.await;
        drop(shared);
        let _ = completer.await;
    }
}

#[cfg(test)]
mod tests;
