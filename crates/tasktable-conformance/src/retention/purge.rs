//! Purging finished tasks by state and age.

use crate::pinned::{at, claim, finish, submit_at};
use crate::Backend;
use chrono::{DateTime, Utc};
use serde_json::json;
use std::time::Duration;
use tasktable_core::{HandlerOutcome, NewTask, TaskState};
use tasktable_store::*;

const HOUR: Duration = Duration::from_secs(3600);

/// Tasks ending in each final state at `t`, plus one left pending and one running;
/// returns the ids by state: succeeded, failed, cancelled, pending, running.
async fn finished_at(s: &dyn Store, t: i64, n: usize) -> [Vec<i64>; 5] {
    let mut out: [Vec<i64>; 5] = Default::default();
    let tasks = (0..n * 3 + 2)
        .map(|i| NewTask::new("job", json!({"i": i})).max_attempts(1))
        .collect();
    let ids = submit_at(s, tasks, at(t)).await;
    let claimed = claim(s, &["job"], (n * 3 + 1) as u32, at(t)).await;
    for (i, task) in claimed.iter().enumerate() {
        let outcome = match i / n {
            0 => HandlerOutcome::Succeeded {
                result: Some(json!({"ok": i})),
            },
            1 => HandlerOutcome::Failed {
                message: "no".into(),
            },
            2 => HandlerOutcome::Cancel {
                reason: "stop".into(),
            },
            _ => {
                out[4].push(task.id);
                continue;
            }
        };
        assert!(finish(s, task.lease(), outcome, task.attempt, at(t + 1)).await);
        out[i / n].push(task.id);
    }
    out[3].push(*ids.last().unwrap());
    out
}

fn purge(state: TaskState, older_than: Duration, limit: u32, now: DateTime<Utc>) -> PurgeParams {
    PurgeParams {
        state,
        older_than,
        archive: false,
        limit,
        dry_run: false,
        now: Some(now),
    }
}

pub async fn purge_takes_each_state_past_its_age_in_batches_and_nothing_else(db: &impl Backend) {
    let s = db.store().await;
    let old = finished_at(&*s, 0, 5).await;
    let young = finished_at(&*s, 3 * 3600, 2).await;
    let now = at(4 * 3600);
    let everything = |s: std::sync::Arc<dyn Store>| async move {
        s.task_count(CountParams {
            filter: TaskFilter::default(),
            cap: 1000,
        })
        .await
        .unwrap()
    };
    let before = everything(s.clone()).await;

    let dry = s
        .task_purge(PurgeParams {
            dry_run: true,
            ..purge(TaskState::Succeeded, 2 * HOUR, 1, now)
        })
        .await
        .unwrap();
    assert_eq!(dry.count, 5, "a dry run counts every eligible task");
    assert_eq!(everything(s.clone()).await, before, "and changes nothing");

    let mut batches = Vec::new();
    loop {
        let p = s
            .task_purge(purge(TaskState::Succeeded, 2 * HOUR, 2, now))
            .await
            .unwrap();
        assert!(p.cutoff <= now - chrono::Duration::hours(2));
        batches.push(p.count);
        if p.count < 2 {
            break;
        }
    }
    assert_eq!(batches, [2, 2, 1], "batches of at most the limit");
    for id in &old[0] {
        assert!(s.task_get(*id).await.unwrap().is_none(), "task {id} purged");
        assert!(
            s.attempt_list(*id).await.unwrap().is_empty(),
            "its attempts went with it"
        );
    }
    for (state, ids) in [
        (TaskState::Failed, &old[1]),
        (TaskState::Cancelled, &old[2]),
    ] {
        for id in ids {
            let t = s
                .task_get(*id)
                .await
                .unwrap()
                .expect("another state's age applies");
            assert_eq!(t.state, state);
        }
    }
    let p = s
        .task_purge(purge(TaskState::Failed, 2 * HOUR, 1000, now))
        .await
        .unwrap();
    assert_eq!(p.count, 5);
    for ids in [&old[3], &old[4], &young[0], &young[1], &young[2]] {
        for id in ids {
            assert!(s.task_get(*id).await.unwrap().is_some(), "task {id} kept");
        }
    }
    assert_eq!(everything(s.clone()).await, before - 10);
    // Nothing finished takes an unfinished state's tasks, and nothing is refused silently.
    let err = s
        .task_purge(purge(TaskState::Pending, HOUR, 10, now))
        .await
        .unwrap_err();
    assert!(err.is_client_error(), "{err}");
    let err = s
        .task_purge(purge(TaskState::Succeeded, HOUR, 0, now))
        .await
        .unwrap_err();
    assert!(err.is_client_error(), "{err}");
    assert_eq!(everything(s.clone()).await, before - 10);
}

pub async fn archive_keeps_every_column_and_the_attempts_and_racing_purgers_take_each_once(
    db: &impl Backend,
) {
    let s = db.store().await;
    let old = finished_at(&*s, 0, 20).await;
    let mut originals = Vec::new();
    for id in old[0].iter().chain(&old[1]) {
        originals.push((
            s.task_get(*id).await.unwrap().unwrap(),
            s.attempt_list(*id).await.unwrap(),
        ));
    }
    let mut racers = Vec::new();
    for _ in 0..4 {
        let store = db.store().await;
        racers.push(tokio::spawn(async move {
            let mut taken = 0;
            for state in [TaskState::Succeeded, TaskState::Failed] {
                loop {
                    let p = store
                        .task_purge(PurgeParams {
                            archive: true,
                            ..purge(state, HOUR, 3, at(2 * 3600))
                        })
                        .await
                        .expect("a racing purge succeeds");
                    taken += p.count;
                    if p.count == 0 {
                        break;
                    }
                }
            }
            taken
        }));
    }
    let mut taken = 0;
    for r in racers {
        taken += r.await.unwrap();
    }
    assert_eq!(taken, 40, "each task archived once");
    for (task, attempts) in originals {
        assert!(s.task_get(task.id).await.unwrap().is_none());
        let (archived, archived_attempts) = s
            .task_get_archived(task.id)
            .await
            .unwrap()
            .expect("archived");
        assert_eq!(archived, task, "every column kept");
        assert_eq!(archived_attempts, attempts, "the attempts kept");
    }
    assert!(s.task_get_archived(old[2][0]).await.unwrap().is_none());
}

pub async fn statistics_rolled_up_survive_the_purge(db: &impl Backend) {
    let s = db.store().await;
    finished_at(&*s, 0, 4).await;
    let now = at(3 * 3600);
    let stats = |s: std::sync::Arc<dyn Store>| async move {
        s.stats(StatsParams {
            window: Duration::from_secs(6 * 3600),
            queue: None,
            kind: None,
            now: Some(now),
        })
        .await
        .unwrap()
    };
    let before = stats(s.clone()).await;
    for state in [
        TaskState::Succeeded,
        TaskState::Failed,
        TaskState::Cancelled,
    ] {
        let p = s.task_purge(purge(state, HOUR, 1000, now)).await.unwrap();
        assert_eq!(p.count, 4, "{state}");
    }
    let after = stats(s.clone()).await;
    assert_eq!(
        after.groups, before.groups,
        "the window's counts are unchanged"
    );
    assert_eq!(after.series, before.series);
}

pub async fn a_retainer_sweeps_each_state_of_its_policy_to_the_end(db: &impl Backend) {
    let s = db.store().await;
    let old = finished_at(&*s, 0, 7).await;
    let retainer = tasktable_runtime::Retainer::new(
        s.clone(),
        tasktable_runtime::RetentionConfig {
            policy: tasktable_core::retention::Retention {
                succeeded: Some(HOUR),
                cancelled: Some(HOUR),
                ..Default::default()
            },
            batch: 3,
            ..Default::default()
        },
    );
    let mut batches = Vec::new();
    let swept = retainer
        .run_once(Some(at(2 * 3600)), |state, n| batches.push((state, n)))
        .await
        .unwrap();
    assert_eq!(
        swept.by_state,
        [(TaskState::Succeeded, 7), (TaskState::Cancelled, 7)]
    );
    assert_eq!(
        batches
            .iter()
            .filter(|(s, _)| *s == TaskState::Succeeded)
            .map(|(_, n)| *n)
            .collect::<Vec<_>>(),
        [3, 3, 1]
    );
    for id in &old[1] {
        assert!(
            s.task_get(*id).await.unwrap().is_some(),
            "failed tasks have no age"
        );
    }
    let again = retainer
        .run_once(Some(at(2 * 3600)), |_, _| {})
        .await
        .unwrap();
    assert_eq!(again.total(), 0);
}
