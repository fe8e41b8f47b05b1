//! Readers see the secret fields of payloads redacted, in lists and in a task's view (a
//! URL's password in every spelling the `http` handler sends it in); operators, who submit
//! and edit payloads, and the worker that claims the task, see them whole.

mod common;

use common::Server;
use serde_json::json;
use tasktable_server::Role;

on_every_backend!(
    readers_see_secret_payload_fields_redacted,
    readers_see_no_url_password_in_any_spelling_the_handler_sends,
);

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
        let text = s.get_text(&path).await;
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

/// The `http` handler parses its URL by WHATWG rules, which read each of these as
/// `https://bot:pa55word@hooks.example/x` and send the password; readers are shown that
/// URL with the password hidden.
async fn readers_see_no_url_password_in_any_spelling_the_handler_sends(mut s: Server) {
    let mut ids = Vec::new();
    for url in [
        "https:/bot:pa55word@hooks.example/x",
        "https:\\\\bot:pa55word@hooks.example/x",
        "https:\\bot:pa55word@hooks.example/x",
        "https:bot:pa55word@hooks.example/x",
    ] {
        let (status, answer) = s
            .post(
                "/api/v1/tasks",
                json!({"kind": "http", "payload": {"url": url}}),
            )
            .await;
        assert_eq!(status, 201, "{answer}");
        ids.push((url, answer["id"].as_i64().unwrap()));
    }

    s.as_role(Role::Reader);
    let list = s.get_text("/api/v1/tasks").await;
    assert!(
        !list.contains("pa55word"),
        "a reader sees a password: {list}"
    );
    for (url, id) in ids {
        let path = format!("/api/v1/tasks/{id}");
        let text = s.get_text(&path).await;
        assert!(!text.contains("pa55word"), "{url:?}: a reader sees {text}");
        let shown = s.get(&path).await.1["task"]["payload"]["url"].clone();
        assert_eq!(shown, "https://bot:[redacted]@hooks.example/x", "{url:?}");
    }
}
