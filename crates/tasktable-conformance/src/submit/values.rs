//! Values at the edges of what a task may hold are stored alike on every backend: names of
//! the longest length, `run_at` times far in the past or the future, and numbers at the
//! ends of what JSON numbers hold.

use crate::pinned::{at, claim, claim_params, finish, get, no_jitter, submit_at, update};
use crate::Backend;
use serde_json::json;
use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
use tasktable_core::{NewTask, TaskState};
use tasktable_store::*;

/// Names are limited in characters, so the longest one may take four bytes a character:
/// every column that holds a name (MySQL's `VARCHAR(255)` included) keeps it whole, from
/// the task through its attempt, its queue's pause row and the statistics rollup.
pub async fn names_of_the_longest_length_are_stored_whole(db: &impl Backend) {
    let s = db.store().await;
    let name = |c: char| c.to_string().repeat(tasktable_core::task::MAX_NAME_LEN);
    let (kind, queue) = (name('😀'), name('é'));
    let id = submit_at(
        &*s,
        vec![NewTask::new(kind.clone(), json!(1))
            .queue(queue.clone())
            .key(name('鍵'))
            .idempotency_key(name('🔑'))],
        at(0),
    )
    .await[0];
    let task = get(&*s, id).await;
    assert_eq!(
        (&task.kind, &task.queue, task.key, task.idempotency_key),
        (&kind, &queue, Some(name('鍵')), Some(name('🔑')))
    );
    let mut params = claim_params(&queue, &[kind.as_str()], 1, at(1));
    params.worker_id = name('w');
    let claimed = s.task_claim(params).await.unwrap();
    assert_eq!(claimed.len(), 1, "claimed by its queue and kind");
    let plan = FinishPlan::for_handler(
        HandlerOutcome::Succeeded { result: None },
        1,
        &no_jitter(),
        0.5,
    );
    let finished = s
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: claimed[0].lease(),
                plan,
            }],
            only_if_expired: false,
            now: Some(at(2)),
        })
        .await
        .unwrap();
    assert_eq!(finished, vec![true]);
    s.queue_set_paused(QueuePauseParams {
        actor: tasktable_core::Actor::rust(),
        queue: queue.clone(),
        paused: true,
    })
    .await
    .unwrap();
    let queues = s.queue_list().await.unwrap();
    assert!(queues.iter().any(|q| q.name == queue && q.paused));
    let stats = s
        .stats(StatsParams {
            window: std::time::Duration::from_secs(4 * 3600),
            queue: Some(queue.clone()),
            kind: Some(kind.clone()),
            now: Some(at(3 * 3600)),
        })
        .await
        .unwrap();
    let group = stats.groups.iter().find(|g| g.kind == kind).expect("group");
    assert_eq!((group.window.submitted, group.window.succeeded), (1, 1));
}

/// Times at the edges of what a `run_at` may say: every backend stores them alike, though
/// MySQL's `DATETIME` holds no year before 1000.
pub async fn far_past_and_far_future_run_at_are_stored_alike(db: &impl Backend) {
    use chrono::{TimeZone, Utc};
    let s = db.store().await;
    let early = Utc.with_ymd_and_hms(1, 1, 1, 0, 0, 0).unwrap();
    let late = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap();
    let ids = submit_at(
        &*s,
        vec![
            NewTask::new("k", json!(1)).run_at(early),
            NewTask::new("k", json!(2)).run_at(late),
        ],
        at(0),
    )
    .await;
    let epoch = Utc.timestamp_opt(0, 0).unwrap();
    assert_eq!(
        get(&*s, ids[0]).await.run_at,
        epoch,
        "before 1970 is stored as 1970"
    );
    assert_eq!(get(&*s, ids[1]).await.run_at, late);
    let claimed = claim(&*s, &["k"], 2, at(1)).await;
    assert_eq!(
        claimed.iter().map(|t| t.id).collect::<Vec<_>>(),
        vec![ids[0]]
    );
    update(
        &*s,
        Target::Id(ids[1]),
        Change::Reschedule { run_at: early },
    )
    .await
    .unwrap();
    assert_eq!(get(&*s, ids[1]).await.run_at, epoch);
    let after_2038 = Utc.with_ymd_and_hms(2100, 6, 1, 12, 0, 0).unwrap();
    update(
        &*s,
        Target::Filter(TaskFilter::default().state(TaskState::Pending)),
        Change::Reschedule { run_at: after_2038 },
    )
    .await
    .unwrap();
    assert_eq!(get(&*s, ids[1]).await.run_at, after_2038);
}

/// The largest and smallest doubles, and others far from 1, come back exactly from every
/// column that holds JSON, written by submit, an edit, a checkpoint and a result.
/// PostgreSQL's `jsonb` keeps them as decimals and prints the large ones in full, hundreds
/// of digits without an exponent, which a reader must parse back to the same double.
pub async fn numbers_at_the_ends_of_a_double_come_back_exactly(db: &impl Backend) {
    let s = db.store().await;
    let doc = json!([
        f64::MAX,
        f64::MIN,
        f64::MIN_POSITIVE,
        -1.797_693_134_862_315_7e308,
        9.455_817_571_772_49e205,
        3.513_598_569_525_120_3e89,
        5e-324,
        u64::MAX,
        i64::MIN,
        {"deep": [1.0e300, -2.5e-300]}
    ]);
    let id = submit_at(&*s, vec![NewTask::new("k", doc.clone())], at(0)).await[0];
    assert_eq!(get(&*s, id).await.payload, doc, "as submitted");
    let edited = json!({"again": doc.clone()});
    update(
        &*s,
        Target::Id(id),
        Change::EditPayload {
            payload: edited.clone(),
        },
    )
    .await
    .unwrap();
    assert_eq!(get(&*s, id).await.payload, edited, "as edited");
    let t = claim(&*s, &["k"], 1, at(1)).await.remove(0);
    assert_eq!(t.payload, edited, "as claimed");
    let saved = s
        .task_checkpoint(CheckpointParams {
            lease: t.lease(),
            checkpoint: Some(doc.clone()),
            progress: Some(doc.clone()),
        })
        .await
        .unwrap();
    assert!(saved.is_held());
    let succeeded = HandlerOutcome::Succeeded {
        result: Some(doc.clone()),
    };
    assert!(finish(&*s, t.lease(), succeeded, t.attempt, at(2)).await);
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    assert_eq!(
        (t.checkpoint, t.progress, t.result),
        (Some(doc.clone()), Some(doc.clone()), Some(doc))
    );
}
