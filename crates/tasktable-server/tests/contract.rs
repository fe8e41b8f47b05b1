//! Requests the OpenAPI document calls valid are accepted. Each case is one the contract
//! check (.ci/schemathesis) found refused, or one it leaves to this file; see docs/api.md,
//! "The document as a contract".

mod common;

use common::Server;
use reqwest::Method;
use serde_json::{json, Value};
use tasktable_server::Role;

on_every_backend!(
    whole_numbers_are_accepted_however_json_spells_them,
    names_are_limited_in_characters_not_bytes,
    a_batch_of_exactly_the_limit_is_accepted,
    operations_without_values_take_an_empty_object_or_no_body,
);

async fn whole_numbers_are_accepted_however_json_spells_them(mut s: Server) {
    let (status, body) = s
        .post(
            "/api/v1/tasks",
            json!({
                "kind": "k", "priority": -2.0, "max_attempts": 3.0, "timeout_ms": 1000.0,
                "backoff": {"initial_ms": 10.0, "multiplier": 2, "max_ms": 100.0, "jitter": 0}
            }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let task = &body["task"];
    assert_eq!(
        (
            &task["priority"],
            &task["max_attempts"],
            &task["timeout_ms"]
        ),
        (&json!(-2), &json!(3), &json!(1000))
    );
    let id = body["id"].as_i64().unwrap();
    let (status, body) = s
        .post(
            &format!("/api/v1/tasks/{id}/set-max-attempts"),
            json!({"max_attempts": 4.0}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), &body["task"]["max_attempts"]),
        (200, &json!(4))
    );
    let (status, body) = s
        .post(
            &format!("/api/v1/tasks/{id}/set-priority"),
            json!({"priority": 2.5}),
        )
        .await;
    assert_eq!(status, 422, "a fraction is still refused: {body}");

    s.as_role(Role::Worker);
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "w", "limit": 1.0, "lease_ms": 5000.0, "wait_ms": 0.0}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let claimed = &body["tasks"][0];
    let token = claimed["token"].as_i64().unwrap() as f64;
    let lease = json!({"token": token, "credential": claimed["credential"], "lease_ms": 6000.0});
    let (status, body) = s.post(&format!("/api/v1/leases/{id}/renew"), lease).await;
    assert_eq!(status, 200, "{body}");
}

async fn names_are_limited_in_characters_not_bytes(mut s: Server) {
    let longest = "é".repeat(255);
    let (status, body) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": longest, "queue": longest, "key": "🔑".repeat(255)}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let (status, body) = s
        .post("/api/v1/tasks", json!({"kind": "é".repeat(256)}))
        .await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = s
        .post(&format!("/api/v1/queues/{longest}/pause"), json!({}))
        .await;
    assert_eq!((status.as_u16(), &body["paused"]), (200, &json!(true)));

    s.as_role(Role::Worker);
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": [longest], "worker_id": longest, "worker_host": longest, "queue": longest}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
}

async fn a_batch_of_exactly_the_limit_is_accepted(s: Server) {
    let limit = tasktable_server::Limits::default().max_batch;
    let tasks: Vec<Value> = (0..limit)
        .map(|i| json!({"kind": "k", "payload": i}))
        .collect();
    let (status, body) = s
        .post("/api/v1/tasks/batch", json!({ "tasks": tasks }))
        .await;
    assert_eq!(status, 201);
    assert_eq!(body["tasks"].as_array().unwrap().len(), limit);
    assert_eq!(s.task_count().await, limit);
}

async fn operations_without_values_take_an_empty_object_or_no_body(s: Server) {
    let (_, body) = s.post("/api/v1/tasks", json!({"kind": "k"})).await;
    let id = body["id"].as_i64().unwrap();
    let paths = [
        "/api/v1/queues/q/pause".to_owned(),
        "/api/v1/queues/q/resume".to_owned(),
        "/api/v1/admin/migrate".to_owned(),
        format!("/api/v1/tasks/{id}/hold"),
        format!("/api/v1/tasks/{id}/release"),
    ];
    // Hold then release, with each kind of empty body in turn.
    for body in ["{}", "", " \n"] {
        for path in &paths {
            let resp = s
                .request(Method::POST, path)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(resp.status(), 200, "{path} with {body:?}");
        }
    }
}
