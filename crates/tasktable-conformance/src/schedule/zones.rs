//! Daylight-saving changes, fired through the store by a scheduler stepping through each
//! change night: a wall-clock time the change skips fires once, at the end of the gap; a
//! wall-clock time the change repeats fires once, at its first occurrence (the rule of
//! `tasktable_core::schedule`). Europe/Berlin and America/New_York, both changes each, in
//! 2030.

use super::{create_at, cron, fired_slots, run_due_at, spec};
use crate::Backend;
use chrono::{DateTime, Duration, TimeZone, Utc};
use chrono_tz::Tz;
use tasktable_core::schedule::{Missed, Recurrence};

/// Fires `recurrences` (name, zone, recurrence) stepping every 5 minutes from noon UTC
/// the day before `night` to noon UTC the day after, and returns each one's fired slots
/// as local times (`HH:MM TZ`).
async fn through_the_night(
    db: &impl Backend,
    night: (i32, u32, u32),
    recurrences: Vec<(&str, &str, Recurrence)>,
) -> Vec<Vec<String>> {
    let s = db.store().await;
    let (y, m, d) = night;
    let start = Utc.with_ymd_and_hms(y, m, d, 12, 0, 0).unwrap() - Duration::days(1);
    let mut schedules = Vec::new();
    for (name, zone, recurrence) in &recurrences {
        let mut sp = spec(&format!("{name}-{m}-{d}"), recurrence.clone());
        // The scheduler looks every 5 minutes, so slots are up to 5 minutes late.
        sp.missed = Missed::RunAll { max: 1000 };
        schedules.push((
            create_at(&*s, sp, start).await.id,
            zone.parse::<Tz>().unwrap(),
        ));
    }
    let mut t = start;
    while t <= start + Duration::days(2) {
        run_due_at(&*s, t).await;
        t += Duration::minutes(5);
    }
    let mut out = Vec::new();
    for (id, zone) in schedules {
        let local =
            |slot: &DateTime<Utc>| slot.with_timezone(&zone).format("%d %H:%M %Z").to_string();
        out.push(fired_slots(&*s, id).await.iter().map(local).collect());
    }
    out
}

fn daily(at: &str, zone: &str) -> Recurrence {
    Recurrence::Daily {
        at: at.parse().unwrap(),
        zone: zone.into(),
    }
}

/// The slots of an hourly `:30` schedule between two local hours of the change night.
fn night_hours(slots: &[String], from: &str, to: &str) -> Vec<String> {
    slots
        .iter()
        .filter(|s| s.as_str() >= from && s.as_str() <= to)
        .cloned()
        .collect()
}

pub async fn berlin_changes_neither_lose_nor_double_a_slot(db: &impl Backend) {
    let zone = "Europe/Berlin";
    for (night, day) in [((2030, 3, 31), "31"), ((2030, 10, 27), "27")] {
        let fired = through_the_night(
            db,
            night,
            vec![
                ("daily-0230", zone, daily("02:30:00", zone)),
                ("hourly-30", zone, cron("30 * * * *", zone)),
            ],
        )
        .await;
        let on_the_night: Vec<&String> = fired[0].iter().filter(|s| s.starts_with(day)).collect();
        let hours = night_hours(&fired[1], &format!("{day} 00"), &format!("{day} 04"));
        if day == "31" {
            // 02:00 to 03:00 does not exist: 02:30 fires at the gap's end.
            assert_eq!(on_the_night, ["31 03:00 CEST"]);
            assert_eq!(
                hours,
                [
                    "31 00:30 CET",
                    "31 01:30 CET",
                    "31 03:00 CEST",
                    "31 03:30 CEST"
                ]
            );
        } else {
            // 02:00 to 03:00 happens twice: 02:30 fires at its first occurrence.
            assert_eq!(on_the_night, ["27 02:30 CEST"]);
            assert_eq!(
                hours,
                [
                    "27 00:30 CEST",
                    "27 01:30 CEST",
                    "27 02:30 CEST",
                    "27 03:30 CET"
                ]
            );
        }
        assert_eq!(fired[0].len(), 2, "one daily slot a day: {:?}", fired[0]);
        // One slot per :30 wall-clock reading in the 48 hours: 49 readings when the clocks
        // go forward (one of them in the gap), 47 when they go back.
        let want = if day == "31" { 49 } else { 47 };
        assert_eq!(fired[1].len(), want, "{:?}", fired[1]);
    }
}

pub async fn new_york_changes_neither_lose_nor_double_a_slot(db: &impl Backend) {
    let zone = "America/New_York";
    for (night, day) in [((2030, 3, 10), "10"), ((2030, 11, 3), "03")] {
        let fired = through_the_night(
            db,
            night,
            vec![
                ("daily-0230", zone, daily("02:30:00", zone)),
                ("daily-0130", zone, daily("01:30:00", zone)),
                ("every-15", zone, cron("*/15 * * * *", zone)),
            ],
        )
        .await;
        let on = |i: usize| -> Vec<String> {
            fired[i]
                .iter()
                .filter(|s| s.starts_with(day))
                .cloned()
                .collect()
        };
        if day == "10" {
            // 02:00 to 03:00 does not exist.
            assert_eq!(on(0), ["10 03:00 EDT"]);
            assert_eq!(on(1), ["10 01:30 EST"]);
            let quarter = night_hours(&fired[2], "10 01:30", "10 03:16");
            assert_eq!(
                quarter,
                [
                    "10 01:30 EST",
                    "10 01:45 EST",
                    "10 03:00 EDT",
                    "10 03:15 EDT"
                ],
                "the four quarters of the skipped hour are one slot at its end"
            );
        } else {
            // 01:00 to 02:00 happens twice.
            assert_eq!(on(0), ["03 02:30 EST"]);
            assert_eq!(on(1), ["03 01:30 EDT"]);
            let quarter = night_hours(&fired[2], "03 00:45", "03 02:01");
            assert_eq!(
                quarter,
                [
                    "03 00:45 EDT",
                    "03 01:00 EDT",
                    "03 01:15 EDT",
                    "03 01:30 EDT",
                    "03 01:45 EDT",
                    "03 02:00 EST"
                ],
                "the repeated hour fires once"
            );
        }
        for (i, slots) in fired.iter().enumerate().take(2) {
            assert_eq!(slots.len(), 2, "schedule {i}: one slot a day: {slots:?}");
        }
    }
}
