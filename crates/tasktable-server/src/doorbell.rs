//! Claims waiting for work share one look at the clock per queue.
//!
//! A waiting claim wakes on the store's wake-ups for its queue (a submit, a release, a
//! retry due at once), as in-process workers do. What no wake-up announces is a task
//! becoming due by the clock: a delay, a backoff, a snooze. Rather than every waiting
//! claim running its claim again on a timer, one watcher per queue that has waiting claims
//! asks the store once per tick whether a task of a kind they wait for is due
//! ([`Store::queue_has_due`], one indexed read), and rings them only when one is. Idle
//! waiting claims so cost the database one read per queue per tick, however many there
//! are. A due task that none of them may take (a policy, a target, another claimer in the
//! way) rings them every tick, which is what an in-process worker's poll costs too.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tasktable_store::{DueParams, Store};
use tokio::sync::watch;

/// The watchers of every queue with waiting claims on this server.
pub struct Doorbells {
    bells: Mutex<HashMap<String, Weak<Bell>>>,
    /// Due checks run so far, by every watcher.
    checks: watch::Sender<u64>,
}

impl Default for Doorbells {
    fn default() -> Self {
        Doorbells {
            bells: Mutex::default(),
            checks: watch::Sender::new(0),
        }
    }
}

impl std::fmt::Debug for Doorbells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let queues = self.bells.lock().map(|b| b.len()).unwrap_or_default();
        f.debug_struct("Doorbells")
            .field("queues", &queues)
            .finish()
    }
}

/// One queue's watcher state: who waits for which kinds, and the bell they listen to.
struct Bell {
    queue: String,
    /// Bumped on every ring; each waiting claim holds a receiver.
    ring: watch::Sender<u64>,
    /// The kinds waited for, with how many waiting claims wait for each.
    kinds: Mutex<HashMap<String, usize>>,
}

/// A claim's place at its queue's bell; leaving it (dropping) stops counting its kinds,
/// and the last one to leave ends the watcher at its next tick.
pub struct Waiting {
    bell: Arc<Bell>,
    rung: watch::Receiver<u64>,
    kinds: Vec<String>,
}

impl Doorbells {
    /// A place at `queue`'s bell for a claim of `kinds`, starting the queue's watcher
    /// (which looks every `tick`) if it has none.
    pub fn wait_on(
        self: &Arc<Self>,
        store: &Arc<dyn Store>,
        queue: &str,
        kinds: &[String],
        tick: Duration,
    ) -> Waiting {
        let mut bells = self.bells.lock().expect("doorbells lock");
        let bell = match bells.get(queue).and_then(Weak::upgrade) {
            Some(bell) => bell,
            None => {
                bells.retain(|_, b| b.strong_count() > 0);
                let bell = Arc::new(Bell {
                    queue: queue.to_owned(),
                    ring: watch::Sender::new(0),
                    kinds: Mutex::default(),
                });
                bells.insert(queue.to_owned(), Arc::downgrade(&bell));
                tokio::spawn(watch_queue(
                    self.clone(),
                    Arc::downgrade(&bell),
                    store.clone(),
                    tick,
                ));
                bell
            }
        };
        drop(bells);
        let mut counts = bell.kinds.lock().expect("bell kinds lock");
        for kind in kinds {
            *counts.entry(kind.clone()).or_default() += 1;
        }
        drop(counts);
        let rung = bell.ring.subscribe();
        Waiting {
            bell,
            rung,
            kinds: kinds.to_vec(),
        }
    }

    /// How many due checks the watchers ran so far, now and as it grows.
    pub fn checks(&self) -> watch::Receiver<u64> {
        self.checks.subscribe()
    }

    /// How many queues have a watcher now.
    pub fn watched_queues(&self) -> usize {
        let bells = self.bells.lock().expect("doorbells lock");
        bells.values().filter(|b| b.strong_count() > 0).count()
    }
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waiting")
            .field("queue", &self.bell.queue)
            .field("kinds", &self.kinds)
            .finish_non_exhaustive()
    }
}

impl Waiting {
    /// Resolves when the watcher rang since this place was taken or last rang.
    pub async fn rung(&mut self) {
        if self.rung.changed().await.is_err() {
            // The bell lives as long as this place does; never reached.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Waiting {
    fn drop(&mut self) {
        let mut counts = self.bell.kinds.lock().expect("bell kinds lock");
        for kind in &self.kinds {
            if let Some(n) = counts.get_mut(kind) {
                *n -= 1;
                if *n == 0 {
                    counts.remove(kind);
                }
            }
        }
    }
}

/// Every `tick` (jittered, so the watchers of many queues and servers spread out), asks
/// whether a task the waiting claims could take is due, and rings them if so; ends once
/// no claim waits.
async fn watch_queue(
    bells: Arc<Doorbells>,
    bell: Weak<Bell>,
    store: Arc<dyn Store>,
    tick: Duration,
) {
    loop {
        tokio::time::sleep(tick.mul_f64(0.8 + 0.4 * rand::random::<f64>())).await;
        let Some(bell) = bell.upgrade() else { return };
        let kinds: Vec<String> = {
            let counts = bell.kinds.lock().expect("bell kinds lock");
            counts.keys().cloned().collect()
        };
        let due = store
            .queue_has_due(DueParams {
                queue: bell.queue.clone(),
                kinds,
            })
            .await;
        bells.checks.send_modify(|n| *n += 1);
        metrics::counter!(crate::metrics::API_DUE_CHECKS_TOTAL).increment(1);
        match due {
            Ok(true) => bell.ring.send_modify(|n| *n = n.wrapping_add(1)),
            Ok(false) => {}
            // The claims find out for themselves at their next wake or deadline. An
            // unreachable database is told once, by the store, not once a tick.
            Err(e) if e.is_unreachable() => {}
            Err(e) => tracing::warn!(queue = %bell.queue, error = %e, "due check failed"),
        }
    }
}
