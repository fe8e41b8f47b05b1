//! The worker registry through the API: what it lists and shows, a drain and a release,
//! and every kind of bad request refused with a reason and nothing changed.

mod common;

use common::{assert_error, worker_facts, Server};
use reqwest::Method;
use serde_json::json;
use tasktable_store::{WorkerBeatParams, WorkerStatus};

on_every_backend!(
    workers_are_listed_shown_drained_and_released,
    bad_worker_requests_are_refused_and_change_nothing,
    pull_workers_register_with_the_address_they_call_from_and_hear_of_a_drain,
    a_draining_pull_worker_claims_nothing_whatever_it_does,
    bad_heartbeats_are_refused_and_register_nothing
);

async fn beat(s: &Server, id: &str) -> WorkerStatus {
    s.store
        .worker_beat(WorkerBeatParams {
            facts: worker_facts(id),
            address: None,
            starting: true,
            now: None,
            owner: None,
            max_live_per_owner: None,
        })
        .await
        .unwrap()
}

async fn workers_are_listed_shown_drained_and_released(s: Server) {
    let (status, empty) = s.get("/api/v1/workers").await;
    assert_eq!(status, 200, "{empty}");
    assert_eq!(empty, json!({"workers": [], "live": 0, "next": null}));

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

async fn pull_workers_register_with_the_address_they_call_from_and_hear_of_a_drain(s: Server) {
    let (status, beat) = s
        .post(
            "/api/v1/heartbeat",
            json!({"worker_id": "py-1", "host": "box-1", "version": "client 0.1",
                   "groups": ["gpu"], "queues": ["render"], "capacity": 8, "starting": true}),
        )
        .await;
    assert_eq!(status, 200, "{beat}");
    let versions = json!({"oldest": 1, "newest": 1});
    assert_eq!(
        beat,
        json!({"draining": false, "protocol_versions": versions})
    );
    let (_, shown) = s.get("/api/v1/workers/py-1").await;
    let w = &shown["worker"];
    assert_eq!(w["protocol"], "pull");
    assert_eq!(w["host"], "box-1");
    assert_eq!(w["version"], "client 0.1");
    assert_eq!(w["groups"], json!(["gpu"]));
    assert_eq!(w["queues"], json!(["render"]));
    assert_eq!(w["capacity"], 8);
    assert_eq!(w["state"], "active");
    // The test client calls over the loopback interface.
    assert_eq!(w["address"], "127.0.0.1", "{shown}");

    s.post("/api/v1/workers/py-1/drain", json!({})).await;
    let (_, beat) = s
        .post("/api/v1/heartbeat", json!({"worker_id": "py-1"}))
        .await;
    assert_eq!(
        beat,
        json!({"draining": true, "protocol_versions": versions})
    );
    let (status, left) = s.post("/api/v1/leave", json!({"worker_id": "py-1"})).await;
    assert_eq!(status, 200, "{left}");
    let (_, shown) = s.get("/api/v1/workers/py-1").await;
    assert_eq!(shown["worker"]["state"], "gone");
    assert_eq!(
        shown["worker"]["draining"], true,
        "the drain outlives the leave"
    );
}

/// A drain holds for a pull worker that ignores it: the server gives its claims nothing,
/// while another worker's claim takes the task.
async fn a_draining_pull_worker_claims_nothing_whatever_it_does(s: Server) {
    let (status, beat) = s
        .post("/api/v1/heartbeat", json!({"worker_id": "stubborn"}))
        .await;
    assert_eq!(status, 200, "{beat}");
    s.post("/api/v1/workers/stubborn/drain", json!({})).await;
    let (status, submitted) = s
        .post("/api/v1/tasks", json!({"kind": "k", "payload": null}))
        .await;
    assert_eq!(status, 201, "{submitted}");
    let claim =
        |worker: &str| json!({"kinds": ["k"], "worker_id": worker, "limit": 5, "wait_ms": 0});
    let (status, got) = s.post("/api/v1/claim", claim("stubborn")).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got, json!({"tasks": []}), "a draining worker gets nothing");
    let (_, shown) = s.get(&format!("/api/v1/tasks/{}", submitted["id"])).await;
    assert_eq!(shown["task"]["state"], "pending", "{shown}");
    let (status, got) = s.post("/api/v1/claim", claim("willing")).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["tasks"].as_array().map(Vec::len), Some(1), "{got}");
    s.post("/api/v1/workers/stubborn/release", json!({})).await;
    let (status, submitted) = s
        .post("/api/v1/tasks", json!({"kind": "k", "payload": null}))
        .await;
    assert_eq!(status, 201, "{submitted}");
    let (_, got) = s.post("/api/v1/claim", claim("stubborn")).await;
    assert_eq!(
        got["tasks"].as_array().map(Vec::len),
        Some(1),
        "released, it claims again: {got}"
    );
}

async fn bad_heartbeats_are_refused_and_register_nothing(s: Server) {
    let cases = [
        (json!({}), "worker_id"),
        (json!({"worker_id": ""}), "id"),
        (json!({"worker_id": "a|b"}), "'|'"),
        (json!({"worker_id": "w", "groups": ["a|b"]}), "'|'"),
        (json!({"worker_id": "w", "queues": []}), "queues"),
        (json!({"worker_id": "w", "capacity": 0}), "capacity"),
        (json!({"worker_id": "w", "capacity": -1}), "capacity"),
        (json!({"worker_id": "w", "host": "a\u{7}b"}), "host"),
        (json!({"worker_id": "w", "pid": 5}), "unknown field"),
        (json!({"worker_id": "w", "kinds": "resize"}), "kinds"),
        (json!({"worker_id": "w", "kinds": [1]}), "kinds"),
        (json!({"worker_id": "w", "kinds": [""]}), "a kind"),
        (json!({"worker_id": "w", "kinds": ["a\nb"]}), "a kind"),
        (
            json!({"worker_id": "w", "kinds": ["k".repeat(256)]}),
            "a kind",
        ),
        (
            json!({"worker_id": "w", "kinds": (0..=1000).map(|i| format!("k{i}")).collect::<Vec<_>>()}),
            "at most 1000 kinds",
        ),
    ];
    for (body, says) in cases {
        let answer = s.post("/api/v1/heartbeat", body.clone()).await;
        assert_error(&answer, 422, "invalid_input");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body} -> {message:?}");
    }
    // A worker of a pull protocol the server does not speak is told which side to upgrade.
    // A newer worker's heartbeat may hold what this server cannot read: the version is
    // looked at first.
    for (body, says) in [
        (
            json!({"worker_id": "w", "protocol_version": 2}),
            "upgrade the server",
        ),
        (
            json!({"worker_id": "w", "protocol_version": 2, "features": ["x"], "capacity": "many"}),
            "upgrade the server",
        ),
        (
            json!({"worker_id": "w", "protocol_version": 0}),
            "upgrade the worker's package",
        ),
    ] {
        let version = body["protocol_version"].clone();
        let answer = s.post("/api/v1/heartbeat", body).await;
        assert_error(&answer, 422, "protocol_unsupported");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{version} -> {message:?}");
        assert!(message.contains("this server 1 to 1"), "{message:?}");
    }
    for body in [
        json!({}),
        json!({"worker_id": "a|b"}),
        json!({"worker_id": "w", "x": 1}),
    ] {
        let answer = s.post("/api/v1/leave", body.clone()).await;
        assert_error(&answer, 422, "invalid_input");
    }
    let (_, all) = s.get("/api/v1/workers?include_gone=true").await;
    assert_eq!(all["workers"], json!([]), "nothing was registered");
}
