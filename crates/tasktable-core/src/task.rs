//! Tasks as rows: what is submitted ([`NewTask`]), what is stored ([`Task`]), what a
//! worker holds ([`Lease`]) and what history keeps ([`Attempt`]).

use crate::actor::Actor;
use crate::backoff::{Backoff, InvalidBackoff};
use crate::batch::{BatchSpec, InvalidBatch};
use crate::outcome::AttemptOutcome;
use crate::runs::{InvalidRuns, Rearm, RunCounts, Runs};
use crate::state::TaskState;
use crate::target::{InvalidTarget, Target};
use crate::trace::TraceParent;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;

/// A task's id, assigned by the database when the task is submitted; ids grow in submit
/// order.
pub type TaskId = i64;

/// The queue a task goes to when none is named.
pub const DEFAULT_QUEUE: &str = "default";
/// Attempts a task gets when none are named.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
pub use crate::names::{MAX_ATTEMPTS_LIMIT, MAX_NAME_LEN};
/// Furthest into the future a task may be delayed, and longest per-attempt timeout.
pub const MAX_DELAY: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A task to create.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewTask {
    /// Which handler runs it.
    pub kind: String,
    /// The queue it is claimed from; [`DEFAULT_QUEUE`] unless set.
    pub queue: String,
    /// The handler's input, as JSON; [`NewTask::validate`] says what it may hold, and the
    /// store limits its size.
    pub payload: Value,
    /// Business id, for search; not unique.
    pub key: Option<String>,
    /// Submitting again with the same idempotency key returns the first task.
    pub idempotency_key: Option<String>,
    /// Higher runs first.
    pub priority: i32,
    /// Run no earlier than this (database time). `None` with no delay: now.
    pub run_at: Option<DateTime<Utc>>,
    /// Run no earlier than this long after the database's now. Excludes `run_at`.
    pub delay: Option<Duration>,
    /// Attempts it may spend before it fails for good: 1 to [`MAX_ATTEMPTS_LIMIT`],
    /// [`DEFAULT_MAX_ATTEMPTS`] unless set.
    pub max_attempts: u32,
    /// The waits between its attempts after retryable errors.
    pub backoff: Backoff,
    /// Longest one attempt may run; passing it counts as a failed attempt.
    pub timeout: Option<Duration>,
    /// Create in `held`: the task waits for an explicit release.
    pub held: bool,
    /// Who may run it; any worker by default.
    #[serde(default)]
    pub target: Target,
    /// After a failed attempt, the retry waits this long for the worker that ran it
    /// (while that worker is live) before any allowed worker may take it. None: no
    /// preference.
    #[serde(default)]
    pub affinity: Option<Duration>,
    /// Run it several times, by several workers ([`crate::runs`]); `None`: once.
    #[serde(default)]
    pub runs: Option<Runs>,
    /// When the idempotency key names an existing multi-run task: re-arm it.
    #[serde(default)]
    pub rearm: Option<Rearm>,
    /// A batch of items run through its kind's batch handler ([`crate::batch`]).
    #[serde(default)]
    pub batch: Option<BatchSpec>,
    /// Who submits it, as the task's history shows it; set by whoever submits on a
    /// caller's behalf (the API from the token, a schedule), never read from input.
    #[serde(skip)]
    pub created_by: Option<Actor>,
    /// The submitter's trace ([`crate::trace`]), which the task's attempts continue; set
    /// by whoever submits from the caller's context (the API from the `traceparent`
    /// header, the Rust client from the current span), never read from input.
    #[serde(skip)]
    pub traceparent: Option<TraceParent>,
}

impl NewTask {
    /// A task of `kind` on the default queue with the default options.
    pub fn new(kind: impl Into<String>, payload: Value) -> Self {
        NewTask {
            kind: kind.into(),
            queue: DEFAULT_QUEUE.to_owned(),
            payload,
            key: None,
            idempotency_key: None,
            priority: 0,
            run_at: None,
            delay: None,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            backoff: Backoff::default(),
            timeout: None,
            held: false,
            target: Target::Any,
            affinity: None,
            runs: None,
            rearm: None,
            batch: None,
            created_by: None,
            traceparent: None,
        }
    }

    /// Recorded as submitted by `actor`.
    pub fn created_by(mut self, actor: Actor) -> Self {
        self.created_by = Some(actor);
        self
    }

    /// Continues the trace of `traceparent`: the task's attempts run in spans of it.
    pub fn traceparent(mut self, traceparent: TraceParent) -> Self {
        self.traceparent = Some(traceparent);
        self
    }

    /// On queue `queue` instead of [`DEFAULT_QUEUE`].
    pub fn queue(mut self, queue: impl Into<String>) -> Self {
        self.queue = queue.into();
        self
    }
    /// With a business id to find it by; tasks may share one, and a queue's key rate
    /// paces those that do together.
    pub fn key(mut self, key: impl Into<String>) -> Self {
        self.key = Some(key.into());
        self
    }
    /// Submitted once under `key`: a later submit with the same key returns this task
    /// while it is kept (an archived or deleted task's key may be used again).
    pub fn idempotency_key(mut self, key: impl Into<String>) -> Self {
        self.idempotency_key = Some(key.into());
        self
    }
    /// Claimed before due tasks of lower priority in its queue; 0 unless set, and it may
    /// be negative.
    pub fn priority(mut self, priority: i32) -> Self {
        self.priority = priority;
        self
    }
    /// Due no earlier than `at`, on the database's clock; excludes a delay.
    pub fn run_at(mut self, at: DateTime<Utc>) -> Self {
        self.run_at = Some(at);
        self
    }
    /// Due no earlier than `delay` after the database's now, at most [`MAX_DELAY`];
    /// excludes `run_at`.
    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
    /// May spend `n` attempts, 1 to [`MAX_ATTEMPTS_LIMIT`].
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }
    /// Waits between attempts as `backoff` says instead of `Backoff::default()`.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }
    /// Each attempt may run at most `timeout`: more than zero, at most [`MAX_DELAY`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = Some(timeout);
        self
    }
    /// Whether it is created `held`, waiting for a release before it can run.
    pub fn held(mut self, held: bool) -> Self {
        self.held = held;
        self
    }
    /// Only the workers `target` allows may run it.
    pub fn target(mut self, target: Target) -> Self {
        self.target = target;
        self
    }
    /// Wants several runs ([`crate::runs`]).
    pub fn runs(mut self, runs: Runs) -> Self {
        self.runs = Some(runs);
        self
    }
    /// A repeat of this task's idempotency key re-arms the multi-run task it names.
    pub fn rearm(mut self, rearm: Rearm) -> Self {
        self.rearm = Some(rearm);
        self
    }
    /// A batch ([`crate::batch`]): its payload is the data every item reads.
    pub fn batch(mut self, spec: BatchSpec) -> Self {
        self.batch = Some(spec);
        self
    }
    /// Retries prefer the worker of the previous attempt for up to `wait`.
    pub fn affinity(mut self, wait: Duration) -> Self {
        self.affinity = Some(wait);
        self
    }

    /// Checks everything that can be checked without a database.
    pub fn validate(&self) -> Result<(), InvalidTask> {
        check_name("kind", &self.kind)?;
        check_name("queue", &self.queue)?;
        if let Some(key) = &self.key {
            check_name("key", key)?;
        }
        if let Some(key) = &self.idempotency_key {
            check_name("idempotency_key", key)?;
        }
        if self.max_attempts == 0 || self.max_attempts > MAX_ATTEMPTS_LIMIT {
            return Err(InvalidTask::MaxAttempts(self.max_attempts));
        }
        if self.run_at.is_some() && self.delay.is_some() {
            return Err(InvalidTask::RunAtAndDelay);
        }
        if let Some(delay) = self.delay {
            if delay > MAX_DELAY {
                return Err(InvalidTask::DelayTooLong(delay));
            }
        }
        if let Some(timeout) = self.timeout {
            if timeout.is_zero() || timeout > MAX_DELAY {
                return Err(InvalidTask::Timeout(timeout));
            }
        }
        if let Some(wait) = self.affinity {
            if wait.as_millis() == 0 || wait > MAX_DELAY {
                return Err(InvalidTask::Affinity(wait));
            }
        }
        if self.rearm.is_some() && (self.runs.is_none() || self.idempotency_key.is_none()) {
            return Err(InvalidRuns::Rearm.into());
        }
        if let Some(runs) = &self.runs {
            runs.validate()?;
            if self.affinity.is_some() {
                return Err(InvalidRuns::Affinity.into());
            }
        }
        if let Some(batch) = &self.batch {
            batch.validate()?;
            if self.runs.is_some() {
                return Err(InvalidBatch::Runs.into());
            }
            if self.timeout.is_some() {
                return Err(InvalidBatch::Timeout.into());
            }
        }
        self.backoff.validate()?;
        self.target.validate()?;
        check_payload("payload", &self.payload)
    }
}

/// Refuses a payload or a batch's data that PostgreSQL cannot store: NUL in a string or
/// a key, at any depth.
pub fn check_payload(field: &'static str, value: &Value) -> Result<(), InvalidTask> {
    if crate::stored::contains_nul(value) {
        return Err(InvalidTask::Nul(field));
    }
    Ok(())
}

pub(crate) fn check_name(field: &'static str, value: &str) -> Result<(), InvalidTask> {
    if value.trim().is_empty() {
        return Err(InvalidTask::Empty(field));
    }
    let len = value.chars().count();
    if len > MAX_NAME_LEN {
        return Err(InvalidTask::TooLong { field, len });
    }
    if value.chars().any(char::is_control) {
        return Err(InvalidTask::ControlCharacter(field));
    }
    Ok(())
}

/// Why a task cannot be submitted or changed as asked.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidTask {
    /// A name that is empty or all whitespace, in the field named.
    #[error("{0} must not be empty")]
    Empty(&'static str),
    /// A name longer than [`MAX_NAME_LEN`] characters.
    #[error("{field} is {len} characters long; the limit is {MAX_NAME_LEN}")]
    TooLong {
        /// Which field: `kind`, `queue`, `key`, ...
        field: &'static str,
        /// Its length in characters (Unicode scalar values).
        len: usize,
    },
    /// A name holding a control character (a newline, say), in the field named.
    #[error("{0} must not contain control characters")]
    ControlCharacter(&'static str),
    /// `max_attempts` of 0 or above [`MAX_ATTEMPTS_LIMIT`].
    #[error("max_attempts must be between 1 and {MAX_ATTEMPTS_LIMIT}, got {0}")]
    MaxAttempts(u32),
    /// Both `run_at` and `delay` were given.
    #[error("give either run_at or delay, not both")]
    RunAtAndDelay,
    /// A delay longer than [`MAX_DELAY`].
    #[error("delay {0:?} is longer than the limit of 10 years")]
    DelayTooLong(Duration),
    /// A timeout of zero or longer than [`MAX_DELAY`].
    #[error("timeout must be greater than zero and at most 10 years, got {0:?}")]
    Timeout(Duration),
    /// An affinity shorter than a millisecond or longer than [`MAX_DELAY`].
    #[error("affinity must be at least 1 ms and at most 10 years, got {0:?}")]
    Affinity(Duration),
    /// A backoff out of its bounds.
    #[error(transparent)]
    Backoff(#[from] InvalidBackoff),
    /// A target that cannot be stored.
    #[error(transparent)]
    Target(#[from] InvalidTarget),
    /// Runs asked for wrongly, or with an option they exclude.
    #[error(transparent)]
    Runs(#[from] InvalidRuns),
    /// A batch asked for wrongly, or with an option it excludes.
    #[error(transparent)]
    Batch(#[from] InvalidBatch),
    /// JSON holding a NUL character in a string or a key, in the field named.
    #[error("{0} contains a NUL character (\\u0000), which PostgreSQL cannot store; tasktable refuses it on every backend")]
    Nul(&'static str),
}

/// A stored task: one row of `tasktable_tasks`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Task {
    /// Assigned by the database on submit.
    pub id: TaskId,
    /// Which handler runs it.
    pub kind: String,
    /// The queue it is claimed from.
    pub queue: String,
    /// Where it is in its life; it moves only as [`crate::state`] allows.
    pub state: TaskState,
    /// The handler's input; an operator may replace it while no worker holds the task.
    pub payload: Value,
    /// What the handler answered when it succeeded; kept by a retry until overwritten.
    pub result: Option<Value>,
    /// What an attempt last saved to resume from; kept across attempts and retries.
    pub checkpoint: Option<Value>,
    /// What an attempt last reported, for people watching.
    pub progress: Option<Value>,
    /// Business id, for search; not unique (the column `task_key`).
    pub key: Option<String>,
    /// The key under which a second submit returns this task; a schedule's tasks have
    /// `schedule:<id>:<slot>`.
    pub idempotency_key: Option<String>,
    /// Higher is claimed first.
    pub priority: i32,
    /// Not claimed before this; for a finished task, when it was last due.
    pub run_at: DateTime<Utc>,
    /// Attempts spent so far, counting the one running now.
    pub attempt: u32,
    /// Attempts it may spend before a retryable error fails it for good.
    pub max_attempts: u32,
    /// The waits between its attempts.
    pub backoff: Backoff,
    /// Longest one attempt may run; `None`: no limit.
    pub timeout: Option<Duration>,
    /// Grows by one on every claim; every worker write must carry the current value.
    pub lease_token: i64,
    /// The current claim's secret. Never serialized: only the claimer learns it, from the
    /// claim itself.
    #[serde(skip)]
    pub lease_credential: Option<LeaseCredential>,
    /// While `running`: when the lease runs out unless renewed; `None` otherwise.
    pub lease_expires_at: Option<DateTime<Utc>>,
    /// When the running attempt's timeout passes.
    pub deadline_at: Option<DateTime<Utc>>,
    /// The worker running it now, or that ran it last.
    pub worker_id: Option<String>,
    /// That worker's host name.
    pub worker_host: Option<String>,
    /// The latest error message, kept until another replaces it, even through a success.
    pub last_error: Option<String>,
    /// When it was submitted, on the database's clock.
    pub created_at: DateTime<Utc>,
    /// Its last submit, claim, attempt end or operator change; renewals, checkpoints and
    /// progress leave it as it is.
    pub updated_at: DateTime<Utc>,
    /// Start of the current or last attempt.
    pub started_at: Option<DateTime<Utc>>,
    /// When it reached `succeeded`, `failed` or `cancelled`; `None` while unfinished.
    pub finished_at: Option<DateTime<Utc>>,
    /// The schedule that fired this task, if one did.
    pub schedule_id: Option<i64>,
    /// The slot of that schedule this task was fired for.
    pub slot_at: Option<DateTime<Utc>>,
    /// Who may run it.
    #[serde(default)]
    pub target: Target,
    /// How long a retry waits for the worker of the previous attempt.
    #[serde(default)]
    pub affinity: Option<Duration>,
    /// While set, the task waits for its previous worker (`worker_id`) until then, or
    /// until that worker is gone, whichever comes first; then any allowed worker.
    #[serde(default)]
    pub affinity_until: Option<DateTime<Utc>>,
    /// What a multi-run task asks for (its `max_failed` resolved); `None` for a task
    /// that runs once.
    #[serde(default)]
    pub runs: Option<Runs>,
    /// A multi-run task's counters.
    #[serde(default)]
    pub run_counts: Option<RunCounts>,
    /// Set on what a claim returns for a run of a multi-run task: the run's number. The
    /// lease, worker, times, checkpoint and attempt are then the run's.
    #[serde(default)]
    pub run: Option<u32>,
    /// Who submitted it, where recorded (a pull worker's claim does not show it).
    #[serde(default)]
    pub created_by: Option<Actor>,
    /// The submitter's trace, which its attempts continue ([`crate::trace`]).
    #[serde(default)]
    pub traceparent: Option<TraceParent>,
}

impl Task {
    /// The error the task stands at: `last_error` unless the task has succeeded since
    /// ([`TaskState::has_current_error`]).
    pub fn current_error(&self) -> Option<&str> {
        self.last_error
            .as_deref()
            .filter(|_| self.state.has_current_error())
    }

    /// The lease a worker holds after claiming this task.
    pub fn lease(&self) -> Lease {
        Lease {
            task_id: self.id,
            token: self.lease_token,
            credential: self.lease_credential,
            run: self.run,
        }
    }

    /// Claim order: higher priority first; among equal priority, tasks aimed at the
    /// claimer (a claim returns only targeted tasks that are) before untargeted ones;
    /// then earlier `run_at`, then lower id.
    pub fn claim_order(a: &Task, b: &Task) -> std::cmp::Ordering {
        b.priority
            .cmp(&a.priority)
            .then(a.target.is_any().cmp(&b.target.is_any()))
            .then(a.run_at.cmp(&b.run_at))
            .then(a.id.cmp(&b.id))
    }
}

/// Proof of a claim: a worker's writes about a task are applied only while the task is
/// running under this token and credential.
///
/// The token is a counter that grows on every claim: it orders claims, so a worker can
/// fence its own side effects with it, and it is no secret. The credential is random and
/// known only to the claimer, so nobody else can write under the lease, whatever they
/// guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Lease {
    /// The task claimed.
    pub task_id: TaskId,
    /// The task's `lease_token` as the claim left it: a later claim's is higher.
    pub token: i64,
    /// `None` only for a task claimed before credentials existed (schema version 4).
    pub credential: Option<LeaseCredential>,
    /// The run of a multi-run task this lease is for; `None` for a task that runs once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run: Option<u32>,
}

/// A claim's secret: 128 random bits, written as 32 lowercase hex digits. `Debug` hides it,
/// so it never reaches a log.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LeaseCredential([u8; 16]);

impl LeaseCredential {
    /// Length of the text form.
    pub const HEX_LEN: usize = 32;

    /// A credential from random bytes; the caller supplies the randomness (core reads no
    /// random source), which must come from a cryptographically secure generator.
    pub fn from_bytes(bytes: [u8; 16]) -> Self {
        LeaseCredential(bytes)
    }

    /// The text form, 32 lowercase hex digits: what the `lease_credential` column holds,
    /// and what `FromStr` reads back (in either case).
    pub fn to_hex(&self) -> String {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = String::with_capacity(Self::HEX_LEN);
        for b in self.0 {
            out.push(DIGITS[usize::from(b >> 4)] as char);
            out.push(DIGITS[usize::from(b & 0xf)] as char);
        }
        out
    }
}

impl std::fmt::Debug for LeaseCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeaseCredential(<redacted>)")
    }
}

/// Text that is not 32 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("a lease credential is {} hex digits", LeaseCredential::HEX_LEN)]
pub struct MalformedCredential;

impl std::str::FromStr for LeaseCredential {
    type Err = MalformedCredential;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let digits = s.as_bytes();
        if digits.len() != Self::HEX_LEN {
            return Err(MalformedCredential);
        }
        let nibble = |c: u8| (c as char).to_digit(16).ok_or(MalformedCredential);
        let mut bytes = [0u8; 16];
        for (i, pair) in digits.chunks_exact(2).enumerate() {
            bytes[i] = (nibble(pair[0])? << 4 | nibble(pair[1])?) as u8;
        }
        Ok(LeaseCredential(bytes))
    }
}

impl Serialize for LeaseCredential {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for LeaseCredential {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// One attempt in a task's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Attempt {
    /// The history row's id, growing in the order rows are written.
    pub id: i64,
    /// The task it was an attempt of.
    pub task_id: TaskId,
    /// Its number, from 1. An attempt given back leaves its number to the next, so two
    /// rows may share one; for a multi-run task it is the run's number.
    pub attempt: u32,
    /// The worker that ran it.
    pub worker_id: Option<String>,
    /// That worker's host name.
    pub worker_host: Option<String>,
    /// When it was claimed, where known.
    pub started_at: Option<DateTime<Utc>>,
    /// When it ended, on the database's clock.
    pub finished_at: DateTime<Utc>,
    /// How it ended.
    pub outcome: AttemptOutcome,
    /// The error it ended with, if any.
    pub error: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_are_valid() {
        NewTask::new("email", json!({"to": "a@b"}))
            .validate()
            .unwrap();
    }

    #[test]
    fn rejects_bad_fields_with_a_reason() {
        let t = || NewTask::new("k", json!(null));
        let cases = [
            (NewTask::new("", json!(null)), "kind must not be empty"),
            (t().queue(" "), "queue must not be empty"),
            (t().max_attempts(0), "max_attempts must be between"),
            (t().key("x".repeat(300)), "key is 300 characters long"),
            (
                NewTask::new("é".repeat(256), json!(null)),
                "kind is 256 characters long",
            ),
            (
                t().kind_with_newline(),
                "kind must not contain control characters",
            ),
            (
                t().delay(Duration::from_secs(1)).run_at(Utc::now()),
                "either run_at or delay",
            ),
            (
                t().timeout(Duration::ZERO),
                "timeout must be greater than zero",
            ),
            (
                NewTask::new("k", json!({"a": ["x\u{0}"]})),
                "payload contains a NUL character",
            ),
        ];
        for (task, want) in cases {
            let err = task.validate().unwrap_err().to_string();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }

    #[test]
    fn names_are_limited_in_characters_not_bytes() {
        NewTask::new("é".repeat(MAX_NAME_LEN), json!(null))
            .key("😀".repeat(MAX_NAME_LEN))
            .validate()
            .unwrap();
    }

    #[test]
    fn credentials_round_trip_as_hex_and_never_print() {
        let c = LeaseCredential::from_bytes([0xab; 16]);
        assert_eq!(c.to_hex(), "ab".repeat(16));
        assert_eq!(c.to_hex().parse::<LeaseCredential>(), Ok(c));
        assert_eq!("AB".repeat(16).parse::<LeaseCredential>(), Ok(c));
        assert!(!format!("{c:?}").contains("ab"));
        for bad in [
            "",
            "ab",
            &"g".repeat(32),
            &"a".repeat(33),
            "é".repeat(16).as_str(),
        ] {
            assert_eq!(
                bad.parse::<LeaseCredential>(),
                Err(MalformedCredential),
                "{bad:?}"
            );
        }
    }

    impl NewTask {
        fn kind_with_newline(mut self) -> Self {
            self.kind = "a\nb".into();
            self
        }
    }
}
