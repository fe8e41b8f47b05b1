//! Limits that keep one client from holding the server's resources: long-poll claims
//! waiting at once per token.

mod common;

use common::{assert_error, token, Server};
use serde_json::{json, Value};
use std::time::Duration;
use tasktable_server::{Role, TokenSet};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_may_have_only_so_many_claims_waiting() {
    let mut tokens = TokenSet::default();
    for (role, t) in common::TOKENS {
        tokens.add_plain(role.as_str(), role, t).unwrap();
    }
    let mut waiting = None;
    let Some(mut s) = Server::start_with("sqlite", tokens, |state| {
        state.limits.max_waiting_claims_per_token = 2;
        waiting = Some(state.waiting.clone());
    })
    .await
    else {
        return;
    };
    let waiting = waiting.unwrap();
    s.as_role(Role::Worker);
    let long_poll = |s: &Server| {
        let req = s
            .request(reqwest::Method::POST, "/api/v1/claim")
            .json(&json!({"kinds": ["k"], "worker_id": "w", "wait_ms": 30_000}));
        tokio::spawn(async move {
            let resp = req.send().await.unwrap();
            (resp.status().as_u16(), resp.json::<Value>().await.unwrap())
        })
    };
    let first = long_poll(&s);
    let second = long_poll(&s);
    // The two requests are in the server's hands once it counts them; nothing else says
    // so from outside.
    tokio::time::timeout(Duration::from_secs(20), async {
        while waiting.count("worker") < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("both claims wait");

    let (status, body) = {
        let resp = s
            .request(reqwest::Method::POST, "/api/v1/claim")
            .json(&json!({"kinds": ["k"], "worker_id": "w", "wait_ms": 1000}))
            .send()
            .await
            .unwrap();
        assert_eq!(
            resp.headers()
                .get("retry-after")
                .map(|v| v.to_str().unwrap()),
            Some("1")
        );
        (resp.status(), resp.json::<Value>().await.unwrap())
    };
    assert_error(&(status, body), 429, "too_many_waiting_claims");
    // A claim that does not wait, and another token's waiting claim, are not limited.
    let (status, _) = s
        .post("/api/v1/claim", json!({"kinds": ["k"], "worker_id": "w"}))
        .await;
    assert_eq!(status, 200);
    s.token = Some(token(Role::Admin).to_owned());
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "a", "wait_ms": 10}),
        )
        .await;
    assert_eq!((status.as_u16(), &body["tasks"]), (200, &json!([])));

    // Work arrives: one waiting claim takes it and returns, which frees its place.
    s.post("/api/v1/tasks", json!({"kind": "k", "payload": 1}))
        .await;
    let answered = tokio::select! {
        r = first => r.unwrap(),
        r = second => r.unwrap(),
    };
    assert_eq!(answered.0, 200);
    assert_eq!(answered.1["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(waiting.count("worker"), 1);
}
