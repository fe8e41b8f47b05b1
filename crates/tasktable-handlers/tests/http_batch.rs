//! The `http_batch` handler run by a real worker on SQLite against a real local HTTP
//! server: every index is posted with the batch's data and headers, a 5xx is retried, a
//! 429 after its `Retry-After`, a 4xx fails the item for good, `past_end` ends an open-ended batch, and an address the
//! policy refuses fails every item before anything is sent.

mod harness;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use harness::{instant_retry, Harness};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tasktable_core::batch::BatchSpec;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_handlers::{HttpBatchHandler, HttpHandler, HttpPolicy};

/// How often each index was posted, and what came with it.
#[derive(Default)]
struct Seen {
    calls: HashMap<u64, u32>,
    /// When each call of an index arrived.
    times: HashMap<u64, Vec<Instant>>,
    data: Vec<Value>,
    auth: Vec<String>,
}

type Shared = Arc<Mutex<Seen>>;

/// Items 0..50: index 7 fails once with a 503, index 21 once with a 429 asking for a
/// second's wait, index 13 is unknown (404), and from 50 on the service says the items
/// have ended.
async fn item(State(seen): State<Shared>, headers: HeaderMap, Json(body): Json<Value>) -> Response {
    let index = body["index"].as_u64().expect("an index");
    let call = {
        let mut seen = seen.lock().unwrap();
        let n = seen.calls.entry(index).or_default();
        *n += 1;
        let call = *n;
        seen.times.entry(index).or_default().push(Instant::now());
        seen.data.push(body["data"].clone());
        if let Some(a) = headers.get("authorization") {
            seen.auth.push(a.to_str().unwrap().to_owned());
        }
        call
    };
    match index {
        7 if call == 1 => (StatusCode::SERVICE_UNAVAILABLE, "busy").into_response(),
        21 if call == 1 => (
            StatusCode::TOO_MANY_REQUESTS,
            [("retry-after", "1")],
            "slow down",
        )
            .into_response(),
        13 => (StatusCode::NOT_FOUND, "no such user").into_response(),
        i if i >= 50 => Json(json!({"past_end": true})).into_response(),
        _ => Json(json!({"ok": true})).into_response(),
    }
}

async fn serve(seen: Shared) -> String {
    let app = Router::new().route("/items", post(item)).with_state(seen);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    format!("http://{addr}")
}

async fn start() -> Harness {
    let policy = HttpPolicy::default().allow_net("127.0.0.0/8".parse().unwrap());
    Harness::start(Duration::from_secs(5), |w| {
        w.register_batch(HttpBatchHandler::new(HttpHandler::new(policy)))
    })
    .await
}

fn batch(data: Value, spec: BatchSpec) -> NewTask {
    NewTask::new("http_batch", data)
        .backoff(instant_retry())
        .max_attempts(1)
        .batch(spec)
}

#[tokio::test]
async fn every_index_is_posted_until_the_service_says_the_items_ended() {
    let seen = Shared::default();
    let base = serve(seen.clone()).await;
    let mut h = start().await;
    let id = h
        .submit(batch(
            json!({
                "url": format!("{base}/items"),
                "headers": {"Authorization": "Bearer s3cret-token"},
                "data": {"campaign": 7}
            }),
            BatchSpec::open_ended()
                .parallelism(4)
                .error_budget(1)
                .item_retries(2, Duration::from_millis(1)),
        ))
        .await;
    let t = h.settled(id).await;
    assert_eq!(t.state, TaskState::Succeeded, "{t:?}");
    assert_eq!(t.result, Some(json!({"items": 50, "errors": 1})));
    {
        let seen = seen.lock().unwrap();
        for i in 0..50 {
            assert!(
                seen.calls.get(&i).is_some_and(|n| *n >= 1),
                "item {i} was posted"
            );
        }
        assert_eq!(seen.calls[&7], 2, "a 503 is retried");
        assert_eq!(seen.calls[&21], 2, "a 429 is retried");
        let waited = seen.times[&21][1] - seen.times[&21][0];
        assert!(
            waited >= Duration::from_secs(1),
            "after the Retry-After of 1 s, not the item backoff of 1 ms: {waited:?}"
        );
        assert_eq!(seen.calls[&13], 1, "a 404 is final at once");
        assert!(seen.data.iter().all(|d| *d == json!({"campaign": 7})));
        assert!(seen.auth.iter().all(|a| a == "Bearer s3cret-token"));
    }
    let failures = h.store.batch_failures(id).await.unwrap();
    assert_eq!(failures.len(), 1);
    assert_eq!(failures[0].item, 13);
    assert!(failures[0].error.contains("404"), "{}", failures[0].error);
    assert!(!failures[0].error.contains("s3cret"), "no secret in errors");
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::Succeeded]);
    h.shutdown().await;
}

#[tokio::test]
async fn an_address_the_policy_refuses_fails_the_items_before_sending() {
    let mut h = start().await;
    let id = h
        .submit(batch(
            json!({"url": "http://10.1.2.3/items"}),
            BatchSpec::items(5),
        ))
        .await;
    let t = h.settled(id).await;
    assert_eq!(t.state, TaskState::Failed, "{t:?}");
    let error = t.last_error.unwrap();
    assert!(
        error.contains("error budget of 0 spent") && error.contains("10.1.2.3"),
        "{error}"
    );
    assert_eq!(h.attempts(id).await.len(), 1, "one attempt, no item sent");
    h.shutdown().await;
}
