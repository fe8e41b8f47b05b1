//! What a store remembers of the open multi-run tasks of the queues it claims from, so
//! that a claim of tasks that run once does not look for runs each time.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long a store trusts that a queue has no open multi-run task, or none the worker
/// may start a run of, before a short hot claim asks again. A store's own multi-run
/// submits and the ends of its runs ask again at once ([`OpenRuns::stir`]).
pub const RECHECK: Duration = Duration::from_secs(1);

/// What a store knows of the open multi-run tasks of the queues it claims from.
#[derive(Debug, Default)]
pub struct OpenRuns {
    /// Queues found without an open multi-run task, and when.
    none: Mutex<HashMap<String, Instant>>,
    /// (queue, worker) pairs whose claim of runs found nothing, and when.
    nothing_for: Mutex<HashMap<(String, String), Instant>>,
}

impl OpenRuns {
    /// Whether a short hot claim of `worker` from `queue` should look for runs. A claim
    /// at a pinned time (`pinned`) always looks: what this remembers is about the real
    /// clock, and such a claim must answer for the time it names.
    pub fn due(&self, queue: &str, worker: &str, pinned: bool) -> bool {
        if pinned {
            return true;
        }
        let fresh = |at: &Instant| at.elapsed() < RECHECK;
        if self
            .none
            .lock()
            .expect("not poisoned")
            .get(queue)
            .is_some_and(fresh)
        {
            return false;
        }
        !self
            .nothing_for
            .lock()
            .expect("not poisoned")
            .get(&(queue.to_owned(), worker.to_owned()))
            .is_some_and(fresh)
    }

    /// `queue` has no open multi-run task.
    pub fn found_none(&self, queue: &str) {
        let mut none = self.none.lock().expect("not poisoned");
        if none.len() >= 1024 {
            none.retain(|_, at| at.elapsed() < RECHECK);
        }
        none.insert(queue.to_owned(), Instant::now());
    }

    /// `worker` may start a run of none of `queue`'s open multi-run tasks.
    pub fn found_nothing_for(&self, queue: &str, worker: &str) {
        let mut nothing = self.nothing_for.lock().expect("not poisoned");
        if nothing.len() >= 4096 {
            nothing.retain(|_, at| at.elapsed() < RECHECK);
        }
        nothing.insert((queue.to_owned(), worker.to_owned()), Instant::now());
    }

    /// A multi-run task of `queue` was submitted, or one of its runs ended: claims look
    /// again at once.
    pub fn stir(&self, queue: &str) {
        self.none.lock().expect("not poisoned").remove(queue);
        self.nothing_for
            .lock()
            .expect("not poisoned")
            .retain(|(q, _), _| q != queue);
    }
}
