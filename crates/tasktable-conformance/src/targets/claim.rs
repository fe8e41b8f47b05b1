//! Claims and targets: a targeted task goes only to a worker it allows, by id or by one of
//! the claimer's groups; among equal priority a worker's own tasks come first; tasks
//! waiting for a worker that is away keep nothing from anyone else.

use super::{groups, workers};
use crate::pinned::*;
use crate::Backend;
use serde_json::json;
use tasktable_core::{NewTask, Target, Task};
use tasktable_store::*;

async fn claim_as(s: &dyn Store, worker: &str, worker_groups: &[&str], limit: u32) -> Vec<Task> {
    s.task_claim(ClaimParams {
        worker_id: worker.into(),
        worker_groups: worker_groups.iter().map(|g| g.to_string()).collect(),
        ..claim_params("default", &["k"], limit, at(1))
    })
    .await
    .expect("claim")
}

fn ids(tasks: &[Task]) -> Vec<i64> {
    tasks.iter().map(|t| t.id).collect()
}

pub async fn targeted_tasks_go_only_to_the_workers_they_allow(db: &impl Backend) {
    let s = db.store().await;
    let targets = [
        Target::Any,
        workers(&["w1"]),
        workers(&["w2", "w3"]),
        groups(&["gpu"]),
        groups(&["eu", "gpu"]),
        // Names that contain others must not match them.
        workers(&["w10"]),
        groups(&["gp"]),
    ];
    let tasks: Vec<NewTask> = targets
        .iter()
        .map(|t| NewTask::new("k", json!(null)).target(t.clone()))
        .collect();
    let id = submit_at(&*s, tasks, t0()).await;
    for (i, t) in targets.iter().enumerate() {
        assert_eq!(&get(&*s, id[i]).await.target, t, "stored target {i}");
    }
    // Nobody else takes what w1 may take: its own task and the untargeted one, its own
    // first.
    assert_eq!(ids(&claim_as(&*s, "w1", &[], 10).await), vec![id[1], id[0]]);
    assert!(claim_as(&*s, "w4", &["blue"], 10).await.is_empty());
    assert_eq!(ids(&claim_as(&*s, "w3", &[], 10).await), vec![id[2]]);
    let by_gpu = claim_as(&*s, "w5", &["gpu"], 10).await;
    assert_eq!(ids(&by_gpu), vec![id[3], id[4]]);
    assert_eq!(by_gpu[0].target, groups(&["gpu"]));
    assert_eq!(
        ids(&claim_as(&*s, "w10", &["gp"], 10).await),
        vec![id[5], id[6]]
    );
    let left = s
        .task_count(CountParams {
            filter: TaskFilter {
                states: vec![tasktable_core::TaskState::Pending],
                ..Default::default()
            },
            cap: 100,
        })
        .await
        .unwrap();
    assert_eq!(left, 0, "every task went to a worker it allows");
}

pub async fn a_worker_takes_its_own_tasks_before_untargeted_ones_of_equal_priority(
    db: &impl Backend,
) {
    let s = db.store().await;
    let plan = [
        (Target::Any, 5),
        (workers(&["w1"]), 5),
        (workers(&["w1"]), 1),
        (Target::Any, 9),
        (groups(&["gpu"]), 5),
        (Target::Any, 1),
    ];
    let tasks: Vec<NewTask> = plan
        .iter()
        .map(|(t, p)| {
            NewTask::new("k", json!(null))
                .target(t.clone())
                .priority(*p)
        })
        .collect();
    let id = submit_at(&*s, tasks, t0()).await;
    // Priority first; at 5, w1's own tasks (by id and by group, oldest first) before the
    // untargeted one; then priority 1 the same way.
    let want = vec![id[3], id[1], id[4], id[0], id[2], id[5]];
    assert_eq!(ids(&claim_as(&*s, "w1", &["gpu"], 10).await), want);
}

pub async fn a_worker_takes_its_own_tasks_first_one_claim_at_a_time(db: &impl Backend) {
    let s = db.store().await;
    let tasks = vec![
        NewTask::new("k", json!(1)),
        NewTask::new("k", json!(2)).target(workers(&["w1"])),
        NewTask::new("k", json!(3)),
    ];
    let id = submit_at(&*s, tasks, t0()).await;
    let mut order = Vec::new();
    for _ in 0..3 {
        order.extend(ids(&claim_as(&*s, "w1", &[], 1).await));
    }
    assert_eq!(order, vec![id[1], id[0], id[2]]);
}

pub async fn tasks_waiting_for_an_absent_worker_keep_nothing_from_others(db: &impl Backend) {
    let s = db.store().await;
    // Many tasks of higher priority for a worker that never comes, then untargeted ones.
    let away: Vec<NewTask> = (0..300)
        .map(|i| {
            NewTask::new("k", json!(i))
                .priority(10)
                .target(workers(&["away"]))
        })
        .collect();
    submit_at(&*s, away, t0()).await;
    let open: Vec<NewTask> = (0..5).map(|i| NewTask::new("k", json!(i))).collect();
    let open = submit_at(&*s, open, t0()).await;
    let got = claim_as(&*s, "w1", &["gpu"], 3).await;
    assert_eq!(ids(&got), open[..3].to_vec());
    let got = claim_as(&*s, "w2", &[], 10).await;
    assert_eq!(ids(&got), open[3..].to_vec());
    assert_eq!(claim_as(&*s, "away", &[], 1).await[0].priority, 10);
}

/// A claim that found no targeted task may leave the targeted lane out for a moment
/// (MySQL does, for a second): a targeted task another store submits is still claimed,
/// by a claimer that polls as workers do.
pub async fn a_targeted_task_from_another_store_is_claimed_by_a_polling_worker(db: &impl Backend) {
    let (s1, s2) = (db.store().await, db.store().await);
    let claim = |s: std::sync::Arc<dyn Store>| async move {
        s.task_claim(ClaimParams {
            now: None,
            ..claim_params("default", &["k"], 10, at(0))
        })
        .await
        .expect("claim")
    };
    assert!(claim(s1.clone()).await.is_empty());
    let id = s2
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", json!(null)).target(workers(&["w1"]))],
            now: None,
        })
        .await
        .unwrap()[0]
        .id;
    let got = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        loop {
            let tasks = claim(s1.clone()).await;
            if !tasks.is_empty() {
                return tasks;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    })
    .await
    .expect("claimed within a few polls");
    assert_eq!(ids(&got), vec![id]);
}
