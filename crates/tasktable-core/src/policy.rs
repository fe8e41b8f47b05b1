//! Queue policies: the limits a queue may put on its claims, and the one rule that says
//! how many tasks a claim may take under them.
//!
//! A policy caps what runs at once cluster-wide (for the queue, and for each of its
//! kinds), how fast tasks start (for the queue, and for each task key: a customer's or a
//! tenant's tasks), whether a worker may hold more than one of the queue's tasks, and
//! whether the queue's tasks are shared fairly among the live workers (long tasks).
//! A queue without a policy is claimed by the hot path as if none of this existed.
//!
//! Rates are a generic cell rate algorithm (GCRA): one time per bucket, the theoretical
//! arrival time `tat`, and no timer. With an interval `T = 1 / per_second` and a burst
//! `b`, a start at `now` is allowed while `max(tat, now) + T <= now + b * T`, and takes
//! `tat` to `max(tat, now) + T`; so over any stretch of time `w`, at most `b + w / T`
//! tasks start. A bucket whose `tat` has passed is full, the same as no bucket at all.

use crate::task::MAX_NAME_LEN;
use chrono::{DateTime, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Most kinds one queue may limit.
pub const MAX_KIND_LIMITS: usize = 64;
/// Fastest rate a policy may set, in starts per second.
pub const MAX_PER_SECOND: f64 = 1_000_000.0;
/// Slowest rate: one start a day.
pub const MIN_PER_SECOND: f64 = 1.0 / 86_400.0;
/// Largest burst, and largest concurrency limit.
pub const MAX_LIMIT: u32 = 1_000_000;

/// A rate of starts: `per_second` on average, `burst` at once after a quiet spell.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rate {
    /// Starts a second on average, [`MIN_PER_SECOND`] to [`MAX_PER_SECOND`]; fractions
    /// are fine (0.5: one start every two seconds).
    pub per_second: f64,
    /// Starts allowed at once; at least 1. Default: one second's worth.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst: Option<u32>,
}

impl Rate {
    /// `per_second` starts a second, with the default burst.
    pub fn per_second(per_second: f64) -> Rate {
        Rate {
            per_second,
            burst: None,
        }
    }

    /// The same rate, allowing `burst` starts at once (1 to [`MAX_LIMIT`]).
    pub fn with_burst(mut self, burst: u32) -> Rate {
        self.burst = Some(burst);
        self
    }

    /// The burst in force: the one set, or one second's worth (at least 1).
    pub fn burst(&self) -> u32 {
        self.burst
            .unwrap_or_else(|| (self.per_second.ceil() as u32).clamp(1, MAX_LIMIT))
    }

    /// The time between starts, in whole microseconds, rounded up (never faster than
    /// the rate set).
    fn interval(&self) -> TimeDelta {
        let micros = (1_000_000.0 / self.per_second).ceil().max(1.0) as i64;
        TimeDelta::microseconds(micros)
    }

    /// Where the bucket stands at `now`: its time, or `now` for a full one.
    fn base(&self, tat: Option<DateTime<Utc>>, now: DateTime<Utc>) -> DateTime<Utc> {
        tat.map_or(now, |tat| tat.max(now))
    }

    /// How many tasks may start at `now` from a bucket at `tat` (none: full).
    pub fn available(&self, tat: Option<DateTime<Utc>>, now: DateTime<Utc>) -> u32 {
        let t = self.interval();
        let room = now + t * self.burst() as i32 - self.base(tat, now);
        let n = room.num_microseconds().unwrap_or(0) / t.num_microseconds().unwrap_or(1);
        n.clamp(0, i64::from(self.burst())) as u32
    }

    /// The bucket after `n` starts at `now`. Store it through [`Rate::stored`].
    pub fn take(&self, tat: Option<DateTime<Utc>>, now: DateTime<Utc>, n: u32) -> DateTime<Utc> {
        self.base(tat, now) + self.interval() * n as i32
    }

    /// A bucket's time as stored: rounded up to the millisecond, the finest time every
    /// backend keeps, so that storing it never gives a token back. Rounded once, when
    /// written, so that a claim taking many tokens of a fast rate is not charged a
    /// millisecond for each.
    pub fn stored(tat: DateTime<Utc>) -> DateTime<Utc> {
        ceil_millis(tat)
    }

    /// A bucket whose `tat` is after this has no token at `now`.
    pub fn empty_after(&self, now: DateTime<Utc>) -> DateTime<Utc> {
        now + self.interval() * (self.burst() as i32 - 1)
    }

    fn validate(&self, what: &'static str) -> Result<(), InvalidPolicy> {
        if !self.per_second.is_finite()
            || !(MIN_PER_SECOND..=MAX_PER_SECOND).contains(&self.per_second)
        {
            return Err(InvalidPolicy::Rate(what));
        }
        match self.burst {
            Some(b) if b == 0 || b > MAX_LIMIT => Err(InvalidPolicy::Burst(what)),
            _ => Ok(()),
        }
    }
}

fn ceil_millis(t: DateTime<Utc>) -> DateTime<Utc> {
    let below = i64::from(t.timestamp_subsec_nanos() % 1_000_000);
    if below == 0 {
        t
    } else {
        t - TimeDelta::nanoseconds(below) + TimeDelta::milliseconds(1)
    }
}

/// What a queue allows its claims. The default allows everything: no policy.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QueuePolicy {
    /// At most this many of the queue's tasks run at once, anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_running: Option<u32>,
    /// At most this many of a kind (of this queue) run at once, anywhere.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kind_max_running: BTreeMap<String, u32>,
    /// How fast the queue's tasks start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<Rate>,
    /// How fast the tasks sharing a task key start (tasks without a key: unlimited).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key_rate: Option<Rate>,
    /// A worker is never handed a second task of the queue before its first ends.
    #[serde(default, skip_serializing_if = "is_false")]
    pub one_per_worker: bool,
    /// Long tasks: a worker runs at most its share, `ceil(wanting / live workers)`.
    #[serde(default, skip_serializing_if = "is_false")]
    pub fair_share: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// Why a policy was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InvalidPolicy {
    /// A concurrency limit above [`MAX_LIMIT`], in the field named (`max_running` or
    /// `kind_max_running`).
    Limit(&'static str),
    /// A `per_second` that is not a finite number from [`MIN_PER_SECOND`] to
    /// [`MAX_PER_SECOND`], in the rate named (`rate` or `key_rate`).
    Rate(&'static str),
    /// A burst of 0 or above [`MAX_LIMIT`], in the rate named.
    Burst(&'static str),
    /// A kind in `kind_max_running` that no task could have (blank, too long, or with
    /// control characters).
    KindName,
    /// `kind_max_running` limits more than [`MAX_KIND_LIMITS`] kinds.
    TooManyKinds,
}

impl fmt::Display for InvalidPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidPolicy::Limit(what) => write!(f, "{what} must be at most {MAX_LIMIT}"),
            InvalidPolicy::Rate(what) => write!(
                f,
                "{what}.per_second must be a number from one a day ({MIN_PER_SECOND:e}) \
                 to {MAX_PER_SECOND}"
            ),
            InvalidPolicy::Burst(what) => {
                write!(f, "{what}.burst must be from 1 to {MAX_LIMIT}")
            }
            InvalidPolicy::KindName => write!(
                f,
                "kind_max_running: a kind is 1 to {MAX_NAME_LEN} characters, not all blank, \
                 with no control characters"
            ),
            InvalidPolicy::TooManyKinds => {
                write!(
                    f,
                    "kind_max_running may limit at most {MAX_KIND_LIMITS} kinds"
                )
            }
        }
    }
}

impl std::error::Error for InvalidPolicy {}

/// What runs now, as a limited claim sees it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Load {
    /// The queue's running tasks, by kind.
    pub running_by_kind: BTreeMap<String, u64>,
    /// Of those, the ones the claiming worker runs.
    pub running_here: u64,
    /// For a fair share: due pending tasks (counted up to what the share needs) and the
    /// live workers that take the queue, the claimer among them.
    pub share: Option<Share>,
}

/// What a fair share is worked out from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Share {
    /// The queue's due pending tasks, counted only as far as the share needs (a long
    /// backlog is not counted to its end).
    pub due: u64,
    /// The live, non-draining workers that take the queue, the claimer counted.
    pub workers: u64,
}

impl Load {
    /// The queue's running tasks, of every kind and every worker.
    pub fn running(&self) -> u64 {
        self.running_by_kind.values().sum()
    }
}

/// How many tasks a claim may take, and of which kinds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowance {
    /// Most tasks the claim may take, all kinds together; 0: none.
    pub total: u32,
    /// The claim's kinds that may still start (kinds at their limit left out).
    pub kinds: Vec<String>,
    /// For each limited kind among them, how many more may start.
    pub per_kind: BTreeMap<String, u32>,
}

/// A task a limited claim could take: what the policy asks of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Its kind, held to the kind's limit if it has one.
    pub kind: String,
    /// Its task key, whose bucket a `key_rate` spends; a task without one is not held
    /// back by the key rate.
    pub key: Option<String>,
}

impl QueuePolicy {
    /// Whether anything is limited: a queue without a policy takes the hot path.
    pub fn is_limited(&self) -> bool {
        *self != QueuePolicy::default()
    }

    /// Checks every limit, rate and burst against its bound, and every limited kind's
    /// name; the error names the first thing wrong.
    pub fn validate(&self) -> Result<(), InvalidPolicy> {
        if self.max_running.is_some_and(|n| n > MAX_LIMIT) {
            return Err(InvalidPolicy::Limit("max_running"));
        }
        if self.kind_max_running.len() > MAX_KIND_LIMITS {
            return Err(InvalidPolicy::TooManyKinds);
        }
        for (kind, n) in &self.kind_max_running {
            if crate::task::check_name("kind", kind).is_err() {
                return Err(InvalidPolicy::KindName);
            }
            if *n > MAX_LIMIT {
                return Err(InvalidPolicy::Limit("kind_max_running"));
            }
        }
        if let Some(r) = &self.rate {
            r.validate("rate")?;
        }
        if let Some(r) = &self.key_rate {
            r.validate("key_rate")?;
        }
        Ok(())
    }

    /// How many of `kinds` a worker with room for `limit` may take at `now`, given what
    /// runs and the queue's bucket.
    pub fn allowance(
        &self,
        limit: u32,
        kinds: &[String],
        load: &Load,
        tat: Option<DateTime<Utc>>,
        now: DateTime<Utc>,
    ) -> Allowance {
        let mut total = u64::from(limit);
        if let Some(max) = self.max_running {
            total = total.min(u64::from(max).saturating_sub(load.running()));
        }
        if let Some(rate) = &self.rate {
            total = total.min(u64::from(rate.available(tat, now)));
        }
        if self.one_per_worker {
            total = total.min(1u64.saturating_sub(load.running_here));
        }
        if let (true, Some(share)) = (self.fair_share, load.share) {
            let wanting = share.due + load.running();
            let fair = wanting.div_ceil(share.workers.max(1));
            total = total.min(fair.saturating_sub(load.running_here));
        }
        let mut per_kind = BTreeMap::new();
        let mut open = Vec::new();
        for kind in kinds {
            match self.kind_max_running.get(kind) {
                None => open.push(kind.clone()),
                Some(max) => {
                    let running = load.running_by_kind.get(kind).copied().unwrap_or(0);
                    let left = u64::from(*max).saturating_sub(running);
                    if left > 0 {
                        per_kind.insert(kind.clone(), left.min(u64::from(limit)) as u32);
                        open.push(kind.clone());
                    }
                }
            }
        }
        if open.is_empty() {
            total = 0;
        }
        Allowance {
            total: total as u32,
            kinds: open,
            per_kind,
        }
    }

    /// Which of `candidates` (in claim order) to take: the first that fit the
    /// allowance, a limited kind's count and their key's bucket. `keys` holds the
    /// buckets of the candidates' keys (missing: full) and comes back with the taken
    /// tokens spent; the second value lists the keys whose bucket changed.
    pub fn pick(
        &self,
        allowance: &Allowance,
        candidates: &[Candidate],
        keys: &mut HashMap<String, Option<DateTime<Utc>>>,
        now: DateTime<Utc>,
    ) -> (Vec<usize>, Vec<String>) {
        let mut per_kind = allowance.per_kind.clone();
        let mut picked = Vec::new();
        let mut spent = Vec::new();
        for (i, c) in candidates.iter().enumerate() {
            if picked.len() as u32 >= allowance.total {
                break;
            }
            if !allowance.kinds.contains(&c.kind) {
                continue;
            }
            if per_kind.get(&c.kind) == Some(&0) {
                continue;
            }
            if let (Some(rate), Some(key)) = (&self.key_rate, &c.key) {
                let tat = keys.get(key).copied().flatten();
                if rate.available(tat, now) == 0 {
                    continue;
                }
                keys.insert(key.clone(), Some(rate.take(tat, now, 1)));
                if !spent.contains(key) {
                    spent.push(key.clone());
                }
            }
            if let Some(left) = per_kind.get_mut(&c.kind) {
                *left -= 1;
            }
            picked.push(i);
        }
        (picked, spent)
    }
}

#[cfg(test)]
mod tests;
