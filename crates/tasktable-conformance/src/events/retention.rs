//! A task's events go with the task; the rest go by age.

use super::{alice, all};
use crate::pinned::{at, claim, finish, ok, submit_at, t0};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{EventKind, NewTask, TaskState};
use tasktable_store::*;

const DAY: Duration = Duration::from_secs(86_400);

async fn edit_priority(s: &dyn Store, id: i64) {
    s.task_update(UpdateParams {
        target: Target::Id(id),
        change: Change::SetPriority { priority: 3 },
        actor: alice(),
        now: Some(at(1)),
        action: None,
    })
    .await
    .unwrap();
}

pub async fn a_tasks_events_are_deleted_or_archived_with_it_and_the_rest_pruned_by_age(
    db: &impl Backend,
) {
    let s = db.store().await;
    let tasks = (0..3)
        .map(|i| NewTask::new("job", json!({"i": i})))
        .collect();
    let ids = submit_at(&*s, tasks, t0()).await;
    for id in &ids {
        edit_priority(&*s, *id).await;
    }
    let claimed = claim(&*s, &["job"], 2, at(2)).await;
    assert_eq!(claimed.len(), 2);
    for t in &claimed {
        assert!(finish(&*s, t.lease(), ok(), t.attempt, at(3)).await);
    }
    s.queue_set_paused(QueuePauseParams {
        queue: "other".into(),
        paused: true,
        actor: alice(),
    })
    .await
    .unwrap();

    let purge = |archive| PurgeParams {
        state: TaskState::Succeeded,
        older_than: DAY,
        archive,
        limit: 1,
        dry_run: false,
        now: Some(at(3) + chrono::Duration::days(2)),
    };
    let purged = s.task_purge(purge(false)).await.unwrap();
    assert_eq!(purged.count, 1);
    let archived = s.task_purge(purge(true)).await.unwrap();
    assert_eq!(archived.count, 1);
    let (deleted_id, archived_id) = (claimed[0].id, claimed[1].id);

    assert!(
        s.task_events(deleted_id).await.unwrap().is_empty(),
        "deleted with it"
    );
    let kept = s.task_events(archived_id).await.unwrap();
    assert_eq!(kept.len(), 1, "archived with it");
    assert_eq!(kept[0].event, EventKind::Edited);
    assert_eq!(kept[0].actor, alice());
    let live: Vec<Option<i64>> = all(&*s, EventFilter::default(), 100)
        .await
        .iter()
        .map(|e| e.task_id)
        .collect();
    let pending = ids.iter().find(|id| !claimed.iter().any(|t| t.id == **id));
    assert_eq!(
        live,
        [None, pending.copied()],
        "the audit reads the live log"
    );

    // Events of no task go by age, in batches; a task's events stay with the task.
    let prune = |older_than, limit| EventPruneParams {
        older_than,
        limit,
        now: None,
    };
    assert_eq!(s.event_prune(prune(DAY, 10)).await.unwrap(), 0, "too young");
    for paused in [false, true] {
        s.queue_set_paused(QueuePauseParams {
            queue: "other".into(),
            paused,
            actor: alice(),
        })
        .await
        .unwrap();
    }
    let now = s.db_now().await.unwrap();
    let later = EventPruneParams {
        older_than: Duration::ZERO,
        limit: 2,
        now: Some(now + chrono::Duration::seconds(1)),
    };
    assert_eq!(s.event_prune(later.clone()).await.unwrap(), 2);
    assert_eq!(s.event_prune(later.clone()).await.unwrap(), 1);
    assert_eq!(s.event_prune(later).await.unwrap(), 0);
    let left = all(&*s, EventFilter::default(), 100).await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].task_id, pending.copied());
    let refused = s.event_prune(prune(DAY, 0)).await;
    assert!(matches!(refused, Err(StoreError::InvalidInput(_))));

    // A bulk action's own event concerns no task, but stays while its tasks' events do:
    // the audit shows the action by it alone.
    let bulk = s
        .task_update(UpdateParams {
            target: Target::Filter(TaskFilter::default().kind("job").state(TaskState::Pending)),
            change: Change::Cancel,
            actor: alice(),
            now: None,
            action: Some("kept-while-its-tasks-are".into()),
        })
        .await
        .unwrap();
    assert_eq!(bulk, 1);
    let now = s.db_now().await.unwrap();
    let later = EventPruneParams {
        older_than: Duration::ZERO,
        limit: 10,
        now: Some(now + chrono::Duration::seconds(1)),
    };
    assert_eq!(s.event_prune(later).await.unwrap(), 0);
    let audit = all(&*s, EventFilter::default(), 100).await;
    assert!(
        audit
            .iter()
            .any(|e| e.task_id.is_none() && e.tasks == Some(1)),
        "{audit:?}"
    );
}
