//! Firing: once per slot however many schedulers race, edits from the next slot, nothing
//! while disabled, and "fire now" beside the slots.

use super::{create_at, cron, fired_slots, run_due_at, spec};
use crate::pinned::at;
use crate::Backend;
use chrono::{DateTime, Utc};
use std::sync::Arc;
use tasktable_core::schedule::{Missed, Recurrence, ScheduleEdit};
use tasktable_core::TaskState;
use tasktable_store::*;

pub async fn racing_schedulers_fire_each_slot_exactly_once(db: &impl Backend) {
    let setup = db.store().await;
    let every = |ms: u64| Recurrence::Every {
        every_ms: ms,
        start: at(0),
    };
    let mut schedules = Vec::new();
    for (name, ms) in [
        ("every-10s", 10_000),
        ("every-25s", 25_000),
        ("every-60s", 60_000),
    ] {
        let mut s = spec(name, every(ms));
        s.missed = Missed::RunAll { max: 1000 };
        schedules.push(create_at(&*setup, s, at(0)).await);
    }
    let mut minutely = spec("minutely", cron("* * * * *", "UTC"));
    minutely.missed = Missed::RunAll { max: 1000 };
    schedules.push(create_at(&*setup, minutely, at(0)).await);

    // Five schedulers, each with a store of its own, each stepping through 20 minutes at
    // its own pace and offset: at any moment some are ahead of others.
    let end = at(1200);
    let mut runs = Vec::new();
    for n in 0..5i64 {
        let store: Arc<dyn Store> = db.store().await;
        runs.push(tokio::spawn(async move {
            let mut fired = 0;
            let mut t = at(n);
            while t <= end {
                for f in run_due_at(&*store, t).await {
                    fired += f.tasks.iter().filter(|t| t.created).count();
                }
                t += chrono::Duration::seconds(3 + n);
            }
            // Everyone ends at the same instant, so every slot up to it is due.
            for f in run_due_at(&*store, end).await {
                fired += f.tasks.iter().filter(|t| t.created).count();
            }
            fired
        }));
    }
    let mut created = 0;
    for r in runs {
        created += r.await.expect("scheduler");
    }
    let mut expected_total = 0;
    for s in &schedules {
        let slots = s.spec.recurrence.slots().unwrap();
        let want: Vec<DateTime<Utc>> = slots.between(at(0), end, usize::MAX);
        let got = fired_slots(&*setup, s.id).await;
        assert_eq!(
            got, want,
            "{}: one task per slot, none missing",
            s.spec.name
        );
        expected_total += want.len();
        let now = setup
            .schedule_get(ScheduleRef::Id(s.id))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(now.last_slot_at, want.last().copied(), "{}", s.spec.name);
        assert_eq!(now.next_run_at, slots.next_after(end), "{}", s.spec.name);
    }
    assert_eq!(created, expected_total, "each slot reported created once");
    let all = setup
        .task_count(CountParams {
            filter: TaskFilter::default(),
            cap: 100_000,
        })
        .await
        .unwrap();
    assert_eq!(all as usize, expected_total, "no task beside the slots'");
}

pub async fn edits_take_effect_from_the_next_slot_and_disabled_schedules_fire_nothing(
    db: &impl Backend,
) {
    let s = db.store().await;
    let sched = create_at(&*s, spec("edited", cron("* * * * *", "UTC")), at(0)).await;
    run_due_at(&*s, at(125)).await;
    assert_eq!(fired_slots(&*s, sched.id).await, [at(60), at(120)]);

    // From every minute to every five minutes at 130 s: the old 180 s slot never fires,
    // the new recurrence's first slot after the edit (300 s) does.
    s.schedule_edit(EditScheduleParams {
        actor: tasktable_core::Actor::rust(),
        schedule: ScheduleRef::Id(sched.id),
        edit: ScheduleEdit {
            recurrence: Some(cron("*/5 * * * *", "UTC")),
            ..Default::default()
        },
        now: Some(at(130)),
    })
    .await
    .unwrap();
    run_due_at(&*s, at(200)).await;
    run_due_at(&*s, at(301)).await;
    assert_eq!(fired_slots(&*s, sched.id).await, [at(60), at(120), at(300)]);

    // A template edit applies to the next task fired.
    let mut template = sched.spec.template.clone();
    template.priority = 7;
    s.schedule_edit(EditScheduleParams {
        actor: tasktable_core::Actor::rust(),
        schedule: ScheduleRef::Id(sched.id),
        edit: ScheduleEdit {
            template: Some(template),
            ..Default::default()
        },
        now: Some(at(302)),
    })
    .await
    .unwrap();
    let fired = run_due_at(&*s, at(600)).await;
    let task = s
        .task_get(fired[0].tasks[0].task_id)
        .await
        .unwrap()
        .unwrap();
    assert_eq!((task.priority, task.slot_at), (7, Some(at(600))));

    // Disabled from 610 s to 1810 s: nothing fires, even under run_all, and enabling
    // starts from the enable.
    let disable = |enabled: bool, secs: i64| {
        let s = s.clone();
        async move {
            s.schedule_edit(EditScheduleParams {
                actor: tasktable_core::Actor::rust(),
                schedule: ScheduleRef::Id(sched.id),
                edit: ScheduleEdit {
                    enabled: Some(enabled),
                    missed: Some(Missed::RunAll { max: 100 }),
                    ..Default::default()
                },
                now: Some(at(secs)),
            })
            .await
            .unwrap()
        }
    };
    disable(false, 610).await;
    for secs in [900, 1200, 1500, 1800] {
        assert!(run_due_at(&*s, at(secs)).await.is_empty(), "at {secs}");
    }
    let enabled = disable(true, 1810).await;
    assert_eq!(enabled.next_run_at, Some(at(2100)));
    run_due_at(&*s, at(2100)).await;
    assert_eq!(
        fired_slots(&*s, sched.id).await,
        [at(60), at(120), at(300), at(600), at(2100)]
    );
}

pub async fn fire_now_submits_at_once_and_leaves_the_slots_alone(db: &impl Backend) {
    let s = db.store().await;
    let mut off = spec("manual", cron("0 0 1 1 *", "UTC"));
    off.enabled = false;
    let sched = create_at(&*s, off, at(0)).await;
    let fired = s
        .schedule_fire_now(FireNowParams {
            actor: tasktable_core::Actor::rust(),
            schedule: ScheduleRef::Name("manual".into()),
            now: Some(at(42)),
        })
        .await
        .unwrap();
    assert_eq!(fired.schedule_id, sched.id);
    assert_eq!(fired.tasks.len(), 1);
    assert!(fired.tasks[0].created);
    assert_eq!(fired.tasks[0].slot_at, at(42));
    let task = s.task_get(fired.tasks[0].task_id).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Pending);
    assert_eq!(
        (task.kind.as_str(), task.queue.as_str()),
        ("report", "reports")
    );
    assert_eq!(task.run_at, at(42), "due at once");
    let after = s
        .schedule_get(ScheduleRef::Id(sched.id))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        after.covered_until, sched.covered_until,
        "its place is unchanged"
    );
    assert_eq!(after.next_run_at, None, "still disabled");
    assert_eq!(after.last_task_id, Some(task.id));
    assert_eq!(fired_slots(&*s, sched.id).await, [at(42)]);
}
