use super::*;
use crate::TaskState;
use chrono::NaiveDate;

fn utc(y: i32, mo: u32, d: u32, h: u32, mi: u32) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(y, mo, d, h, mi, 0).unwrap()
}

fn cron(expr: &str, zone: &str) -> Slots {
    Recurrence::Cron {
        expr: expr.into(),
        zone: zone.into(),
    }
    .slots()
    .unwrap()
}

fn daily(h: u32, m: u32, zone: &str) -> Slots {
    Recurrence::Daily {
        at: NaiveTime::from_hms_opt(h, m, 0).unwrap(),
        zone: zone.into(),
    }
    .slots()
    .unwrap()
}

fn local(slots: &[DateTime<Utc>], zone: &str) -> Vec<String> {
    let tz: Tz = zone.parse().unwrap();
    slots
        .iter()
        .map(|s| s.with_timezone(&tz).format("%d %H:%M %Z").to_string())
        .collect()
}

#[test]
fn cron_takes_five_or_six_fields_and_a_known_zone() {
    assert!(
        cron("*/5 * * * *", "UTC").next_after(utc(2026, 1, 1, 0, 1)) == Some(utc(2026, 1, 1, 0, 5))
    );
    let six = cron("30 0 12 * * *", "UTC");
    assert_eq!(
        six.next_after(utc(2026, 1, 1, 0, 0)),
        Some(utc(2026, 1, 1, 12, 0) + TimeDelta::seconds(30))
    );
    for bad in ["* * * *", "0 0 0 1 1 * 2030", "61 * * * *", "nonsense"] {
        let err = Recurrence::Cron {
            expr: bad.into(),
            zone: "UTC".into(),
        }
        .slots()
        .unwrap_err();
        assert!(
            matches!(err, InvalidRecurrence::Cron { .. }),
            "{bad}: {err}"
        );
    }
    let zone = Recurrence::Cron {
        expr: "* * * * *".into(),
        zone: "Mars/Olympus".into(),
    }
    .slots()
    .unwrap_err();
    assert_eq!(zone, InvalidRecurrence::Zone("Mars/Olympus".into()));
}

#[test]
fn intervals_count_from_their_start_in_absolute_time() {
    let start = utc(2026, 3, 29, 0, 0);
    let every = Recurrence::Every {
        every_ms: 90 * 60 * 1000,
        start,
    }
    .slots()
    .unwrap();
    assert_eq!(every.next_after(start - TimeDelta::days(1)), Some(start));
    assert_eq!(every.next_after(start), Some(utc(2026, 3, 29, 1, 30)));
    assert_eq!(
        every.next_after(utc(2026, 3, 29, 1, 29)),
        Some(utc(2026, 3, 29, 1, 30))
    );
    assert_eq!(every.prev_before(utc(2026, 3, 29, 1, 30)), Some(start));
    assert_eq!(every.prev_before(start), None);
    let day = every.between(start, start + TimeDelta::days(1), 100);
    assert_eq!(day.len(), 16, "{day:?}");
    assert_eq!(
        every.between(start, start + TimeDelta::days(1), 3),
        day[13..]
    );
    assert!(every
        .between(start, start + TimeDelta::days(1), 0)
        .is_empty());
    for ms in [0, 999, MAX_INTERVAL.as_millis() as u64 + 1] {
        let err = Recurrence::Every {
            every_ms: ms,
            start,
        }
        .slots()
        .unwrap_err();
        assert_eq!(err, InvalidRecurrence::Interval(ms));
    }
}

/// The slots of a daily schedule at `h:m` in `zone` between two UTC times, on its clock.
fn daily_between(
    h: u32,
    m: u32,
    zone: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
) -> Vec<String> {
    local(&daily(h, m, zone).between(from, to, 100), zone)
}

#[test]
fn a_daily_slot_in_the_skipped_hour_fires_once_when_the_gap_ends() {
    // Berlin, 29 March 2026: clocks go from 02:00 CET to 03:00 CEST.
    let berlin = daily_between(
        2,
        30,
        "Europe/Berlin",
        utc(2026, 3, 27, 12, 0),
        utc(2026, 3, 31, 12, 0),
    );
    assert_eq!(
        berlin,
        [
            "28 02:30 CET",
            "29 03:00 CEST",
            "30 02:30 CEST",
            "31 02:30 CEST"
        ]
    );
    // New York, 8 March 2026: clocks go from 02:00 EST to 03:00 EDT.
    let new_york = daily_between(
        2,
        30,
        "America/New_York",
        utc(2026, 3, 7, 0, 0),
        utc(2026, 3, 10, 0, 0),
    );
    assert_eq!(new_york, ["07 02:30 EST", "08 03:00 EDT", "09 02:30 EDT"]);
}

#[test]
fn a_daily_slot_in_the_repeated_hour_fires_once_at_its_first_occurrence() {
    // New York, 1 November 2026: clocks go back from 02:00 EDT to 01:00 EST.
    let new_york = daily_between(
        1,
        30,
        "America/New_York",
        utc(2026, 10, 31, 0, 0),
        utc(2026, 11, 3, 0, 0),
    );
    assert_eq!(new_york, ["31 01:30 EDT", "01 01:30 EDT", "02 01:30 EST"]);
    // Berlin, 25 October 2026: clocks go back from 03:00 CEST to 02:00 CET.
    let berlin = daily_between(
        2,
        30,
        "Europe/Berlin",
        utc(2026, 10, 24, 0, 0),
        utc(2026, 10, 27, 0, 0),
    );
    assert_eq!(berlin, ["24 02:30 CEST", "25 02:30 CEST", "26 02:30 CET"]);
}

#[test]
fn frequent_slots_across_both_changes_are_increasing_and_each_wall_time_fires_once() {
    for (zone, from, to) in [
        (
            "Europe/Berlin",
            utc(2026, 3, 28, 23, 0),
            utc(2026, 3, 29, 3, 0),
        ),
        (
            "Europe/Berlin",
            utc(2026, 10, 24, 23, 0),
            utc(2026, 10, 25, 3, 0),
        ),
        (
            "America/New_York",
            utc(2026, 3, 8, 5, 0),
            utc(2026, 3, 8, 9, 0),
        ),
        (
            "America/New_York",
            utc(2026, 11, 1, 4, 0),
            utc(2026, 11, 1, 8, 0),
        ),
    ] {
        let every15 = cron("*/15 * * * *", zone);
        let slots = every15.between(from, to, 1000);
        assert!(slots.windows(2).all(|w| w[0] < w[1]), "{zone}: {slots:?}");
        let walls = local(&slots, zone);
        let mut seen: Vec<String> = walls.iter().map(|w| w[..8].to_owned()).collect();
        seen.dedup();
        assert_eq!(
            seen.len(),
            walls.len(),
            "{zone}: a wall time fired twice: {walls:?}"
        );
        // Walking back finds the same slots.
        let mut back = Vec::new();
        let mut t = to + TimeDelta::nanoseconds(1);
        while let Some(s) = every15.prev_before(t) {
            if s <= from {
                break;
            }
            back.push(s);
            t = s;
        }
        back.reverse();
        assert_eq!(back, slots, "{zone}");
    }
    // The four quarter hours of the skipped hour are one slot, when the gap ends.
    let gap = cron("*/15 * * * *", "Europe/Berlin").between(
        utc(2026, 3, 29, 0, 30),
        utc(2026, 3, 29, 1, 30),
        100,
    );
    assert_eq!(
        local(&gap, "Europe/Berlin"),
        [
            "29 01:45 CET",
            "29 03:00 CEST",
            "29 03:15 CEST",
            "29 03:30 CEST"
        ]
    );
}

#[test]
fn missed_slots_follow_the_policy_and_on_time_ones_always_fire() {
    let minutely = cron("* * * * *", "UTC");
    let last = utc(2026, 5, 1, 10, 0);
    let now = last + TimeDelta::minutes(10) + TimeDelta::seconds(30);
    let at = |m: i64| last + TimeDelta::minutes(m);
    assert_eq!(due_slots(&minutely, last, now, Missed::Skip), [at(10)]);
    assert_eq!(
        due_slots(&minutely, last, now, Missed::RunLatest),
        [at(9), at(10)]
    );
    assert_eq!(
        due_slots(&minutely, last, now, Missed::RunAll { max: 3 }),
        [at(7), at(8), at(9), at(10)]
    );
    assert_eq!(
        due_slots(&minutely, last, now, Missed::RunAll { max: 100 }),
        (1..=10).map(at).collect::<Vec<_>>()
    );
    // Nothing passed since the last slot: nothing to fire, whatever the policy.
    assert!(due_slots(&minutely, at(10), now, Missed::RunAll { max: 5 }).is_empty());
    // A long outage costs only the slots returned.
    let year_later = last + TimeDelta::days(365) + TimeDelta::seconds(30);
    assert_eq!(
        due_slots(&minutely, last, year_later, Missed::RunLatest).len(),
        2
    );
}

#[test]
fn a_plan_counts_the_missed_slots_it_fires_late_and_those_it_leaves() {
    let minutely = cron("* * * * *", "UTC");
    let last = utc(2026, 5, 1, 10, 0);
    let now = last + TimeDelta::minutes(10) + TimeDelta::seconds(30);
    let at = |m: i64| last + TimeDelta::minutes(m);
    // Slots 1 to 9 were missed; 10 is on time.
    let skip = plan(&minutely, last, now, Missed::Skip);
    assert_eq!(skip.caught_up, 0);
    assert_eq!(
        skip.missed_skipped,
        SlotSpan {
            count: 9,
            more: false,
            first: Some(at(1)),
            last: Some(at(9)),
        }
    );
    let three = plan(&minutely, last, now, Missed::RunAll { max: 3 });
    assert_eq!(three.slots, [at(7), at(8), at(9), at(10)]);
    assert_eq!(three.caught_up, 3);
    assert_eq!(
        (
            three.missed_skipped.count,
            three.missed_skipped.first,
            three.missed_skipped.last
        ),
        (6, Some(at(1)), Some(at(6)))
    );
    let all = plan(&minutely, last, now, Missed::RunAll { max: 100 });
    assert_eq!(
        (all.caught_up, all.missed_skipped),
        (9, SlotSpan::default())
    );
    // On time: nothing missed.
    let on_time = plan(&minutely, at(9), now, Missed::Skip);
    assert_eq!(
        (on_time.caught_up, on_time.missed_skipped.is_empty()),
        (0, true)
    );
}

#[test]
fn a_long_outage_is_counted_only_so_far() {
    let minutely = cron("* * * * *", "UTC");
    let last = utc(2026, 5, 1, 10, 0);
    let year_later = last + TimeDelta::days(365) + TimeDelta::seconds(30);
    let p = plan(&minutely, last, year_later, Missed::RunLatest);
    assert_eq!(p.caught_up, 1);
    let left = p.missed_skipped;
    assert_eq!((left.count, left.more), (SLOTS_COUNTED, true));
    assert_eq!(left.first, Some(last + TimeDelta::minutes(1)));
    // The newest left is the one before the slot fired late.
    assert_eq!(left.last, Some(p.slots[0] - TimeDelta::minutes(1)));
}

#[test]
fn recurrences_round_trip_through_json() {
    let daily = Recurrence::Daily {
        at: NaiveDate::from_ymd_opt(2026, 1, 1)
            .unwrap()
            .and_hms_opt(6, 45, 0)
            .unwrap()
            .time(),
        zone: "Asia/Tokyo".into(),
    };
    let text = serde_json::to_string(&daily).unwrap();
    assert_eq!(
        text,
        r#"{"type":"daily","at":"06:45:00","zone":"Asia/Tokyo"}"#
    );
    assert_eq!(serde_json::from_str::<Recurrence>(&text).unwrap(), daily);
    let missed: Missed = serde_json::from_str(r#"{"policy":"run_all","max":5}"#).unwrap();
    assert_eq!(missed, Missed::RunAll { max: 5 });
}

#[test]
fn a_template_makes_one_keyed_task_per_slot_due_at_the_slot() {
    let template: TaskTemplate = serde_json::from_value(
        serde_json::json!({"kind": "report", "payload": {"n": 1}, "timeout_ms": 1500}),
    )
    .unwrap();
    assert_eq!(template.queue, crate::task::DEFAULT_QUEUE);
    assert_eq!(template.max_attempts, crate::task::DEFAULT_MAX_ATTEMPTS);
    assert_eq!(template.timeout, Some(Duration::from_millis(1500)));
    template.validate().unwrap();
    let slot = utc(2026, 3, 29, 1, 0);
    let task = template.task_for(7, slot);
    assert_eq!(task.run_at, Some(slot));
    assert_eq!(
        task.idempotency_key.as_deref(),
        Some("schedule:7:2026-03-29T01:00:00.000Z")
    );
    task.validate().unwrap();
    // The same slot always gives the same key; another slot or schedule, another key.
    assert_eq!(
        template.task_for(7, slot).idempotency_key,
        task.idempotency_key
    );
    assert_ne!(
        template
            .task_for(7, slot + TimeDelta::minutes(1))
            .idempotency_key,
        task.idempotency_key
    );
    assert_ne!(
        template.task_for(8, slot).idempotency_key,
        task.idempotency_key
    );
    let key = slot_key(i64::MAX, DateTime::<Utc>::MAX_UTC);
    assert!(key.chars().count() <= crate::task::MAX_NAME_LEN, "{key}");
    let empty = TaskTemplate {
        kind: " ".into(),
        ..template
    };
    assert_eq!(empty.validate(), Err(crate::InvalidTask::Empty("kind")));
    let typo =
        serde_json::from_value::<TaskTemplate>(serde_json::json!({"kind": "k", "priorty": 3}));
    assert!(typo.unwrap_err().to_string().contains("priorty"));
}

fn spec(recurrence: Recurrence) -> ScheduleSpec {
    ScheduleSpec {
        name: "nightly".into(),
        recurrence,
        template: serde_json::from_value(serde_json::json!({"kind": "report"})).unwrap(),
        missed: Missed::RunLatest,
        overlap: Overlap::Allow,
        enabled: true,
    }
}

fn every_minute() -> Recurrence {
    Recurrence::Cron {
        expr: "* * * * *".into(),
        zone: "UTC".into(),
    }
}

#[test]
fn a_plan_fires_the_due_slots_and_moves_the_place_to_now() {
    let slots = every_minute().slots().unwrap();
    let now = utc(2026, 3, 1, 10, 3) + TimeDelta::seconds(20);
    let p = plan(&slots, utc(2026, 3, 1, 10, 1), now, Missed::RunLatest);
    assert_eq!(p.slots, [utc(2026, 3, 1, 10, 2), utc(2026, 3, 1, 10, 3)]);
    assert_eq!(p.covered_until, now);
    assert_eq!(p.next_run_at, Some(utc(2026, 3, 1, 10, 4)));
    // A second firing at the same time finds nothing left.
    let again = plan(&slots, p.covered_until, now, Missed::RunLatest);
    assert!(again.slots.is_empty());
    assert_eq!(again.next_run_at, p.next_run_at);
}

#[test]
fn enabling_or_a_new_recurrence_starts_from_the_edit_and_other_edits_keep_the_place() {
    let old = spec(every_minute());
    let covered = utc(2026, 3, 1, 9, 0);
    let now = utc(2026, 3, 1, 10, 0);
    let hourly = Recurrence::Cron {
        expr: "0 * * * *".into(),
        zone: "UTC".into(),
    };
    let recur = ScheduleEdit {
        recurrence: Some(hourly),
        ..Default::default()
    };
    assert_eq!(recur.covered_from(&old, covered, now), now);
    let same = ScheduleEdit {
        recurrence: Some(every_minute()),
        ..Default::default()
    };
    assert_eq!(same.covered_from(&old, covered, now), covered);
    let priority = ScheduleEdit {
        overlap: Some(Overlap::Skip),
        ..Default::default()
    };
    assert_eq!(priority.covered_from(&old, covered, now), covered);
    let disabled = ScheduleSpec {
        enabled: false,
        ..old.clone()
    };
    let enable = ScheduleEdit {
        enabled: Some(true),
        ..Default::default()
    };
    assert_eq!(enable.covered_from(&disabled, covered, now), now);
    assert_eq!(enable.covered_from(&old, covered, now), covered);
    let slots = every_minute().slots().unwrap();
    assert_eq!(next_run(&slots, false, now), None);
    assert_eq!(next_run(&slots, true, now), Some(utc(2026, 3, 1, 10, 1)));
}

#[test]
fn an_edit_between_two_specs_holds_only_what_differs_and_applies_back() {
    let old = spec(every_minute());
    let new = ScheduleSpec {
        overlap: Overlap::Skip,
        enabled: false,
        ..old.clone()
    };
    let edit = ScheduleEdit::between(&old, &new);
    assert_eq!(edit.overlap, Some(Overlap::Skip));
    assert_eq!(edit.enabled, Some(false));
    assert!(edit.recurrence.is_none() && edit.template.is_none() && edit.name.is_none());
    assert_eq!(edit.apply(&old), new);
    assert!(ScheduleEdit::between(&old, &old).is_empty());
}

#[test]
fn overlap_skip_waits_for_the_previous_task_to_finish() {
    assert!(Overlap::Skip.fires(None));
    for state in [
        TaskState::Succeeded,
        TaskState::Failed,
        TaskState::Cancelled,
    ] {
        assert!(Overlap::Skip.fires(Some(state)));
    }
    for state in [TaskState::Held, TaskState::Pending, TaskState::Running] {
        assert!(!Overlap::Skip.fires(Some(state)));
        assert!(Overlap::Allow.fires(Some(state)));
    }
}

#[test]
fn a_spec_is_checked_part_by_part() {
    assert!(spec(every_minute()).validate().is_ok());
    let mut bad = spec(every_minute());
    bad.name = " ".into();
    assert!(matches!(bad.validate(), Err(InvalidSchedule::Name(_))));
    let mut bad = spec(every_minute());
    bad.name = "42".into();
    assert!(matches!(
        bad.validate(),
        Err(InvalidSchedule::NumericName(_))
    ));
    let mut bad = spec(every_minute());
    bad.missed = Missed::RunAll { max: 0 };
    assert_eq!(bad.validate().unwrap_err(), InvalidSchedule::MissedMax(0));
    let mut bad = spec(every_minute());
    bad.template.max_attempts = 0;
    assert!(matches!(bad.validate(), Err(InvalidSchedule::Template(_))));
    let bad = spec(Recurrence::Cron {
        expr: "* * *".into(),
        zone: "UTC".into(),
    });
    assert!(matches!(
        bad.validate(),
        Err(InvalidSchedule::Recurrence(_))
    ));
    let unknown = serde_json::from_value::<ScheduleSpec>(serde_json::json!({
        "name": "x", "recurrence": {"type": "every", "every_ms": 1000, "start": "2026-01-01T00:00:00Z"},
        "template": {"kind": "k"}, "missd": {"policy": "skip"}
    }));
    assert!(unknown.is_err());
}

#[test]
fn upcoming_fire_times_read_in_the_schedules_own_zone() {
    let r = Recurrence::Daily {
        at: NaiveTime::from_hms_opt(2, 30, 0).unwrap(),
        zone: "Europe/Berlin".into(),
    };
    let next = r.slots().unwrap().next_after(utc(2030, 3, 29, 12, 0));
    let times: Vec<String> = upcoming(&r, next, 3)
        .iter()
        .map(|t| t.to_rfc3339())
        .collect();
    assert_eq!(
        times,
        [
            "2030-03-30T02:30:00+01:00",
            "2030-03-31T03:00:00+02:00",
            "2030-04-01T02:30:00+02:00"
        ]
    );
    assert!(
        upcoming(&r, None, 5).is_empty(),
        "a disabled schedule has none"
    );
}
