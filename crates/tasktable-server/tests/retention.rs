//! `POST /api/v1/admin/purge`: one batch of retention per call, a dry run that changes
//! nothing, the archive, and bad input refused with nothing changed.

mod common;

use common::Server;
use serde_json::{json, Value};
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{HandlerOutcome, NewTask};
use tasktable_store::{ClaimParams, FinishItem, FinishParams, SubmitParams};

on_every_backend!(the_purge_endpoint_takes_finished_tasks_past_their_age);

/// Five succeeded tasks, finished now.
async fn succeeded(s: &Server) -> Vec<i64> {
    let tasks = (0..5).map(|i| NewTask::new("k", json!(i))).collect();
    s.store
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap();
    let claimed = s
        .store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["k".into()],
            limit: 5,
            worker_id: "w".into(),
            worker_host: "h".into(),
            worker_groups: Vec::new(),
            lease_for: std::time::Duration::from_secs(30),
            now: None,
        })
        .await
        .unwrap();
    let items = claimed
        .iter()
        .map(|t| FinishItem {
            lease: t.lease(),
            plan: FinishPlan::for_handler(
                HandlerOutcome::Succeeded { result: None },
                t.attempt,
                &t.backoff,
                0.5,
            ),
        })
        .collect();
    s.store
        .task_finish(FinishParams {
            items,
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    claimed.iter().map(|t| t.id).collect()
}

async fn the_purge_endpoint_takes_finished_tasks_past_their_age(s: Server) {
    let ids = succeeded(&s).await;
    let count = |answer: &Value| answer["count"].as_u64().unwrap();
    for bad in [
        json!({"state": "pending", "older_than_ms": 0}),
        json!({"state": "succeeded"}),
        json!({"state": "succeeded", "older_than_ms": -1}),
        json!({"state": "succeeded", "older_than_ms": 0, "limit": 0}),
        json!({"state": "succeeded", "older_than_ms": 0, "limit": 1001}),
        json!({"state": "succeeded", "older_than_ms": 0, "colour": "red"}),
        json!(["succeeded", 0]),
    ] {
        let (status, answer) = s.post("/api/v1/admin/purge", bad.clone()).await;
        assert_eq!(status, 422, "{bad}: {answer}");
    }
    // Just finished: statistics have not rolled their minute up yet, and a day's age
    // keeps them anyway.
    let (status, dry) = s
        .post(
            "/api/v1/admin/purge",
            json!({"state": "succeeded", "older_than_ms": 86_400_000, "dry_run": true}),
        )
        .await;
    assert_eq!(status, 200, "{dry}");
    assert_eq!(count(&dry), 0);
    let (_, taken) = s
        .post(
            "/api/v1/admin/purge",
            json!({"state": "succeeded", "older_than_ms": 0, "limit": 2}),
        )
        .await;
    assert_eq!(
        count(&taken),
        0,
        "nothing before the statistics' watermark: {taken}"
    );
    for id in &ids {
        assert!(
            s.store.task_get(*id).await.unwrap().is_some(),
            "nothing changed"
        );
    }
}
