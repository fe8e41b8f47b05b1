//! Schedules for people: the `schedule ls` table and the `schedule show` page, read from
//! the server's JSON. Only the fields shown are read; unknown ones are ignored, so a
//! newer server still works.

use crate::client::field;
use crate::commands::show;
use crate::error::CliError;
use crate::output::{self, Table};
use chrono::{DateTime, FixedOffset, Utc};
use serde::Deserialize;
use serde_json::Value;

use tasktable::schedule::{Missed, Overlap, Recurrence};
use tasktable_wire::BackoffSpec as Backoff;
/// A schedule as the API returns it: the server's own type.
pub use tasktable_wire::ScheduleView as Schedule;

/// One of the last tasks a schedule fired.
#[derive(Debug, Deserialize)]
struct RecentTask {
    id: i64,
    state: String,
    slot_at: Option<DateTime<Utc>>,
    attempt: u32,
    finished_at: Option<DateTime<Utc>>,
}

/// The schedule in the `schedule` field of an answer.
pub fn schedule(answer: &Value) -> Result<Schedule, CliError> {
    field(answer, "schedule")
}

/// When `s` fires, in the words of the flags that set it: `cron 0 2 * * * Europe/Berlin`,
/// `every 1m`, `daily 02:30:00 UTC`.
pub fn when(s: &Schedule) -> String {
    match &s.recurrence {
        Recurrence::Cron { expr, zone } => format!("cron {expr} {zone}"),
        Recurrence::Every { every_ms, .. } => format!("every {}", output::millis(*every_ms)),
        Recurrence::Daily { at, zone } => format!("daily {at} {zone}"),
    }
}

/// The next fire time of `s` in its zone, or why there is none.
pub fn next_run(s: &Schedule) -> String {
    match s.upcoming.first() {
        Some(t) => local_time(*t),
        None if !s.enabled => "- (disabled)".into(),
        None => "- (never again)".into(),
    }
}

/// `name` and `(id N)`, the way every message names a schedule.
pub fn label(s: &Schedule) -> String {
    format!("schedule {:?} (id {})", s.name, s.id)
}

/// A time in the offset it was given in: `2026-11-27 02:00:00+01:00`, or with `Z` in UTC
/// like the other tables.
fn local_time(t: DateTime<FixedOffset>) -> String {
    if t.offset().local_minus_utc() == 0 {
        output::time(t.with_timezone(&Utc))
    } else {
        t.format("%Y-%m-%d %H:%M:%S%:z").to_string()
    }
}

/// The `schedule ls` table, one row per schedule in the server's order (by name).
pub fn table(schedules: &[Schedule]) -> Table {
    let mut table = Table::new([
        "NAME",
        "ID",
        "WHEN",
        "ENABLED",
        "NEXT RUN",
        "LAST SLOT",
        "KIND/QUEUE",
    ]);
    for s in schedules {
        table.row(vec![
            s.name.clone(),
            s.id.to_string(),
            when(s),
            yes_no(s.enabled),
            next_run(s),
            output::opt_time(s.last_slot_at),
            format!("{}/{}", s.template.kind, s.template.queue),
        ]);
    }
    table
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.into()
}

/// The `schedule show` page: the schedule's fields, its next fire times and the last
/// tasks it fired.
pub fn page(answer: &Value) -> Result<String, CliError> {
    let s = schedule(answer)?;
    let recent: Vec<RecentTask> = field(answer, "recent_tasks")?;
    let t = &s.template;
    let mut fields: Vec<(&str, String)> = vec![
        ("when", when_in_full(&s.recurrence)),
        ("enabled", yes_no(s.enabled)),
        ("missed", missed(s.missed)),
        ("overlap", overlap(s.overlap)),
        ("kind", t.kind.clone()),
        ("queue", t.queue.clone()),
        ("priority", t.priority.to_string()),
        ("attempts", t.max_attempts.to_string()),
        ("backoff", backoff(&t.backoff)),
    ];
    if let Some(ms) = t.timeout_ms {
        fields.push(("timeout", output::millis(ms)));
    }
    if let Some(key) = &t.key {
        fields.push(("key", key.clone()));
    }
    fields.push(("payload", show::pretty(&t.payload)));
    if let (Some(slot), Some(task)) = (s.last_slot_at, s.last_task_id) {
        fields.push(("last slot", format!("{} (task {task})", output::time(slot))));
    }
    fields.push(("created", output::time(s.created_at)));
    fields.push(("updated", output::time(s.updated_at)));

    let mut text = format!("schedule {} (id {})\n", s.name, s.id);
    text.push_str(&show::field_lines(&fields));
    text.push('\n');
    if s.upcoming.is_empty() {
        text.push_str(if s.enabled {
            "no upcoming fire times: the recurrence never matches again\n"
        } else {
            "no upcoming fire times: the schedule is disabled\n"
        });
    } else {
        text.push_str("upcoming\n");
        for t in &s.upcoming {
            text.push_str(&format!("  {}\n", local_time(*t)));
        }
    }
    text.push('\n');
    if recent.is_empty() {
        text.push_str("no tasks fired yet\n");
        return Ok(text);
    }
    let mut table = Table::new(["ID", "STATE", "SLOT", "ATTEMPT", "FINISHED"]);
    for task in recent {
        table.row(vec![
            task.id.to_string(),
            task.state,
            output::opt_time(task.slot_at),
            task.attempt.to_string(),
            output::opt_time(task.finished_at),
        ]);
    }
    text.push_str("recent tasks, newest first\n");
    text.push_str(&table.render());
    Ok(text)
}

/// [`Schedule::when`] with an interval's start.
fn when_in_full(r: &Recurrence) -> String {
    match r {
        Recurrence::Every { every_ms, start } => format!(
            "every {} from {}",
            output::millis(*every_ms),
            output::time(*start)
        ),
        Recurrence::Cron { expr, zone } => format!("cron {expr} {zone}"),
        Recurrence::Daily { at, zone } => format!("daily {at} {zone}"),
    }
}

/// The policy as `--missed` spells it, and what it means.
fn missed(m: Missed) -> String {
    match m {
        Missed::Skip => "skip: slots missed while nothing ran are not fired".into(),
        Missed::RunLatest => "latest: of the slots missed while nothing ran, the last fires".into(),
        Missed::RunAll { max } => {
            format!("all:{max}: slots missed while nothing ran fire, the last {max} at most")
        }
    }
}

fn overlap(o: Overlap) -> String {
    match o {
        Overlap::Allow => {
            "allow: every slot fires, even while the previous slot's task is unfinished".into()
        }
        Overlap::Skip => {
            "skip: a slot does not fire while the previous slot's task is unfinished".into()
        }
    }
}

/// `5s, x2 per attempt, at most 1h, jitter 10%`.
fn backoff(b: &Backoff) -> String {
    format!(
        "{}, x{} per attempt, at most {}, jitter {}%",
        output::millis(b.initial_ms),
        b.multiplier,
        output::millis(b.max_ms),
        (b.jitter * 100.0).round()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn answer(recurrence: Value, upcoming: Value, enabled: bool) -> Value {
        json!({
            "schedule": {
                "id": 1, "name": "nightly", "recurrence": recurrence,
                "template": {"kind": "report", "queue": "default", "payload": null, "key": null,
                    "priority": 0, "max_attempts": 5, "timeout_ms": null,
                    "backoff": {"initial_ms": 5000, "multiplier": 2.0, "max_ms": 3_600_000, "jitter": 0.1}},
                "missed": {"policy": "run_all", "max": 3}, "overlap": "skip", "enabled": enabled,
                "covered_until": "2026-11-26T04:00:00Z", "next_run_at": null,
                "last_task_id": null, "last_slot_at": null,
                "created_at": "2026-11-26T04:00:00Z", "updated_at": "2026-11-26T04:00:00Z",
                "upcoming": upcoming, "a_field_added_later": true
            },
            "recent_tasks": []
        })
    }

    #[test]
    fn when_reads_like_the_flags_that_set_it() {
        let cases = [
            (
                json!({"type": "cron", "expr": "0 2 * * *", "zone": "Europe/Berlin"}),
                "cron 0 2 * * * Europe/Berlin",
            ),
            (
                json!({"type": "every", "every_ms": 60_000, "start": "2026-01-01T00:00:00Z"}),
                "every 1m",
            ),
            (
                json!({"type": "daily", "at": "02:30:00", "zone": "UTC"}),
                "daily 02:30:00 UTC",
            ),
        ];
        for (recurrence, when) in cases {
            let s = schedule(&answer(recurrence, json!([]), true)).unwrap();
            assert_eq!(super::when(&s), when);
        }
    }

    #[test]
    fn the_next_run_is_shown_in_the_schedules_own_offset() {
        let cron = json!({"type": "cron", "expr": "0 2 * * *", "zone": "Europe/Berlin"});
        let s = schedule(&answer(
            cron.clone(),
            json!(["2026-11-27T02:00:00+01:00", "2026-11-28T02:00:00+01:00"]),
            true,
        ))
        .unwrap();
        assert_eq!(next_run(&s), "2026-11-27 02:00:00+01:00");
        let utc = schedule(&answer(cron.clone(), json!(["2026-11-27T02:00:00Z"]), true)).unwrap();
        assert_eq!(next_run(&utc), "2026-11-27 02:00:00Z");
        let off = schedule(&answer(cron, json!([]), false)).unwrap();
        assert_eq!(next_run(&off), "- (disabled)");
    }

    #[test]
    fn the_page_lists_upcoming_times_and_says_when_nothing_fired_yet() {
        let every = json!({"type": "every", "every_ms": 90_000, "start": "2026-01-01T00:00:00Z"});
        let text = page(&answer(
            every,
            json!(["2026-11-26T04:01:30Z", "2026-11-26T04:03:00Z"]),
            true,
        ))
        .unwrap();
        assert!(text.starts_with("schedule nightly (id 1)\n"), "{text}");
        assert!(
            text.contains("  when        every 90s from 2026-01-01 00:00:00Z\n"),
            "{text}"
        );
        assert!(text.contains("  missed      all:3: "), "{text}");
        assert!(
            text.contains("  backoff     5s, x2 per attempt, at most 1h, jitter 10%\n"),
            "{text}"
        );
        assert!(
            text.contains("upcoming\n  2026-11-26 04:01:30Z\n  2026-11-26 04:03:00Z\n"),
            "{text}"
        );
        assert!(text.ends_with("no tasks fired yet\n"), "{text}");
    }
}
