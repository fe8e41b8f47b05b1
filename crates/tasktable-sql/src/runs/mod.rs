//! Multi-run tasks ([`tasktable_core::runs`]): their submit, the claim of a run, and the
//! fenced writes under a run's lease, written once for the three backends.
//!
//! A multi-run task's row holds its request and counters, and `target` is
//! [`MULTI_RUN_TARGET`], a name no worker answers to: the hot claim's lanes never take
//! it, and nothing on the hot path changes for tasks that run once. Its own target is in
//! `run_target`. A store learns that a queue has open multi-run tasks when a hot claim
//! comes back short ([`OpenRuns`]), and then claims runs here, in a write transaction of
//! its own: lock the open tasks of the queue (passing over rows others hold), ask core
//! which this worker may start a run of, insert each run (numbered by the task's
//! `attempt` counter, fenced by the task's `lease_token` counter, which grows on every
//! claim) and move the counters. A run's renewal, checkpoint and end are fenced on the
//! run's row exactly as a task's are on the task's; the end of a run locks its task
//! first (as the claim does, so the two never wait on each other in opposite orders),
//! writes the attempt's history row, and applies
//! [`Runs::after_run`](tasktable_core::runs::Runs::after_run).

mod claim;
mod finish;
mod lease;
mod open;
mod rows;
mod submit;

pub use claim::{any_open, claim_in};
pub use finish::{end_running, finish_in, list_expired, Ended};
pub use lease::{checkpoint_in, list, renew_in, status};
pub use open::{OpenRuns, RECHECK};
pub use rows::{MULTI_RUN_TARGET, RUN_COLUMNS};
pub use submit::{mark_submitted, resolve_broadcasts};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_remembers_empty_queues_and_idle_workers_until_stirred() {
        let open = OpenRuns::default();
        assert!(open.due("q", "a", false));
        open.found_nothing_for("q", "a");
        assert!(!open.due("q", "a", false));
        assert!(open.due("q", "b", false), "another worker still looks");
        assert!(open.due("q", "a", true), "a pinned claim always looks");
        open.found_none("q");
        assert!(!open.due("q", "b", false));
        assert!(open.due("other", "b", false));
        open.stir("q");
        assert!(open.due("q", "a", false) && open.due("q", "b", false));
    }
}
