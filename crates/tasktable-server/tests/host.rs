//! Without tokens the server answers only requests addressed to this machine, so a web
//! page that reaches it by DNS rebinding (its requests say `Host: evil.example`) can
//! neither read nor change anything. With tokens the rule is off.

mod common;

use common::{assert_error, Server};
use reqwest::header::HOST;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tasktable_core::{NewTask, TaskState};
use tasktable_server::TokenSet;
use tasktable_store::SubmitParams;

/// A server without tokens, as `tasktable serve` runs on loopback by default.
async fn open_server(backend: &str) -> Option<Server> {
    let mut server = Server::start_with(backend, TokenSet::default(), |_| {}).await?;
    server.token = None;
    Some(server)
}

async fn pending_task(server: &Server) -> i64 {
    server
        .store
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("mail", json!({"to": "ada"}))],
            now: None,
        })
        .await
        .unwrap()[0]
        .id
}

async fn send(server: &Server, method: Method, path: &str, host: &str) -> (StatusCode, String) {
    let mut req = server.request(method.clone(), path).header(HOST, host);
    if method == Method::POST {
        req = req.json(&json!({}));
    }
    let resp = req.send().await.expect("server answers");
    (resp.status(), resp.text().await.unwrap())
}

#[tokio::test]
async fn without_tokens_a_foreign_host_is_refused_and_changes_nothing() {
    for backend in ["sqlite", "postgres", "mysql"] {
        let Some(server) = open_server(backend).await else {
            continue;
        };
        let id = pending_task(&server).await;
        for (method, path) in [
            (Method::POST, format!("/api/v1/tasks/{id}/cancel")),
            (Method::POST, "/api/v1/queues/default/pause".to_owned()),
            (Method::GET, "/api/v1/tasks".to_owned()),
            (Method::GET, "/metrics".to_owned()),
            (Method::GET, "/healthz".to_owned()),
            (Method::GET, "/no/such/route".to_owned()),
        ] {
            for host in ["evil.example", "evil.example:8080", "0.0.0.0:8080"] {
                let (status, text) = send(&server, method.clone(), &path, host).await;
                let body: Value = serde_json::from_str(&text).expect("a JSON error");
                assert_error(&(status, body.clone()), 421, "host_not_allowed");
                let message = body["error"]["message"].as_str().unwrap();
                assert!(
                    message.contains("--allow-host") && message.contains(host),
                    "{backend} {path}: {message}"
                );
                assert!(!text.contains("\"tasks\""), "nothing is read: {text}");
            }
        }
        let task = server.store.task_get(id).await.unwrap().unwrap();
        assert_eq!(task.state, TaskState::Pending, "{backend}: not cancelled");
        let queues = server.store.queue_list().await.unwrap();
        assert!(queues.iter().all(|q| !q.paused), "{backend}: not paused");
    }
}

#[tokio::test]
async fn without_tokens_loopback_names_and_addresses_are_answered_on_any_port() {
    let Some(server) = open_server("sqlite").await else {
        return;
    };
    let id = pending_task(&server).await;
    let port = server.base.rsplit(':').next().unwrap().to_owned();
    for host in [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        "localhost".to_owned(),
        "127.0.0.2:1".to_owned(),
        format!("[::1]:{port}"),
    ] {
        let (status, text) =
            send(&server, Method::GET, &format!("/api/v1/tasks/{id}"), &host).await;
        assert_eq!(status, StatusCode::OK, "{host}: {text}");
        let (status, _) = send(&server, Method::GET, "/healthz", &host).await;
        assert_eq!(status, StatusCode::OK, "{host}");
    }
    // The client's own Host header, as every other test sends it.
    let (status, _) = server.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(
        &server,
        Method::POST,
        &format!("/api/v1/tasks/{id}/cancel"),
        "localhost",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let task = server.store.task_get(id).await.unwrap().unwrap();
    assert_eq!(task.state, TaskState::Cancelled);
}

#[tokio::test]
async fn with_tokens_the_host_is_not_checked_and_the_token_decides() {
    let Some(server) = Server::start("sqlite").await else {
        return;
    };
    let id = pending_task(&server).await;
    let (status, text) = send(
        &server,
        Method::GET,
        &format!("/api/v1/tasks/{id}"),
        "tasks.example.com",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    // A page reaching the server by rebinding has no token: refused by authentication.
    let anonymous = server
        .http
        .get(format!("{}/api/v1/tasks/{id}", server.base))
        .header(HOST, "evil.example")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}
