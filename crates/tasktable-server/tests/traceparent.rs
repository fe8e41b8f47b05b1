//! A submit's `traceparent` header is stored with its tasks and handed to the pull
//! workers that claim them, on every backend. This server exports no traces, so what is
//! stored is the caller's own value (normalised to version 00); a malformed value, or
//! two of them, is ignored as the W3C specification says, and the submit goes through.

mod common;

use common::Server;
use reqwest::Method;
use serde_json::{json, Value};

on_every_backend!(
    a_submits_traceparent_is_stored_and_claimed,
    a_batch_shares_its_requests_traceparent,
    a_malformed_or_repeated_traceparent_is_ignored,
);

const CALLER: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

/// POSTs `body` to `path` with each of `traceparents` as a `traceparent` header.
async fn submit(s: &Server, path: &str, traceparents: &[&str], body: Value) -> Value {
    let mut request = s.request(Method::POST, path).json(&body);
    for value in traceparents {
        request = request.header("traceparent", *value);
    }
    let response = request.send().await.expect("server answers");
    assert_eq!(response.status(), 201);
    response.json().await.expect("JSON")
}

async fn stored(s: &Server, id: &Value) -> Value {
    let (status, body) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(status, 200, "{body}");
    body["task"]["traceparent"].clone()
}

async fn a_submits_traceparent_is_stored_and_claimed(s: Server) {
    // A later version's value is kept in its version-00 form.
    let later = CALLER.replacen("00-", "01-", 1) + "-more";
    let answer = submit(&s, "/api/v1/tasks", &[&later], json!({"kind": "traced"})).await;
    assert_eq!(answer["task"]["traceparent"], CALLER, "{answer}");
    assert_eq!(stored(&s, &answer["id"]).await, CALLER);
    let (status, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["traced"], "worker_id": "w-trace", "limit": 1}),
        )
        .await;
    assert_eq!(status, 200, "{claimed}");
    assert_eq!(claimed["tasks"][0]["id"], answer["id"], "{claimed}");
    assert_eq!(claimed["tasks"][0]["traceparent"], CALLER, "{claimed}");

    // Without a header, null in both.
    let plain = submit(&s, "/api/v1/tasks", &[], json!({"kind": "plain"})).await;
    assert_eq!(plain["task"]["traceparent"], Value::Null, "{plain}");
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["plain"], "worker_id": "w-trace", "limit": 1}),
        )
        .await;
    assert_eq!(claimed["tasks"][0]["traceparent"], Value::Null, "{claimed}");
}

async fn a_batch_shares_its_requests_traceparent(s: Server) {
    let tasks: Vec<Value> = (0..3)
        .map(|n| json!({"kind": "traced", "payload": n}))
        .collect();
    let answer = submit(
        &s,
        "/api/v1/tasks/batch",
        &[CALLER],
        json!({ "tasks": tasks }),
    )
    .await;
    let ids = answer["tasks"].as_array().expect("tasks");
    assert_eq!(ids.len(), 3, "{answer}");
    for task in ids {
        assert_eq!(stored(&s, &task["id"]).await, CALLER);
    }
}

async fn a_malformed_or_repeated_traceparent_is_ignored(s: Server) {
    for headers in [
        vec!["00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7"],
        vec!["ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"],
        vec!["00-00000000000000000000000000000000-00f067aa0ba902b7-01"],
        vec![&CALLER.to_uppercase()],
        vec![CALLER, CALLER],
    ] {
        let answer = submit(&s, "/api/v1/tasks", &headers, json!({"kind": "odd"})).await;
        assert_eq!(answer["task"]["traceparent"], Value::Null, "{headers:?}");
    }
}
