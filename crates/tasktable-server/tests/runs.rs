//! Multi-run tasks through the API and the pull protocol: a claim names the run, every
//! lease call sends it back, and the task page lists the runs.

mod common;

use common::{assert_error, Server};
use serde_json::{json, Value};

on_every_backend!(
    remote_workers_each_run_a_copy_under_the_run_they_were_given,
    a_broadcast_goes_to_every_registered_worker,
    bad_multi_run_submits_are_refused_and_create_nothing,
);

async fn claim(s: &Server, worker: &str) -> Value {
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["sync"], "worker_id": worker}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["tasks"].clone()
}

fn lease(task: &Value, fields: Value) -> Value {
    let mut body = fields;
    body["token"] = task["token"].clone();
    body["credential"] = task["credential"].clone();
    body["run"] = task["run"].clone();
    body
}

async fn remote_workers_each_run_a_copy_under_the_run_they_were_given(s: Server) {
    let (status, answer) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "sync", "payload": {"cache": "eu"}, "copies": 2, "at_once": 2}),
        )
        .await;
    assert_eq!(status, 201, "{answer}");
    let id = answer["id"].as_i64().unwrap();
    assert_eq!(answer["task"]["copies"], 2);
    assert_eq!(answer["task"]["runs_succeeded"], 0);
    let a = claim(&s, "edge-a").await[0].clone();
    let b = claim(&s, "edge-b").await[0].clone();
    assert_eq!((a["id"].as_i64(), a["run"].as_i64()), (Some(id), Some(1)));
    assert_eq!((b["id"].as_i64(), b["run"].as_i64()), (Some(id), Some(2)));
    assert!(claim(&s, "edge-a").await.as_array().unwrap().is_empty());
    // Without its run, a's lease names the task's row, which no claim holds.
    let mut runless = lease(&a, json!({}));
    runless.as_object_mut().unwrap().remove("run");
    let answer = s.post(&format!("/api/v1/leases/{id}/renew"), runless).await;
    assert_error(&answer, 409, "lease_lost");
    // b's run under a's token and credential.
    let mut crossed = lease(&a, json!({}));
    crossed["run"] = b["run"].clone();
    let answer = s
        .post(&format!("/api/v1/leases/{id}/complete"), crossed)
        .await;
    assert_error(&answer, 409, "lease_lost");
    let (status, body) = s
        .post(&format!("/api/v1/leases/{id}/renew"), lease(&a, json!({})))
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = s
        .post(
            &format!("/api/v1/leases/{id}/checkpoint"),
            lease(&a, json!({"checkpoint": {"at": 3}})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    for (t, name) in [(&a, "a"), (&b, "b")] {
        let (status, body) = s
            .post(
                &format!("/api/v1/leases/{id}/complete"),
                lease(t, json!({"result": name})),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, page) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(page["task"]["state"], "succeeded");
    assert_eq!(page["task"]["runs_succeeded"], 2);
    let runs = page["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert_eq!(runs[0]["worker_id"], "edge-a");
    assert_eq!(runs[0]["checkpoint"], json!({"at": 3}));
    assert_eq!(runs[0]["result"], "a");
    assert_eq!(runs[1]["state"], "succeeded");
    assert_eq!(page["attempts"].as_array().unwrap().len(), 2);
    // A repeat of its key with rearm "all" starts it over.
    let (status, _) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "sync", "idempotency_key": "sync-eu", "copies": 1}),
        )
        .await;
    assert_eq!(status, 201);
    let c = claim(&s, "edge-c").await[0].clone();
    let (status, _) = s
        .post(
            &format!("/api/v1/leases/{}/complete", c["id"]),
            lease(&c, json!({})),
        )
        .await;
    assert_eq!(status, 200);
    let (status, again) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "sync", "idempotency_key": "sync-eu", "copies": 1, "rearm": "all"}),
        )
        .await;
    assert_eq!(status, 200, "{again}");
    assert_eq!(
        (
            &again["created"],
            &again["task"]["state"],
            &again["task"]["runs_succeeded"]
        ),
        (&json!(false), &json!("pending"), &json!(0))
    );
    // A task that runs once lists no runs.
    let (_, once) = s.post("/api/v1/tasks", json!({"kind": "sync"})).await;
    let (_, page) = s.get(&format!("/api/v1/tasks/{}", once["id"])).await;
    assert_eq!(page["runs"], json!([]));
    assert_eq!(page["task"]["copies"], Value::Null);
}

async fn a_broadcast_goes_to_every_registered_worker(s: Server) {
    for id in ["edge-a", "edge-b"] {
        let (status, body) = s
            .post(
                "/api/v1/heartbeat",
                json!({"worker_id": id, "starting": true}),
            )
            .await;
        assert_eq!(status, 200, "{body}");
    }
    let (status, answer) = s
        .post("/api/v1/tasks", json!({"kind": "sync", "copies": "all"}))
        .await;
    assert_eq!(status, 201, "{answer}");
    assert_eq!(answer["task"]["copies"], 2);
    assert_eq!(
        answer["task"]["target"],
        json!({"workers": ["edge-a", "edge-b"]})
    );
    assert!(claim(&s, "edge-c").await.as_array().unwrap().is_empty());
    for id in ["edge-a", "edge-b"] {
        assert_eq!(
            claim(&s, id).await.as_array().map(Vec::len),
            Some(1),
            "{id}"
        );
    }
    let answer = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "sync", "copies": "all", "target": {"groups": ["none"]}}),
        )
        .await;
    assert_error(&answer, 422, "invalid_input");
    let answer = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "sync", "copies": "all", "at_once": 1}),
        )
        .await;
    assert_eq!(answer.0, 422, "{answer:?}");
    // "all_joining" keeps the task's own target, and a worker that joins later runs it too.
    let (status, joining) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "sync", "copies": "all_joining", "queue": "edge"}),
        )
        .await;
    assert_eq!(status, 201, "{joining}");
    let task = &joining["task"];
    assert_eq!(
        (&task["copies"], &task["joining"], &task["target"]),
        (&json!(2), &json!(true), &Value::Null)
    );
    let (status, body) = s
        .post(
            "/api/v1/heartbeat",
            json!({"worker_id": "edge-late", "starting": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (status, got) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["sync"], "queue": "edge", "worker_id": "edge-late"}),
        )
        .await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["tasks"][0]["id"], task["id"], "{got}");
}

async fn bad_multi_run_submits_are_refused_and_create_nothing(s: Server) {
    let bad = [
        json!({"kind": "sync", "copies": 0}),
        json!({"kind": "sync", "copies": 10001}),
        json!({"kind": "sync", "copies": 2, "at_once": 3}),
        json!({"kind": "sync", "copies": 2, "at_once": 0}),
        json!({"kind": "sync", "at_once": 2}),
        json!({"kind": "sync", "repeat": true}),
        json!({"kind": "sync", "max_failed_runs": 1}),
        json!({"kind": "sync", "copies": 2, "affinity_ms": 1000}),
        json!({"kind": "sync", "copies": "two"}),
        json!({"kind": "sync", "copies": -1}),
        json!({"kind": "sync", "copies": "ALL"}),
        json!({"kind": "sync", "rearm": "all", "idempotency_key": "k"}),
        json!({"kind": "sync", "copies": 2, "rearm": "all"}),
        json!({"kind": "sync", "copies": 2, "idempotency_key": "k", "rearm": "some"}),
        json!({"kind": "sync", "copies": "all", "repeat": true}),
        json!({"kind": "sync", "copies": "all_joining", "repeat": true}),
        json!({"kind": "sync", "copies": "All_Joining"}),
        json!({"kind": "sync", "copies": 2, "repeat": "yes"}),
    ];
    for body in bad {
        // Malformed JSON values are 400, values a task may not hold 422, each with a
        // message.
        let answer = s.post("/api/v1/tasks", body.clone()).await;
        assert!(
            [400, 422].contains(&answer.0.as_u16()),
            "{body}: {answer:?}"
        );
        assert!(answer.1["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty()));
        let answer = s
            .post(
                "/api/v1/tasks/batch",
                json!({"tasks": [{"kind": "sync"}, body]}),
            )
            .await;
        assert!([400, 422].contains(&answer.0.as_u16()), "{answer:?}");
    }
    assert_eq!(s.task_count().await, 0, "nothing was created");
}
