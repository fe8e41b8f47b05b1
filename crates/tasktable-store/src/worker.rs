//! The parameters and results of the worker registry calls of [`Store`](crate::Store).
//!
//! What a worker is, and what its state means, is core's ([`tasktable_core::worker`]);
//! a store keeps one row per worker id, stamps every heartbeat with the database's clock,
//! and marks workers gone after a silence.

use chrono::{DateTime, Utc};
use std::time::Duration;
use tasktable_core::worker::{Protocol, WorkerFacts};

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
    /// The token the caller is bound to (a pull worker through an API with tokens): the
    /// beat is refused with [`WorkerRefused`](crate::StoreError::WorkerRefused) and
    /// changes nothing unless core's [`may_act_as`](tasktable_core::ownership::may_act_as)
    /// allows it; an id it registers or adopts becomes this token's. `None`: no check
    /// (in-process workers, a server without tokens), and the id's owner is kept.
    pub owner: Option<String>,
    /// Most live ids `owner` may hold: a beat that would make one more live (a new id, or
    /// one that was gone) is refused when it already holds this many. `None`: no cap.
    /// Concurrent beats of new ids may each pass it, by at most the writers at once.
    pub max_live_per_owner: Option<u32>,
}

impl WorkerBeatParams {
    /// A heartbeat of `facts`, on the database's clock, bound to no token.
    pub fn new(facts: WorkerFacts) -> Self {
        WorkerBeatParams {
            facts,
            address: None,
            starting: false,
            now: None,
            owner: None,
            max_live_per_owner: None,
        }
    }
}

/// A worker that stops: it is marked gone at once.
#[derive(Debug, Clone)]
pub struct WorkerLeaveParams {
    /// Its id.
    pub id: String,
    /// The token the caller is bound to, checked as a heartbeat's
    /// ([`WorkerBeatParams::owner`]); `None`: no check.
    pub owner: Option<String>,
}

impl From<String> for WorkerLeaveParams {
    /// The leave of `id`, bound to no token.
    fn from(id: String) -> Self {
        WorkerLeaveParams { id, owner: None }
    }
}

impl From<&str> for WorkerLeaveParams {
    /// The leave of `id`, bound to no token.
    fn from(id: &str) -> Self {
        id.to_owned().into()
    }
}

/// How the registry holds one worker id: what the API checks of a claim, in one read by
/// key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerStanding {
    /// The token that owns the id; `None`: no token does.
    pub owner: Option<String>,
    /// The protocol of its last heartbeat.
    pub protocol: Protocol,
    /// The groups of its last heartbeat.
    pub groups: Vec<String>,
    /// An operator asked it to drain.
    pub draining: bool,
    /// It left or fell silent.
    pub gone: bool,
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
    /// Only workers whose id sorts after this one: the next page after a page that
    /// ended with it.
    pub after: Option<String>,
    /// At most this many workers (checked: 1 to [`MAX_WORKER_PAGE`]); `None`: all.
    pub limit: Option<u32>,
}

/// The most workers one [`Store::worker_list`](crate::Store::worker_list) call answers
/// when asked for a page.
pub const MAX_WORKER_PAGE: u32 = 1000;

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
