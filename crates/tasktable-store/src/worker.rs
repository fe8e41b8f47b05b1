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
    pub facts: WorkerFacts,
    /// The address the worker called from, when a server between it and the database saw
    /// it; `None`: the address the database sees (none on SQLite).
    pub address: Option<String>,
    /// The first beat of a run: `started_at` is set to now.
    pub starting: bool,
    pub now: Option<DateTime<Utc>>,
}

/// What a heartbeat tells the worker back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WorkerStatus {
    /// An operator asked it to drain: claim nothing new.
    pub draining: bool,
}

#[derive(Debug, Clone, Default)]
pub struct WorkerListParams {
    /// Workers that left or fell silent too.
    pub include_gone: bool,
}

#[derive(Debug, Clone)]
pub struct WorkerDrainParams {
    pub id: String,
    /// `true`: drain; `false`: release.
    pub draining: bool,
    pub actor: tasktable_core::Actor,
}

#[derive(Debug, Clone)]
pub struct WorkerReapParams {
    /// Workers not heard from for this long are marked gone.
    pub silence: Duration,
    /// Gone workers are removed this long after they went, unless an operator's drain
    /// still holds for them.
    pub forget_after: Duration,
    pub now: Option<DateTime<Utc>>,
}

/// What one reaping did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Reaped {
    pub gone: u64,
    pub forgotten: u64,
}
