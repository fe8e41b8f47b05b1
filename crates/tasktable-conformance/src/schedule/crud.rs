//! Saving, reading, editing and deleting schedules, and what each refuses.

use super::{create_at, cron, spec};
use crate::pinned::at;
use crate::Backend;
use serde_json::json;
use tasktable_core::schedule::{Missed, Overlap, Recurrence, ScheduleEdit, ScheduleSpec};
use tasktable_store::*;

pub async fn schedules_are_saved_read_edited_and_deleted(db: &impl Backend) {
    let s = db.store().await;
    let nightly = create_at(
        &*s,
        spec("nightly", cron("0 2 * * *", "Europe/Berlin")),
        at(0),
    )
    .await;
    assert_eq!(
        nightly.spec,
        spec("nightly", cron("0 2 * * *", "Europe/Berlin"))
    );
    assert_eq!(
        nightly.covered_until,
        at(0),
        "a new schedule starts from now"
    );
    // 2030-01-01 02:00 in Berlin is 01:00 UTC.
    assert_eq!(nightly.next_run_at, Some(at(3600)));
    assert_eq!((nightly.last_task_id, nightly.last_slot_at), (None, None));
    let every = Recurrence::Every {
        every_ms: 90_000,
        start: at(-30),
    };
    let mut paused = spec("paused", every.clone());
    paused.enabled = false;
    paused.missed = Missed::RunAll { max: 5 };
    paused.overlap = Overlap::Skip;
    let paused = create_at(&*s, paused, at(0)).await;
    assert_eq!(paused.next_run_at, None, "a disabled schedule is never due");

    let by_name = s
        .schedule_get(ScheduleRef::Name("paused".into()))
        .await
        .unwrap();
    assert_eq!(by_name.as_ref(), Some(&paused));
    assert_eq!(
        s.schedule_get(ScheduleRef::Id(nightly.id)).await.unwrap(),
        Some(nightly.clone())
    );
    let names: Vec<String> = s
        .schedule_list()
        .await
        .unwrap()
        .into_iter()
        .map(|x| x.spec.name)
        .collect();
    assert_eq!(names, ["nightly", "paused"], "listed by name");

    let edited = s
        .schedule_edit(EditScheduleParams {
            actor: tasktable_core::Actor::rust(),
            schedule: ScheduleRef::Id(paused.id),
            edit: ScheduleEdit {
                name: Some("every-90s".into()),
                enabled: Some(true),
                ..Default::default()
            },
            now: Some(at(100)),
        })
        .await
        .unwrap();
    assert_eq!(edited.spec.name, "every-90s");
    assert_eq!(
        edited.covered_until,
        at(100),
        "enabling starts from the edit"
    );
    assert_eq!(edited.next_run_at, Some(at(150)));
    assert_eq!(
        edited.spec.missed,
        Missed::RunAll { max: 5 },
        "other fields kept"
    );
    assert_eq!(edited.updated_at, at(100));

    s.schedule_delete(DeleteScheduleParams {
        schedule: ScheduleRef::Name("nightly".into()),
        actor: tasktable_core::Actor::rust(),
    })
    .await
    .unwrap();
    assert_eq!(
        s.schedule_get(ScheduleRef::Id(nightly.id)).await.unwrap(),
        None
    );
    assert!(matches!(
        s.schedule_delete(DeleteScheduleParams {
            schedule: ScheduleRef::Id(nightly.id),
            actor: tasktable_core::Actor::rust()
        })
        .await,
        Err(StoreError::ScheduleNotFound(_))
    ));
    assert_eq!(s.schedule_list().await.unwrap().len(), 1);
}

pub async fn bad_schedules_are_refused_and_change_nothing(db: &impl Backend) {
    let s = db.store().await;
    let kept = create_at(&*s, spec("kept", cron("*/5 * * * *", "UTC")), at(0)).await;
    let other = create_at(&*s, spec("other", cron("0 * * * *", "UTC")), at(0)).await;
    let mut bad_specs: Vec<(ScheduleSpec, &str)> = vec![
        (spec("kept", cron("* * * * *", "UTC")), "exists"),
        (spec("", cron("* * * * *", "UTC")), "name"),
        (spec(&"n".repeat(256), cron("* * * * *", "UTC")), "name"),
        (spec("bad-cron", cron("61 * * * *", "UTC")), "cron"),
        (spec("bad-fields", cron("* * *", "UTC")), "cron"),
        (spec("bad-zone", cron("* * * * *", "Mars/Olympus")), "zone"),
        (
            spec(
                "bad-interval",
                Recurrence::Every {
                    every_ms: 10,
                    start: at(0),
                },
            ),
            "interval",
        ),
    ];
    let mut bad = spec("bad-missed", cron("* * * * *", "UTC"));
    bad.missed = Missed::RunAll { max: 0 };
    bad_specs.push((bad, "missed"));
    let mut bad = spec("bad-template", cron("* * * * *", "UTC"));
    bad.template.max_attempts = 0;
    bad_specs.push((bad, "max_attempts"));
    let mut bad = spec("big-payload", cron("* * * * *", "UTC"));
    bad.template.payload = json!({"blob": "x".repeat(2 * 1024 * 1024)});
    bad_specs.push((bad, "payload"));
    for (spec, why) in bad_specs {
        let name = spec.name.clone();
        let err = s
            .schedule_create(CreateScheduleParams {
                actor: tasktable_core::Actor::rust(),
                spec,
                on_existing: OnExisting::Refuse,
                now: Some(at(1)),
            })
            .await
            .expect_err(&name);
        assert!(err.is_client_error(), "{name}: {err}");
        assert!(err.to_string().contains(why), "{name}: {err}");
    }
    let edit = |edit: ScheduleEdit| {
        let s = s.clone();
        async move {
            s.schedule_edit(EditScheduleParams {
                actor: tasktable_core::Actor::rust(),
                schedule: ScheduleRef::Id(kept.id),
                edit,
                now: Some(at(2)),
            })
            .await
        }
    };
    let taken = edit(ScheduleEdit {
        name: Some("other".into()),
        ..Default::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(taken, StoreError::ScheduleExists(_)), "{taken}");
    let zone = edit(ScheduleEdit {
        recurrence: Some(cron("* * * * *", "Nowhere/Land")),
        enabled: Some(false),
        ..Default::default()
    })
    .await
    .unwrap_err();
    assert!(matches!(zone, StoreError::InvalidSchedule(_)), "{zone}");
    let missing = s
        .schedule_edit(EditScheduleParams {
            actor: tasktable_core::Actor::rust(),
            schedule: ScheduleRef::Name("nobody".into()),
            edit: ScheduleEdit::default(),
            now: None,
        })
        .await
        .unwrap_err();
    assert!(
        matches!(missing, StoreError::ScheduleNotFound(_)),
        "{missing}"
    );
    assert!(matches!(
        s.schedule_fire_now(FireNowParams {
            actor: tasktable_core::Actor::rust(),
            schedule: ScheduleRef::Id(other.id + 1000),
            now: None
        })
        .await,
        Err(StoreError::ScheduleNotFound(_))
    ));
    let all = s.schedule_list().await.unwrap();
    assert_eq!(all, vec![kept, other], "nothing changed");
    let tasks = s
        .task_count(CountParams {
            filter: TaskFilter::default(),
            cap: 10,
        })
        .await
        .unwrap();
    assert_eq!(tasks, 0, "no task fired");
}

pub async fn declared_schedules_are_upserted_keeping_an_operators_disable(db: &impl Backend) {
    let s = db.store().await;
    let upsert = |spec: ScheduleSpec, secs: i64| {
        let s = s.clone();
        async move {
            s.schedule_create(CreateScheduleParams {
                actor: tasktable_core::Actor::rust(),
                spec,
                on_existing: OnExisting::Update,
                now: Some(at(secs)),
            })
            .await
            .unwrap()
        }
    };
    let first = upsert(spec("declared", cron("0 * * * *", "UTC")), 0).await;
    let same = upsert(spec("declared", cron("0 * * * *", "UTC")), 10).await;
    assert_eq!(same, first, "an unchanged declaration writes nothing");
    s.schedule_edit(EditScheduleParams {
        actor: tasktable_core::Actor::rust(),
        schedule: ScheduleRef::Id(first.id),
        edit: ScheduleEdit {
            enabled: Some(false),
            ..Default::default()
        },
        now: Some(at(20)),
    })
    .await
    .unwrap();
    let mut changed = spec("declared", cron("30 * * * *", "UTC"));
    changed.template.priority = 5;
    let after = upsert(changed.clone(), 30).await;
    assert_eq!(after.id, first.id);
    assert_eq!(after.spec.recurrence, changed.recurrence);
    assert_eq!(after.spec.template.priority, 5);
    assert!(
        !after.spec.enabled,
        "the operator's disable survives a restart"
    );
    assert_eq!(after.next_run_at, None);

    // Declarations racing at start-up, each process with a store of its own: one
    // schedule, however many processes start.
    let mut stores = Vec::new();
    for _ in 0..6 {
        stores.push(db.store().await);
    }
    let racers = stores.iter().map(|store| {
        store.schedule_create(CreateScheduleParams {
            actor: tasktable_core::Actor::rust(),
            spec: spec("raced", cron("0 * * * *", "UTC")),
            on_existing: OnExisting::Update,
            now: Some(at(40)),
        })
    });
    let ids: Vec<i64> = futures::future::join_all(racers)
        .await
        .into_iter()
        .map(|x| x.expect("a racing declaration succeeds").id)
        .collect();
    assert!(ids.iter().all(|id| *id == ids[0]), "{ids:?}");
    assert_eq!(s.schedule_list().await.unwrap().len(), 2);
}
