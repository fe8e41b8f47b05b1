//! The claim loop: one claim round, the step a worker repeats, and the loop that drives
//! it between wake-ups, polls and freed capacity.
//!
//! A round asks each queue, in one store call, for the free slots (the smaller of the
//! worker's and the queue's free permits) plus the tasks it may claim ahead, at most
//! `claim_batch`, and starts an executor for each task claimed; it does not wait for
//! them. [`Worker::run`](crate::Worker::run) repeats rounds until shut down;
//! [`Worker::run_once`](crate::Worker::run_once) runs one and waits for its attempts.
//!
//! **Claiming ahead.** A worker whose handlers are short claims more tasks than it has
//! free slots, so a worker of concurrency 10 still claims, and records the ends, in
//! hundreds: the database's cost of a claim and of a commit is shared by more tasks. A
//! task claimed ahead holds its lease (renewed like a running one) and waits in its
//! executor for a slot. How many may wait is set by the handlers' recent mean run time,
//! so that the last of them starts within [`AHEAD_WAIT`]: the queue's slots times that
//! wait over the mean, none until a handler has run, at most [`ahead_limit`]. A task that
//! waits longer than [`AHEAD_PATIENCE`](crate::executor::AHEAD_PATIENCE) anyway (the
//! handlers slowed down), is told to stop, or whose worker stops, is given back without
//! spending its attempt; after such a wait the mean is raised to it, so the worker claims
//! nothing ahead until short runs are seen again.

use crate::config::{ahead_limit, jittered, QueueConfig};
use crate::executor::{self, Slot, Waiting};
use crate::metrics::{self, Call, QueueMetrics};
use crate::shared::Shared;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tasktable_store::{ClaimParams, StoreError, Wake};
use tokio::sync::{broadcast, Semaphore};
use tokio::time::Instant;
use tokio_util::task::TaskTracker;

/// What one claim round did.
#[derive(Debug, Default)]
pub(crate) struct Round {
    /// Tasks claimed, each now running in an executor.
    pub claimed: usize,
    /// Some queue had no free slot, or gave as many tasks as it was asked for: more work
    /// may be waiting for capacity.
    pub saturated: bool,
    /// The first claim the store refused; the round still asked the other queues.
    pub failed: Option<StoreError>,
}

/// The worker's capacity as the claim loop sees it, and what it asks the store for. The
/// claimer takes free permits for the tasks it claims; tasks claimed ahead wait for
/// theirs; executors give them back when their handler is done.
pub(crate) struct Claimer {
    total: Arc<Semaphore>,
    queues: Vec<Queue>,
    kinds: Vec<String>,
    /// The queue the next round asks first.
    first: usize,
    /// Takes every queue: those with work are discovered at most once a poll interval.
    all: bool,
    discovered_at: Option<Instant>,
}

struct Queue {
    config: QueueConfig,
    limit: Arc<Semaphore>,
    metrics: QueueMetrics,
    /// Found by discovery rather than configured: dropped when it has no work left and
    /// nothing of it runs here.
    discovered: bool,
}

impl Queue {
    fn new(config: QueueConfig, kinds: &[String], discovered: bool) -> Self {
        Queue {
            limit: Arc::new(Semaphore::new(config.concurrency)),
            metrics: QueueMetrics::new(&config.name, kinds),
            config,
            discovered,
        }
    }
}

impl Claimer {
    /// Every slot free.
    pub fn new(shared: &Shared) -> Self {
        let kinds: Vec<String> = shared.handlers.keys().cloned().collect();
        metrics::waiting(0.0);
        let queues = shared
            .config
            .queues
            .iter()
            .map(|q| Queue::new(q.clone(), &kinds, false))
            .collect();
        Claimer {
            total: Arc::new(Semaphore::new(shared.config.concurrency)),
            queues,
            kinds,
            first: 0,
            all: shared.config.all_queues,
            discovered_at: None,
        }
    }

    /// Adds `name` to the queues asked, when this claimer takes every queue.
    fn learn(&mut self, name: &str, concurrency: usize) {
        if self.all && !self.queues.iter().any(|q| q.config.name == name) {
            let config = QueueConfig {
                name: name.to_owned(),
                concurrency,
            };
            self.queues.push(Queue::new(config, &self.kinds, true));
        }
    }

    /// Asks the store which queues have work, at most once a poll interval: new ones are
    /// added, discovered ones with no work left and nothing running here are dropped.
    async fn discover(&mut self, shared: &Shared) {
        if !self.all
            || self
                .discovered_at
                .is_some_and(|at| at.elapsed() < shared.config.poll_interval)
        {
            return;
        }
        self.discovered_at = Some(Instant::now());
        let found = match shared.store.queue_discover().await {
            Ok(found) => found,
            Err(e) => {
                metrics::store_error(Call::Claim);
                if !e.is_unreachable() {
                    tracing::warn!(error = %e, "finding queues with work failed");
                }
                return;
            }
        };
        self.queues.retain(|q| {
            !q.discovered
                || found.contains(&q.config.name)
                || q.limit.available_permits() < q.config.concurrency
        });
        for name in &found {
            self.learn(name, shared.config.concurrency);
        }
        self.first = self.first.min(self.queues.len().saturating_sub(1));
    }

    /// One claim per queue with free slots; every task claimed is spawned on `tracker`.
    /// A draining worker claims nothing.
    pub async fn round(&mut self, shared: &Arc<Shared>, tracker: &TaskTracker) -> Round {
        let mut round = Round::default();
        if shared.draining.load(Ordering::Relaxed) {
            // Counted as saturated so the loop also waits on freed capacity, which a
            // release signals: a released worker claims at once, not at its next poll.
            round.saturated = true;
            return round;
        }
        self.discover(shared).await;
        let n = self.queues.len();
        if n == 0 {
            return round;
        }
        let first = self.first % n;
        // Rotate the first queue so one busy queue cannot starve the others of capacity.
        self.first = (first + 1) % n;
        for queue in (0..n).map(|i| &self.queues[(first + i) % n]) {
            let free = self
                .total
                .available_permits()
                .min(queue.limit.available_permits());
            // As many as this queue's slots start within the wait (one worker-wide mean).
            let ahead = ahead_count(
                shared.config.concurrency.min(queue.config.concurrency),
                shared.run_time.mean(),
            )
            .saturating_sub(shared.waiting.load(Ordering::Relaxed));
            let want = (free + ahead).min(shared.config.claim_batch as usize);
            if want == 0 {
                round.saturated = true;
                continue;
            }
            let claimed = shared
                .store
                .task_claim(ClaimParams {
                    queue: queue.config.name.clone(),
                    kinds: self.kinds.clone(),
                    limit: want as u32,
                    worker_id: shared.config.identity.id.clone(),
                    worker_host: shared.config.identity.host.clone(),
                    worker_groups: shared.config.groups.clone(),
                    lease_for: shared.config.lease_for,
                    now: None,
                })
                .await;
            queue.metrics.claim_made();
            let tasks = match claimed {
                Ok(tasks) => tasks,
                Err(e) => {
                    metrics::store_error(Call::Claim);
                    if !e.is_unreachable() {
                        tracing::warn!(error = %e, queue = %queue.config.name, "claim failed");
                    }
                    round.failed.get_or_insert(e);
                    continue;
                }
            };
            round.saturated |= tasks.len() == want;
            round.claimed += tasks.len();
            for task in tasks {
                // A free slot now runs the task at once; otherwise it waits for one (the
                // slots free before the claim may have gone to tasks claimed ahead).
                let slot = match (
                    self.total.clone().try_acquire_owned(),
                    queue.limit.clone().try_acquire_owned(),
                ) {
                    (Ok(total), Ok(queue)) => Slot::Held(vec![total, queue]),
                    _ => Slot::Ahead {
                        queue: queue.limit.clone(),
                        total: self.total.clone(),
                        waiting: Waiting::enter(shared),
                        recording_added: shared.add_recording(),
                    },
                };
                let task_metrics = queue.metrics.claimed(&task);
                tracker.spawn(executor::execute(shared.clone(), task, slot, task_metrics));
            }
        }
        round
    }

    /// Completions are written in batches, so the executors of one batch free their
    /// permits within moments of each other, and a worker that claims as soon as one
    /// permit is free splits into cohorts that each pay a claim and a completion write.
    /// Under load (the last round used all the capacity it had) wait until half the
    /// capacity is free, or [`COHORT_WAIT`] has passed, whichever comes first, so cohorts
    /// merge; a slot freed by a long task is refilled at most that much later.
    async fn settle_freed_capacity(&self, shared: &Shared) {
        let ahead = ahead_target(shared);
        let target = ((shared.config.concurrency + ahead).min(shared.config.claim_batch as usize)
            / 2)
        .max(1);
        // Free slots, and room for tasks claimed ahead.
        let room = || {
            (self.total.available_permits() + ahead)
                .saturating_sub(shared.waiting.load(Ordering::Relaxed))
        };
        let deadline = Instant::now() + COHORT_WAIT;
        let mut free = room();
        // First let executors that are already awake release their permits.
        for _ in 0..16 {
            if free >= target {
                return;
            }
            tokio::task::yield_now().await;
            let now = room();
            if now == free {
                break;
            }
            free = now;
        }
        while room() < target {
            tokio::select! {
                _ = shared.capacity_freed.notified() => {}
                _ = tokio::time::sleep_until(deadline) => return,
            }
        }
    }

    fn takes_from(&self, queue: &str) -> bool {
        self.all || self.queues.iter().any(|q| q.config.name == queue)
    }
}

/// How long the last task claimed ahead should wait for a slot, at the handlers' mean
/// run time.
pub(crate) const AHEAD_WAIT: Duration = Duration::from_millis(10);

/// How many tasks may wait for a slot now: as many as `concurrency` slots start within
/// [`AHEAD_WAIT`] at the handlers' mean run time, within [`ahead_limit`]; none before a
/// handler has run.
fn ahead_count(concurrency: usize, mean_run: Option<Duration>) -> usize {
    let Some(mean) = mean_run else { return 0 };
    let fit = AHEAD_WAIT.as_micros() * concurrency as u128 / mean.as_micros().max(1);
    usize::try_from(fit)
        .unwrap_or(usize::MAX)
        .min(ahead_limit(concurrency))
}

fn ahead_target(shared: &Shared) -> usize {
    ahead_count(shared.config.concurrency, shared.run_time.mean())
}

/// The longest a claim waits for more capacity to free once some has (see
/// [`Claimer::settle_freed_capacity`]).
const COHORT_WAIT: Duration = Duration::from_millis(2);

/// Runs claim rounds until `shutdown` resolves. After each round it waits for the first
/// of: shutdown, freed capacity (only when the round was saturated), a wake-up for one of
/// its queues, or the jittered poll timer.
pub(crate) async fn run(
    shared: &Arc<Shared>,
    tracker: &TaskTracker,
    shutdown: impl Future<Output = ()>,
) {
    tokio::pin!(shutdown);
    let mut claimer = Claimer::new(shared);
    let mut wake = match shared.store.subscribe().await {
        Ok(rx) => Some(rx),
        Err(e) => {
            tracing::warn!(error = %e, "no wake-up notifications; polling only");
            None
        }
    };
    loop {
        let round = claimer.round(shared, tracker).await;
        let poll = jittered(shared.config.poll_interval);
        tokio::select! {
            _ = &mut shutdown => return,
            _ = shared.capacity_freed.notified(), if round.saturated => {
                claimer.settle_freed_capacity(shared).await;
            }
            woke = next_wake(&mut wake, &claimer) => {
                if let Some(queue) = woke {
                    claimer.learn(&queue, shared.config.concurrency);
                }
            }
            _ = tokio::time::sleep(poll) => {}
        }
        // One claim round answers every wake-up that arrived so far: without this, a
        // burst of N notifications would cost N claim rounds that find nothing.
        drain_wakes(&mut wake, &mut claimer, shared.config.concurrency);
    }
}

/// Discards wake-ups already queued: the claim round about to run covers them (a worker
/// that takes every queue first learns the queues they name).
fn drain_wakes(
    wake: &mut Option<broadcast::Receiver<Wake>>,
    claimer: &mut Claimer,
    concurrency: usize,
) {
    if let Some(rx) = wake {
        loop {
            match rx.try_recv() {
                Ok(w) => claimer.learn(&w.queue, concurrency),
                Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return,
            }
        }
    }
}

/// Resolves with the queue a notification names when it is one of ours (`None` after
/// missed notifications); never, without notifications.
async fn next_wake(
    wake: &mut Option<broadcast::Receiver<Wake>>,
    claimer: &Claimer,
) -> Option<String> {
    let Some(rx) = wake else {
        return std::future::pending().await;
    };
    loop {
        match rx.recv().await {
            Ok(w) if claimer.takes_from(&w.queue) => return Some(w.queue),
            Ok(_) => continue,
            Err(broadcast::error::RecvError::Lagged(_)) => return None,
            Err(broadcast::error::RecvError::Closed) => {
                *wake = None;
                return std::future::pending().await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::AHEAD_MAX;

    #[test]
    fn nothing_is_claimed_ahead_before_a_handler_has_run_or_for_long_handlers() {
        assert_eq!(ahead_count(10, None), 0);
        assert_eq!(ahead_count(10, Some(Duration::from_millis(200))), 0);
        assert_eq!(ahead_count(1, Some(AHEAD_WAIT * 2)), 0);
    }

    #[test]
    fn short_handlers_let_the_worker_claim_ahead_up_to_its_limit() {
        // 10 slots of 5 ms handlers start 20 tasks within 10 ms.
        assert_eq!(ahead_count(10, Some(Duration::from_millis(5))), 20);
        assert_eq!(ahead_count(10, Some(Duration::from_micros(500))), 200);
        assert_eq!(ahead_count(10, Some(Duration::from_micros(100))), 800);
        assert_eq!(ahead_count(10, Some(Duration::from_millis(1))), 100);
        assert_eq!(ahead_count(10, Some(Duration::ZERO)), ahead_limit(10));
        assert_eq!(ahead_count(50, Some(Duration::ZERO)), AHEAD_MAX);
        assert_eq!(ahead_limit(1), 80);
        assert_eq!(ahead_limit(10), 800);
    }
}
