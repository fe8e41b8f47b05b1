//! Readers see the secret fields of payloads redacted, in lists and in a task's view;
//! operators, who submit and edit payloads, and the worker that claims the task, see them
//! whole.

mod common;

use common::Server;
use serde_json::json;
use tasktable_server::Role;

on_every_backend!(readers_see_secret_payload_fields_redacted);

async fn readers_see_secret_payload_fields_redacted(mut s: Server) {
    let payload = json!({
        "url": "https://bot:pa55word@hooks.example/x",
        "headers": {"Authorization": "Bearer sekr1t-header", "X-Trace": "abcd-1234"},
        "body": {"order": 42},
    });
    let (status, answer) = s
        .post("/api/v1/tasks", json!({"kind": "http", "payload": payload}))
        .await;
    assert_eq!(status, 201, "{answer}");
    let id = answer["id"].as_i64().unwrap();
    let secrets = ["sekr1t-header", "abcd-1234", "pa55word"];

    s.as_role(Role::Reader);
    for path in [format!("/api/v1/tasks/{id}"), "/api/v1/tasks".to_owned()] {
        let text = s
            .request(reqwest::Method::GET, &path)
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        for secret in secrets {
            assert!(!text.contains(secret), "a reader sees {secret} at {path}");
        }
    }
    let shown = s.get(&format!("/api/v1/tasks/{id}")).await.1["task"]["payload"].clone();
    assert_eq!(
        shown,
        json!({
            "url": "https://bot:[redacted]@hooks.example/x",
            "headers": {"Authorization": "[redacted]", "X-Trace": "[redacted]"},
            "body": {"order": 42},
        })
    );

    s.as_role(Role::Operator);
    let shown = s.get(&format!("/api/v1/tasks/{id}")).await.1["task"]["payload"].clone();
    assert_eq!(shown, payload, "an operator sees the payload whole");
    s.as_role(Role::Worker);
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["http"], "worker_id": "w"}),
        )
        .await;
    assert_eq!(
        claimed["tasks"][0]["payload"], payload,
        "the claimer gets it whole"
    );
}
