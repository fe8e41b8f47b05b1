//! Every endpoint against every role, no token, a malformed header and an unknown token:
//! each caller gets exactly what its role allows, no more and no less.

mod common;

use common::Server;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tasktable_server::{Role, TokenSet, ROUTES};

/// One row: method, route, a concrete path, a body, and who may call it
/// (admin, operator, worker, reader).
type Row = (&'static str, &'static str, String, Option<Value>, [bool; 4]);

/// The expected matrix, written out rather than derived from the code under test:
/// (method, route, a concrete request path, body, allowed for [admin, operator, worker, reader]).
fn matrix(id: i64, batch: i64) -> Vec<Row> {
    let read = [true, true, false, true];
    let operate = [true, true, false, false];
    let work = [true, false, true, false];
    let admin = [true, false, false, false];
    vec![
        ("GET", "/api/v1/tasks", "/api/v1/tasks".into(), None, read),
        (
            "POST",
            "/api/v1/tasks",
            "/api/v1/tasks".into(),
            Some(json!({"kind": "k"})),
            operate,
        ),
        (
            "POST",
            "/api/v1/tasks/batch",
            "/api/v1/tasks/batch".into(),
            Some(json!({"tasks": [{"kind": "k"}]})),
            operate,
        ),
        (
            "POST",
            "/api/v1/tasks/bulk/{op}",
            "/api/v1/tasks/bulk/set-priority".into(),
            Some(json!({"filter": {"kind": "k"}, "priority": 1})),
            operate,
        ),
        (
            "GET",
            "/api/v1/tasks/{id}",
            format!("/api/v1/tasks/{id}"),
            None,
            read,
        ),
        (
            "POST",
            "/api/v1/tasks/{id}/{op}",
            format!("/api/v1/tasks/{id}/set-priority"),
            Some(json!({"priority": 2})),
            operate,
        ),
        ("GET", "/api/v1/queues", "/api/v1/queues".into(), None, read),
        (
            "POST",
            "/api/v1/queues/{name}/{op}",
            "/api/v1/queues/other/resume".into(),
            Some(json!({})),
            operate,
        ),
        (
            "PUT",
            "/api/v1/queues/{name}/policy",
            "/api/v1/queues/other/policy".into(),
            Some(json!({"max_running": 4})),
            operate,
        ),
        ("GET", "/api/v1/stats", "/api/v1/stats".into(), None, read),
        ("GET", "/api/v1/audit", "/api/v1/audit".into(), None, read),
        ("GET", "/api/v1/events", "/api/v1/events".into(), None, read),
        (
            "GET",
            "/api/v1/schedules",
            "/api/v1/schedules".into(),
            None,
            read,
        ),
        (
            "POST",
            "/api/v1/schedules",
            "/api/v1/schedules".into(),
            Some(json!({
                "name": "made-by-a-role",
                "recurrence": {"type": "cron", "expr": "0 * * * *", "zone": "UTC"},
                "template": {"kind": "k"}
            })),
            operate,
        ),
        (
            "GET",
            "/api/v1/schedules/{schedule}",
            "/api/v1/schedules/hourly".into(),
            None,
            read,
        ),
        (
            "PATCH",
            "/api/v1/schedules/{schedule}",
            "/api/v1/schedules/hourly".into(),
            Some(json!({"overlap": "skip"})),
            operate,
        ),
        (
            "DELETE",
            "/api/v1/schedules/{schedule}",
            "/api/v1/schedules/made-by-a-role".into(),
            None,
            operate,
        ),
        (
            "POST",
            "/api/v1/schedules/{schedule}/{op}",
            "/api/v1/schedules/hourly/disable".into(),
            Some(json!({})),
            operate,
        ),
        (
            "GET",
            "/api/v1/workers",
            "/api/v1/workers".into(),
            None,
            read,
        ),
        (
            "GET",
            "/api/v1/workers/{id}",
            "/api/v1/workers/w-1".into(),
            None,
            read,
        ),
        (
            "POST",
            "/api/v1/workers/{id}/{op}",
            "/api/v1/workers/w-1/drain".into(),
            Some(json!({})),
            operate,
        ),
        (
            "GET",
            "/api/v1/batches",
            "/api/v1/batches".into(),
            None,
            read,
        ),
        (
            "POST",
            "/api/v1/batches",
            "/api/v1/batches".into(),
            Some(json!({"kind": "k", "held": true, "idempotency_key": "b-1", "batch": {}})),
            operate,
        ),
        (
            "GET",
            "/api/v1/batches/{id}",
            format!("/api/v1/batches/{batch}"),
            None,
            read,
        ),
        (
            "PATCH",
            "/api/v1/batches/{id}",
            format!("/api/v1/batches/{batch}"),
            Some(json!({"error_budget": 4})),
            operate,
        ),
        (
            "POST",
            "/api/v1/batches/{id}/{op}",
            format!("/api/v1/batches/{batch}/pause"),
            Some(json!({})),
            operate,
        ),
        (
            "POST",
            "/api/v1/heartbeat",
            "/api/v1/heartbeat".into(),
            Some(json!({"worker_id": "pull-1"})),
            work,
        ),
        (
            "POST",
            "/api/v1/leave",
            "/api/v1/leave".into(),
            Some(json!({"worker_id": "pull-1"})),
            work,
        ),
        (
            "POST",
            "/api/v1/claim",
            "/api/v1/claim".into(),
            Some(json!({"kinds": ["none"], "worker_id": "w"})),
            work,
        ),
        (
            "POST",
            "/api/v1/leases",
            "/api/v1/leases".into(),
            Some(
                json!({"leases": [{"task": id, "op": "renew", "token": 0, "credential": "0".repeat(32)}]}),
            ),
            work,
        ),
        (
            "POST",
            "/api/v1/leases/{id}/{op}",
            format!("/api/v1/leases/{id}/renew"),
            Some(json!({"token": 0, "credential": "0".repeat(32)})),
            work,
        ),
        (
            "POST",
            "/api/v1/admin/migrate",
            "/api/v1/admin/migrate".into(),
            Some(json!({})),
            admin,
        ),
        (
            "POST",
            "/api/v1/admin/purge",
            "/api/v1/admin/purge".into(),
            Some(json!({"state": "succeeded", "older_than_ms": 86_400_000, "dry_run": true})),
            admin,
        ),
        ("GET", "/metrics", "/metrics".into(), None, read),
    ]
}

on_every_backend!(
    every_endpoint_answers_each_role_as_it_should,
    worker_calls_check_the_role_then_the_worker_ids_owner
);

/// The calls that name a worker id answer the role first (`forbidden`), then whose the
/// id is (`worker_not_owned`, for an admin too: owning an id is identity, not
/// permission); only its owner's calls pass.
async fn worker_calls_check_the_role_then_the_worker_ids_owner(mut s: Server) {
    s.as_role(Role::Worker);
    let (status, body) = s
        .post("/api/v1/heartbeat", json!({"worker_id": "owned"}))
        .await;
    assert_eq!(status, 200, "{body}");
    let calls = [
        ("/api/v1/heartbeat", json!({"worker_id": "owned"})),
        (
            "/api/v1/claim",
            json!({"kinds": ["none"], "worker_id": "owned"}),
        ),
        ("/api/v1/leave", json!({"worker_id": "owned"})),
    ];
    for (path, body) in &calls {
        for (role, code) in [
            (Role::Operator, Some("forbidden")),
            (Role::Reader, Some("forbidden")),
            (Role::Admin, Some("worker_not_owned")),
            (Role::Worker, None),
        ] {
            s.as_role(role);
            let answer = s.post(path, body.clone()).await;
            match code {
                Some(code) => common::assert_error(&answer, 403, code),
                None => assert_eq!(answer.0, 200, "{role} on {path}: {}", answer.1),
            }
        }
    }
}

async fn every_endpoint_answers_each_role_as_it_should(mut s: Server) {
    let (_, body) = s.post("/api/v1/tasks", json!({"kind": "k"})).await;
    let id = body["id"].as_i64().unwrap();
    let (status, _) = s
        .post(
            "/api/v1/schedules",
            json!({
                "name": "hourly",
                "recurrence": {"type": "cron", "expr": "0 * * * *", "zone": "UTC"},
                "template": {"kind": "k"}
            }),
        )
        .await;
    assert_eq!(status, 201);
    s.store
        .worker_beat(tasktable_store::WorkerBeatParams {
            facts: common::worker_facts("w-1"),
            address: None,
            starting: true,
            now: None,
            owner: None,
            max_live_per_owner: None,
        })
        .await
        .unwrap();
    let (status, body) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "k", "held": true, "batch": {"items": 5}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let rows = matrix(id, body["id"].as_i64().unwrap());
    let covered: Vec<(&str, &str)> = rows.iter().map(|r| (r.0, r.1)).collect();
    let routes: Vec<(&str, &str)> = ROUTES.iter().map(|r| (r.0, r.1)).collect();
    assert_eq!(
        covered, routes,
        "the matrix covers every route of the router"
    );

    for (method, route, path, body, allowed) in &rows {
        let method: Method = method.parse().unwrap();
        for (i, role) in [Role::Admin, Role::Operator, Role::Worker, Role::Reader]
            .into_iter()
            .enumerate()
        {
            s.as_role(role);
            let (status, answer) = if *route == "/metrics" {
                // The Prometheus text format when allowed; refusals are JSON like
                // everywhere else.
                let resp = s.request(method.clone(), path).send().await.unwrap();
                let status = resp.status();
                let text = resp.text().await.unwrap();
                let answer = serde_json::from_str(&text).unwrap_or(Value::String(text));
                (status, answer)
            } else {
                s.call(method.clone(), path, own_worker(body, role)).await
            };
            if allowed[i] {
                // A second create of one name is a conflict, and a second delete finds
                // nothing: both got past the role check.
                let again = status == StatusCode::CONFLICT
                    || (method == Method::DELETE && status == StatusCode::NOT_FOUND);
                assert!(
                    status.is_success() || again,
                    "{role} on {method} {route}: {status} {answer}"
                );
            } else {
                assert_eq!(status, 403, "{role} on {method} {route}: {answer}");
                assert_eq!(answer["error"]["code"], "forbidden");
                assert!(answer["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains(role.as_str()));
            }
        }
        let callers: [(&str, Option<&str>); 4] = [
            ("no token", None),
            ("malformed header", Some("Basic YWRtaW46YWRtaW4=")),
            ("empty bearer", Some("Bearer ")),
            (
                "unknown token",
                Some("Bearer not-a-configured-token-at-all"),
            ),
        ];
        for (who, header) in callers {
            let mut req = s.http.request(method.clone(), format!("{}{path}", s.base));
            if let Some(h) = header {
                req = req.header("authorization", h);
            }
            if let Some(b) = body {
                req = req.json(b);
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 401, "{who} on {method} {route}");
            assert!(resp.headers().contains_key("www-authenticate"));
            let answer: Value = resp.json().await.unwrap();
            assert_eq!(
                answer["error"]["code"], "unauthorized",
                "{who} on {method} {route}"
            );
        }
    }
    // The refused calls changed nothing: only the admin's and operator's submits added tasks.
    let (_, page) = s.call(Method::GET, "/api/v1/tasks?limit=100", None).await;
    assert_eq!(
        page["tasks"].as_array().unwrap().len(),
        7,
        "a task and a batch task, one single and one batch submit each by admin and operator, and one batch its key made"
    );
    // Health and the API description need no token.
    let resp = s
        .http
        .get(format!("{}/api/v1/openapi.json", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    let resp = s
        .http
        .get(format!("{}/healthz", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

#[tokio::test]
async fn without_tokens_every_caller_is_admin() {
    let Some(s) = Server::start_with("sqlite", TokenSet::default(), |_| {}).await else {
        return;
    };
    let resp = s
        .http
        .post(format!("{}/api/v1/admin/migrate", s.base))
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(
        resp.status(),
        200,
        "authentication is off when no token is configured"
    );
}

/// `body` with its worker id made the role's own: a worker id belongs to the token that
/// first used it, so each role's calls name a worker of its own.
fn own_worker(body: &Option<Value>, role: Role) -> Option<Value> {
    let mut body = body.clone()?;
    if let Some(id) = body.get("worker_id").and_then(Value::as_str) {
        body["worker_id"] = Value::String(format!("{id}-{role}"));
    }
    Some(body)
}
