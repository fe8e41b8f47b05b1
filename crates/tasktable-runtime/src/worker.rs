//! The worker: its builder, the claim loop, and shutdown.

use crate::completer;
use crate::config::{QueueConfig, WorkerConfig, WorkerError};
use crate::context::StopReason;
use crate::handler::{ErasedHandler, Handler, Typed};
use crate::identity::WorkerIdentity;
use crate::metrics::{self, Call, QueueMetrics};
use crate::rescuer::{Rescuer, RescuerConfig};
use crate::shared::{Shared, WorkerEvent};
use crate::{executor, lease_keeper};
use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tasktable_store::{ClaimParams, Store, Wake};
use tokio::sync::{broadcast, Semaphore};
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
    /// Runs tasks of `H::KIND` with `handler`.
    pub fn register<H: Handler>(mut self, handler: H) -> Self {
        self.handlers
            .insert(H::KIND.to_owned(), Arc::new(Typed(handler)));
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
    pub fn builder(store: Arc<dyn Store>) -> WorkerBuilder {
        WorkerBuilder {
            store,
            config: WorkerConfig::default(),
            handlers: HashMap::new(),
        }
    }

    pub fn id(&self) -> &str {
        &self.config.identity.id
    }

    /// Events from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<WorkerEvent> {
        self.events.subscribe()
    }

    /// Runs until `shutdown` resolves, then shuts down gracefully: stops claiming, lets
    /// running handlers finish within `shutdown_grace`, and releases the rest as
    /// interrupted (no attempt spent, checkpoint kept).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) {
        metrics::describe();
        let lease_for = self.config.lease_for;
        let (completer, completer_task) =
            completer::start(self.store.clone(), self.config.finish_batch, lease_for);
        let shared = Arc::new(Shared::new(
            self.store.clone(),
            self.config,
            self.handlers,
            completer,
            self.events,
        ));
        let stop_services = CancellationToken::new();
        let keeper = tokio::spawn(lease_keeper::run(shared.clone(), stop_services.clone()));
        let rescuer = shared.config.rescue_interval.map(|interval| {
            let r = Rescuer::new(
                shared.store.clone(),
                RescuerConfig {
                    interval,
                    ..Default::default()
                },
            );
            tokio::spawn(r.run(stop_services.clone().cancelled_owned()))
        });
        let tracker = TaskTracker::new();
        tracing::info!(worker = %shared.config.identity.id, "worker started");

        claim_loop(&shared, &tracker, shutdown).await;

        // Graceful shutdown.
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
        let _ = keeper.await;
        if let Some(r) = rescuer {
            let _ = r.await;
        }
        let id = shared.config.identity.id.clone();
        drop(shared);
        let _ = completer_task.await;
        tracing::info!(worker = %id, "worker stopped");
    }
}

async fn claim_loop(
    shared: &Arc<Shared>,
    tracker: &TaskTracker,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let total = Arc::new(Semaphore::new(shared.config.concurrency));
    let queues: Vec<(QueueConfig, Arc<Semaphore>)> = shared
        .config
        .queues
        .iter()
        .map(|q| (q.clone(), Arc::new(Semaphore::new(q.concurrency))))
        .collect();
    let kinds: Vec<String> = shared.handlers.keys().cloned().collect();
    let queue_metrics: Vec<QueueMetrics> = queues
        .iter()
        .map(|(q, _)| QueueMetrics::new(&q.name, &kinds))
        .collect();
    let mut wake = match shared.store.subscribe().await {
        Ok(rx) => Some(rx),
        Err(e) => {
            tracing::warn!(error = %e, "no wake-up notifications; polling only");
            None
        }
    };
    let mut start = 0usize;
    loop {
        let mut want_more = false;
        // Rotate the first queue so one busy queue cannot starve the others of capacity.
        start = (start + 1) % queues.len();
        for i in 0..queues.len() {
            let (queue, limit) = &queues[(start + i) % queues.len()];
            let queue_metrics = &queue_metrics[(start + i) % queues.len()];
            let free = total
                .available_permits()
                .min(limit.available_permits())
                .min(shared.config.claim_batch as usize);
            if free == 0 {
                want_more = true;
                continue;
            }
            let claimed = shared
                .store
                .task_claim(ClaimParams {
                    queue: queue.name.clone(),
                    kinds: kinds.clone(),
                    limit: free as u32,
                    worker_id: shared.config.identity.id.clone(),
                    worker_host: shared.config.identity.host.clone(),
                    lease_for: shared.config.lease_for,
                    now: None,
                })
                .await;
            queue_metrics.claim_made();
            let tasks = match claimed {
                Ok(tasks) => tasks,
                Err(e) => {
                    metrics::store_error(Call::Claim);
                    tracing::warn!(error = %e, queue = %queue.name, "claim failed");
                    continue;
                }
            };
            want_more |= tasks.len() == free;
            for task in tasks {
                // Only this loop takes permits, and it asked for no more than were free.
                let permits = vec![
                    total.clone().try_acquire_owned().expect("free capacity"),
                    limit
                        .clone()
                        .try_acquire_owned()
                        .expect("free queue capacity"),
                ];
                let task_metrics = queue_metrics.claimed(&task);
                tracker.spawn(executor::execute(
                    shared.clone(),
                    task,
                    permits,
                    task_metrics,
                ));
            }
        }
        let poll = jittered(shared.config.poll_interval);
        tokio::select! {
            _ = &mut shutdown => return,
            _ = shared.capacity_freed.notified(), if want_more => {
                settle_freed_capacity(shared, &total).await;
            }
            _ = next_wake(&mut wake, &queues) => {}
            _ = tokio::time::sleep(poll) => {}
        }
        // One claim round answers every wake-up that arrived so far: without this, a
        // burst of N notifications would cost N claim rounds that find nothing.
        drain_wakes(&mut wake);
    }
}

/// Completions are written in batches, so the executors of one batch free their permits
/// within moments of each other, and a worker that claims as soon as one permit is free
/// splits into cohorts that each pay a claim and a completion write. Under load (the last
/// round used all the capacity it had) wait until half the capacity is free, or
/// [`COHORT_WAIT`] has passed, whichever comes first, so cohorts merge; a slot freed by a
/// long task is refilled at most that much later.
async fn settle_freed_capacity(shared: &Shared, total: &Semaphore) {
    let target = (shared
        .config
        .concurrency
        .min(shared.config.claim_batch as usize)
        / 2)
    .max(1);
    let deadline = Instant::now() + COHORT_WAIT;
    let mut free = total.available_permits();
    // First let executors that are already awake release their permits.
    for _ in 0..16 {
        if free >= target {
            return;
        }
        tokio::task::yield_now().await;
        let now = total.available_permits();
        if now == free {
            break;
        }
        free = now;
    }
    while total.available_permits() < target {
        tokio::select! {
            _ = shared.capacity_freed.notified() => {}
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}

/// The longest a claim waits for more capacity to free once some has (see
/// [`settle_freed_capacity`]).
const COHORT_WAIT: Duration = Duration::from_millis(2);

/// Discards wake-ups already queued: the claim round about to run covers them.
fn drain_wakes(wake: &mut Option<broadcast::Receiver<Wake>>) {
    if let Some(rx) = wake {
        while let Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) = rx.try_recv() {}
    }
}

/// Resolves when a notification names one of our queues; never, without notifications.
async fn next_wake(
    wake: &mut Option<broadcast::Receiver<Wake>>,
    queues: &[(QueueConfig, Arc<Semaphore>)],
) {
    let Some(rx) = wake else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(w) if queues.iter().any(|(q, _)| q.name == w.queue) => return,
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => {
                *wake = None;
                return std::future::pending().await;
            }
        }
    }
}

fn jittered(d: Duration) -> Duration {
    d.mul_f64(0.8 + 0.4 * rand::random::<f64>())
}
