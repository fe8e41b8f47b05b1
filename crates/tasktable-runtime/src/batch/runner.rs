//! One attempt of a batch: read where it got to, run the pre-start hook, push items
//! through the window until the end, a pause, a stop, an exhausted budget or a lost
//! lease, saving every [`SAVE_EVERY`](super::SAVE_EVERY).

use super::{BatchContext, BatchHandler, Item, SAVE_EVERY};
use crate::handler::HandlerError;
use crate::metrics::BatchMetrics;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use serde_json::{json, Value};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::batch::{BatchControl, BatchSpec, Budget, TokenBucket, Window};
use tasktable_core::HandlerOutcome;
use tasktable_store::{BatchSaveParams, BatchSaved, ItemFailure};
use tokio::time::{Instant, MissedTickBehavior};

/// The least time between two saves that a filling window asks for.
const MIN_SAVE_GAP: Duration = Duration::from_millis(100);

/// Why the items stopped starting.
#[derive(Debug, Clone, PartialEq)]
enum Winding {
    Pause,
    Stop,
    /// The error budget ran out at this item, with its error.
    Exhausted(u64, String),
}

/// What one item came to, with its index and the tries it took.
type Ended = (u64, Result<Item, String>, u32);

struct State<D> {
    spec: BatchSpec,
    window: Window,
    budget: Budget,
    data: Arc<D>,
    data_version: u64,
    failures: Vec<ItemFailure>,
    /// Items done since the last save, and when that was, for the measured rate.
    done_since: u64,
    metrics: BatchMetrics,
    saved_at: Instant,
    /// The earliest an early save may go: a gap after the last save, a second after a
    /// save that failed.
    early_from: Instant,
}

pub(super) async fn run<H: BatchHandler>(
    handler: &H,
    ctx: BatchContext,
    payload: Value,
) -> HandlerOutcome {
    let task = ctx.task();
    let store = task.store().clone();
    let batch = match store.batch_get(task.task_id()).await {
        Ok(Some(b)) => b,
        Ok(None) => {
            return HandlerOutcome::Failed {
                message: format!(
                    "task {} is no batch: submit it with NewTask::batch",
                    task.task_id()
                ),
            }
        }
        Err(e) => {
            return HandlerOutcome::Error {
                message: format!("cannot read the batch: {e}"),
                retry_after: None,
            }
        }
    };
    let data: H::Data = match serde_json::from_value(payload) {
        Ok(d) => d,
        Err(e) => {
            return HandlerOutcome::Failed {
                message: format!("batch data does not fit handler {}: {e}", H::KIND),
            }
        }
    };
    let spec = batch.spec;
    let mut state = State {
        spec,
        window: Window::new(batch.low_water, spec.window_size(), batch.end),
        budget: Budget {
            allowed: spec.error_budget,
            spent: batch.errors,
        },
        data: Arc::new(data),
        data_version: batch.data_version,
        failures: Vec::new(),
        done_since: 0,
        metrics: BatchMetrics::new(task.queue(), task.kind()),
        saved_at: Instant::now(),
        early_from: Instant::now(),
    };
    // The first save marks the batch started and hears a pause or stop that came while
    // it was being claimed.
    let mut winding = match save(&ctx, &mut state).await {
        Ok(w) => w,
        Err(outcome) => return outcome,
    };
    let mut ticks = tokio::time::interval_at(Instant::now() + SAVE_EVERY, SAVE_EVERY);
    ticks.set_missed_tick_behavior(MissedTickBehavior::Delay);
    if winding.is_none() {
        let data = state.data.clone();
        let prestart = tokio::time::timeout(spec.prestart_timeout, handler.prestart(&ctx, &data));
        tokio::pin!(prestart);
        loop {
            tokio::select! {
                done = &mut prestart => match done {
                    Ok(Ok(())) => break,
                    Ok(Err(e)) => return e.into_outcome(),
                    Err(_) => {
                        return HandlerOutcome::Error {
                            message: format!(
                                "the pre-start hook timed out after {:?}",
                                spec.prestart_timeout
                            ),
                            retry_after: None,
                        }
                    }
                },
                _ = ticks.tick() => match save(&ctx, &mut state).await {
                    Ok(None) => {}
                    Ok(Some(w)) => {
                        winding = Some(w);
                        break;
                    }
                    Err(outcome) => return outcome,
                },
                _ = task.stopped() => return stopped(),
            }
        }
    }
    if winding.is_none() {
        winding = match items(handler, &ctx, &mut state, &mut ticks).await {
            Ok(w) => w,
            Err(outcome) => return outcome,
        };
    }
    // Nothing runs any more: the last save holds the final mark.
    if let Err(outcome) = save(&ctx, &mut state).await {
        return outcome;
    }
    match winding {
        Some(Winding::Pause) => HandlerOutcome::Hold {
            reason: "paused".into(),
        },
        Some(Winding::Stop) => HandlerOutcome::Cancel {
            reason: "stopped".into(),
        },
        Some(Winding::Exhausted(item, error)) => HandlerOutcome::Failed {
            message: format!(
                "error budget of {} spent: item {item} failed: {error}",
                state.budget.allowed
            ),
        },
        None => HandlerOutcome::Succeeded {
            result: Some(json!({
                "items": state.window.low(),
                "errors": state.budget.spent,
            })),
        },
    }
}

/// Runs items until the window completes or the batch winds down; answers why it
/// stopped (`None`: every item is done).
async fn items<H: BatchHandler>(
    handler: &H,
    ctx: &BatchContext,
    state: &mut State<H::Data>,
    ticks: &mut tokio::time::Interval,
) -> Result<Option<Winding>, HandlerOutcome> {
    let clock = Instant::now();
    let seconds = move || clock.elapsed().as_secs_f64();
    let mut bucket = state.spec.rate.map(|r| TokenBucket::new(r, seconds()));
    let parallelism = state.spec.parallelism as usize;
    let mut running = FuturesUnordered::new();
    let mut winding: Option<Winding> = None;
    let mut token_wait: Option<Instant> = None;
    loop {
        while winding.is_none() && running.len() < parallelism && token_wait.is_none() {
            if state.window.is_complete() {
                break;
            }
            if let Some(b) = bucket.as_mut() {
                if let Err(wait) = b.take(seconds()) {
                    token_wait = Some(Instant::now() + wait);
                    break;
                }
            }
            let Some(index) = state.window.start_next() else {
                // The token taken is not spent: the bucket only refills to its burst.
                break;
            };
            running.push(one_item(
                handler,
                ctx,
                index,
                state.data.clone(),
                state.spec,
            ));
        }
        if running.is_empty() && (winding.is_some() || state.window.is_complete()) {
            return Ok(winding);
        }
        // Half the window is done but not saved: save early, so that the window, which
        // moves only as far as the saved mark allows, never holds the items up.
        let mut early: Option<Instant> = None;
        if state.window.unsaved() * 2 >= state.window.size() && winding.is_none() {
            let due = state.early_from;
            if Instant::now() >= due {
                if let Some(w) = save(ctx, state).await? {
                    winding.get_or_insert(w);
                }
                continue;
            }
            early = Some(due);
        }
        let save_early = async {
            match early {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        let wait_token = async {
            match token_wait {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            Some((index, ended, tries)) = running.next() => {
                if state.window.end().is_some_and(|end| index >= end) {
                    // Past the end an item found: it does not count.
                    continue;
                }
                match ended {
                    Ok(Item::Done) => {
                        state.done_since += 1;
                        state.metrics.done.increment(1);
                        state.window.finish(index);
                    }
                    Ok(Item::PastEnd) => state.window.end_at(index),
                    Err(error) => {
                        state.metrics.failed.increment(1);
                        state.failures.push(ItemFailure { item: index, error: error.clone(), tries, failed_at: None });
                        state.window.finish(index);
                        if !state.budget.spend() && winding.is_none() {
                            winding = Some(Winding::Exhausted(index, error));
                        }
                    }
                }
            }
            _ = wait_token => token_wait = None,
            _ = save_early => {}
            _ = ticks.tick() => {
                if let Some(w) = save(ctx, state).await? {
                    winding.get_or_insert(w);
                }
            }
            _ = ctx.task().stopped() => return Err(stopped()),
        }
    }
}

/// One item with its retries, a panic counted as an error.
async fn one_item<H: BatchHandler>(
    handler: &H,
    ctx: &BatchContext,
    index: u64,
    data: Arc<H::Data>,
    spec: BatchSpec,
) -> Ended {
    let mut tries = 0;
    loop {
        tries += 1;
        let result = AssertUnwindSafe(handler.item(ctx, index, &data))
            .catch_unwind()
            .await
            .unwrap_or_else(|_| Err(HandlerError::retry("the item's handler panicked")));
        match result {
            Ok(item) => return (index, Ok(item), tries),
            Err(e) if e.is_permanent() || tries > spec.item_retries => {
                return (index, Err(e.message().to_owned()), tries)
            }
            Err(_) => tokio::time::sleep(spec.item_retry_delay(tries)).await,
        }
    }
}

/// Saves progress and the failures since the last save; answers a pause or stop asked
/// for, or ends the attempt when the lease is gone.
async fn save<D: serde::de::DeserializeOwned>(
    ctx: &BatchContext,
    state: &mut State<D>,
) -> Result<Option<Winding>, HandlerOutcome> {
    let task = ctx.task();
    let elapsed = state.saved_at.elapsed().as_secs_f64();
    let rate = (elapsed > 0.0).then(|| state.done_since as f64 / elapsed);
    let params = BatchSaveParams {
        lease: task.lease(),
        low_water: state.window.low(),
        end: state.window.end(),
        errors: state.budget.spent,
        failures: state.failures.clone(),
        items_per_second: rate,
        lease_for: task.lease_for(),
        data_version: state.data_version,
        now: None,
    };
    let low = params.low_water;
    let saved: BatchSaved = match task.store().batch_save(params).await {
        Ok(saved) => saved,
        // The database may be back by the next save; the lease keeper renews meanwhile.
        Err(e) => {
            tracing::warn!(task_id = task.task_id(), error = %e, "cannot save the batch's progress");
            state.early_from = Instant::now() + SAVE_EVERY;
            return Ok(None);
        }
    };
    state.metrics.saves.increment(1);
    state.failures.clear();
    state.done_since = 0;
    state.saved_at = Instant::now();
    state.early_from = state.saved_at + MIN_SAVE_GAP;
    if task.heed(&saved.lease).is_err() {
        return Err(stopped());
    }
    state.window.mark_saved(low);
    state.budget.allowed = saved.error_budget;
    if let Some((version, value)) = saved.data {
        match serde_json::from_value(value) {
            Ok(data) => {
                state.data = Arc::new(data);
                state.data_version = version;
            }
            Err(e) => {
                tracing::warn!(task_id = task.task_id(), error = %e, "the batch's new data does not fit its handler; keeping the old");
                state.data_version = version;
            }
        }
    }
    Ok(match saved.control {
        BatchControl::Run => None,
        BatchControl::Pause => Some(Winding::Pause),
        BatchControl::Stop => Some(Winding::Stop),
    })
}

/// The outcome of an attempt told to stop (a lost lease, a cancel, shutdown): the
/// executor records none of it, so any will do.
fn stopped() -> HandlerOutcome {
    HandlerOutcome::Snooze {
        after: Duration::ZERO,
    }
}
