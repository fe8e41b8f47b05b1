//! The parameters and results of the worker registry calls of [`Store`](crate::Store).
//!
//! What a worker is, and what its state means, is core's ([`tasktable_core::worker`]);
//! a store keeps one row per worker id, stamps every heartbeat with the database's clock,
//! and marks workers gone after a silence.

use chrono::{DateTime, Utc};
use std::time::Duration;
use tasktable_core::worker::WorkerFacts;

/// One heartbeat: the worker's facts, saved over the ones it sent before.
#[derive(Debug, Clone)]
pub struct WorkerBeatParams {
    /// What the worker says of itself; its `id` is the registry's key. Checked by
    /// [`Limits::worker_beat`](crate::Limits::worker_beat).
    pub facts: WorkerFacts,
    /// The address the worker called from, when a server between it and the database saw
    /// it; `None`: the address the database sees (none on SQLite).
    pub address: Option<String>,
    /// The first beat of a run: `started_at` is set to now.
    pub starting: bool,
    /// The beat's time, saved as the worker's last sight; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// What a heartbeat tells the worker back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerStatus {
    /// An operator asked it to drain: claim nothing new.
    pub draining: bool,
}

/// Which workers [`Store::worker_list`](crate::Store::worker_list) answers: by default
/// those not gone.
#[derive(Debug, Clone, Default)]
pub struct WorkerListParams {
    /// Workers that left or fell silent too.
    pub include_gone: bool,
}

/// An operator's drain or release of one worker. A drain is kept on the worker's row,
/// even while it is gone, until an operator releases it; a heartbeat never changes it.
#[derive(Debug, Clone)]
pub struct WorkerDrainParams {
    /// The worker's id, as it registers it.
    pub id: String,
    /// `true`: drain; `false`: release.
    pub draining: bool,
    /// Who asks: the event log records it when the flag changes.
    pub actor: tasktable_core::Actor,
}

/// One reaping of the registry, which every rescuer round runs. Checked by
/// [`Limits::worker_reap`](crate::Limits::worker_reap): a silence of 1 s to 100 years,
/// a `forget_after` of at most 100 years.
#[derive(Debug, Clone)]
pub struct WorkerReapParams {
    /// Workers not heard from for this long are marked gone.
    pub silence: Duration,
    /// Gone workers are removed this long after they went, unless an operator's drain
    /// still holds for them.
    pub forget_after: Duration,
    /// What silence and age are measured back from; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

/// What one reaping did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reaped {
    /// Workers it marked gone for their silence.
    pub gone: u64,
    /// Gone workers it removed from the registry.
    pub forgotten: u64,
}
