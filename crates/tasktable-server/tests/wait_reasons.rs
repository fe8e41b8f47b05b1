//! Why a pending task waits, through the API: `GET /api/v1/tasks/{id}` answers `waiting`
//! from the registry (the kinds pull workers' heartbeats carry) and the queue's pause, and
//! the registry shows each worker's kinds.

mod common;

use common::Server;
use serde_json::{json, Value};

on_every_backend!(
    a_pending_tasks_page_says_why_it_waits_and_heartbeats_change_the_answer,
    only_a_pending_task_has_reasons
);

async fn waiting(s: &Server, id: &Value) -> Value {
    let (status, shown) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(status, 200, "{shown}");
    shown["waiting"].clone()
}

async fn codes(s: &Server, id: &Value) -> Vec<String> {
    waiting(s, id)
        .await
        .as_array()
        .expect("waiting is a list")
        .iter()
        .map(|r| r["reason"].as_str().expect("a code").to_owned())
        .collect()
}

async fn beat(s: &Server, body: Value) {
    let (status, answer) = s.post("/api/v1/heartbeat", body).await;
    assert_eq!(status, 200, "{answer}");
}

async fn a_pending_tasks_page_says_why_it_waits_and_heartbeats_change_the_answer(s: Server) {
    let (status, submitted) = s
        .post("/api/v1/tasks", json!({"kind": "resize", "payload": {}}))
        .await;
    assert_eq!(status, 201, "{submitted}");
    let id = &submitted["id"];
    assert_eq!(
        waiting(&s, id).await,
        json!([{"reason": "no_live_worker", "text": "no worker is live"}])
    );

    beat(
        &s,
        json!({"worker_id": "mailer", "queues": ["default"], "kinds": ["email"]}),
    )
    .await;
    let (_, shown) = s.get("/api/v1/workers/mailer").await;
    assert_eq!(shown["worker"]["kinds"], json!(["email"]), "{shown}");
    assert_eq!(
        waiting(&s, id).await,
        json!([{"reason": "no_worker_for_kind",
                "text": "no live worker handles kind \"resize\" in queue \"default\""}])
    );

    // A worker that does not say its kinds might handle it: nothing definite.
    beat(&s, json!({"worker_id": "old", "queues": ["default"]})).await;
    let (_, shown) = s.get("/api/v1/workers/old").await;
    assert_eq!(shown["worker"]["kinds"], json!(null), "{shown}");
    assert_eq!(codes(&s, id).await, vec!["turn"]);
    let (status, _) = s.post("/api/v1/leave", json!({"worker_id": "old"})).await;
    assert_eq!(status, 200);
    assert_eq!(codes(&s, id).await, vec!["no_worker_for_kind"]);

    // The same worker beating again with the kind: the reason goes.
    beat(
        &s,
        json!({"worker_id": "mailer", "queues": ["default"], "kinds": ["email", "resize"]}),
    )
    .await;
    assert_eq!(codes(&s, id).await, vec!["turn"]);

    let (status, paused) = s.post("/api/v1/queues/default/pause", json!({})).await;
    assert_eq!(status, 200, "{paused}");
    assert_eq!(
        waiting(&s, id).await,
        json!([{"reason": "queue_paused", "text": "queue \"default\" is paused"}])
    );

    let (status, submitted) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "resize", "queue": "gpu-work", "payload": {},
                   "target": {"groups": ["gpu"]}}),
        )
        .await;
    assert_eq!(status, 201, "{submitted}");
    beat(
        &s,
        json!({"worker_id": "gpu-less", "queues": ["gpu-work"], "kinds": ["resize"]}),
    )
    .await;
    assert_eq!(
        waiting(&s, &submitted["id"]).await,
        json!([{"reason": "target_groups_empty",
                "text": "no live worker is in group \"gpu\""}])
    );
}

async fn only_a_pending_task_has_reasons(s: Server) {
    let (_, held) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "k", "payload": null, "held": true}),
        )
        .await;
    assert_eq!(waiting(&s, &held["id"]).await, json!([]));
    let (_, submitted) = s
        .post("/api/v1/tasks", json!({"kind": "k", "payload": null}))
        .await;
    let (status, got) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "w", "limit": 1, "wait_ms": 0}),
        )
        .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["tasks"][0]["id"], submitted["id"]);
    assert_eq!(waiting(&s, &submitted["id"]).await, json!([]));
}
