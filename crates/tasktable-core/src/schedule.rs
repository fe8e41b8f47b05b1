//! Recurring schedules: when each slot of a schedule falls, and which slots to fire
//! after a pause. Pure: the current time is always an argument.
//!
//! A slot is an instant. Cron and daily schedules are written in a zone's wall clock,
//! and wall clocks skip and repeat hours when daylight saving starts and ends. The rule
//! here: the expression is matched against wall-clock times (as if the zone had no
//! daylight saving), and each matching wall-clock time becomes one instant. A time that
//! occurs twice (the hour repeated when clocks go back) fires once, at its first
//! occurrence; a time that does not occur (the hour skipped when clocks go forward) fires
//! at the first instant after the gap. Two wall-clock times that land on one instant
//! that way are one slot. So no slot is lost and none is doubled, whatever the zone.

use chrono::{
    DateTime, Duration as TimeDelta, LocalResult, NaiveDateTime, NaiveTime, TimeZone, Timelike, Utc,
};
use chrono_tz::Tz;
use croner::parser::{CronParser, Seconds, Year};
use croner::Cron;
use serde::{Deserialize, Serialize};
use std::time::Duration;

mod spec;
pub use spec::{
    is_numeric, next_run, plan, upcoming, FirePlan, InvalidSchedule, Overlap, ScheduleEdit,
    ScheduleSpec, MAX_MISSED_RUNS,
};

/// When a schedule fires, as it is written and stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Recurrence {
    /// A cron expression of 5 fields (minute hour day-of-month month day-of-week) or 6
    /// (seconds first), in an IANA time zone (`Europe/Berlin`, `UTC`).
    Cron {
        /// The expression; names (`MON-FRI`, `JAN`), ranges, lists, steps and the
        /// `@daily`-style shorthands are understood.
        expr: String,
        /// The IANA zone whose wall clock the expression is matched against.
        zone: String,
    },
    /// Every `every_ms` milliseconds from `start`, in absolute time.
    Every {
        /// The interval, in milliseconds: [`MIN_INTERVAL`] to [`MAX_INTERVAL`].
        every_ms: u64,
        /// The first slot; every other falls a whole number of intervals after it.
        start: DateTime<Utc>,
    },
    /// Every day at a wall-clock time in an IANA time zone.
    Daily {
        /// The time of day, to the second (a fraction of a second is ignored).
        at: NaiveTime,
        /// The IANA zone whose wall clock `at` is read in.
        zone: String,
    },
}

/// Why a recurrence cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidRecurrence {
    /// A cron expression (or the one a daily time makes) that does not parse, or has
    /// neither 5 nor 6 fields.
    #[error("bad cron expression {expr:?}: {reason} (give 5 fields, or 6 with seconds first)")]
    Cron {
        /// The expression given.
        expr: String,
        /// What is wrong with it: the field count, or the parser's message.
        reason: String,
    },
    /// A zone the built-in IANA database does not know, as given.
    #[error("unknown time zone {0:?} (give an IANA name such as Europe/Berlin or UTC)")]
    Zone(String),
    /// An interval outside [`MIN_INTERVAL`] to [`MAX_INTERVAL`], in milliseconds.
    #[error("an interval must be between 1 second and 10 years, got {0} ms")]
    Interval(u64),
}

/// Shortest interval of an [`Recurrence::Every`] schedule.
pub const MIN_INTERVAL: Duration = Duration::from_secs(1);
/// Longest interval of an [`Recurrence::Every`] schedule: 10 years (of 366 days).
pub const MAX_INTERVAL: Duration = Duration::from_secs(10 * 366 * 24 * 3600);

/// A recurrence checked and ready to compute slots.
#[derive(Debug, Clone)]
pub struct Slots(Kind);

#[derive(Debug, Clone)]
enum Kind {
    Wall {
        cron: Box<Cron>,
        zone: Tz,
    },
    Every {
        every: TimeDelta,
        start: DateTime<Utc>,
    },
}

fn zone(name: &str) -> Result<Tz, InvalidRecurrence> {
    name.parse()
        .map_err(|_| InvalidRecurrence::Zone(name.to_owned()))
}

fn parse_cron(expr: &str) -> Result<Cron, InvalidRecurrence> {
    let fields = expr.split_whitespace().count();
    let bad = |reason: String| InvalidRecurrence::Cron {
        expr: expr.to_owned(),
        reason,
    };
    if !(5..=6).contains(&fields) && !expr.trim_start().starts_with('@') {
        return Err(bad(format!("it has {fields} fields")));
    }
    CronParser::builder()
        .seconds(Seconds::Optional)
        .year(Year::Disallowed)
        .build()
        .parse(expr)
        .map_err(|e| bad(e.to_string()))
}

impl Recurrence {
    /// Checks the recurrence: the expression parses, the zone exists, the interval is in
    /// range.
    pub fn slots(&self) -> Result<Slots, InvalidRecurrence> {
        let kind = match self {
            Recurrence::Cron { expr, zone: z } => Kind::Wall {
                cron: Box::new(parse_cron(expr)?),
                zone: zone(z)?,
            },
            Recurrence::Daily { at, zone: z } => {
                let expr = format!("{} {} {} * * *", at.second(), at.minute(), at.hour());
                Kind::Wall {
                    cron: Box::new(parse_cron(&expr)?),
                    zone: zone(z)?,
                }
            }
            Recurrence::Every { every_ms, start } => {
                let every = Duration::from_millis(*every_ms);
                if !(MIN_INTERVAL..=MAX_INTERVAL).contains(&every) {
                    return Err(InvalidRecurrence::Interval(*every_ms));
                }
                Kind::Every {
                    every: TimeDelta::milliseconds(*every_ms as i64),
                    start: *start,
                }
            }
        };
        Ok(Slots(kind))
    }
}

/// The instant of the wall-clock time `wall` in `zone`: its first occurrence when it
/// occurs twice, the first whole minute after the gap when it does not occur.
fn instant(zone: &Tz, wall: NaiveDateTime) -> Option<DateTime<Utc>> {
    let first = |local: NaiveDateTime| match zone.from_local_datetime(&local) {
        LocalResult::Single(t) | LocalResult::Ambiguous(t, _) => Some(t.with_timezone(&Utc)),
        LocalResult::None => None,
    };
    if let Some(t) = first(wall) {
        return Some(t);
    }
    // Gaps last an hour in most zones, and never more than a day.
    let minute = wall.with_second(0)?.with_nanosecond(0)?;
    (1..=26 * 60).find_map(|m| first(minute + TimeDelta::minutes(m)))
}

/// The next (`forward`) or previous wall-clock match of `cron` after or before `wall`,
/// exclusive.
fn matches(cron: &Cron, wall: NaiveDateTime, forward: bool) -> Option<NaiveDateTime> {
    let at = Utc.from_utc_datetime(&wall);
    let found = if forward {
        cron.find_next_occurrence(&at, false)
    } else {
        cron.find_previous_occurrence(&at, false)
    };
    // Matches fall on whole seconds.
    found.ok().and_then(|t| t.naive_utc().with_nanosecond(0))
}

/// Far enough past a wall-clock time to be beyond any hour a zone repeats.
const REPEAT_REACH: TimeDelta = TimeDelta::hours(3);

impl Slots {
    /// The first slot strictly after `t`; `None` when the expression never matches again.
    pub fn next_after(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.0 {
            Kind::Every { every, start } => {
                if t < *start {
                    return Some(*start);
                }
                let every_ms = every.num_milliseconds();
                let passed = (t - *start).num_milliseconds() / every_ms + 1;
                start.checked_add_signed(TimeDelta::milliseconds(passed.checked_mul(every_ms)?))
            }
            Kind::Wall { cron, zone } => {
                // Every wall time before `t`'s reading maps to an instant at or before `t`
                // (the mapping keeps order), so the search starts there.
                let mut wall = t.with_timezone(zone).naive_local().with_nanosecond(0)?;
                loop {
                    wall = matches(cron, wall, true)?;
                    let at = instant(zone, wall)?;
                    // At or before `t`: a time of a repeated hour already passed, or a time
                    // in a gap that is one slot with the gap's end.
                    if at > t {
                        return Some(at);
                    }
                }
            }
        }
    }

    /// The last slot strictly before `t`, if any.
    pub fn prev_before(&self, t: DateTime<Utc>) -> Option<DateTime<Utc>> {
        match &self.0 {
            Kind::Every { every, start } => {
                if t <= *start {
                    return None;
                }
                let every_ms = every.num_milliseconds();
                let passed = ((t - *start).num_milliseconds() - 1) / every_ms;
                start.checked_add_signed(TimeDelta::milliseconds(passed.checked_mul(every_ms)?))
            }
            Kind::Wall { cron, zone } => {
                // Wall times a little after `t`'s reading may map before `t` (the first pass
                // of an hour `t` is in the second pass of), so search back from beyond them.
                let mut wall = t.with_timezone(zone).naive_local() + REPEAT_REACH;
                loop {
                    wall = matches(cron, wall, false)?;
                    let at = instant(zone, wall)?;
                    if at < t {
                        return Some(at);
                    }
                }
            }
        }
    }

    /// The slots in `(after, until]`, oldest first, at most `limit` of them (the newest
    /// `limit` when there are more).
    pub fn between(
        &self,
        after: DateTime<Utc>,
        until: DateTime<Utc>,
        limit: usize,
    ) -> Vec<DateTime<Utc>> {
        let mut out = std::collections::VecDeque::new();
        if limit == 0 {
            return Vec::new();
        }
        let mut t = after;
        while let Some(next) = self.next_after(t) {
            if next > until {
                break;
            }
            if out.len() == limit {
                out.pop_front();
            }
            out.push_back(next);
            t = next;
        }
        out.into()
    }
}

/// What to do with slots that passed while nothing ran (every process was down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum Missed {
    /// Fire none of them; go on with the next slot.
    Skip,
    /// Fire the most recent one only.
    RunLatest,
    /// Fire each of them, the most recent `max` at the most.
    RunAll {
        /// Most missed slots fired, 1 to [`MAX_MISSED_RUNS`]; older ones are skipped.
        max: u32,
    },
}

/// A slot this recent is on time, not missed: a scheduler that ticks at least this often
/// fires it.
pub const ON_TIME: Duration = Duration::from_secs(60);

/// The slots to fire at `now` for a schedule whose last fired slot was `last` (or, before
/// its first, the time it was created or enabled): every slot in `(last, now]` that is on
/// time (at most [`ON_TIME`] old), and of the older, missed ones those `missed` lets
/// through. Oldest first. However long everything was down, it reads only the slots it
/// returns.
pub fn due_slots(
    slots: &Slots,
    last: DateTime<Utc>,
    now: DateTime<Utc>,
    missed: Missed,
) -> Vec<DateTime<Utc>> {
    let on_time_from = on_time_from(now);
    let keep = match missed {
        Missed::Skip => 0,
        Missed::RunLatest => 1,
        Missed::RunAll { max } => max as usize,
    };
    let mut late = Vec::new();
    let mut t = on_time_from;
    while late.len() < keep {
        match slots.prev_before(t) {
            Some(s) if s > last => {
                late.push(s);
                t = s;
            }
            _ => break,
        }
    }
    late.reverse();
    let from = last.max(on_time_from - TimeDelta::nanoseconds(1));
    late.extend(slots.between(from, now, usize::MAX));
    late
}

/// The oldest slot still on time at `now`: older ones were missed.
fn on_time_from(now: DateTime<Utc>) -> DateTime<Utc> {
    now - TimeDelta::from_std(ON_TIME).unwrap_or_default()
}

/// How many slots a [`SlotSpan`] counts before it stops: a schedule down for a month may
/// have missed millions of slots, and counting them all would take as many steps.
pub const SLOTS_COUNTED: u32 = 1000;

/// Slots told in bounded space: how many (up to [`SLOTS_COUNTED`]), the oldest and the
/// newest. What a firing says of the missed slots it leaves unfired.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SlotSpan {
    /// How many, counted up to [`SLOTS_COUNTED`].
    pub count: u32,
    /// There are more than `count`: counting stopped at [`SLOTS_COUNTED`].
    pub more: bool,
    /// The oldest; `None` when there is none.
    pub first: Option<DateTime<Utc>>,
    /// The newest; `None` when there is none.
    pub last: Option<DateTime<Utc>>,
}

impl SlotSpan {
    /// The slots strictly between `after` and `before`, in at most [`SLOTS_COUNTED`] + 2
    /// steps however many there are.
    pub fn between(slots: &Slots, after: DateTime<Utc>, before: DateTime<Utc>) -> SlotSpan {
        let mut span = SlotSpan::default();
        let mut t = after;
        while let Some(next) = slots.next_after(t).filter(|n| *n < before) {
            if span.count == SLOTS_COUNTED {
                span.more = true;
                break;
            }
            span.first.get_or_insert(next);
            span.count += 1;
            t = next;
        }
        span.last = match (span.count, span.more) {
            (0, _) => None,
            (_, false) => Some(t),
            (_, true) => slots.prev_before(before),
        };
        span
    }

    /// Whether it holds no slot.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
}

/// What a schedule submits at each slot: a task's options without its time or keys of
/// its own. Unknown fields are refused, so a misspelt option is an error, not a default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskTemplate {
    /// Which handler runs the fired tasks; the one field that must be given.
    pub kind: String,
    /// The queue they go to; [`DEFAULT_QUEUE`](crate::task::DEFAULT_QUEUE) when absent.
    #[serde(default = "default_queue")]
    pub queue: String,
    /// The handler's input, the same for every slot; JSON `null` when absent.
    #[serde(default)]
    pub payload: serde_json::Value,
    /// Business id, for search; not unique.
    #[serde(default)]
    pub key: Option<String>,
    /// Higher is claimed first; 0 when absent.
    #[serde(default)]
    pub priority: i32,
    /// Attempts each fired task may spend;
    /// [`DEFAULT_MAX_ATTEMPTS`](crate::task::DEFAULT_MAX_ATTEMPTS) when absent.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// The fired tasks' retry delays; `Backoff::default()` when absent.
    #[serde(default)]
    pub backoff: crate::Backoff,
    /// Longest one attempt may run (`timeout_ms`).
    #[serde(default, rename = "timeout_ms", with = "optional_millis")]
    pub timeout: Option<Duration>,
    /// Who may run the fired tasks; any worker when absent.
    #[serde(default, skip_serializing_if = "crate::Target::is_any")]
    pub target: crate::Target,
}

fn default_queue() -> String {
    crate::task::DEFAULT_QUEUE.to_owned()
}

fn default_max_attempts() -> u32 {
    crate::task::DEFAULT_MAX_ATTEMPTS
}

/// A timeout as whole milliseconds (`timeout_ms` in the API's own words).
mod optional_millis {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use std::time::Duration;

    pub fn serialize<S: Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
        d.map(|d| d.as_millis() as u64).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
        Ok(Option::<u64>::deserialize(d)?.map(Duration::from_millis))
    }
}

/// The idempotency key of the task a schedule fires for a slot: one task per slot, however
/// many schedulers race for it and however often one retries after a lost answer.
pub fn slot_key(schedule_id: i64, slot: DateTime<Utc>) -> String {
    format!(
        "{}{}",
        slot_key_prefix(schedule_id),
        slot.to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
    )
}

/// What the key of every slot of a schedule starts with: `schedule:<id>:`.
pub fn slot_key_prefix(schedule_id: i64) -> String {
    format!("schedule:{schedule_id}:")
}

impl TaskTemplate {
    /// The task fired for `slot` of schedule `schedule_id`: due at the slot, keyed to it.
    pub fn task_for(&self, schedule_id: i64, slot: DateTime<Utc>) -> crate::NewTask {
        crate::NewTask {
            kind: self.kind.clone(),
            queue: self.queue.clone(),
            payload: self.payload.clone(),
            key: self.key.clone(),
            idempotency_key: Some(slot_key(schedule_id, slot)),
            priority: self.priority,
            run_at: Some(slot),
            delay: None,
            max_attempts: self.max_attempts,
            backoff: self.backoff,
            timeout: self.timeout,
            held: false,
            target: self.target.clone(),
            affinity: None,
            created_by: None,
            traceparent: None,
            runs: None,
            rearm: None,
            batch: None,
        }
    }

    /// Checks the template as the tasks it makes will be checked on submit.
    pub fn validate(&self) -> Result<(), crate::InvalidTask> {
        self.task_for(0, DateTime::<Utc>::UNIX_EPOCH).validate()
    }
}

#[cfg(test)]
mod tests;
