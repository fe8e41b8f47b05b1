//! A schedule as operators write it ([`ScheduleSpec`], [`ScheduleEdit`]), and the rules
//! that keep its place among its slots: which slots one firing fires ([`plan`]), when it
//! is next due, and where an edit leaves it ([`ScheduleEdit::covered_from`]).
//!
//! A schedule's place is one instant, `covered_until`: every slot at or before it has
//! been fired or settled by a policy. Creating or enabling a schedule, or changing its
//! recurrence, sets it to the time of the change, so the schedule takes effect from its
//! next slot and never fires slots from before it existed in that form.

use super::{
    due_slots, on_time_from, InvalidRecurrence, Missed, Recurrence, SlotSpan, Slots, TaskTemplate,
};
use crate::{InvalidTask, TaskState};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

/// Whether `text` is written as a whole number (an optional sign, then digits), which a
/// schedule's name never is, so that paths can hold an id or a name.
pub fn is_numeric(text: &str) -> bool {
    let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Most missed slots a `run_all` policy may fire at once.
pub const MAX_MISSED_RUNS: u32 = 1000;

/// Whether a slot fires while the task of the schedule's previous slot is unfinished.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Fire every slot.
    #[default]
    Allow,
    /// Skip a slot while the previous slot's task is held, pending or running.
    Skip,
}

impl Overlap {
    /// Whether a slot fires, given the state of the previous slot's task (`None`: there
    /// is none, or it was deleted).
    pub fn fires(self, previous: Option<TaskState>) -> bool {
        match self {
            Overlap::Allow => true,
            Overlap::Skip => previous.is_none_or(TaskState::is_finished),
        }
    }
}

fn default_missed() -> Missed {
    Missed::RunLatest
}

fn enabled() -> bool {
    true
}

/// A recurring schedule: a unique name, when it fires, and what it submits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleSpec {
    /// Unique among the schedules of a database; held to a task name's rules, and never
    /// a number ([`is_numeric`]).
    pub name: String,
    /// When it fires.
    pub recurrence: Recurrence,
    /// What it submits at each slot.
    pub template: TaskTemplate,
    /// What to do with slots that passed while nothing ran. Default: run the latest.
    #[serde(default = "default_missed")]
    pub missed: Missed,
    /// Whether a slot fires while the previous slot's task is unfinished. Default: it
    /// does ([`Overlap::Allow`]).
    #[serde(default)]
    pub overlap: Overlap,
    /// A disabled schedule fires nothing, and does not catch up when enabled again.
    /// Default: enabled.
    #[serde(default = "enabled")]
    pub enabled: bool,
}

/// Why a schedule cannot be saved.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum InvalidSchedule {
    /// The name is blank, too long, or holds control characters.
    #[error("name: {0}")]
    Name(InvalidTask),
    /// The name is a number ([`is_numeric`]), which a path would take for an id.
    #[error(
        "name: {0:?} is a number; give a name with a letter in it (paths take an id or a name)"
    )]
    NumericName(String),
    /// The recurrence cannot compute slots.
    #[error(transparent)]
    Recurrence(#[from] InvalidRecurrence),
    /// The template makes tasks a submit would refuse.
    #[error("template: {0}")]
    Template(InvalidTask),
    /// A `run_all` policy's `max` is 0 or above [`MAX_MISSED_RUNS`].
    #[error("missed: max must be between 1 and {MAX_MISSED_RUNS}, got {0}")]
    MissedMax(u32),
}

impl ScheduleSpec {
    /// Checks every part; the recurrence, ready to compute slots.
    pub fn validate(&self) -> Result<Slots, InvalidSchedule> {
        crate::task::check_name("name", &self.name).map_err(InvalidSchedule::Name)?;
        if is_numeric(&self.name) {
            return Err(InvalidSchedule::NumericName(self.name.clone()));
        }
        if let Missed::RunAll { max } = self.missed {
            if max == 0 || max > MAX_MISSED_RUNS {
                return Err(InvalidSchedule::MissedMax(max));
            }
        }
        self.template
            .validate()
            .map_err(InvalidSchedule::Template)?;
        Ok(self.recurrence.slots()?)
    }
}

/// A change to a schedule: the fields given replace the stored ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScheduleEdit {
    /// A new name, held to [`ScheduleSpec::name`]'s rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// A new recurrence; a different one takes effect from the edit's time
    /// ([`ScheduleEdit::covered_from`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recurrence: Option<Recurrence>,
    /// A new template, whole: it replaces the old one rather than some of its fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<TaskTemplate>,
    /// A new missed-slot policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missed: Option<Missed>,
    /// A new overlap policy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overlap: Option<Overlap>,
    /// Enables or disables the schedule; an enable takes effect from the edit's time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

impl ScheduleEdit {
    /// The edit that turns `old` into `new`: only the fields that differ.
    pub fn between(old: &ScheduleSpec, new: &ScheduleSpec) -> ScheduleEdit {
        fn differ<T: PartialEq + Clone>(a: &T, b: &T) -> Option<T> {
            (a != b).then(|| b.clone())
        }
        ScheduleEdit {
            name: differ(&old.name, &new.name),
            recurrence: differ(&old.recurrence, &new.recurrence),
            template: differ(&old.template, &new.template),
            missed: differ(&old.missed, &new.missed),
            overlap: differ(&old.overlap, &new.overlap),
            enabled: differ(&old.enabled, &new.enabled),
        }
    }

    /// Whether the edit changes nothing: no field given.
    pub fn is_empty(&self) -> bool {
        *self == ScheduleEdit::default()
    }

    /// `spec` with this edit applied.
    pub fn apply(&self, spec: &ScheduleSpec) -> ScheduleSpec {
        ScheduleSpec {
            name: self.name.clone().unwrap_or_else(|| spec.name.clone()),
            recurrence: self
                .recurrence
                .clone()
                .unwrap_or_else(|| spec.recurrence.clone()),
            template: self
                .template
                .clone()
                .unwrap_or_else(|| spec.template.clone()),
            missed: self.missed.unwrap_or(spec.missed),
            overlap: self.overlap.unwrap_or(spec.overlap),
            enabled: self.enabled.unwrap_or(spec.enabled),
        }
    }

    /// Where the schedule's place (`covered_until`) is after this edit of `old` at `now`:
    /// the edit's time when it enables the schedule or changes its recurrence (the new
    /// form takes effect from its next slot), else where it was (a slot that is due but
    /// not yet fired still fires, with the new template).
    pub fn covered_from(
        &self,
        old: &ScheduleSpec,
        covered_until: DateTime<Utc>,
        now: DateTime<Utc>,
    ) -> DateTime<Utc> {
        let enables = self.enabled == Some(true) && !old.enabled;
        let recurs = self
            .recurrence
            .as_ref()
            .is_some_and(|r| *r != old.recurrence);
        if enables || recurs {
            now.max(covered_until)
        } else {
            covered_until
        }
    }
}

/// When an enabled schedule placed at `covered_until` is next due; `None` when it is
/// disabled or its recurrence never matches again.
pub fn next_run(
    slots: &Slots,
    enabled: bool,
    covered_until: DateTime<Utc>,
) -> Option<DateTime<Utc>> {
    enabled.then(|| slots.next_after(covered_until)).flatten()
}

/// What one firing of a due schedule does at `now`.
#[derive(Debug, Clone, PartialEq)]
pub struct FirePlan {
    /// The slots to fire, oldest first (the overlap policy may still skip some).
    pub slots: Vec<DateTime<Utc>>,
    /// How many of `slots`, the oldest, were missed (more than
    /// [`ON_TIME`](super::ON_TIME) old at `now`) and fire late, as the schedule's
    /// [`Missed`] policy lets them through.
    pub caught_up: usize,
    /// The missed slots the [`Missed`] policy leaves unfired.
    pub missed_skipped: SlotSpan,
    /// The schedule's place afterwards: `now`, since every slot up to it is settled.
    pub covered_until: DateTime<Utc>,
    /// When it is next due.
    pub next_run_at: Option<DateTime<Utc>>,
}

/// The firing of a schedule placed at `covered_until`, at `now`: the slots in
/// `(covered_until, now]` that [`due_slots`] lets through under `missed`, and an account
/// of the missed ones, fired late or left.
pub fn plan(
    slots: &Slots,
    covered_until: DateTime<Utc>,
    now: DateTime<Utc>,
    missed: Missed,
) -> FirePlan {
    let covered = covered_until.max(now);
    let due = due_slots(slots, covered_until, now, missed);
    let on_time = on_time_from(now);
    let caught_up = due.iter().take_while(|s| **s < on_time).count();
    // The slots left are the missed ones older than the oldest fired late.
    let left_before = match caught_up {
        0 => on_time,
        _ => due[0],
    };
    FirePlan {
        slots: due,
        caught_up,
        missed_skipped: SlotSpan::between(slots, covered_until, left_before),
        covered_until: covered,
        next_run_at: slots.next_after(covered),
    }
}

/// The next `n` fire times of a schedule whose next run is `next_run_at`, each in its
/// recurrence's own zone (UTC for an interval): what an operator wants to read.
pub fn upcoming(
    recurrence: &Recurrence,
    next_run_at: Option<DateTime<Utc>>,
    n: usize,
) -> Vec<DateTime<chrono::FixedOffset>> {
    let Ok(slots) = recurrence.slots() else {
        return Vec::new();
    };
    let zone: Option<chrono_tz::Tz> = match recurrence {
        Recurrence::Cron { zone, .. } | Recurrence::Daily { zone, .. } => zone.parse().ok(),
        Recurrence::Every { .. } => None,
    };
    let local = |t: DateTime<Utc>| match zone {
        Some(z) => t.with_timezone(&z).fixed_offset(),
        None => t.fixed_offset(),
    };
    let mut out = Vec::with_capacity(n);
    let mut next = next_run_at;
    while let Some(t) = next {
        if out.len() == n {
            break;
        }
        out.push(local(t));
        next = slots.next_after(t);
    }
    out
}
