//! What a handler returns, or how it panics, moves its task as documented, and an
//! operator's cancel reaches the handler of a running task.

use super::{
    fast, finished, get, instant_retry, outcomes, start, submit, submit_all, wait_event, PATIENCE,
};
use crate::Backend;
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_runtime::*;
use tasktable_store::*;
use tokio::sync::mpsc;

#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Script {
    Ok,
    Permanent,
    SnoozeOnce,
    Cancel,
    PanicOnce,
    Retry,
    Log,
}

pub(super) struct Scripted;

impl Handler for Scripted {
    const KIND: &'static str = "scripted";
    type Payload = Script;
    type Output = serde_json::Value;
    async fn run(
        &self,
        ctx: TaskContext,
        script: Script,
    ) -> Result<serde_json::Value, HandlerError> {
        match script {
            Script::Ok => Ok(json!({"attempt": ctx.attempt()})),
            Script::Permanent => Err(HandlerError::permanent("invalid address")),
            Script::SnoozeOnce if ctx.checkpoint::<bool>()?.is_none() => {
                ctx.save_checkpoint(&true).await?;
                Err(HandlerError::snooze(Duration::from_millis(10)))
            }
            Script::SnoozeOnce => Ok(json!({"attempt": ctx.attempt()})),
            Script::Cancel => Err(HandlerError::cancel("order was withdrawn")),
            Script::PanicOnce if ctx.attempt() == 1 => panic!("index out of bounds"),
            Script::PanicOnce => Ok(json!({"attempt": ctx.attempt()})),
            Script::Retry => Err(std::io::Error::other("connection reset").into()),
            Script::Log => {
                ctx.log(format!("attempt {} starts", ctx.attempt())).await?;
                ctx.log_lines(vec!["step 1".into(), "step 2".into()])
                    .await?;
                Ok(json!({"logged": 3}))
            }
        }
    }
}

async fn run_scripted(db: &impl Backend, tasks: Vec<NewTask>) -> (Arc<dyn Store>, Vec<i64>) {
    let store = db.store().await;
    let ids = submit_all(&*store, tasks).await;
    let w = fast(db.store().await).register(Scripted).build().unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    for id in &ids {
        while !get(&*store, *id).await.state.is_finished() {
            wait_event(&mut events, "a scripted task", finished(*id)).await;
        }
    }
    w.shutdown().await;
    (store, ids)
}

pub async fn panicking_handler_fails_only_its_attempt(db: &impl Backend) {
    let tasks = vec![
        NewTask::new("scripted", json!("panic_once")).backoff(instant_retry()),
        NewTask::new("scripted", json!("ok")),
    ];
    let (store, ids) = run_scripted(db, tasks).await;
    let panicky = get(&*store, ids[0]).await;
    assert_eq!((panicky.state, panicky.attempt), (TaskState::Succeeded, 2));
    let history = store.attempt_list(ids[0]).await.unwrap();
    assert_eq!(history[0].outcome, AttemptOutcome::Error);
    assert!(
        history[0]
            .error
            .as_deref()
            .unwrap()
            .contains("handler panicked: index out of bounds"),
        "{:?}",
        history[0].error
    );
    assert_eq!(get(&*store, ids[1]).await.state, TaskState::Succeeded);
}

pub async fn a_handlers_log_lines_join_its_tasks_history(db: &impl Backend) {
    let (store, ids) = run_scripted(db, vec![NewTask::new("scripted", json!("log"))]).await;
    let lines: Vec<(u32, String)> = store
        .task_logs(ids[0])
        .await
        .unwrap()
        .into_iter()
        .map(|l| (l.attempt, l.line))
        .collect();
    assert_eq!(
        lines,
        [
            (1, "attempt 1 starts".to_owned()),
            (1, "step 1".to_owned()),
            (1, "step 2".to_owned())
        ]
    );
    let task = get(&*store, ids[0]).await;
    let attempts = store.attempt_list(ids[0]).await.unwrap();
    let logs = store.task_logs(ids[0]).await.unwrap();
    let seen: Vec<String> = timeline(&task, &attempts, &[], &logs)
        .into_iter()
        .map(|e| e.event)
        .collect();
    assert_eq!(
        seen,
        ["submitted", "claimed", "log", "log", "log", "succeeded"]
    );
}

pub async fn handler_outcomes_move_tasks_as_documented(db: &impl Backend) {
    let tasks = vec![
        NewTask::new("scripted", json!("ok")),
        NewTask::new("scripted", json!("permanent")).max_attempts(5),
        NewTask::new("scripted", json!("snooze_once")),
        NewTask::new("scripted", json!("cancel")),
        NewTask::new("scripted", json!({"not": "a script"})),
        NewTask::new("scripted", json!("retry"))
            .max_attempts(3)
            .backoff(instant_retry()),
    ];
    let (store, ids) = run_scripted(db, tasks).await;
    let t = get(&*store, ids[0]).await;
    assert_eq!(
        (t.state, t.result),
        (TaskState::Succeeded, Some(json!({"attempt": 1})))
    );
    let t = get(&*store, ids[1]).await;
    assert_eq!(
        (t.state, t.attempt, t.last_error.as_deref()),
        (TaskState::Failed, 1, Some("invalid address")),
        "permanent: no retry"
    );
    let t = get(&*store, ids[2]).await;
    assert_eq!(
        (t.state, t.result),
        (TaskState::Succeeded, Some(json!({"attempt": 1}))),
        "snooze spent no attempt"
    );
    assert_eq!(
        outcomes(&*store, ids[2]).await,
        vec![AttemptOutcome::Snoozed, AttemptOutcome::Succeeded]
    );
    let t = get(&*store, ids[3]).await;
    assert_eq!(
        (t.state, t.last_error.as_deref()),
        (TaskState::Cancelled, Some("order was withdrawn"))
    );
    let t = get(&*store, ids[4]).await;
    assert_eq!(t.state, TaskState::Failed);
    assert!(t
        .last_error
        .unwrap()
        .contains("payload does not fit handler scripted"));
    let t = get(&*store, ids[5]).await;
    assert_eq!(
        (t.state, t.attempt, t.last_error.as_deref()),
        (TaskState::Failed, 3, Some("connection reset"))
    );
}

struct WaitForStop {
    started: mpsc::UnboundedSender<i64>,
    stopped: mpsc::UnboundedSender<StopReason>,
}

impl Handler for WaitForStop {
    const KIND: &'static str = "wait_for_stop";
    type Payload = ();
    type Output = ();
    async fn run(&self, ctx: TaskContext, _: ()) -> Result<(), HandlerError> {
        let _ = self.started.send(ctx.task_id());
        let reason = ctx.stopped().await;
        let _ = self.stopped.send(reason);
        Ok(())
    }
}

pub async fn cancelling_a_running_task_signals_its_handler(db: &impl Backend) {
    let store = db.store().await;
    let id = submit(&*store, NewTask::new("wait_for_stop", json!(null))).await;
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (stopped_tx, mut stopped) = mpsc::unbounded_channel();
    let w = fast(db.store().await)
        .lease_for(Duration::from_millis(600))
        .register(WaitForStop {
            started: started_tx,
            stopped: stopped_tx,
        })
        .build()
        .unwrap();
    let mut events = w.subscribe();
    let w = start(w);
    tokio::time::timeout(PATIENCE, started.recv())
        .await
        .unwrap()
        .unwrap();
    let changed = store
        .task_update(UpdateParams {
            actor: tasktable_core::Actor::rust(),
            target: Target::Id(id),
            change: Change::Cancel,
            now: None,
            action: None,
        })
        .await
        .unwrap();
    assert_eq!(changed, 1);
    let reason = tokio::time::timeout(PATIENCE, stopped.recv())
        .await
        .expect("handler signalled")
        .unwrap();
    assert_eq!(reason, StopReason::Cancelled);
    let e = wait_event(&mut events, "the stop", |e| {
        matches!(e, WorkerEvent::Stopped { .. })
    })
    .await;
    assert_eq!(
        e,
        WorkerEvent::Stopped {
            task_id: id,
            reason: StopReason::Cancelled
        }
    );
    w.shutdown().await;
    let t = get(&*store, id).await;
    assert_eq!(t.state, TaskState::Cancelled);
    assert_eq!(outcomes(&*store, id).await, vec![AttemptOutcome::Cancelled]);
}
