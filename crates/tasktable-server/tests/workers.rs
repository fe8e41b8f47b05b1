//! The worker registry through the API: what it lists and shows, a drain and a release,
//! and every kind of bad request refused with a reason and nothing changed.

mod common;

use common::{assert_error, worker_facts, Server};
use reqwest::Method;
use serde_json::json;
use tasktable_store::{WorkerBeatParams, WorkerStatus};

on_every_backend!(
    workers_are_listed_shown_drained_and_released,
    bad_worker_requests_are_refused_and_change_nothing
);

async fn beat(s: &Server, id: &str) -> WorkerStatus {
    s.store
        .worker_beat(WorkerBeatParams {
            facts: worker_facts(id),
            address: None,
            starting: true,
            now: None,
        })
        .await
        .unwrap()
}

async fn workers_are_listed_shown_drained_and_released(s: Server) {
    let (status, empty) = s.get("/api/v1/workers").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty, json!({"workers": [], "live": 0}));

    beat(&s, "w-1").await;
    beat(&s, "w-2").await;
    s.store.worker_leave("w-2".into()).await.unwrap();
    let (_, listed) = s.get("/api/v1/workers").await;
    assert_eq!(listed["live"], 1);
    let workers = listed["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "gone workers are left out: {listed}");
    let w = &workers[0];
    assert_eq!(w["id"], "w-1");
    assert_eq!(w["host"], "host-a");
    assert_eq!(w["pid"], 77);
    assert_eq!(w["groups"], json!(["blue"]));
    assert_eq!(w["queues"], json!(["default"]));
    assert_eq!(w["capacity"], 4);
    assert_eq!(w["protocol"], "process");
    assert_eq!(w["state"], "active");
    assert_eq!(w["draining"], false);
    assert_eq!(w["running"], 0);
    assert_eq!(w["gone_at"], json!(null));
    assert!(w["last_seen_at"]
        .as_str()
        .unwrap()
        .parse::<chrono::DateTime<chrono::Utc>>()
        .is_ok());

    let (_, all) = s.get("/api/v1/workers?include_gone=true").await;
    let states: Vec<(&str, &str)> = all["workers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| (w["id"].as_str().unwrap(), w["state"].as_str().unwrap()))
        .collect();
    assert_eq!(states, vec![("w-1", "active"), ("w-2", "gone")]);
    let (status, shown) = s.get("/api/v1/workers/w-2").await;
    assert_eq!(status, 200);
    assert_eq!(shown["worker"]["state"], "gone", "a gone worker is shown");

    let (status, drained) = s.post("/api/v1/workers/w-1/drain", json!({})).await;
    assert_eq!(status, 200, "{drained}");
    assert_eq!(drained["worker"]["state"], "draining");
    assert!(beat(&s, "w-1").await.draining, "the worker hears of it");
    let (_, released) = s.post("/api/v1/workers/w-1/release", json!({})).await;
    assert_eq!(released["worker"]["state"], "active");
    assert!(!beat(&s, "w-1").await.draining);
}

async fn bad_worker_requests_are_refused_and_change_nothing(s: Server) {
    beat(&s, "w-1").await;
    let before = s.get("/api/v1/workers?include_gone=true").await;
    let cases: Vec<(Method, &str, Option<serde_json::Value>, u16, &str)> = vec![
        (
            Method::GET,
            "/api/v1/workers?include_gone=yes",
            None,
            400,
            "invalid_query",
        ),
        (
            Method::GET,
            "/api/v1/workers?gone=true",
            None,
            400,
            "invalid_query",
        ),
        (
            Method::GET,
            "/api/v1/workers/nobody",
            None,
            404,
            "not_found",
        ),
        (
            Method::GET,
            "/api/v1/workers/%20",
            None,
            400,
            "invalid_path",
        ),
        (
            Method::GET,
            "/api/v1/workers/a%0Ab",
            None,
            400,
            "invalid_path",
        ),
        (
            Method::POST,
            "/api/v1/workers/nobody/drain",
            Some(json!({})),
            404,
            "not_found",
        ),
        (
            Method::POST,
            "/api/v1/workers/w-1/pause",
            Some(json!({})),
            404,
            "not_found",
        ),
        (
            Method::POST,
            "/api/v1/workers/w-1/drain",
            Some(json!({"draining": true})),
            422,
            "invalid_input",
        ),
        (
            Method::POST,
            "/api/v1/workers/w-1/drain",
            Some(json!([])),
            422,
            "invalid_input",
        ),
        (
            Method::DELETE,
            "/api/v1/workers/w-1",
            None,
            405,
            "method_not_allowed",
        ),
    ];
    for (method, path, body, status, code) in cases {
        let answer = s.call(method.clone(), path, body).await;
        assert_error(&answer, status, code);
        assert_eq!(
            s.get("/api/v1/workers?include_gone=true").await,
            before,
            "{method} {path} changed nothing"
        );
    }
}
