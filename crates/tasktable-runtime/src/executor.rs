//! Runs one claimed task: the handler in its own tokio task (so a panic fails only this
//! attempt), under its per-attempt timeout, watching for the stop signal; then hands the
//! outcome to the completer.

use crate::context::{StopReason, TaskContext};
use crate::metrics::TaskMetrics;
use crate::shared::{Shared, WorkerEvent};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{HandlerOutcome, Task};
use tokio::sync::OwnedSemaphorePermit;

enum Ending {
    Returned(HandlerOutcome),
    Stopped(StopReason),
}

pub(crate) async fn execute(
    shared: Arc<Shared>,
    task: Task,
    permits: Vec<OwnedSemaphorePermit>,
    metrics: Arc<TaskMetrics>,
) {
    let ctx = TaskContext::new(task.clone(), shared.store.clone(), shared.config.lease_for);
    metrics.started();
    shared.activate(&ctx);
    shared.emit(WorkerEvent::Claimed {
        task_id: task.id,
        attempt: task.attempt,
    });
    let handler = shared.handlers.get(&task.kind).cloned();
    let started = Instant::now();
    let ending = match handler {
        Some(handler) => {
            run_handler(
                &shared,
                handler.call(ctx.clone(), task.payload.clone()),
                &ctx,
                task.timeout,
            )
            .await
        }
        // The claim asks only for registered kinds, so this is a bug elsewhere; failing
        // the attempt keeps it visible rather than silently looping.
        None => Ending::Returned(HandlerOutcome::Failed {
            message: format!("no handler for kind {:?} on this worker", task.kind),
        }),
    };
    metrics.ran_for(started.elapsed());
    match ending {
        Ending::Stopped(StopReason::LeaseLost) => metrics.lease_lost(),
        // The operator's change recorded this attempt's end; the worker counts it.
        Ending::Stopped(StopReason::Retargeted) => {
            metrics.recorded(tasktable_core::AttemptOutcome::Retargeted)
        }
        _ => {}
    }
    let plan = match ending {
        Ending::Returned(outcome) => Some(FinishPlan::for_handler(
            outcome,
            task.attempt,
            &task.backoff,
            rand::random(),
        )),
        Ending::Stopped(StopReason::Shutdown) => Some(FinishPlan::interrupted()),
        Ending::Stopped(_) => None,
    };
    // The handler is done, so its slot is free: the claim loop may fetch the next tasks
    // while this attempt's end is being written, instead of one round trip after the
    // other. Handlers running at once still never exceed the limits, and the leases held
    // (running plus being recorded) stay within twice the concurrency: the slot moves to
    // a recording slot, and waits for one if the completer is that far behind.
    let recording = shared.recording.clone().acquire_owned().await;
    drop(permits);
    shared.capacity_freed.notify_one();
    let mut finished = None;
    if let Some(plan) = plan {
        let planned = plan.outcome;
        let recorded = shared.completer.finish(&task, plan).await;
        match recorded {
            Some(outcome) => metrics.recorded(outcome),
            None => {
                metrics.lease_lost();
                tracing::warn!(task_id = task.id, outcome = %planned, "result dropped: the lease was lost before it was recorded");
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
    metrics.ended();
    if let Some(event) = finished {
        shared.emit(event);
    }
    shared.deactivate(&ctx);
    drop(recording);
    // Shutdown waits for the active count to reach zero.
    shared.capacity_freed.notify_one();
}

async fn run_handler(
    shared: &Shared,
    future: futures::future::BoxFuture<'static, HandlerOutcome>,
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
