//! The schedules page (every schedule, when each fires next, what it last fired) and one
//! schedule's page (its template, its next fire times, the tasks it fired last, and for
//! operators the forms of [`crate::schedule_actions`]).
//!
//! Fire times are read in the schedule's own zone, the zone its recurrence is written in,
//! with the offset beside each: "02:00" alone is wrong for half the year somewhere.

use crate::layout::Flash;
use crate::layout::{action_form, flash, json, page, state_badge, time};
use crate::links;
use crate::session::Session;
use crate::DashState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use chrono::{DateTime, FixedOffset, Timelike, Utc};
use maud::{html, Markup};
use tasktable_core::schedule::{upcoming, Missed, Overlap, Recurrence};
use tasktable_store::{ListParams, Schedule, ScheduleRef, TaskFilter};

/// How many fire times a schedule shows.
const UPCOMING: usize = 5;

/// How many of the tasks it fired a schedule's page lists.
const RECENT_TASKS: u32 = 10;

/// The recurrence in words: `cron 0 2 * * * (Europe/Berlin)`, `every 1m from ...`,
/// `daily 02:30:00 (UTC)`.
pub fn recurrence(r: &Recurrence) -> String {
    match r {
        Recurrence::Cron { expr, zone } => format!("cron {expr} ({zone})"),
        Recurrence::Every { every_ms, start } => format!(
            "every {} from {}",
            interval(*every_ms),
            start.format("%Y-%m-%d %H:%M:%S UTC")
        ),
        Recurrence::Daily { at, zone } => format!("daily {at} ({zone})"),
    }
}

/// An interval in its units, largest first: `1m`, `1h30m`, `2d`, `1s500ms`.
pub(crate) fn interval(ms: u64) -> String {
    let units = [
        (86_400_000, "d"),
        (3_600_000, "h"),
        (60_000, "m"),
        (1000, "s"),
        (1, "ms"),
    ];
    let mut left = ms;
    let mut out = String::new();
    for (size, unit) in units {
        if left >= size {
            out.push_str(&format!("{}{unit}", left / size));
            left %= size;
        }
    }
    if out.is_empty() {
        out.push_str("0ms");
    }
    out
}

pub fn missed(m: Missed) -> String {
    match m {
        Missed::Skip => "skip".to_owned(),
        Missed::RunLatest => "run latest".to_owned(),
        Missed::RunAll { max } => format!("run all (at most {max})"),
    }
}

pub fn overlap(o: Overlap) -> &'static str {
    match o {
        Overlap::Allow => "allow",
        Overlap::Skip => "skip",
    }
}

/// `t` in the zone of `r` (UTC for an interval). Core's `upcoming` starts at the time it
/// is given, so its first item is `t` itself, read as the schedule reads its slots.
fn in_zone(r: &Recurrence, t: DateTime<Utc>) -> DateTime<FixedOffset> {
    upcoming(r, Some(t), 1)
        .into_iter()
        .next()
        .unwrap_or_else(|| t.fixed_offset())
}

/// A fire time as its zone reads it, with the offset: `2026-11-27 02:00 +01:00`. Seconds
/// show only when a slot has them.
fn local(t: DateTime<FixedOffset>) -> Markup {
    let clock = if t.nanosecond() != 0 {
        "%Y-%m-%d %H:%M:%S%.3f %:z"
    } else if t.second() != 0 {
        "%Y-%m-%d %H:%M:%S %:z"
    } else {
        "%Y-%m-%d %H:%M %:z"
    };
    html! { time.nw datetime=(t.to_rfc3339()) { (t.format(clock)) } }
}

/// A slot of `r` in its zone, or a dash.
fn slot(r: &Recurrence, t: Option<DateTime<Utc>>) -> Markup {
    match t {
        Some(t) => local(in_zone(r, t)),
        None => html! { span.muted { "—" } },
    }
}

/// The next fire times, one a line; why there are none when there are none.
fn next_times(s: &Schedule) -> Markup {
    let times = upcoming(&s.spec.recurrence, s.next_run_at, UPCOMING);
    html! {
        @if !s.spec.enabled {
            span.muted { "none while disabled" }
        } @else if times.is_empty() {
            span.muted { "never again" }
        }
        @for t in times { (local(t)) br; }
    }
}

fn enabled(on: bool) -> Markup {
    html! {
        @if on { span.state.s-succeeded { "enabled" } } @else { span.state.s-held { "disabled" } }
    }
}

/// The last slot fired and its task.
fn last_fired(s: &Schedule) -> Markup {
    html! {
        (slot(&s.spec.recurrence, s.last_slot_at))
        @if let Some(id) = s.last_task_id { br; a href={ "/ui/tasks/" (id) } { "task " (id) } }
    }
}

pub async fn schedules(
    State(state): State<DashState>,
    session: Session,
    Query(f): Query<Flash>,
) -> Response {
    let all = match state.app.store.schedule_list().await {
        Ok(all) => all,
        Err(e) => return crate::failure::page_for(e),
    };
    let body = html! {
        h1 { "Schedules" }
        (flash(f.done.as_deref(), f.error.as_deref()))
        p.muted { "Fire times are in each schedule's own time zone." }
        table id="schedules" {
            thead { tr {
                th { "Name" } th { "Recurrence" } th { "State" } th { "Next fire times" }
                th { "Last fired" } th { "Kind and queue" } th { "Policies" }
            } }
            tbody {
                @for s in &all {
                    tr {
                        td { a href={ "/ui/schedules/" (s.id) } { (s.spec.name) } }
                        td { (recurrence(&s.spec.recurrence)) }
                        td { (enabled(s.spec.enabled)) }
                        td { (next_times(s)) }
                        td { (last_fired(s)) }
                        td { (s.spec.template.kind) br; span.muted { "on " } (s.spec.template.queue) }
                        td.nw { "missed: " (missed(s.spec.missed)) br; "overlap: " (overlap(s.spec.overlap)) }
                    }
                }
                @if all.is_empty() { tr { td colspan="7" .muted { "No schedule is defined." } } }
            }
        }
    };
    page("Schedules", "Schedules", Some(&session), false, body).into_response()
}

pub async fn schedule(
    State(state): State<DashState>,
    session: Session,
    Path(id): Path<i64>,
    Query(f): Query<Flash>,
) -> Response {
    let mut s = match state.app.store.schedule_get(ScheduleRef::Id(id)).await {
        Ok(Some(s)) => s,
        Ok(None) => {
            let body = html! {
                h1 { "Schedule " (id) }
                p { "No such schedule. " a href="/ui/schedules" { "Every schedule" } }
            };
            return (
                StatusCode::NOT_FOUND,
                page("Not found", "Schedules", Some(&session), false, body),
            )
                .into_response();
        }
        Err(e) => return crate::failure::page_for(e),
    };
    let fired = match state
        .app
        .store
        .task_list(ListParams {
            filter: TaskFilter::default().schedule(id),
            after: None,
            limit: RECENT_TASKS,
            light: true,
        })
        .await
    {
        Ok(page) => page.tasks,
        Err(e) => return crate::failure::page_for(e),
    };
    let template = &mut s.spec.template;
    template.payload = state.app.payload_for(
        session.principal.role,
        &template.kind,
        std::mem::take(&mut template.payload),
    );
    let r = &s.spec.recurrence;
    let t = &s.spec.template;
    let act = |op: &str, label: &str| {
        action_form(
            &session,
            &format!("/ui/schedules/{id}/{op}"),
            label,
            false,
            html! {},
        )
    };
    let body = html! {
        h1 { "Schedule " (s.spec.name) " " (enabled(s.spec.enabled)) }
        (flash(f.done.as_deref(), f.error.as_deref()))
        @if session.can_act() {
            div id="actions" {
                @if s.spec.enabled { (act("disable", "Disable")) } @else { (act("enable", "Enable")) }
                (act("fire", "Fire now"))
            }
        }
        dl {
            dt { "Recurrence" } dd { (recurrence(r)) }
            dt { "Next fire times" } dd { (next_times(&s)) }
            dt { "Last fired" } dd { (last_fired(&s)) }
            dt { "Missed slots" } dd { (missed(s.spec.missed)) }
            dt { "Overlap" } dd { (overlap(s.spec.overlap)) }
            dt { "Settled until" } dd { (slot(r, Some(s.covered_until))) }
            dt { "Created" } dd { (time(Some(s.created_at))) }
            dt { "Updated" } dd { (time(Some(s.updated_at))) }
        }
        h2 { "Template" }
        dl {
            dt { "Kind" } dd { (t.kind) }
            dt { "Queue" } dd { a href=(links::tasks(&[("queue", t.queue.as_str())])) { (t.queue) } }
            dt { "Key" } dd { (t.key.as_deref().unwrap_or("—")) }
            dt { "Priority" } dd { (t.priority) }
            dt { "Max attempts" } dd { (t.max_attempts) }
            dt { "Timeout" } dd { (t.timeout.map(|d| interval(d.as_millis() as u64)).unwrap_or_else(|| "—".to_owned())) }
        }
        h2 { "Payload" } div id="payload" { (json(Some(&t.payload))) }
        h2 { "Last tasks fired" }
        table id="fired" {
            thead { tr { th { "ID" } th { "State" } th { "Slot" } th.num { "Attempt" } th { "Finished" } } }
            tbody {
                @for task in &fired {
                    tr {
                        td { a href={ "/ui/tasks/" (task.id) } { (task.id) } }
                        td { (state_badge(task.state)) }
                        td { (slot(r, task.slot_at)) }
                        td.num { (task.attempt) "/" (task.max_attempts) }
                        td { (time(task.finished_at)) }
                    }
                }
                @if fired.is_empty() { tr { td colspan="5" .muted { "It has fired no task yet." } } }
            }
        }
        p.muted { "The newest " (RECENT_TASKS) " at the most." }
    };
    let title = format!("Schedule {}", s.spec.name);
    page(&title, "Schedules", Some(&session), false, body).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn intervals_read_in_their_units_largest_first() {
        assert_eq!(interval(60_000), "1m");
        assert_eq!(interval(5_400_000), "1h30m");
        assert_eq!(interval(2 * 86_400_000), "2d");
        assert_eq!(interval(1500), "1s500ms");
        assert_eq!(interval(0), "0ms");
    }

    #[test]
    fn recurrences_read_as_written_with_their_zone() {
        let cron = Recurrence::Cron {
            expr: "0 2 * * *".into(),
            zone: "Europe/Berlin".into(),
        };
        assert_eq!(recurrence(&cron), "cron 0 2 * * * (Europe/Berlin)");
        let every = Recurrence::Every {
            every_ms: 60_000,
            start: Utc.with_ymd_and_hms(2026, 1, 2, 3, 4, 5).unwrap(),
        };
        assert_eq!(recurrence(&every), "every 1m from 2026-01-02 03:04:05 UTC");
        let daily = Recurrence::Daily {
            at: chrono::NaiveTime::from_hms_opt(2, 30, 0).unwrap(),
            zone: "UTC".into(),
        };
        assert_eq!(recurrence(&daily), "daily 02:30:00 (UTC)");
    }

    #[test]
    fn a_slot_reads_in_its_schedules_zone_with_the_offset_of_that_day() {
        let cron = Recurrence::Cron {
            expr: "0 2 * * *".into(),
            zone: "Europe/Berlin".into(),
        };
        let winter = Utc.with_ymd_and_hms(2026, 11, 27, 1, 0, 0).unwrap();
        assert_eq!(
            local(in_zone(&cron, winter)).into_string(),
            "<time class=\"nw\" datetime=\"2026-11-27T02:00:00+01:00\">2026-11-27 02:00 +01:00</time>"
        );
        let summer = Utc.with_ymd_and_hms(2026, 7, 1, 0, 0, 30).unwrap();
        assert!(local(in_zone(&cron, summer))
            .into_string()
            .contains(">2026-07-01 02:00:30 +02:00<"));
    }
}
