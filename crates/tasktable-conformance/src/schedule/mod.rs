//! Recurring schedules: saved, edited and refused like any stored thing; fired once per
//! slot however many schedulers race; across daylight-saving changes; under each
//! missed-slot and overlap policy.

pub mod crud;
pub mod firing;
pub mod policies;
pub mod zones;

use chrono::{DateTime, Utc};
use serde_json::json;
use tasktable_core::schedule::{Missed, Overlap, Recurrence, ScheduleSpec};
use tasktable_store::*;

/// A schedule of `recurrence` that submits `report` tasks to the `reports` queue.
pub fn spec(name: &str, recurrence: Recurrence) -> ScheduleSpec {
    ScheduleSpec {
        name: name.into(),
        recurrence,
        template: serde_json::from_value(json!({
            "kind": "report", "queue": "reports", "payload": {"from": name}
        }))
        .expect("template"),
        missed: Missed::RunLatest,
        overlap: Overlap::Allow,
        enabled: true,
    }
}

pub fn cron(expr: &str, zone: &str) -> Recurrence {
    Recurrence::Cron {
        expr: expr.into(),
        zone: zone.into(),
    }
}

pub async fn create_at(store: &dyn Store, spec: ScheduleSpec, now: DateTime<Utc>) -> Schedule {
    store
        .schedule_create(CreateScheduleParams {
            actor: tasktable_core::Actor::rust(),
            spec,
            on_existing: OnExisting::Refuse,
            now: Some(now),
        })
        .await
        .expect("create schedule")
}

pub async fn run_due_at(store: &dyn Store, now: DateTime<Utc>) -> Vec<Fired> {
    store
        .schedule_run_due(RunDueParams {
            limit: 100,
            now: Some(now),
        })
        .await
        .expect("run due schedules")
}

/// The slots of the tasks `schedule_id` fired, oldest first, each task checked to carry
/// the schedule and its slot.
pub async fn fired_slots(store: &dyn Store, schedule_id: i64) -> Vec<DateTime<Utc>> {
    let mut slots = Vec::new();
    let mut after = None;
    loop {
        let page = store
            .task_list(ListParams {
                filter: TaskFilter::default().schedule(schedule_id),
                after,
                limit: 500,
                light: true,
            })
            .await
            .expect("list fired tasks");
        for t in &page.tasks {
            assert_eq!(t.schedule_id, Some(schedule_id), "task {}", t.id);
            let slot = t.slot_at.expect("a fired task records its slot");
            assert_eq!(t.run_at, slot, "a fired task is due at its slot");
            assert_eq!(
                t.idempotency_key.as_deref(),
                Some(tasktable_core::schedule::slot_key(schedule_id, slot).as_str())
            );
            slots.push(slot);
        }
        match page.next {
            Some(n) => after = Some(n),
            None => break,
        }
    }
    slots.sort();
    slots
}
