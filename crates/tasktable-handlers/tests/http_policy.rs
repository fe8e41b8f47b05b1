//! Where the `http` handler may connect: its default refusal of addresses that are not
//! public, names judged by what they resolve to, redirects re-checked hop by hop, and
//! headers dropped on the way to another origin. A real worker on SQLite against real
//! HTTP servers on loopback, which the tests must opt in to reach.

mod harness;

use axum::extract::Query;
use axum::http::HeaderMap;
use axum::response::Redirect;
use axum::routing::{any, get};
use axum::{Json, Router};
use harness::{instant_retry, Harness};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_handlers::{HttpHandler, HttpPolicy};

const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

/// A server on 127.0.0.1 that counts the requests it answers.
struct Server {
    base: String,
    port: u16,
    hits: Arc<AtomicUsize>,
}

impl Server {
    async fn start() -> Server {
        let hits = Arc::new(AtomicUsize::new(0));
        let counted = hits.clone();
        let app = Router::new()
            .route("/echo", any(echo))
            // Redirects (307) to the URL in its `url` query parameter.
            .route(
                "/to",
                get(|Query(q): Query<HashMap<String, String>>| async move {
                    Redirect::temporary(&q["url"])
                })
                .post(|Query(q): Query<HashMap<String, String>>| async move {
                    Redirect::temporary(&q["url"])
                }),
            )
            .layer(axum::middleware::from_fn(
                move |request: axum::extract::Request, next: axum::middleware::Next| {
                    counted.fetch_add(1, Ordering::SeqCst);
                    next.run(request)
                },
            ));
        let listener = tokio::net::TcpListener::bind((LOOPBACK, 0)).await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Server {
            base: format!("http://127.0.0.1:{port}"),
            port,
            hits,
        }
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// The credentials it was sent, so a test can see which reached it.
async fn echo(headers: HeaderMap) -> Json<Value> {
    let header = |name: &str| headers.get(name).map(|v| v.to_str().unwrap().to_owned());
    Json(json!({
        "x_api_key": header("x-api-key"),
        "authorization": header("authorization"),
    }))
}

async fn start(policy: HttpPolicy) -> Harness {
    Harness::start(Duration::from_secs(5), |w| {
        w.register(HttpHandler::new(policy))
    })
    .await
}

/// Five attempts, so a refusal that is not permanent would show as a retry.
fn http(payload: Value) -> NewTask {
    NewTask::new("http", payload)
        .backoff(instant_retry())
        .max_attempts(5)
        .timeout(Duration::from_secs(30))
}

/// Waits for task `id` and returns its error, checking it failed at once.
async fn refused(h: &mut Harness, id: i64) -> String {
    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(
        h.outcomes(id).await,
        [AttemptOutcome::Failed],
        "{:?}",
        task.last_error
    );
    task.last_error.unwrap()
}

#[tokio::test]
async fn addresses_that_are_not_public_are_refused_by_default_before_anything_is_sent() {
    let server = Server::start().await;
    let port = server.port;
    let mut h = start(HttpPolicy::default()).await;
    let cases = [
        (format!("http://127.0.0.1:{port}/echo"), "127.0.0.1"),
        (
            format!("http://localhost:{port}/echo"),
            "which \"localhost\" resolves to",
        ),
        (format!("http://0.0.0.0:{port}/echo"), "0.0.0.0"),
        (format!("http://2130706433:{port}/echo"), "127.0.0.1"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/echo"),
            "::ffff:127.0.0.1",
        ),
        (format!("http://[::1]:{port}/echo"), "::1"),
        (
            "http://169.254.169.254/latest/meta-data/".into(),
            "169.254.169.254",
        ),
        (
            "http://[fd00:ec2::254]/latest/meta-data/".into(),
            "fd00:ec2::254",
        ),
        (
            "http://100.100.100.200/latest/meta-data/".into(),
            "100.100.100.200",
        ),
        ("http://10.0.0.1/".into(), "10.0.0.1"),
        ("https://192.168.1.1/".into(), "192.168.1.1"),
    ];
    let mut ids = Vec::new();
    for (url, _) in &cases {
        ids.push(h.submit(http(json!({"url": url}))).await);
    }

    for (id, (url, address)) in ids.into_iter().zip(&cases) {
        let error = refused(&mut h, id).await;
        assert!(error.contains("refused to connect to "), "{url}: {error}");
        assert!(
            error.contains(address),
            "{url}: {error} should name {address}"
        );
        assert!(error.contains("--http-allow-net "), "{url}: {error}");
    }
    assert_eq!(server.hits(), 0, "no request reached the server");
    h.shutdown().await;
}

#[tokio::test]
async fn a_name_is_judged_by_the_address_it_resolves_to_and_an_allowed_host_passes() {
    let server = Server::start().await;
    let url = format!("http://rebind.test:{}/echo", server.port);
    // As if the name's DNS answered with loopback when the handler asked.
    let pinned = HttpPolicy::default().resolve_to("rebind.test".parse().unwrap(), [LOOPBACK]);

    let mut h = start(pinned.clone()).await;
    let id = h.submit(http(json!({"url": url}))).await;
    let error = refused(&mut h, id).await;
    assert!(
        error.contains("127.0.0.1, which \"rebind.test\" resolves to"),
        "{error}"
    );
    assert!(error.contains("--http-allow-host rebind.test"), "{error}");
    assert_eq!(server.hits(), 0);
    h.shutdown().await;

    let mut h = start(pinned.allow_host("rebind.test".parse().unwrap())).await;
    let id = h.submit(http(json!({"url": url}))).await;
    assert_eq!(h.settled(id).await.state, TaskState::Succeeded);
    assert_eq!(server.hits(), 1);
    h.shutdown().await;
}

#[tokio::test]
async fn every_redirect_is_checked_like_the_first_request() {
    let server = Server::start().await;
    let port = server.port;
    let policy = HttpPolicy::default()
        .allow_net("127.0.0.1".parse().unwrap())
        .resolve_to(
            "inside.test".parse().unwrap(),
            ["10.1.2.3".parse().unwrap()],
        );
    let mut h = start(policy).await;
    let to = |target: &str| format!("{}/to?url={target}", server.base);
    let cases = [
        (to("http://10.0.0.1/"), "10.0.0.1"),
        (to(&format!("http://[::1]:{port}/echo")), "::1"),
        (to("http://169.254.169.254/"), "169.254.169.254"),
        (
            to(&format!("http://inside.test:{port}/echo")),
            "10.1.2.3, which \"inside.test\"",
        ),
    ];
    let mut ids = Vec::new();
    for (url, _) in &cases {
        ids.push(h.submit(http(json!({"url": url}))).await);
    }

    for (id, (url, address)) in ids.into_iter().zip(&cases) {
        let error = refused(&mut h, id).await;
        assert!(
            error.contains(&format!("refused to connect to {address}")),
            "{url}: {error}"
        );
    }
    assert_eq!(server.hits(), cases.len(), "only the first hops were sent");
    h.shutdown().await;
}

#[tokio::test]
async fn a_redirect_to_another_origin_drops_the_payload_headers() {
    let first = Server::start().await;
    let other = Server::start().await;
    let policy = HttpPolicy::default().allow_net("127.0.0.0/8".parse().unwrap());
    let mut h = start(policy).await;
    let headers = json!({"X-Api-Key": "k3y-of-the-first", "Authorization": "Bearer t0ken"});
    let task = |target: &Server| {
        let url = format!("{}/to?url={}/echo", first.base, target.base);
        http(json!({"url": url, "headers": headers}))
    };
    let same = h.submit(task(&first)).await;
    let cross = h.submit(task(&other)).await;

    let echoed = |task: tasktable_core::Task| task.result.expect("succeeded")["body"].clone();
    let kept = echoed(h.settled(same).await);
    assert_eq!(
        kept,
        json!({"x_api_key": "k3y-of-the-first", "authorization": "Bearer t0ken"})
    );
    let dropped = echoed(h.settled(cross).await);
    assert_eq!(dropped, json!({"x_api_key": null, "authorization": null}));
    h.shutdown().await;
}
