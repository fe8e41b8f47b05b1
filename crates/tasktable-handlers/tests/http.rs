//! The `http` handler run by a real worker on SQLite against a real local HTTP server.

mod harness;

use axum::body::Bytes;
use axum::http::{header, HeaderMap, Method, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, post};
use axum::{Json, Router};
use harness::{instant_retry, Harness};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_handlers::{HttpHandler, HttpPolicy};

/// Starts the server every test talks to; returns its base URL.
async fn serve() -> String {
    let flaky_calls = Arc::new(AtomicUsize::new(0));
    let app = Router::new()
        .route("/ok", post(|| async { Json(json!({"ok": true})) }))
        .route("/echo", any(echo))
        .route(
            "/flaky",
            post(move || {
                let call = flaky_calls.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    match call {
                        1 => (StatusCode::INTERNAL_SERVER_ERROR, "database down").into_response(),
                        _ => Json(json!({"call": call})).into_response(),
                    }
                }
            }),
        )
        .route(
            "/missing",
            post(|| async { (StatusCode::NOT_FOUND, "no such thing") }),
        )
        .route(
            "/busy",
            post(|| async {
                let wait = [(header::RETRY_AFTER, "120")];
                (StatusCode::SERVICE_UNAVAILABLE, wait, "busy")
            }),
        )
        .route(
            "/never",
            post(|| async { std::future::pending::<&str>().await }),
        )
        .route("/moved", post(|| async { Redirect::temporary("/ok") }))
        .route("/loop", post(|| async { Redirect::temporary("/loop") }))
        .route("/choices", post(|| async { StatusCode::MULTIPLE_CHOICES }))
        .route("/login", post(reflect_credentials));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("address");
    tokio::spawn(async move { axum::serve(listener, app).await.expect("serve") });
    format!("http://{addr}")
}

/// Answers with what it received, so a test can see what was sent.
async fn echo(method: Method, headers: HeaderMap, body: Bytes) -> Json<Value> {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    Json(json!({
        "method": method.as_str(),
        "content_type": header("content-type"),
        "user_agent": header("user-agent"),
        "x_request_id": header("x-request-id"),
        "body": if body.is_empty() { Value::Null } else { serde_json::from_slice::<Value>(&body).unwrap() },
    }))
}

/// A careless server that quotes the credentials it refuses.
async fn reflect_credentials(headers: HeaderMap) -> Response {
    let auth = headers[header::AUTHORIZATION].to_str().unwrap().to_owned();
    (
        StatusCode::UNAUTHORIZED,
        format!("credentials {auth} are not valid"),
    )
        .into_response()
}

/// A worker whose `http` handler may reach the test's server, on loopback.
async fn start() -> (Harness, String) {
    let base = serve().await;
    let policy = HttpPolicy::default().allow_net("127.0.0.0/8".parse().unwrap());
    let harness = Harness::start(Duration::from_secs(5), |w| {
        w.register(HttpHandler::new(policy))
    })
    .await;
    (harness, base)
}

fn http(payload: Value) -> NewTask {
    NewTask::new("http", payload).backoff(instant_retry())
}

#[tokio::test]
async fn a_2xx_succeeds_with_the_status_and_the_json_body_as_the_result() {
    let (mut h, base) = start().await;
    let id = h.submit(http(json!({"url": format!("{base}/ok")}))).await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Succeeded);
    assert_eq!(
        task.result,
        Some(json!({"status": 200, "body": {"ok": true}}))
    );
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::Succeeded]);
    h.shutdown().await;
}

#[tokio::test]
async fn sends_the_body_as_json_with_the_payload_headers_and_a_tasktable_user_agent() {
    let (mut h, base) = start().await;
    let posted = h
        .submit(http(json!({
            "url": format!("{base}/echo"),
            "headers": {"X-Request-Id": "r-42"},
            "body": {"order": 7, "items": ["a", "b"]},
        })))
        .await;
    let got = h
        .submit(http(
            json!({"url": format!("{base}/echo"), "method": "GET"}),
        ))
        .await;

    let echoed = h.settled(posted).await.result.expect("result")["body"].clone();
    assert_eq!(echoed["method"], "POST");
    assert_eq!(echoed["content_type"], "application/json");
    assert_eq!(echoed["x_request_id"], "r-42");
    assert_eq!(echoed["body"], json!({"order": 7, "items": ["a", "b"]}));
    let version = env!("CARGO_PKG_VERSION");
    assert_eq!(echoed["user_agent"], format!("tasktable/{version}"));

    let echoed = h.settled(got).await.result.expect("result")["body"].clone();
    assert_eq!(echoed["method"], "GET");
    assert_eq!(
        echoed["content_type"],
        Value::Null,
        "no body, no content type"
    );
    assert_eq!(echoed["body"], Value::Null);
    h.shutdown().await;
}

#[tokio::test]
async fn a_server_error_is_retried_and_the_second_attempt_succeeds() {
    let (mut h, base) = start().await;
    let id = h
        .submit(http(json!({"url": format!("{base}/flaky")})))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Succeeded);
    assert_eq!(task.attempt, 2);
    assert_eq!(
        task.result,
        Some(json!({"status": 200, "body": {"call": 2}}))
    );
    let attempts = h.attempts(id).await;
    let outcomes: Vec<_> = attempts.iter().map(|a| a.outcome).collect();
    assert_eq!(outcomes, [AttemptOutcome::Error, AttemptOutcome::Succeeded]);
    let error = attempts[0].error.as_deref().unwrap();
    assert!(
        error.contains("HTTP 500") && error.contains("database down"),
        "{error}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_404_fails_permanently_after_one_attempt_naming_status_and_body() {
    let (mut h, base) = start().await;
    let id = h
        .submit(http(json!({"url": format!("{base}/missing")})).max_attempts(5))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::Failed]);
    let error = task.last_error.unwrap();
    assert!(
        error.contains("HTTP 404 Not Found: no such thing"),
        "{error}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_503_with_retry_after_is_retried_after_that_many_seconds() {
    let (mut h, base) = start().await;
    let id = h.submit(http(json!({"url": format!("{base}/busy")}))).await;

    h.event(id, harness::is_finished).await;
    let task = h.task(id).await;
    assert_eq!(task.state, TaskState::Pending);
    let attempts = h.attempts(id).await;
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0].outcome, AttemptOutcome::Error);
    // Backoff here is zero, so only the server's Retry-After can have set the wait.
    let wait = (task.run_at - attempts[0].finished_at).num_milliseconds();
    assert!((119_000..=121_000).contains(&wait), "retry in {wait} ms");
    h.shutdown().await;
}

#[tokio::test]
async fn an_answer_slower_than_the_task_timeout_counts_as_a_timed_out_attempt() {
    let (mut h, base) = start().await;
    let task = http(json!({"url": format!("{base}/never")}))
        .timeout(Duration::from_millis(500))
        .max_attempts(1);
    let id = h.submit(task).await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::TimedOut]);
    h.shutdown().await;
}

#[tokio::test]
async fn a_request_timeout_and_a_refused_connection_are_retryable_errors() {
    let (mut h, base) = start().await;
    let closed = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    }; // dropped: nothing listens there now
    let slow = h
        .submit(http(json!({"url": format!("{base}/never"), "timeout_ms": 200})).max_attempts(2))
        .await;
    let refused = h
        .submit(http(json!({"url": format!("http://{closed}/")})).max_attempts(2))
        .await;

    for (id, symptom) in [(slow, "timed out"), (refused, "onnect")] {
        let task = h.settled(id).await;
        assert_eq!(task.state, TaskState::Failed, "once the attempts ran out");
        assert_eq!(
            h.outcomes(id).await,
            [AttemptOutcome::Error, AttemptOutcome::Error]
        );
        let error = task.last_error.unwrap();
        assert!(
            error.contains(symptom),
            "{error:?} should mention {symptom:?}"
        );
    }
    h.shutdown().await;
}

#[tokio::test]
async fn redirects_are_followed_but_a_loop_or_a_final_3xx_fails_permanently() {
    let (mut h, base) = start().await;
    let moved = h
        .submit(http(json!({"url": format!("{base}/moved")})))
        .await;
    let looped = h.submit(http(json!({"url": format!("{base}/loop")}))).await;
    let choices = h
        .submit(http(json!({"url": format!("{base}/choices")})))
        .await;

    let task = h.settled(moved).await;
    assert_eq!(
        task.result,
        Some(json!({"status": 200, "body": {"ok": true}}))
    );
    for (id, symptom) in [(looped, "redirect"), (choices, "HTTP 300")] {
        let task = h.settled(id).await;
        assert_eq!(task.state, TaskState::Failed);
        assert_eq!(h.outcomes(id).await, [AttemptOutcome::Failed]);
        let error = task.last_error.unwrap();
        assert!(
            error.contains(symptom),
            "{error:?} should mention {symptom:?}"
        );
    }
    h.shutdown().await;
}

#[tokio::test]
async fn other_url_schemes_fail_permanently() {
    let (mut h, _base) = start().await;
    let id = h
        .submit(http(json!({"url": "file:///etc/passwd"})).max_attempts(5))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::Failed]);
    assert!(task.last_error.unwrap().contains("scheme \"file\""));
    h.shutdown().await;
}

#[tokio::test]
async fn error_messages_never_contain_header_values() {
    let (mut h, base) = start().await;
    let secret = "Bearer sk-live-0123456789";
    let quoted = h
        .submit(http(json!({
            "url": format!("{base}/login"),
            "headers": {"Authorization": secret},
        })))
        .await;
    let invalid = h
        .submit(http(json!({
            "url": format!("{base}/ok"),
            "headers": {"X-Api-Key": "sk-live-0123456789\r\nInjected: 1"},
        })))
        .await;

    for id in [quoted, invalid] {
        let task = h.settled(id).await;
        assert_eq!(task.state, TaskState::Failed);
        let error = task.last_error.unwrap();
        assert!(!error.contains("sk-live"), "secret leaked: {error}");
    }
    let error = h.task(quoted).await.last_error.unwrap();
    assert!(
        error.contains("HTTP 401") && error.contains("[redacted]"),
        "{error}"
    );
    let error = h.task(invalid).await.last_error.unwrap();
    assert!(error.contains("X-Api-Key"), "{error}");
    h.shutdown().await;
}
