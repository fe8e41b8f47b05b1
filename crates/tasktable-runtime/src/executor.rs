//! Runs one claimed task: the handler in its own tokio task (so a panic fails only this
//! attempt), under its per-attempt timeout, watching for the stop signal; then hands the
//! outcome to the completer.
//!
//! A task claimed ahead (see [`crate::claimer`]) first waits for a slot of its queue and
//! of the worker. Its lease is renewed and its stop signal heard while it waits; a task
//! told to stop, or kept waiting longer than [`AHEAD_PATIENCE`], is given back without
//! spending its attempt and without its handler having run.

use crate::attempt_log;
use crate::context::{StopReason, TaskContext};
use crate::metrics::TaskMetrics;
use crate::shared::{Shared, WorkerEvent};
use crate::trace;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{AttemptOutcome, HandlerOutcome, Task};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tracing::{Instrument, Span};

enum Ending {
    Returned(HandlerOutcome),
    Stopped(StopReason),
    /// Claimed ahead and given back before its handler ran.
    Unstarted,
}

/// The longest a task claimed ahead waits for a slot before it is given back (less
/// when a quarter of its timeout is shorter: the timeout runs from the claim).
pub(crate) const AHEAD_PATIENCE: Duration = Duration::from_secs(1);

/// Where a claimed task's slot comes from.
pub(crate) enum Slot {
    /// The slot was free when the task was claimed: the claimer took its permits.
    Held(Vec<OwnedSemaphorePermit>),
    /// Claimed ahead of a free slot: wait for one of the queue and of the worker.
    Ahead {
        queue: Arc<Semaphore>,
        total: Arc<Semaphore>,
        waiting: Waiting,
        /// A recording slot was added for this task (`Shared::add_recording`).
        recording_added: bool,
    },
}

pub(crate) async fn execute(
    shared: Arc<Shared>,
    task: Task,
    slot: Slot,
    metrics: Arc<TaskMetrics>,
) {
    let claimed_at = Instant::now();
    // Disabled (and free) unless this process exports traces.
    let span = trace::attempt_span(&task);
    let ctx = TaskContext::new(
        task.clone(),
        shared.store.clone(),
        shared.config.lease_for,
        shared.unstarted.clone(),
    );
    shared.activate(&ctx);
    let mut recording_added = false;
    let permits = match slot {
        Slot::Held(permits) => Ok(permits),
        Slot::Ahead {
            queue,
            total,
            waiting,
            recording_added: added,
        } => {
            recording_added = added;
            wait_for_slot(&shared, &ctx, queue, total)
                .await
                .map_err(|ending| (ending, waiting))
        }
    };
    let (ending, permits, waiting) = match permits {
        Ok(permits) => {
            let ending = run(&shared, &task, &ctx, &metrics, claimed_at, &span).await;
            (ending, permits, None)
        }
        Err((ending, waiting)) => {
            if let Ending::Stopped(reason) = ending {
                shared.emit(WorkerEvent::Stopped {
                    task_id: task.id,
                    reason,
                });
            }
            (ending, Vec::new(), Some(waiting))
        }
    };
    let holding = Holding {
        permits,
        waiting,
        recording_added,
    };
    finish(shared, task, ctx, ending, holding, metrics, span).await
}

/// What an attempt holds of the worker's capacity until its end is recorded.
struct Holding {
    permits: Vec<OwnedSemaphorePermit>,
    /// Still counted among the tasks waiting for a slot (it never got one).
    waiting: Option<Waiting>,
    recording_added: bool,
}

/// A task's place among those claimed ahead (`Shared::waiting` and its gauge): taken at
/// the claim, left when dropped. One that is given back keeps it until it holds a
/// recording slot, so the leases a worker holds stay within its running, recording and
/// waiting tasks however the completer lags.
pub(crate) struct Waiting(Arc<Shared>);

impl Waiting {
    pub fn enter(shared: &Arc<Shared>) -> Self {
        shared.waiting.fetch_add(1, Ordering::Relaxed);
        crate::metrics::waiting(1.0);
        Waiting(shared.clone())
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.waiting.fetch_sub(1, Ordering::Relaxed);
        crate::metrics::waiting(-1.0);
        // Room to claim ahead again: a claim loop waiting for it hears so.
        self.0.capacity_freed.notify_one();
    }
}

/// Waits for a queue slot, then a worker slot (in that order, so a task never holds the
/// worker's slot while its queue is full), unless it is told to stop first, the worker
/// stops, or it has waited too long.
async fn wait_for_slot(
    shared: &Shared,
    ctx: &TaskContext,
    queue: Arc<Semaphore>,
    total: Arc<Semaphore>,
) -> Result<Vec<OwnedSemaphorePermit>, Ending> {
    let patience = ctx
        .task()
        .timeout
        .map_or(AHEAD_PATIENCE, |t| AHEAD_PATIENCE.min(t / 4));
    let permits = async {
        let q = queue.acquire_owned().await.expect("queue slots stay open");
        let t = total.acquire_owned().await.expect("worker slots stay open");
        vec![t, q]
    };
    tokio::select! {
        // A stop that comes with a free slot wins: nothing starts once told not to.
        biased;
        reason = ctx.stopped() => Err(match reason {
            StopReason::Shutdown => Ending::Unstarted,
            reason => Ending::Stopped(reason),
        }),
        _ = shared.unstarted.cancelled() => Err(Ending::Unstarted),
        permits = permits => Ok(permits),
        _ = tokio::time::sleep(patience) => {
            // The handlers ahead of it run longer than the mean said: claim nothing
            // ahead until short runs are seen again, so the tasks given back now are not
            // claimed ahead again at once.
            shared.run_time.slowed(patience);
            Err(Ending::Unstarted)
        }
    }
}

/// Runs the handler of a task that holds its slots.
async fn run(
    shared: &Shared,
    task: &Task,
    ctx: &TaskContext,
    metrics: &TaskMetrics,
    claimed_at: Instant,
    span: &Span,
) -> Ending {
    metrics.started();
    shared.emit(WorkerEvent::Claimed {
        task_id: task.id,
        attempt: task.attempt,
    });
    let handler = shared.handlers.get(&task.kind).cloned();
    let started = Instant::now();
    // The database's deadline runs from the claim, so the time spent waiting for a slot
    // is taken off the handler's.
    let timeout = task.timeout.map(|t| t.saturating_sub(started - claimed_at));
    let ending = match handler {
        Some(handler) => {
            let call = handler.call(ctx.clone(), task.payload.clone());
            // The handler runs in the attempt's span, when there is one to run in.
            if span.is_disabled() {
                run_handler(shared, call, ctx, timeout).await
            } else {
                run_handler(shared, call.instrument(span.clone()), ctx, timeout).await
            }
        }
        // The claim asks only for registered kinds, so this is a bug elsewhere; failing
        // the attempt keeps it visible rather than silently looping.
        None => Ending::Returned(HandlerOutcome::Failed {
            message: format!("no handler for kind {:?} on this worker", task.kind),
        }),
    };
    let ran_for = started.elapsed();
    metrics.ran_for(ran_for);
    shared.run_time.record(ran_for);
    ending
}

/// Records how the attempt ended and lets go of its slots and its lease.
async fn finish(
    shared: Arc<Shared>,
    task: Task,
    ctx: TaskContext,
    ending: Ending,
    holding: Holding,
    metrics: Arc<TaskMetrics>,
    span: Span,
) {
    let Holding {
        permits,
        waiting,
        recording_added,
    } = holding;
    let started = waiting.is_none();
    match ending {
        Ending::Stopped(StopReason::LeaseLost) => {
            metrics.lease_lost();
            trace::attempt_ended(&span, AttemptOutcome::LeaseExpired);
        }
        // The operator's change recorded this attempt's end; the worker counts it.
        Ending::Stopped(StopReason::Retargeted) => {
            metrics.recorded(AttemptOutcome::Retargeted);
            trace::attempt_ended(&span, AttemptOutcome::Retargeted);
        }
        Ending::Stopped(StopReason::Cancelled) => {
            trace::attempt_ended(&span, AttemptOutcome::Cancelled)
        }
        _ => {}
    }
    let plan = match ending {
        // The worker's timer: the task's own limit is at hand, and the error names it.
        Ending::Returned(HandlerOutcome::TimedOut) => Some(FinishPlan::timed_out(
            task.attempt,
            &task.backoff,
            rand::random(),
            task.timeout,
        )),
        Ending::Returned(outcome) => Some(FinishPlan::for_handler(
            outcome,
            task.attempt,
            &task.backoff,
            rand::random(),
        )),
        Ending::Stopped(StopReason::Shutdown) => Some(FinishPlan::interrupted()),
        Ending::Unstarted => Some(FinishPlan::given_back()),
        Ending::Stopped(_) => None,
    };
    // The handler is done, so its slot is free: the claim loop may fetch the next tasks
    // while this attempt's end is being written, instead of one round trip after the
    // other. Handlers running at once still never exceed the limits, and the leases held
    // stay bounded (see `Shared::recording`): the slot moves to a recording slot, and
    // waits for one if the completer is that far behind.
    let recording = shared.recording.clone().acquire_owned().await;
    drop(waiting);
    drop(permits);
    shared.capacity_freed.notify_one();
    let mut finished = None;
    if let Some(plan) = plan {
        let planned = plan.outcome;
        // Kept for the log line of an attempt that did not succeed (never cloned else).
        let error = attempt_log::logs(planned)
            .then(|| plan.error.clone())
            .flatten();
        let recorded = shared.completer.finish(&task, plan).await;
        trace::attempt_ended(&span, recorded.unwrap_or(AttemptOutcome::LeaseExpired));
        let worker = shared.config.identity.id.as_str();
        match recorded {
            Some(outcome) => {
                metrics.recorded(outcome);
                attempt_log::attempt_ended(attempt_log::Ended {
                    task_id: task.id,
                    queue: &task.queue,
                    kind: &task.kind,
                    attempt: task.attempt,
                    max_attempts: task.max_attempts,
                    worker,
                    outcome,
                    error: error.as_deref(),
                });
            }
            None => {
                metrics.lease_lost();
                attempt_log::result_dropped(task.id, &task.queue, &task.kind, worker, planned);
            }
        }
        finished = Some(WorkerEvent::Finished {
            task_id: task.id,
            outcome: recorded.unwrap_or(planned),
            applied: recorded.is_some(),
        });
    }
    // The attempt is over before anyone hears of it, so an observer woken by the event
    // sees the counters and the gauge already up to date.
    if started {
        metrics.ended();
    }
    if let Some(event) = finished {
        shared.emit(event);
    }
    shared.deactivate(&ctx);
    match recording {
        // The slot added for this task goes with it.
        Ok(permit) if recording_added => shared.remove_recording(permit),
        other => drop(other),
    }
    // Shutdown waits for the active count to reach zero.
    shared.capacity_freed.notify_one();
}

async fn run_handler(
    shared: &Shared,
    future: impl Future<Output = HandlerOutcome> + Send + 'static,
    ctx: &TaskContext,
    timeout: Option<Duration>,
) -> Ending {
    let mut join = tokio::spawn(future);
    let deadline = async {
        match timeout {
            Some(t) => tokio::time::sleep(t).await,
            None => std::future::pending().await,
        }
    };
    let mut returned = false;
    let ending = tokio::select! {
        res = &mut join => {
            returned = true;
            match (ctx.stop_reason(), res) {
                // A handler that returns because it was told to stop (it watched
                // `ctx.stopped()`) has been stopped, whichever of the two the select saw
                // first: its result is not recorded either way.
                (Some(reason), _) if reason != StopReason::Shutdown => Ending::Stopped(reason),
                (_, Ok(outcome)) => return Ending::Returned(outcome),
                (_, Err(e)) if e.is_panic() => return Ending::Returned(HandlerOutcome::Panicked { message: panic_message(e.into_panic()) }),
                (_, Err(_)) => return Ending::Stopped(StopReason::Shutdown),
            }
        }
        _ = deadline => Ending::Returned(HandlerOutcome::TimedOut),
        reason = ctx.stopped() => Ending::Stopped(reason),
    };
    match ending {
        // Told to stop by an operator or a lost lease: the handler may wind down for a
        // moment, but nothing it returns is recorded.
        Ending::Stopped(reason) if reason != StopReason::Shutdown => {
            shared.emit(WorkerEvent::Stopped {
                task_id: ctx.task_id(),
                reason,
            });
            if !returned
                && tokio::time::timeout(shared.config.stop_grace, &mut join)
                    .await
                    .is_err()
            {
                join.abort();
            }
        }
        _ => join.abort(),
    }
    ending
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}
