//! Operator changes recorded with their actor and what they changed.

use super::{alice, all, bob};
use crate::pinned::{at, claim, submit_at, t0};
use crate::schedule::{create_at, cron, run_due_at, spec};
use crate::Backend;
use serde_json::json;
use tasktable_core::policy::QueuePolicy;
use tasktable_core::{Actor, ActorKind, EventKind, NewTask, TaskState};
use tasktable_store::*;

async fn change(s: &dyn Store, actor: Actor, target: Target, change: Change) -> StoreResult<u64> {
    s.task_update(UpdateParams {
        target,
        change,
        actor,
        now: Some(at(5)),
        action: None,
    })
    .await
}

pub async fn task_changes_are_recorded_with_their_actor_and_what_they_changed(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..4)
        .map(|i| {
            NewTask::new("mail", json!({"to": i}))
                .queue("mail")
                .priority(1)
        })
        .collect();
    let ids = submit_at(&*s, tasks, t0()).await;
    change(
        &*s,
        alice(),
        Target::Id(ids[0]),
        Change::SetPriority { priority: 7 },
    )
    .await
    .unwrap();
    change(&*s, bob(), Target::Id(ids[1]), Change::Cancel)
        .await
        .unwrap();
    let payload = json!({"to": "someone else"});
    change(
        &*s,
        alice(),
        Target::Id(ids[2]),
        Change::EditPayload {
            payload: payload.clone(),
        },
    )
    .await
    .unwrap();
    let held = TaskFilter::default()
        .queue("mail")
        .state(TaskState::Pending);
    let n = change(&*s, bob(), Target::Filter(held.clone()), Change::Hold)
        .await
        .unwrap();
    assert_eq!(n, 3, "three pending tasks held");

    let log = all(&*s, EventFilter::default(), 2).await;
    assert_eq!(
        log.len(),
        4,
        "one event per change of one task, one for the bulk action: {log:#?}"
    );
    let action = &log[0];
    assert_eq!(
        (
            action.event,
            action.task_id,
            action.tasks,
            action.actor.clone()
        ),
        (EventKind::Held, None, Some(3), bob())
    );
    assert_eq!(action.queue.as_deref(), Some("mail"));
    assert_eq!(
        action.detail,
        json!({"filter": {"queue": "mail", "states": ["pending"]}})
    );
    let key = action.action.clone().expect("the action's key");
    assert!(log.windows(2).all(|w| w[0].id > w[1].id), "newest first");
    let first = log.last().unwrap();
    assert_eq!(first.event, EventKind::Edited);
    assert_eq!(first.task_id, Some(ids[0]));
    assert_eq!(first.queue.as_deref(), Some("mail"));
    assert_eq!(first.kind.as_deref(), Some("mail"));
    assert_eq!(first.actor, alice());
    assert_eq!(first.at, at(5));
    assert_eq!(first.detail, json!({"priority": {"old": 1, "new": 7}}));

    let of = |id| {
        all(
            &*s,
            EventFilter {
                task_id: Some(id),
                ..Default::default()
            },
            100,
        )
    };
    let cancelled = of(ids[1]).await;
    assert_eq!(cancelled.len(), 1);
    assert_eq!(cancelled[0].event, EventKind::Cancelled);
    assert_eq!(cancelled[0].actor.kind, ActorKind::Dashboard);
    assert_eq!(
        cancelled[0].detail,
        json!({"state": {"old": "pending", "new": "cancelled"}})
    );
    let edited = of(ids[2]).await;
    assert_eq!(edited[1].event, EventKind::Edited);
    assert_eq!(
        edited[1].detail,
        json!({"payload": {"old": {"to": 2}, "new": payload}})
    );
    assert_eq!(edited[0].event, EventKind::Held, "newest first");
    assert_eq!(
        edited[0].detail["state"],
        json!({"old": "pending", "new": "held"})
    );
    assert_eq!(
        edited[0].action.as_deref(),
        Some(key.as_str()),
        "a task's row of a bulk change names its action, whose row holds the filter"
    );
    let of_action = all(
        &*s,
        EventFilter {
            action: Some(key.clone()),
            ..Default::default()
        },
        100,
    )
    .await;
    assert_eq!(of_action.len(), 4, "its own row and one per task held");

    // The task's own history, oldest first.
    let history = s.task_events(ids[2]).await.unwrap();
    let kinds: Vec<EventKind> = history.iter().map(|e| e.event).collect();
    assert_eq!(kinds, [EventKind::Edited, EventKind::Held]);

    // The audit's filters.
    let by_bob = all(
        &*s,
        EventFilter {
            actor: Some("bob".into()),
            ..Default::default()
        },
        100,
    )
    .await;
    assert_eq!(by_bob.len(), 2, "a cancel and the bulk action");
    assert!(by_bob.iter().all(|e| e.actor == bob()));
    let dashboard = EventFilter {
        actor_kind: Some(ActorKind::Dashboard),
        events: vec![EventKind::Cancelled],
        ..Default::default()
    };
    assert_eq!(all(&*s, dashboard, 100).await.len(), 1);
    let other_queue = EventFilter {
        queue: Some("other".into()),
        ..Default::default()
    };
    assert!(all(&*s, other_queue, 100).await.is_empty());
    let later = EventFilter {
        from: Some(at(6)),
        ..Default::default()
    };
    assert!(all(&*s, later, 100).await.is_empty());
    let window = EventFilter {
        from: Some(at(5)),
        to: Some(at(6)),
        ..Default::default()
    };
    assert_eq!(all(&*s, window, 100).await.len(), 4);
}

pub async fn refused_changes_record_nothing(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_at(&*s, vec![NewTask::new("job", json!({}))], t0()).await[0];
    let refused = change(&*s, alice(), Target::Id(id), Change::Release).await;
    assert!(refused.is_err(), "a pending task cannot be released");
    let missing = change(&*s, alice(), Target::Id(id + 1000), Change::Cancel).await;
    assert!(missing.is_err());
    let none = TaskFilter::default().state(TaskState::Failed);
    assert_eq!(
        change(&*s, alice(), Target::Filter(none), Change::Retry)
            .await
            .unwrap(),
        0
    );
    let refused_batch = s
        .event_list(EventListParams {
            filter: EventFilter::default(),
            before: None,
            limit: MAX_EVENT_LIST + 1,
        })
        .await;
    assert!(matches!(refused_batch, Err(StoreError::InvalidInput(_))));
    // Changes to what already is change nothing and record nothing.
    change(
        &*s,
        alice(),
        Target::Id(id),
        Change::SetPriority { priority: 0 },
    )
    .await
    .unwrap();
    for _ in 0..2 {
        s.queue_set_paused(QueuePauseParams {
            queue: "default".into(),
            paused: false,
            actor: alice(),
        })
        .await
        .unwrap();
    }
    assert!(all(&*s, EventFilter::default(), 100).await.is_empty());

    // Payloads too large to keep in the log whole are compared whole: two different ones
    // of one size are two edits.
    for c in ['a', 'b'] {
        let payload = json!({"blob": c.to_string().repeat(9000)});
        change(
            &*s,
            alice(),
            Target::Id(id),
            Change::EditPayload { payload },
        )
        .await
        .unwrap();
    }
    let edits = all(&*s, EventFilter::default(), 100).await;
    assert_eq!(edits.len(), 2);
    assert_eq!(
        edits[0].detail["payload"],
        json!({"old": {"omitted_bytes": 9011}, "new": {"omitted_bytes": 9011}})
    );
}

pub async fn queue_worker_and_schedule_changes_are_recorded(db: &impl Backend) {
    let s = db.store().await;
    s.queue_set_paused(QueuePauseParams {
        queue: "mail".into(),
        paused: true,
        actor: alice(),
    })
    .await
    .unwrap();
    s.queue_set_paused(QueuePauseParams {
        queue: "mail".into(),
        paused: false,
        actor: bob(),
    })
    .await
    .unwrap();
    let policy = QueuePolicy {
        max_running: Some(3),
        ..Default::default()
    };
    s.queue_set_policy(QueuePolicyParams {
        queue: "mail".into(),
        policy: policy.clone(),
        actor: alice(),
    })
    .await
    .unwrap();
    s.worker_beat(WorkerBeatParams {
        facts: crate::workers::facts("w9"),
        address: None,
        starting: true,
        now: None,
        owner: None,
        max_live_per_owner: None,
    })
    .await
    .unwrap();
    for draining in [true, false] {
        s.worker_set_draining(WorkerDrainParams {
            id: "w9".into(),
            draining,
            actor: alice(),
        })
        .await
        .unwrap();
    }
    let unknown = s
        .worker_set_draining(WorkerDrainParams {
            id: "nobody".into(),
            draining: true,
            actor: alice(),
        })
        .await
        .unwrap();
    assert!(unknown.is_none(), "no such worker, and no event for it");

    let log = all(&*s, EventFilter::default(), 100).await;
    let seen: Vec<(EventKind, &str)> = log
        .iter()
        .rev()
        .map(|e| (e.event, e.actor.name.as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            (EventKind::QueuePaused, "alice"),
            (EventKind::QueueResumed, "bob"),
            (EventKind::PolicySet, "alice"),
            (EventKind::WorkerDrained, "alice"),
            (EventKind::WorkerReleased, "alice"),
        ]
    );
    assert!(log.iter().all(|e| e.task_id.is_none()));
    let set = &log[2];
    assert_eq!(set.queue.as_deref(), Some("mail"));
    assert_eq!(set.detail["policy"]["new"]["max_running"], json!(3));
    assert_eq!(log[0].worker_id.as_deref(), Some("w9"));

    // Schedules: an operator's create, edit, fire and delete; the scheduler's own firing.
    let nightly = create_at(&*s, spec("nightly", cron("0 3 * * *", "UTC")), t0()).await;
    s.schedule_edit(EditScheduleParams {
        schedule: ScheduleRef::Id(nightly.id),
        edit: tasktable_core::schedule::ScheduleEdit {
            enabled: Some(false),
            ..Default::default()
        },
        actor: bob(),
        now: Some(t0()),
    })
    .await
    .unwrap();
    let fired = s
        .schedule_fire_now(FireNowParams {
            schedule: ScheduleRef::Id(nightly.id),
            actor: alice(),
            now: Some(at(10)),
        })
        .await
        .unwrap();
    let hourly = create_at(&*s, spec("hourly", cron("0 * * * *", "UTC")), t0()).await;
    let by_scheduler = run_due_at(&*s, at(3600)).await;
    assert_eq!(by_scheduler.len(), 1);
    s.schedule_delete(DeleteScheduleParams {
        schedule: ScheduleRef::Id(nightly.id),
        actor: bob(),
    })
    .await
    .unwrap();
    let schedule_events = EventFilter {
        events: vec![
            EventKind::ScheduleCreated,
            EventKind::ScheduleEdited,
            EventKind::ScheduleFired,
            EventKind::ScheduleDeleted,
        ],
        ..Default::default()
    };
    let log = all(&*s, schedule_events, 100).await;
    let seen: Vec<(EventKind, Option<i64>, String)> = log
        .iter()
        .rev()
        .map(|e| (e.event, e.schedule_id, e.actor.to_string()))
        .collect();
    let rust = Actor::rust().to_string();
    assert_eq!(
        seen,
        [
            (EventKind::ScheduleCreated, Some(nightly.id), rust.clone()),
            (
                EventKind::ScheduleEdited,
                Some(nightly.id),
                bob().to_string()
            ),
            (
                EventKind::ScheduleFired,
                Some(nightly.id),
                alice().to_string()
            ),
            (EventKind::ScheduleCreated, Some(hourly.id), rust),
            (
                EventKind::ScheduleFired,
                Some(hourly.id),
                "system:scheduler".into()
            ),
            (
                EventKind::ScheduleDeleted,
                Some(nightly.id),
                bob().to_string()
            ),
        ]
    );
    assert_eq!(
        log[4].detail,
        json!({"name": "nightly", "fields": ["enabled"]})
    );
    assert_eq!(
        log[3].task_id,
        Some(fired.tasks[0].task_id),
        "a firing names its task"
    );
    assert_eq!(log[1].task_id, Some(by_scheduler[0].tasks[0].task_id));
    let fired_task = s.task_events(fired.tasks[0].task_id).await.unwrap();
    assert_eq!(
        fired_task.len(),
        1,
        "the task's history says where it came from"
    );
    assert_eq!(fired_task[0].event, EventKind::ScheduleFired);
    let claimed = claim(&*s, &["report"], 1, at(3600)).await;
    assert!(
        claimed.is_empty(),
        "the reports queue is not the default queue"
    );
}

pub async fn a_task_keeps_who_submitted_it(db: &impl Backend) {
    let s = db.store().await;
    let ids = submit_at(
        &*s,
        vec![
            NewTask::new("mail", json!({})).created_by(alice()),
            NewTask::new("mail", json!({})),
        ],
        t0(),
    )
    .await;
    let task = s.task_get(ids[0]).await.unwrap().unwrap();
    assert_eq!(task.created_by, Some(alice()));
    let unknown = s.task_get(ids[1]).await.unwrap().unwrap();
    assert_eq!(unknown.created_by, None);
    let timeline = timeline(&task, &[], &s.task_events(ids[0]).await.unwrap(), &[]);
    assert_eq!(
        (timeline[0].event.as_str(), &timeline[0].actor),
        ("submitted", &Some(alice()))
    );
    // A schedule's tasks are the scheduler's, or the operator's who fired one.
    let hourly = create_at(&*s, spec("hourly", cron("0 * * * *", "UTC")), t0()).await;
    let by_clock = run_due_at(&*s, at(3600)).await[0].tasks[0].task_id;
    let by_hand = s
        .schedule_fire_now(FireNowParams {
            schedule: ScheduleRef::Id(hourly.id),
            actor: bob(),
            now: Some(at(3700)),
        })
        .await
        .unwrap()
        .tasks[0]
        .task_id;
    let by = |id| {
        let s = s.clone();
        async move { s.task_get(id).await.unwrap().unwrap().created_by }
    };
    assert_eq!(by(by_clock).await, Some(Actor::system("scheduler")));
    assert_eq!(by(by_hand).await, Some(bob()));
}
