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

/// Builds a [`Worker`].
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
    pub fn config(mut self, config: WorkerConfig) -> Self {
        self.config = config;
        self
    }
    pub fn identity(mut self, identity: WorkerIdentity) -> Self {
        self.config.identity = identity;
        self
    }
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n;
        self
    }
    /// Takes tasks from `name`, at most `concurrency` at once.
    pub fn queue(mut self, name: impl Into<String>, concurrency: usize) -> Self {
        self.config.queues.push(QueueConfig {
            name: name.into(),
            concurrency,
        });
        self
    }
    pub fn lease_for(mut self, d: Duration) -> Self {
        self.config.lease_for = d;
        self
    }
    pub fn poll_interval(mut self, d: Duration) -> Self {
        self.config.poll_interval = d;
        self
    }
    pub fn shutdown_grace(mut self, d: Duration) -> Self {
        self.config.shutdown_grace = d;
        self
    }
    pub fn rescue_interval(mut self, d: Option<Duration>) -> Self {
        self.config.rescue_interval = d;
        self
    }
    /// How long finished tasks are kept (see [`Retainer`](crate::Retainer)).
    pub fn retention(mut self, policy: tasktable_core::retention::Retention) -> Self {
        self.config.retention = policy;
        self
    }
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
    /// Runs tasks of `H::KIND` with `handler`.
    pub fn register<H: Handler>(mut self, handler: H) -> Self {
        self.handlers
            .insert(H::KIND.to_owned(), Arc::new(Typed(handler)));
        self
    }

    /// Runs batches of `H::KIND` with `handler` (docs/batches.md).
    pub fn register_batch<H: BatchHandler>(mut self, handler: H) -> Self {
        self.handlers
            .insert(H::KIND.to_owned(), Arc::new(Batched(handler)));
        self
    }

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

/// Claims tasks from its queues and runs them with the registered handlers.
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

    pub fn id(&self) -> &str {
        &self.config.identity.id
    }

    /// Writes this worker's row in the registry now, as its first heartbeat does (`run`
    /// beats again before its first claim), for a process that says it is ready only
    /// once its worker can be seen there, as `tasktable serve` does.
    pub async fn register(&self) -> StoreResult<()> {
        self.store
            .worker_beat(tasktable_store::WorkerBeatParams {
                facts: crate::config::facts(&self.config),
                address: None,
                starting: true,
                now: None,
            })
            .await
            .map(drop)
    }

    /// Events from now on.
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
            tracing::warn!(error = %e, "worker heartbeat failed");
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
        if let Err(e) = shared.store.worker_leave(id.clone()).await {
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
