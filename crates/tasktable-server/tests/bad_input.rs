//! Every kind of bad request gets a 4xx whose JSON says what is wrong, and changes nothing.

mod common;

use common::{assert_error, Server};
use reqwest::Method;
use serde_json::{json, Value};

on_every_backend!(
    bad_submits_are_refused_with_a_reason_and_write_nothing,
    bad_queries_paths_and_methods_are_refused,
    bad_lease_calls_are_refused,
    oversized_bodies_are_refused,
    bad_targets_are_refused_and_change_nothing,
    bad_policies_are_refused_and_change_nothing,
    nul_deep_in_a_payload_is_refused_wherever_a_payload_is_given,
);

async fn bad_submits_are_refused_with_a_reason_and_write_nothing(s: Server) {
    let cases = [
        (
            json!({"kind": "k", "priority": "high"}),
            422,
            "invalid_input",
            "priority",
        ),
        (
            json!({"kind": "k", "delay_ms": -5}),
            422,
            "invalid_input",
            "delay_ms",
        ),
        (
            json!({"kind": "k", "max_attempts": 0}),
            422,
            "invalid_input",
            "max_attempts",
        ),
        (
            json!({"kind": "k", "max_attempts": 4_000_000_000u64}),
            422,
            "invalid_input",
            "max_attempts",
        ),
        (
            json!({"kind": "k", "delay_ms": 999_999_999_999_999u64}),
            422,
            "invalid_input",
            "delay",
        ),
        (
            json!({"kind": "k", "timeout_ms": 0}),
            422,
            "invalid_input",
            "timeout",
        ),
        (
            json!({"kind": "k", "affinity_ms": 0}),
            422,
            "invalid_input",
            "affinity",
        ),
        (
            json!({"kind": "k", "affinity_ms": 315_360_000_001u64}),
            422,
            "invalid_input",
            "affinity",
        ),
        (
            json!({"kind": "k", "affinity_ms": 2.5}),
            422,
            "invalid_input",
            "affinity_ms",
        ),
        (
            json!({"kind": "k", "delay_ms": 5, "run_at": "2030-01-01T00:00:00Z"}),
            422,
            "invalid_input",
            "run_at or delay",
        ),
        (
            json!({"kind": "k", "run_at": "tomorrow"}),
            422,
            "invalid_input",
            "run_at",
        ),
        (
            json!({"kind": ""}),
            422,
            "invalid_input",
            "kind must not be empty",
        ),
        (
            json!({"kind": "k", "queue": "a\u{7}b"}),
            422,
            "invalid_input",
            "control",
        ),
        (
            json!({"kind": "k", "priorty": 5}),
            422,
            "invalid_input",
            "unknown field `priorty`",
        ),
        (
            json!({"payload": 1}),
            422,
            "invalid_input",
            "missing field `kind`",
        ),
        (
            json!({"kind": "k", "payload": "a\u{0}b"}),
            422,
            "invalid_input",
            "NUL",
        ),
        (
            json!({"kind": "k", "backoff": {"initial_ms": 10, "multiplier": 0.5, "max_ms": 100, "jitter": 0}}),
            422,
            "invalid_input",
            "multiplier",
        ),
        // The one rule between two fields, which the OpenAPI document states in words.
        (
            json!({"kind": "k", "backoff": {"initial_ms": 100, "multiplier": 1, "max_ms": 10, "jitter": 0}}),
            422,
            "invalid_input",
            "must not exceed its cap",
        ),
        (
            json!({"kind": "k", "payload": "x".repeat(1_100_000)}),
            413,
            "payload_too_large",
            "limit",
        ),
        (json!([{"kind": "k"}]), 422, "invalid_input", "expected"),
        (
            json!({"kind": "k", "target": {"workers": ["a"], "groups": ["g"]}}),
            422,
            "invalid_input",
            "exactly one",
        ),
        (
            json!({"kind": "k", "target": {}}),
            422,
            "invalid_input",
            "exactly one",
        ),
        (
            json!({"kind": "k", "target": {"workers": []}}),
            422,
            "invalid_input",
            "at least one worker id",
        ),
        (
            json!({"kind": "k", "target": {"groups": ["a|b"]}}),
            422,
            "invalid_input",
            "'|'",
        ),
        (
            json!({"kind": "k", "target": {"hosts": ["a"]}}),
            422,
            "invalid_input",
            "unknown field",
        ),
        (
            json!({"kind": "k", "target": "gpu"}),
            422,
            "invalid_input",
            "target",
        ),
    ];
    for (body, status, code, says) in cases {
        let answer = s.post("/api/v1/tasks", body.clone()).await;
        assert_error(&answer, status, code);
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(
            message.contains(says),
            "{body} -> {message:?} should mention {says:?}"
        );
    }
    let batch = s.post("/api/v1/tasks/batch", json!({"tasks": []})).await;
    assert_error(&batch, 422, "invalid_input");

    let resp = s
        .request(Method::POST, "/api/v1/tasks")
        .header("content-type", "application/json")
        .body("{\"kind\": ")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
    let body: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(body["error"]["code"], "malformed_json");
    let resp = s
        .request(Method::POST, "/api/v1/tasks")
        .body("{\"kind\": \"k\"}")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 415, "a body without a JSON content type");

    assert_eq!(s.task_count().await, 0, "no refused request wrote anything");
}

async fn bad_queries_paths_and_methods_are_refused(s: Server) {
    let cases = [
        ("/api/v1/tasks?limit=0", 422, "invalid_input"),
        ("/api/v1/tasks?limit=1001", 422, "invalid_input"),
        ("/api/v1/tasks?limit=-1", 400, "invalid_query"),
        ("/api/v1/tasks?state=exploded", 400, "invalid_query"),
        ("/api/v1/tasks?colour=red", 400, "invalid_query"),
        (
            "/api/v1/tasks?created_after=yesterday",
            400,
            "invalid_query",
        ),
        ("/api/v1/tasks/abc", 400, "invalid_path"),
        ("/api/v1/stats?window=3w", 422, "invalid_input"),
        ("/api/v1/stats?window=1.5h", 422, "invalid_input"),
        ("/api/v1/stats?window=0m", 422, "invalid_input"),
        ("/api/v1/stats?window=90d", 422, "invalid_input"),
        ("/api/v1/stats?window=%2B1h", 422, "invalid_input"),
        ("/api/v1/stats?window=%201h", 422, "invalid_input"),
        // NUL is in no stored text; PostgreSQL cannot even compare with it, and answered
        // such filters with a 503.
        ("/api/v1/tasks?queue=a%00", 422, "invalid_input"),
        ("/api/v1/tasks?error=%00", 422, "invalid_input"),
        ("/api/v1/stats?kind=%00", 422, "invalid_input"),
        ("/api/v1/stats?bucket=1m", 400, "invalid_query"),
        ("/api/v1/audit?limit=0", 422, "invalid_input"),
        ("/api/v1/audit?limit=1001", 422, "invalid_input"),
        ("/api/v1/audit?event=exploded", 400, "invalid_query"),
        ("/api/v1/audit?event=held,exploded", 400, "invalid_query"),
        ("/api/v1/audit?actor_kind=robot", 400, "invalid_query"),
        ("/api/v1/audit?task=abc", 400, "invalid_query"),
        ("/api/v1/audit?from=yesterday", 400, "invalid_query"),
        ("/api/v1/audit?colour=red", 400, "invalid_query"),
        ("/api/v1/audit?action=no%20spaces", 422, "invalid_input"),
        ("/api/v1/audit?action=", 422, "invalid_input"),
        ("/api/v1/audit?actor=a%00", 422, "invalid_input"),
        ("/api/v1/audit?queue=%00", 422, "invalid_input"),
        ("/api/v1/nothing-here", 404, "not_found"),
    ];
    for (path, status, code) in cases {
        assert_error(&s.get(path).await, status, code);
    }
    assert_error(
        &s.call(Method::DELETE, "/api/v1/tasks", None).await,
        405,
        "method_not_allowed",
    );
    assert_error(
        &s.post("/api/v1/tasks/1/set-priority", json!({"priority": "top"}))
            .await,
        422,
        "invalid_input",
    );
    assert_error(
        &s.post("/api/v1/tasks/1/cancel", json!({"reason": "x"}))
            .await,
        422,
        "invalid_input",
    );
    assert_error(
        &s.post("/api/v1/tasks/1/reschedule", json!({})).await,
        422,
        "invalid_input",
    );
    assert_error(
        &s.post(
            "/api/v1/tasks/bulk/retry",
            json!({"filter": {"states": ["nope"]}}),
        )
        .await,
        422,
        "invalid_input",
    );
    assert_error(
        &s.post("/api/v1/queues/%20/pause", json!({})).await,
        422,
        "invalid_input",
    );
    assert_error(
        &s.post(
            "/api/v1/tasks/bulk/cancel",
            json!({"filter": {"key": "k\u{0}"}}),
        )
        .await,
        422,
        "invalid_input",
    );
    for path in ["/api/v1/queues/q/pause", "/api/v1/admin/migrate"] {
        for (body, status, code) in [
            (json!({"force": true}), 422, "invalid_input"),
            (json!([]), 422, "invalid_input"),
        ] {
            assert_error(&s.post(path, body).await, status, code);
        }
        let resp = s
            .request(Method::POST, path)
            .header("content-type", "application/json")
            .body("{")
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 400, "{path}: malformed JSON");
    }
    let queues = s.get("/api/v1/queues").await.1;
    assert_eq!(
        queues["queues"],
        json!([]),
        "no refused pause paused anything"
    );
}

async fn bad_lease_calls_are_refused(s: Server) {
    let cases = [
        (json!({"worker_id": "w"}), "kinds"),
        (json!({"kinds": [], "worker_id": "w"}), "at least one"),
        (json!({"kinds": ["k"]}), "worker_id"),
        (json!({"kinds": ["k"], "worker_id": "x|g:gpu"}), "'|'"),
        (
            json!({"kinds": ["k"], "worker_id": "w", "limit": 0}),
            "limit",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "limit": 5000}),
            "limit",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "lease_ms": 10}),
            "lease_ms",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "wait_ms": 3_600_000}),
            "wait_ms",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "group": "g"}),
            "unknown field",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "groups": ["gpu|eu"]}),
            "'|'",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "groups": [" "]}),
            "groups",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "groups": (0..65).map(|i| format!("g{i}")).collect::<Vec<_>>()}),
            "at most 64",
        ),
        (
            json!({"kinds": ["k"], "worker_id": "w", "groups": "gpu"}),
            "groups",
        ),
    ];
    for (body, says) in cases {
        let answer = s.post("/api/v1/claim", body.clone()).await;
        assert_error(&answer, 422, "invalid_input");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body} -> {message:?}");
    }
    // A well-formed credential, so each case fails for the reason it names.
    let c = "0".repeat(32);
    let lease_cases = [
        ("renew", json!({}), 422, "missing field `token`"),
        (
            "renew",
            json!({"token": 1}),
            422,
            "missing field `credential`",
        ),
        (
            "renew",
            json!({"token": 1, "credential": "xyz"}),
            422,
            "32 hex digits",
        ),
        (
            "renew",
            json!({"token": 1, "credential": c, "result": 2}),
            422,
            "renew does not take result",
        ),
        (
            "renew",
            json!({"token": 1, "credential": c, "delay_ms": null}),
            422,
            "renew does not take delay_ms",
        ),
        (
            "teleport",
            json!({"token": 1, "credential": c}),
            404,
            "unknown lease operation",
        ),
        (
            "checkpoint",
            json!({"token": 1, "credential": c}),
            422,
            "checkpoint needs",
        ),
        (
            "snooze",
            json!({"token": 1, "credential": c, "delay_ms": u64::MAX}),
            422,
            "delay_ms must be at most",
        ),
        (
            "log",
            json!({"token": 1, "credential": c}),
            422,
            "log needs lines",
        ),
        (
            "log",
            json!({"token": 1, "credential": c, "lines": []}),
            422,
            "log needs lines",
        ),
        (
            "log",
            json!({"token": 1, "credential": c, "lines": vec!["x"; 101]}),
            422,
            "1 to 100",
        ),
        (
            "log",
            json!({"token": 1, "credential": c, "lines": [1, 2]}),
            422,
            "lines",
        ),
        (
            "checkpoint",
            json!({"token": 1, "credential": c, "progress": 1, "lines": ["x"]}),
            422,
            "checkpoint does not take lines",
        ),
    ];
    for (op, body, status, says) in lease_cases {
        let answer = s
            .post(&format!("/api/v1/leases/1/{op}"), body.clone())
            .await;
        let code = if status == 404 {
            "not_found"
        } else {
            "invalid_input"
        };
        assert_error(&answer, status, code);
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{op} {body} -> {message:?}");
    }
}

/// The answer to a POST that announces a body of `len` bytes and sends none of it: a server
/// that refuses an oversized body answers from the announced length, before reading it.
/// (Sending the whole body would race the refusal: the server may close the connection
/// while the client is still writing, and the client then sees a broken pipe instead of
/// the answer.)
async fn announced_body(s: &Server, path: &str, len: usize) -> (reqwest::StatusCode, Value) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let addr = s.base.trim_start_matches("http://");
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let head = format!(
        "POST {path} HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {}\r\n\
         Content-Type: application/json\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n",
        s.token.as_deref().unwrap()
    );
    stream.write_all(head.as_bytes()).await.unwrap();
    // Read the answer's head, then as many body bytes as it announces: the server may keep
    // the connection open for the body it was promised.
    let read = async {
        let mut answer = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "connection closed before a full answer: {answer:?}");
            answer.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&answer).to_string();
            let Some(split) = text.find("\r\n\r\n") else {
                continue;
            };
            let length: usize = text[..split]
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("content-length")
                        .then(|| value.trim().parse().unwrap())
                })
                .expect("a Content-Length");
            if answer.len() >= split + 4 + length {
                return (
                    text[9..12].parse::<u16>().unwrap(),
                    text[split + 4..].to_owned(),
                );
            }
        }
    };
    let (status, body) = tokio::time::timeout(std::time::Duration::from_secs(20), read)
        .await
        .expect("the server answers without waiting for the body");
    (
        reqwest::StatusCode::from_u16(status).unwrap(),
        serde_json::from_str(&body).unwrap_or_else(|_| panic!("not JSON: {body}")),
    )
}

async fn oversized_bodies_are_refused(s: Server) {
    // Operations that read their body themselves answer in JSON too, not in axum's
    // plain text.
    for path in [
        "/api/v1/tasks",
        "/api/v1/tasks/1/edit-payload",
        "/api/v1/tasks/bulk/cancel",
    ] {
        let answer = announced_body(&s, path, 9 << 20).await;
        assert_error(&answer, 413, "body_too_large");
    }
    let tasks: Vec<_> = (0..10_001).map(|_| json!({"kind": "k"})).collect();
    let answer = s
        .post("/api/v1/tasks/batch", json!({ "tasks": tasks }))
        .await;
    assert_error(&answer, 422, "invalid_input");
    assert_eq!(s.task_count().await, 0);
}

async fn bad_targets_are_refused_and_change_nothing(s: Server) {
    let (status, created) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "k", "queue": "q", "target": {"groups": ["gpu"]}}),
        )
        .await;
    assert_eq!(status.as_u16(), 201, "{created}");
    let id = created["id"].as_i64().unwrap();
    assert_eq!(created["task"]["target"], json!({"groups": ["gpu"]}));
    let bodies = [
        (json!({}), "missing field `target`"),
        (json!({"target": {"workers": []}}), "at least one worker id"),
        (
            json!({"target": {"workers": ["a"], "groups": ["b"]}}),
            "exactly one",
        ),
        (json!({"target": {"groups": ["a|b"]}}), "'|'"),
        (json!({"target": {"groups": ["\u{7}"]}}), "control"),
        (json!({"target": "gpu"}), "target"),
        (json!({"target": null, "priority": 1}), "unknown field"),
    ];
    for (body, says) in &bodies {
        let answer = s
            .post(&format!("/api/v1/tasks/{id}/set-target"), body.clone())
            .await;
        assert_error(&answer, 422, "invalid_input");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body} -> {message:?}");
        let mut bulk = body.clone();
        bulk["filter"] = json!({"queue": "q"});
        let answer = s.post("/api/v1/tasks/bulk/set-target", bulk).await;
        assert_error(&answer, 422, "invalid_input");
    }
    let (_, shown) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(shown["task"]["target"], json!({"groups": ["gpu"]}));
    // A good one applies, and null clears it.
    let (status, changed) = s
        .post(
            &format!("/api/v1/tasks/{id}/set-target"),
            json!({"target": {"workers": ["w1"]}}),
        )
        .await;
    assert_eq!(status.as_u16(), 200, "{changed}");
    assert_eq!(changed["task"]["target"], json!({"workers": ["w1"]}));
    let (_, cleared) = s
        .post(
            &format!("/api/v1/tasks/{id}/set-target"),
            json!({"target": null}),
        )
        .await;
    assert_eq!(cleared["task"]["target"], json!(null));
}

async fn put(s: &Server, path: &str, body: Value) -> (reqwest::StatusCode, Value) {
    s.call(Method::PUT, path, Some(body)).await
}

async fn bad_policies_are_refused_and_change_nothing(s: Server) {
    let good = json!({"max_running": 4, "rate": {"per_second": 2.5}});
    let (status, set) = put(&s, "/api/v1/queues/q/policy", good.clone()).await;
    assert_eq!(status.as_u16(), 200, "{set}");
    assert_eq!(set["policy"], good);
    let bodies = [
        (json!({"max_running": -1}), "max_running"),
        (json!({"max_running": 2.5}), "max_running"),
        (json!({"max_running": 1_000_001}), "max_running"),
        (json!({"max_running": "4"}), "max_running"),
        (json!({"rate": {"per_second": 0}}), "per_second"),
        (json!({"rate": {"per_second": 2_000_000}}), "per_second"),
        (json!({"rate": {}}), "per_second"),
        (json!({"rate": {"per_second": 1, "burst": 0}}), "burst"),
        (
            json!({"key_rate": {"per_second": 1, "every": 2}}),
            "unknown field",
        ),
        (json!({"kind_max_running": {"": 1}}), "kind"),
        (json!({"kind_max_running": {"k\u{7}": 1}}), "control"),
        (json!({"kind_max_running": {"k": -2}}), "kind_max_running"),
        (json!({"kind_max_running": null}), "kind_max_running"),
        (json!({"one_per_worker": "yes"}), "one_per_worker"),
        (json!({"max_runing": 3}), "unknown field"),
    ];
    for (body, says) in &bodies {
        let answer = put(&s, "/api/v1/queues/q/policy", body.clone()).await;
        assert_error(&answer, 422, "invalid_input");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{body} -> {message:?}");
    }
    let many: serde_json::Map<String, Value> =
        (0..65).map(|i| (format!("k{i}"), json!(1))).collect();
    let answer = put(
        &s,
        "/api/v1/queues/q/policy",
        json!({ "kind_max_running": many }),
    )
    .await;
    assert_error(&answer, 422, "invalid_input");
    assert_error(
        &put(&s, "/api/v1/queues/%20/policy", json!({})).await,
        422,
        "invalid_input",
    );
    assert_error(
        &put(&s, "/api/v1/queues/q/policy", json!([])).await,
        422,
        "invalid_input",
    );
    let (_, queues) = s.get("/api/v1/queues").await;
    assert_eq!(queues["queues"].as_array().unwrap().len(), 1, "{queues}");
    assert_eq!(
        queues["queues"][0]["policy"], good,
        "nothing refused changed it"
    );
    // `{}` clears it.
    let (status, cleared) = put(&s, "/api/v1/queues/q/policy", json!({})).await;
    assert_eq!(status.as_u16(), 200, "{cleared}");
    assert_eq!(cleared["policy"], json!({}));
}

/// NUL inside `levels` arrays and objects, alternating.
fn nested_nul(levels: usize) -> Value {
    (0..levels).fold(json!("a\u{0}b"), |v, i| {
        if i % 2 == 0 {
            json!([v])
        } else {
            json!({ "k": v })
        }
    })
}

/// The OpenAPI document spells the NUL rule out for a payload's outer levels only, for
/// generators that cannot follow a schema referring to itself; the server holds to it at
/// every depth, wherever a payload is given.
async fn nul_deep_in_a_payload_is_refused_wherever_a_payload_is_given(s: Server) {
    let deep = nested_nul(20);
    let refused = |answer: (reqwest::StatusCode, Value), what: &str| {
        assert_error(&answer, 422, "invalid_input");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains("NUL"), "{what}: {message:?}");
    };

    let good = json!({"kind": "k", "payload": {"deep": nested_nul(0).to_string()}, "held": true});
    let (status, answer) = s.post("/api/v1/tasks", good.clone()).await;
    assert_eq!(status, 201, "{answer}");
    let id = answer["id"].as_i64().unwrap();
    refused(
        s.post("/api/v1/tasks", json!({"kind": "k", "payload": deep}))
            .await,
        "submit",
    );
    refused(
        s.post(
            "/api/v1/tasks/batch",
            json!({"tasks": [{"kind": "k"}, {"kind": "k", "payload": deep}]}),
        )
        .await,
        "submit of several",
    );
    refused(
        s.post(
            &format!("/api/v1/tasks/{id}/edit-payload"),
            json!({"payload": deep}),
        )
        .await,
        "edit",
    );
    refused(
        s.post(
            "/api/v1/tasks/bulk/edit-payload",
            json!({"filter": {"kind": "k"}, "payload": deep}),
        )
        .await,
        "bulk edit",
    );
    refused(
        s.post(
            "/api/v1/schedules",
            json!({"name": "deep", "recurrence": {"type": "every", "every_ms": 60000, "start": "2026-01-01T00:00:00Z"},
                   "template": {"kind": "k", "payload": deep}}),
        )
        .await,
        "schedule template",
    );
    refused(
        s.post("/api/v1/batches", json!({"kind": "b", "payload": deep}))
            .await,
        "batch",
    );
    // A batch's options may be left out where the route says it is one.
    let (status, batch) = s
        .post("/api/v1/batches", json!({"kind": "b", "held": true}))
        .await;
    assert_eq!(status, 201, "{batch}");
    assert_eq!(batch["batch"]["parallelism"], 10, "the default: {batch}");
    let batch = batch["id"].as_i64().unwrap();
    refused(
        s.call(
            Method::PATCH,
            &format!("/api/v1/batches/{batch}"),
            Some(json!({"data": deep})),
        )
        .await,
        "batch data",
    );

    assert_eq!(s.task_count().await, 2, "only the two good submits wrote");
    let (_, shown) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(
        shown["task"]["payload"], good["payload"],
        "the task kept its payload"
    );
    let (_, schedules) = s.get("/api/v1/schedules").await;
    assert_eq!(schedules["schedules"], json!([]), "no schedule was made");
}
