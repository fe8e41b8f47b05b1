//! Batches over HTTP: submitted as tasks with `batch`, listed, shown with their failed
//! items, edited, and started, paused, stopped and resumed; bad input is refused with a
//! clear 4xx and changes nothing.

mod common;

use common::{assert_error, Server};
use reqwest::Method;
use serde_json::{json, Value};
use tasktable_core::{AttemptOutcome, HandlerOutcome};
use tasktable_store::{BatchSaveParams, ClaimParams, FinishItem, FinishParams, ItemFailure};

on_every_backend!(
    a_batch_is_submitted_listed_shown_and_controlled,
    bad_batch_input_is_refused_and_changes_nothing,
);

async fn patch(s: &Server, path: &str, body: Value) -> (reqwest::StatusCode, Value) {
    s.call(Method::PATCH, path, Some(body)).await
}

async fn a_batch_is_submitted_listed_shown_and_controlled(s: Server) {
    let (status, answer) = s
        .post(
            "/api/v1/tasks",
            json!({
                "kind": "notify", "payload": {"campaign": 7}, "held": true,
                "batch": {"items": 500, "parallelism": 4, "rate": 50, "error_budget": 3}
            }),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    let id = answer["id"].as_i64().unwrap();
    let (status, page) = s.get("/api/v1/batches").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(page["batches"].as_array().unwrap().len(), 1);
    let b = &page["batches"][0];
    assert_eq!(
        (
            &b["status"],
            &b["items"],
            &b["window"],
            &b["rate"],
            &b["task"]["id"]
        ),
        (
            &json!("waiting"),
            &json!(500),
            &json!(500),
            &json!(50),
            &json!(id)
        )
    );
    assert_eq!(page["next"], Value::Null);
    // Pages: a second batch, one a page.
    let (_, second) = s
        .post("/api/v1/tasks", json!({"kind": "notify", "batch": {}}))
        .await;
    let (_, first_page) = s.get("/api/v1/batches?limit=1").await;
    assert_eq!(first_page["batches"][0]["task"]["id"], second["id"]);
    assert_eq!(first_page["next"], second["id"]);
    let (_, next_page) = s
        .get(&format!("/api/v1/batches?limit=1&before={}", second["id"]))
        .await;
    assert_eq!(next_page["batches"][0]["task"]["id"], json!(id));
    assert_eq!(next_page["batches"][0]["items"], json!(500));
    assert_eq!(second["task"]["state"], "pending", "{second}");
    // The business starts it; a worker runs it and saves a failed item.
    let (status, started) = s
        .post(&format!("/api/v1/batches/{id}/start"), json!({}))
        .await;
    assert_eq!(
        (status.as_u16(), &started["batch"]["status"]),
        (200, &json!("queued"))
    );
    let task = s
        .store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["notify".into()],
            limit: 1,
            worker_id: "w".into(),
            worker_host: "h".into(),
            worker_groups: vec![],
            lease_for: std::time::Duration::from_secs(30),
            now: None,
        })
        .await
        .unwrap()
        .pop()
        .expect("the batch is claimed");
    s.store
        .batch_save(BatchSaveParams {
            lease: task.lease(),
            low_water: 120,
            end: Some(500),
            errors: 1,
            failures: vec![ItemFailure {
                item: 17,
                error: "no such user".into(),
                tries: 3,
                failed_at: None,
            }],
            items_per_second: Some(40.0),
            lease_for: std::time::Duration::from_secs(30),
            data_version: 0,
            now: None,
        })
        .await
        .unwrap();
    let (status, shown) = s.get(&format!("/api/v1/batches/{id}")).await;
    assert_eq!(status, 200, "{shown}");
    let b = &shown["batch"];
    assert_eq!(
        (
            &b["status"],
            &b["low_water"],
            &b["errors"],
            &b["eta_seconds"]
        ),
        (&json!("running"), &json!(120), &json!(1), &json!(9.5))
    );
    assert_eq!(
        shown["failures"],
        json!([{"item": 17, "error": "no such user", "tries": 3, "failed_at": shown["failures"][0]["failed_at"]}])
    );
    // A pause of a running batch waits for its runner; the data of a parallel batch is
    // fixed while it runs, its budget is not.
    let (_, pausing) = s
        .post(&format!("/api/v1/batches/{id}/pause"), json!({}))
        .await;
    assert_eq!(pausing["batch"]["status"], "pausing");
    let refused = patch(
        &s,
        &format!("/api/v1/batches/{id}"),
        json!({"data": {"campaign": 8}}),
    )
    .await;
    assert_error(&refused, 409, "batch_refused");
    let (status, edited) = patch(
        &s,
        &format!("/api/v1/batches/{id}"),
        json!({"error_budget": 9}),
    )
    .await;
    assert_eq!(
        (status.as_u16(), &edited["batch"]["error_budget"]),
        (200, &json!(9))
    );
    assert_eq!(edited["batch"]["task"]["payload"], json!({"campaign": 7}));
    // The runner gives it back held; resume and stop follow.
    let done = s
        .store
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: task.lease(),
                plan: tasktable_core::outcome::FinishPlan::for_handler(
                    HandlerOutcome::Hold {
                        reason: "paused".into(),
                    },
                    task.attempt,
                    &task.backoff,
                    0.5,
                ),
            }],
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(done, [true]);
    let (_, shown) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(
        shown["attempts"][0]["outcome"],
        AttemptOutcome::Paused.as_str()
    );
    for (op, status) in [
        ("resume", "queued"),
        ("stop", "stopped"),
        ("resume", "queued"),
    ] {
        let (code, answer) = s
            .post(&format!("/api/v1/batches/{id}/{op}"), json!({}))
            .await;
        assert_eq!(
            (code.as_u16(), &answer["batch"]["status"]),
            (200, &json!(status)),
            "{op}"
        );
    }
    let again = s
        .post(&format!("/api/v1/batches/{id}/start"), json!({}))
        .await;
    assert_error(&again, 409, "batch_refused");
    // POST /api/v1/batches creates one and answers with it; a repeated key finds it.
    let body = json!({"kind": "notify", "idempotency_key": "b-7", "batch": {"items": 3}});
    let (status, made) = s.post("/api/v1/batches", body.clone()).await;
    assert_eq!(status, 201, "{made}");
    assert_eq!(
        (&made["created"], &made["batch"]["items"]),
        (&json!(true), &json!(3))
    );
    let (status, again) = s.post("/api/v1/batches", body).await;
    assert_eq!((status.as_u16(), &again["id"]), (200, &made["id"]));
    let (_, plain) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "notify", "idempotency_key": "t-8"}),
        )
        .await;
    let clash = s
        .post(
            "/api/v1/batches",
            json!({"kind": "notify", "idempotency_key": "t-8", "batch": {}}),
        )
        .await;
    assert_error(&clash, 409, "batch_refused");
    assert!(plain["id"].is_i64());
    // The route says it is a batch: `batch` left out is a batch of defaults.
    let (status, without) = s.post("/api/v1/batches", json!({"kind": "notify"})).await;
    assert_eq!(status, 201, "{without}");
    assert_eq!(without["batch"]["parallelism"], 10, "{without}");
    // A task that runs once is no batch.
    let (_, plain) = s.post("/api/v1/tasks", json!({"kind": "notify"})).await;
    let missing = s.get(&format!("/api/v1/batches/{}", plain["id"])).await;
    assert_error(&missing, 404, "not_found");
}

async fn bad_batch_input_is_refused_and_changes_nothing(s: Server) {
    let bad_submits = [
        json!({"kind": "b", "batch": {"parallelism": 0}}),
        json!({"kind": "b", "batch": {"parallelism": 10001}}),
        json!({"kind": "b", "batch": {"rate": 0}}),
        json!({"kind": "b", "batch": {"rate": 1_000_000_001}}),
        json!({"kind": "b", "batch": {"rate": 4_294_967_295_u64}}),
        json!({"kind": "b", "batch": {"window": 0}}),
        json!({"kind": "b", "batch": {"window": 10000001}}),
        json!({"kind": "b", "batch": {"items": -1}}),
        json!({"kind": "b", "batch": {"items": "many"}}),
        json!({"kind": "b", "batch": {"item_retries": 101}}),
        json!({"kind": "b", "batch": {"prestart_timeout_ms": 0}}),
        json!({"kind": "b", "batch": {"unknown": 1}}),
        json!({"kind": "b", "batch": 5}),
        json!({"kind": "b", "batch": {}, "timeout_ms": 1000}),
        json!({"kind": "b", "batch": {}, "copies": 2}),
    ];
    for body in bad_submits {
        let answer = s.post("/api/v1/tasks", body.clone()).await;
        assert!(
            [400, 422].contains(&answer.0.as_u16()),
            "{body}: {answer:?}"
        );
        assert!(answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    assert_eq!(s.task_count().await, 0, "nothing was stored");
    let (_, answer) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "b", "held": true, "batch": {"items": 10}}),
        )
        .await;
    let id = answer["id"].as_i64().unwrap();
    let before = s.get(&format!("/api/v1/batches/{id}")).await.1;
    let bad_edits = [
        json!({}),
        json!({"error_budget": -1}),
        json!({"error_budget": "x"}),
        json!({"data": null}),
        json!({"budget": 3}),
    ];
    for body in bad_edits {
        let answer = patch(&s, &format!("/api/v1/batches/{id}"), body.clone()).await;
        assert!(
            [400, 422].contains(&answer.0.as_u16()),
            "{body}: {answer:?}"
        );
        assert!(answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
    }
    let big = json!({"data": {"blob": "x".repeat(2 << 20)}});
    let answer = patch(&s, &format!("/api/v1/batches/{id}"), big).await;
    assert_eq!(answer.0.as_u16(), 413, "{answer:?}");
    for (path, status) in [
        (format!("/api/v1/batches/{id}/explode"), 404),
        ("/api/v1/batches/999999/pause".to_owned(), 404),
        ("/api/v1/batches/abc/pause".to_owned(), 400),
    ] {
        let answer = s.post(&path, json!({})).await;
        assert_eq!(answer.0.as_u16(), status, "{path}: {answer:?}");
    }
    let answer = s
        .post(&format!("/api/v1/batches/{id}/pause"), json!({"x": 1}))
        .await;
    assert!([400, 422].contains(&answer.0.as_u16()), "{answer:?}");
    for query in ["limit=0", "limit=1001", "limit=x", "before=x", "other=1"] {
        let answer = s.get(&format!("/api/v1/batches?{query}")).await;
        assert_eq!(answer.0.as_u16(), 400, "{query}: {answer:?}");
    }
    let after = s.get(&format!("/api/v1/batches/{id}")).await.1;
    assert_eq!(before, after, "the refused calls changed nothing");
}
