//! Batches: one task that pushes items `0..N` (or an open-ended run of them) through a
//! handler, one index at a time, keeping only a low-water mark as progress \[S2\].
//!
//! Owns what a batch asks for ([`BatchSpec`] and its defaults), the sliding window of
//! indices that bounds what a takeover repeats ([`Window`]), the rate limit
//! ([`TokenBucket`]), the error budget ([`Budget`]), and the rules of its lifecycle: what
//! an operator's start, pause, stop or resume does ([`BatchAction::apply`]), which
//! status a user sees ([`BatchStatus::of`]), and when its data may change
//! ([`data_may_change`]).

mod rate;
mod window;

pub use rate::TokenBucket;
pub use window::Window;

use crate::change::Change;
use crate::state::TaskState;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Most items run at the same time by one batch.
pub const MAX_PARALLELISM: u32 = 10_000;
/// The fastest rate a batch may ask for, in items started a second (the databases keep it
/// in a 32-bit column).
pub const MAX_RATE: u32 = 1_000_000_000;
/// Largest sliding window: what a takeover may repeat, and what a runner holds in memory
/// (one bit per index).
pub const MAX_WINDOW: u64 = 10_000_000;
/// Most failed items a batch keeps for operators to see; later failures still spend the
/// budget and are counted.
pub const FAILURES_KEPT: u64 = 1_000;
/// The pre-start hook's timeout unless the batch says otherwise [S2: "about 30 minutes,
/// for downloads and caches"].
pub const DEFAULT_PRESTART_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Parallelism unless the batch says otherwise.
pub const DEFAULT_PARALLELISM: u32 = 10;
/// Retries of one item unless the batch says otherwise.
pub const DEFAULT_ITEM_RETRIES: u32 = 2;
/// The wait before an item's first retry (doubling after each), unless the batch says
/// otherwise.
pub const DEFAULT_ITEM_BACKOFF: Duration = Duration::from_millis(100);

/// What a batch asks for.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchSpec {
    /// Items `0..items`; `None`: open-ended, until the handler says an index is past the
    /// end.
    pub items: Option<u64>,
    /// Most items running at once (P).
    pub parallelism: u32,
    /// Most items started per second (R); `None`: as fast as the handler goes.
    pub rate: Option<u32>,
    /// Indices past the saved low-water mark that may be started (W): the most a
    /// takeover repeats. `None`: ten times the rate \[S2\], or a thousand times the
    /// parallelism when the rate is unlimited (about a second's work at a millisecond an
    /// item).
    pub window: Option<u64>,
    /// Items that may fail for good before the batch stops as failed (E).
    pub error_budget: u64,
    /// Retries of an item before it fails for good.
    pub item_retries: u32,
    /// The wait before an item's first retry; it doubles after each.
    #[serde(with = "crate::backoff::millis")]
    pub item_backoff: Duration,
    /// The pre-start hook's own timeout.
    #[serde(with = "crate::backoff::millis")]
    pub prestart_timeout: Duration,
}

impl Default for BatchSpec {
    fn default() -> Self {
        BatchSpec {
            items: None,
            parallelism: DEFAULT_PARALLELISM,
            rate: None,
            window: None,
            error_budget: 0,
            item_retries: DEFAULT_ITEM_RETRIES,
            item_backoff: DEFAULT_ITEM_BACKOFF,
            prestart_timeout: DEFAULT_PRESTART_TIMEOUT,
        }
    }
}

impl BatchSpec {
    /// A batch of items `0..n`.
    pub fn items(n: u64) -> Self {
        BatchSpec {
            items: Some(n),
            ..Self::default()
        }
    }

    /// A batch that runs until its handler says an index is past the end.
    pub fn open_ended() -> Self {
        Self::default()
    }

    /// At most `p` items run at once: 1 to [`MAX_PARALLELISM`], [`DEFAULT_PARALLELISM`]
    /// unless set.
    pub fn parallelism(mut self, p: u32) -> Self {
        self.parallelism = p;
        self
    }

    /// At most `items_per_second` items start a second: 1 to [`MAX_RATE`]; no limit
    /// unless set.
    pub fn rate(mut self, items_per_second: u32) -> Self {
        self.rate = Some(items_per_second);
        self
    }

    /// At most `w` indices past the saved mark may start (1 to [`MAX_WINDOW`]); unless
    /// set, [`BatchSpec::window_size`] derives it from the rate or the parallelism.
    pub fn window(mut self, w: u64) -> Self {
        self.window = Some(w);
        self
    }

    /// Lets `e` items fail for good; the next failure fails the batch. 0 unless set.
    pub fn error_budget(mut self, e: u64) -> Self {
        self.error_budget = e;
        self
    }

    /// Retries a failed item up to `retries` times (at most 100), waiting `first_wait`
    /// (at most an hour) before the first retry and twice as long before each next one.
    /// Unless set: [`DEFAULT_ITEM_RETRIES`] from [`DEFAULT_ITEM_BACKOFF`].
    pub fn item_retries(mut self, retries: u32, first_wait: Duration) -> Self {
        self.item_retries = retries;
        self.item_backoff = first_wait;
        self
    }

    /// The pre-start hook's own timeout: more than zero, at most a day;
    /// [`DEFAULT_PRESTART_TIMEOUT`] unless set.
    pub fn prestart_timeout(mut self, timeout: Duration) -> Self {
        self.prestart_timeout = timeout;
        self
    }

    /// The window in force: the one asked for, or ten times the rate \[S2\], or a
    /// thousand times the parallelism when the rate is unlimited; never more than
    /// [`MAX_WINDOW`].
    pub fn window_size(&self) -> u64 {
        let default = match self.rate {
            Some(r) => 10 * u64::from(r),
            None => 1000 * u64::from(self.parallelism),
        };
        self.window.unwrap_or(default).clamp(1, MAX_WINDOW)
    }

    /// The wait before retry number `retry` (1-based) of one item: `item_backoff`,
    /// doubled for each retry before it, never more than an hour.
    pub fn item_retry_delay(&self, retry: u32) -> Duration {
        let factor = 1u32 << retry.saturating_sub(1).min(16);
        self.item_backoff
            .saturating_mul(factor)
            .min(Duration::from_secs(3600))
    }

    /// The wait before retry number `retry` of one item whose last try asked for `asked`
    /// (a server's `Retry-After`, through `HandlerError::retry_after`): that wait when it
    /// asked, never more than an hour, else [`item_retry_delay`](Self::item_retry_delay).
    pub fn item_retry_wait(&self, retry: u32, asked: Option<Duration>) -> Duration {
        asked.map_or_else(
            || self.item_retry_delay(retry),
            |asked| asked.min(Duration::from_secs(3600)),
        )
    }

    /// Checks the bounds the builders state; the error names the first one broken.
    pub fn validate(&self) -> Result<(), InvalidBatch> {
        if self.parallelism == 0 || self.parallelism > MAX_PARALLELISM {
            return Err(InvalidBatch::Parallelism(self.parallelism));
        }
        if self.rate.is_some_and(|r| r == 0 || r > MAX_RATE) {
            return Err(InvalidBatch::Rate);
        }
        if let Some(w) = self.window {
            if w == 0 || w > MAX_WINDOW {
                return Err(InvalidBatch::Window(w));
            }
        }
        if self.item_retries > 100 {
            return Err(InvalidBatch::ItemRetries(self.item_retries));
        }
        if self.item_backoff > Duration::from_secs(3600) {
            return Err(InvalidBatch::ItemBackoff);
        }
        if self.prestart_timeout.is_zero() || self.prestart_timeout > Duration::from_secs(86_400) {
            return Err(InvalidBatch::PrestartTimeout);
        }
        Ok(())
    }
}

/// Why a batch cannot be submitted as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidBatch {
    /// The parallelism given is 0 or above [`MAX_PARALLELISM`].
    #[error("parallelism must be 1 to {MAX_PARALLELISM}, not {0}")]
    Parallelism(u32),
    /// The rate is 0 or above [`MAX_RATE`] items a second.
    #[error("a rate is 1 to {MAX_RATE} items per second (leave it out for no limit)")]
    Rate,
    /// The window given is 0 or above [`MAX_WINDOW`] indices.
    #[error("the window must be 1 to {MAX_WINDOW} items, not {0}")]
    Window(u64),
    /// More than 100 retries of one item (the number given).
    #[error("an item may be retried at most 100 times, not {0}")]
    ItemRetries(u32),
    /// The wait before an item's first retry is longer than an hour.
    #[error("an item's retry wait is at most an hour")]
    ItemBackoff,
    /// The pre-start hook's timeout is zero or longer than a day.
    #[error("the pre-start hook's timeout is more than zero and at most a day")]
    PrestartTimeout,
    /// The task asks for copies ([`crate::runs`]) as well as being a batch.
    #[error("a batch cannot also ask for copies: a batch's window is its own parallelism")]
    Runs,
    /// The task has a per-attempt timeout as well as being a batch.
    #[error("a batch has no timeout: its items are paced by its rate and window, and its pre-start hook has prestart_timeout")]
    Timeout,
}

/// What operators asked of a running batch; its runner reads it at each save.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchControl {
    /// Go on: what a batch is submitted with, and what a resume sets.
    #[default]
    Run,
    /// Finish the items in flight, save, and give the task back held.
    Pause,
    /// As a pause, but the task ends cancelled, its offset kept.
    Stop,
}

impl BatchControl {
    /// The name in the `control` column of `tasktable_batches` and in the API: `run`,
    /// `pause` or `stop`, which [`FromStr`] reads back.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchControl::Run => "run",
            BatchControl::Pause => "pause",
            BatchControl::Stop => "stop",
        }
    }
}

impl FromStr for BatchControl {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "run" => Ok(BatchControl::Run),
            "pause" => Ok(BatchControl::Pause),
            "stop" => Ok(BatchControl::Stop),
            other => Err(format!("unknown batch control {other:?}")),
        }
    }
}

/// An operator's (or the business's) request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchAction {
    /// Start a batch that waits for the business (submitted held).
    Start,
    /// Stop it for now, keeping its offset; `resume` goes on.
    Pause,
    /// End it, keeping its offset (the task is cancelled); `resume` may still go on.
    Stop,
    /// Go on from the offset: a paused, stopped or failed batch, or one whose pause or
    /// stop its runner has not seen yet.
    Resume,
}

impl BatchAction {
    /// The name in the API's paths and the CLI's verbs: `start`, `pause`, `stop` or
    /// `resume`, which [`FromStr`] reads back.
    pub fn as_str(self) -> &'static str {
        match self {
            BatchAction::Start => "start",
            BatchAction::Pause => "pause",
            BatchAction::Stop => "stop",
            BatchAction::Resume => "resume",
        }
    }

    /// What the action does to a batch whose task is in `state`, with `control` as it
    /// is and `awaiting` telling whether it still waits for the business's start
    /// ([`awaits_start`]). A batch that waits stays waiting through pauses, stops and
    /// resumes: only `start` lets it run \[S2\].
    pub fn apply(
        self,
        state: TaskState,
        control: BatchControl,
        awaiting: bool,
    ) -> Result<ControlChange, BatchRefusal> {
        use BatchControl as C;
        use TaskState as S;
        let change = |control, state| {
            Ok(ControlChange {
                control,
                state,
                release: false,
            })
        };
        // Where a resumed batch goes: back to waiting, or due.
        let resumed = if awaiting { S::Held } else { S::Pending };
        match (self, state) {
            (BatchAction::Start, S::Held) if awaiting && control == C::Run => Ok(ControlChange {
                control: C::Run,
                state: Some(S::Pending),
                release: true,
            }),
            (BatchAction::Start, _) => Err(BatchRefusal::NotWaiting),
            (BatchAction::Pause, S::Pending | S::Held) => change(C::Pause, Some(S::Held)),
            (BatchAction::Pause, S::Running) => change(C::Pause, None),
            (BatchAction::Stop, S::Pending | S::Held) => change(C::Stop, Some(S::Cancelled)),
            (BatchAction::Stop, S::Running) => change(C::Stop, None),
            (BatchAction::Pause | BatchAction::Stop, _) => Err(BatchRefusal::Ended(state)),
            (BatchAction::Resume, S::Held) if !awaiting || control != C::Run => {
                change(C::Run, Some(resumed))
            }
            (BatchAction::Resume, S::Cancelled | S::Failed) => change(C::Run, Some(resumed)),
            (BatchAction::Resume, S::Running) if control != C::Run => change(C::Run, None),
            (BatchAction::Resume, _) => Err(BatchRefusal::NotResumable(state)),
        }
    }
}

impl FromStr for BatchAction {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "start" => Ok(BatchAction::Start),
            "pause" => Ok(BatchAction::Pause),
            "stop" => Ok(BatchAction::Stop),
            "resume" => Ok(BatchAction::Resume),
            other => Err(format!(
                "unknown batch action {other:?} (start, pause, stop or resume)"
            )),
        }
    }
}

/// What [`BatchAction::apply`] decided: the control to store, the task's new state
/// when it is not running (a running batch's runner moves it when it sees the control),
/// and whether the business has now started it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlChange {
    /// The control to store on the batch's row.
    pub control: BatchControl,
    /// The state to move the task to now; `None` while it runs.
    pub state: Option<TaskState>,
    /// The business started it (`start`): it no longer waits (the batch's
    /// `released_at` is written).
    pub release: bool,
}

impl ControlChange {
    /// The operator changes that move a batch's task from `from` to [`Self::state`], in
    /// order: a held batch is released, an ended one retried (its attempts counted
    /// afresh), and held again when it goes back to waiting for its start; a queued one
    /// held or cancelled; none when the task stays where it is.
    pub fn task_changes(&self, from: TaskState) -> Vec<Change> {
        let Some(to) = self.state.filter(|to| *to != from) else {
            return Vec::new();
        };
        match (to, from) {
            (TaskState::Pending, TaskState::Held) => vec![Change::Release],
            (TaskState::Pending, _) => vec![Change::Retry],
            (TaskState::Held, TaskState::Pending) => vec![Change::Hold],
            (TaskState::Held, _) => vec![Change::Retry, Change::Hold],
            _ => vec![Change::Cancel],
        }
    }
}

/// Why an action does not apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BatchRefusal {
    /// `start` of a batch that is not [`BatchStatus::Waiting`].
    #[error("only a batch that waits for its start (submitted held, never run) can be started")]
    NotWaiting,
    /// `pause` or `stop` of a batch whose task has finished, in the state given.
    #[error("the batch has ended ({0}): resume it instead")]
    Ended(TaskState),
    /// `resume` of a batch that is waiting, queued, succeeded, or running with no pause
    /// or stop to take back; its task is in the state given.
    #[error("a {0} batch has nothing to resume")]
    NotResumable(TaskState),
    /// A change of the batch's data while [`data_may_change`] says no.
    #[error("a batch's data changes only while it waits for its start, or when it runs serially (parallelism 1 or rate 1)")]
    DataFixed,
}

/// What a user sees of a batch, derived from its task's state, its control and whether
/// it ever ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchStatus {
    /// Submitted held: waits for the business to start it.
    Waiting,
    /// Waits for a worker (or its next attempt).
    Queued,
    /// Claimed by a worker, whose runner starts its items.
    Running,
    /// Asked to pause; its runner has not given it back yet.
    Pausing,
    /// Held after a pause, its offset kept; a resume goes on from there.
    Paused,
    /// Asked to stop; its runner has not ended it yet.
    Stopping,
    /// Its task cancelled, its offset kept; a resume still goes on from there.
    Stopped,
    /// Every item done (each succeeded, or failed within the error budget).
    Succeeded,
    /// Its error budget ran out, or its task's attempts did.
    Failed,
}

impl BatchStatus {
    /// The status of a batch whose task is in `state`, with `control` as stored and
    /// `awaiting` as [`awaits_start`] answers it.
    pub fn of(state: TaskState, control: BatchControl, awaiting: bool) -> Self {
        use BatchControl as C;
        use TaskState as S;
        match (state, control) {
            (S::Held, C::Run) if awaiting => BatchStatus::Waiting,
            (S::Held, _) => BatchStatus::Paused,
            (S::Pending, _) => BatchStatus::Queued,
            (S::Running, C::Run) => BatchStatus::Running,
            (S::Running, C::Pause) => BatchStatus::Pausing,
            (S::Running, C::Stop) => BatchStatus::Stopping,
            (S::Succeeded, _) => BatchStatus::Succeeded,
            (S::Failed, _) => BatchStatus::Failed,
            (S::Cancelled, _) => BatchStatus::Stopped,
        }
    }

    /// The name the API, the CLI and the dashboard show: `waiting`, `queued`, ...
    pub fn as_str(self) -> &'static str {
        match self {
            BatchStatus::Waiting => "waiting",
            BatchStatus::Queued => "queued",
            BatchStatus::Running => "running",
            BatchStatus::Pausing => "pausing",
            BatchStatus::Paused => "paused",
            BatchStatus::Stopping => "stopping",
            BatchStatus::Stopped => "stopped",
            BatchStatus::Succeeded => "succeeded",
            BatchStatus::Failed => "failed",
        }
    }
}

impl fmt::Display for BatchStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Whether a runner ever had the batch: it claimed it (`attempt` counts claims until an
/// operator's retry resets it) or saved progress. A batch a runner had no longer waits
/// for the business ([`awaits_start`]).
pub fn started(attempt: u32, ever_saved: bool) -> bool {
    attempt > 0 || ever_saved
}

/// Whether a batch still waits for the business's `start` \[S2\]: it was submitted held
/// and the business has not started it (`released`), and no runner has had it
/// ([`started`]; an operator's release of its task lets it run all the same). Pauses,
/// stops and resumes leave this as it is.
pub fn awaits_start(released: bool, started: bool) -> bool {
    !released && !started
}

/// Whether a batch's data may be replaced now \[S2\]: while it waits for the business, or
/// at any time when it runs serially (one item at a time, or one per second), so that no
/// two items running together see different data.
pub fn data_may_change(spec: &BatchSpec, status: BatchStatus) -> bool {
    status == BatchStatus::Waiting || spec.parallelism == 1 || spec.rate == Some(1)
}

/// How long the items left take at `items_per_second`: `None` when the end or the rate is
/// not known (or the rate is zero).
pub fn eta(low_water: u64, end: Option<u64>, items_per_second: Option<f64>) -> Option<Duration> {
    let left = end?.saturating_sub(low_water) as f64;
    let rate = items_per_second.filter(|r| r.is_finite() && *r > 0.0)?;
    Duration::try_from_secs_f64(left / rate).ok()
}

/// The error budget: `allowed` items may fail for good; the next one stops the batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Items that may fail for good: the batch's `error_budget`.
    pub allowed: u64,
    /// Items that failed for good so far, those of earlier attempts included.
    pub spent: u64,
}

impl Budget {
    /// Spends one failure; answers whether the batch may go on.
    pub fn spend(&mut self) -> bool {
        self.spent += 1;
        !self.exhausted()
    }

    /// More items failed than allowed: the batch must stop as failed.
    pub fn exhausted(&self) -> bool {
        self.spent > self.allowed
    }
}

#[cfg(test)]
mod tests;
