//! One attempt of a batch: read where it got to, run the pre-start hook, push items
//! through the window until the end, a pause, a stop, an exhausted budget or a lost
//! lease, saving every [`SAVE_EVERY`](super::SAVE_EVERY).

use super::{BatchContext, BatchHandler, Item, SAVE_EVERY};
use crate::handler::HandlerError;
use crate::metrics::BatchMetrics;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use serde_json::{json, Value};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::batch::{BatchControl, BatchSpec, Budget, TokenBucket, Window};
use tasktable_core::HandlerOutcome;
use tasktable_store::{BatchSaveParams, BatchSaved, ItemFailure, StoreResult};
use tokio::time::{Instant, MissedTickBehavior};

/// The least time between two saves that a filling window asks for.
const MIN_SAVE_GAP: Duration = Duration::from_millis(100);

/// Why the items stopped starting.
#[derive(Debug, Clone, PartialEq)]
enum Winding {
    Pause,
    Stop,
    /// The worker is shutting down: the items in flight end, none starts.
    Shutdown,
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
        let mut saving: Option<Saving> = None;
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
                _ = ticks.tick(), if saving.is_none() => {
                    saving = Some(start_save(&ctx, &mut state));
                }
                answer = answer(&mut saving) => {
                    let done = saving.take().expect("a save was in flight");
                    ticks.reset();
                    match saved(&ctx, &mut state, done, answer) {
                        Ok(None) => {}
                        Ok(Some(w)) => {
                            winding = Some(w);
                            break;
                        }
                        Err(outcome) => return outcome,
                    }
                }
                _ = task.stopped() => return stopped(),
            }
        }
        // A save still in flight is answered before the items begin.
        if let Some(mut done) = saving.take() {
            let answer = (&mut done.call).await;
            match saved(&ctx, &mut state, done, answer) {
                Ok(w) => winding = winding.or(w),
                Err(outcome) => return outcome,
            }
        }
    }
    if winding.is_none() && task.is_shutting_down() {
        winding = Some(Winding::Shutdown);
    }
    if winding.is_none() {
        tracing::info!(
            task_id = task.task_id(),
            kind = task.kind(),
            queue = task.queue(),
            attempt = task.attempt(),
            from = state.window.low(),
            items = state.window.end(),
            failed = state.budget.spent,
            "batch started"
        );
        winding = match items(handler, &ctx, &mut state, &mut ticks).await {
            Ok(w) => w,
            Err(outcome) => return outcome,
        };
    }
    // Nothing runs any more: the last save holds the final mark.
    if let Err(outcome) = save(&ctx, &mut state).await {
        return outcome;
    }
    log_wound_down(&ctx, &state, winding.as_ref());
    match winding {
        Some(Winding::Pause) => HandlerOutcome::Hold {
            reason: "paused".into(),
        },
        Some(Winding::Stop) => HandlerOutcome::Cancel {
            reason: "stopped".into(),
        },
        Some(Winding::Shutdown) => HandlerOutcome::Interrupted,
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

/// The INFO line of an attempt that ran every item, spent the error budget, or gives its
/// task back because an operator paused or stopped the batch or the worker is shutting
/// down: one line an attempt, never one an item.
fn log_wound_down<D>(ctx: &BatchContext, state: &State<D>, winding: Option<&Winding>) {
    let task = ctx.task();
    let (task_id, kind, queue) = (task.task_id(), task.kind(), task.queue());
    let (done, failed, items) = (state.window.low(), state.budget.spent, state.window.end());
    let given_back = match winding {
        Some(Winding::Pause) => Some("batch paused"),
        Some(Winding::Stop) => Some("batch stopped"),
        Some(Winding::Shutdown) => Some("batch given back for the shutdown"),
        Some(Winding::Exhausted(..)) | None => None,
    };
    if let Some(message) = given_back {
        tracing::info!(task_id, kind, queue, done, failed, items, "{message}");
        return;
    }
    let outcome = if winding.is_some() {
        "failed"
    } else {
        "succeeded"
    };
    tracing::info!(
        task_id,
        kind,
        queue,
        done,
        failed,
        items,
        outcome,
        "batch ended"
    )
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
    let mut saving: Option<Saving> = None;
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
            // A save still in flight is answered first: the last save comes after it.
            if let Some(mut done) = saving.take() {
                let answer = (&mut done.call).await;
                if let Some(w) = saved(ctx, state, done, answer)? {
                    winding.get_or_insert(w);
                }
            }
            return Ok(winding);
        }
        // Half the window is done but not saved: save early, so that the window, which
        // moves only as far as the saved mark allows, never holds the items up.
        let mut early: Option<Instant> = None;
        if state.window.unsaved() * 2 >= state.window.size()
            && winding.is_none()
            && saving.is_none()
        {
            let due = state.early_from;
            if Instant::now() >= due {
                saving = Some(start_save(ctx, state));
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
            _ = ctx.task().shutting_down(), if winding.is_none() => winding = Some(Winding::Shutdown),
            _ = save_early => {}
            _ = ticks.tick(), if saving.is_none() => saving = Some(start_save(ctx, state)),
            answer = answer(&mut saving) => {
                let done = saving.take().expect("a save was in flight");
                // The next save a whole period after this one, not at once after a slow one.
                ticks.reset();
                if let Some(w) = saved(ctx, state, done, answer)? {
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
            Err(e) => tokio::time::sleep(spec.item_retry_wait(tries, e.asked_wait())).await,
        }
    }
}

/// A save of the batch's progress on its way to the store, with what it carries. It is
/// polled beside the items and the pre-start hook, never instead of them: a database that
/// answers slowly (or not, while it restarts) must not keep an item's own timers from
/// being heard.
struct Saving {
    call: BoxFuture<'static, StoreResult<BatchSaved>>,
    low: u64,
    /// The failures it carries, taken from the state: put back if the save fails.
    failures: Vec<ItemFailure>,
    /// The items done that its rate counts, and when it set out: the next rate counts
    /// from there.
    done: u64,
    started: Instant,
}

/// Starts a save of the progress and the failures since the last save.
fn start_save<D>(ctx: &BatchContext, state: &mut State<D>) -> Saving {
    let task = ctx.task();
    let elapsed = state.saved_at.elapsed().as_secs_f64();
    let rate = (elapsed > 0.0).then(|| state.done_since as f64 / elapsed);
    let failures = std::mem::take(&mut state.failures);
    let params = BatchSaveParams {
        lease: task.lease(),
        low_water: state.window.low(),
        end: state.window.end(),
        errors: state.budget.spent,
        failures: failures.clone(),
        items_per_second: rate,
        lease_for: task.lease_for(),
        data_version: state.data_version,
        now: None,
    };
    let store = task.store().clone();
    Saving {
        low: params.low_water,
        call: Box::pin(async move { store.batch_save(params).await }),
        failures,
        done: state.done_since,
        started: Instant::now(),
    }
}

/// Resolves with the answer to the save in flight; never while there is none.
async fn answer(saving: &mut Option<Saving>) -> StoreResult<BatchSaved> {
    match saving {
        Some(s) => (&mut s.call).await,
        None => std::future::pending().await,
    }
}

/// Takes in the answer to `saving`: answers a pause or stop asked for, or ends the
/// attempt when the lease is gone. A save that failed is made again by a later one.
fn saved<D: serde::de::DeserializeOwned>(
    ctx: &BatchContext,
    state: &mut State<D>,
    saving: Saving,
    answer: StoreResult<BatchSaved>,
) -> Result<Option<Winding>, HandlerOutcome> {
    let task = ctx.task();
    let saved: BatchSaved = match answer {
        Ok(saved) => saved,
        // The database may be back by the next save; the lease keeper renews meanwhile.
        Err(e) => {
            if !e.is_unreachable() {
                tracing::warn!(task_id = task.task_id(), error = %e, "cannot save the batch's progress");
            }
            let mut failures = saving.failures;
            failures.append(&mut state.failures);
            state.failures = failures;
            state.early_from = Instant::now() + SAVE_EVERY;
            return Ok(None);
        }
    };
    state.metrics.saves.increment(1);
    state.done_since -= saving.done.min(state.done_since);
    state.saved_at = saving.started;
    state.early_from = Instant::now() + MIN_SAVE_GAP;
    if task.heed(&saved.lease).is_err() {
        return Err(stopped());
    }
    state.window.mark_saved(saving.low);
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

/// Saves and waits for the answer (the first save, which marks the batch started, and
/// the last, which holds the final mark, when nothing else runs).
async fn save<D: serde::de::DeserializeOwned>(
    ctx: &BatchContext,
    state: &mut State<D>,
) -> Result<Option<Winding>, HandlerOutcome> {
    let mut saving = start_save(ctx, state);
    let answer = (&mut saving.call).await;
    saved(ctx, state, saving, answer)
}

/// The outcome of an attempt told to stop (a lost lease, a cancel, shutdown): the
/// executor records none of it, so any will do.
fn stopped() -> HandlerOutcome {
    HandlerOutcome::Snooze {
        after: Duration::ZERO,
    }
}
