//! Many lease calls in one request (`POST /api/v1/leases`) against real databases: each
//! call fenced and answered on its own, a malformed one refusing the whole request.

mod common;

use common::{assert_error, Server};
use serde_json::{json, Value};

on_every_backend!(
    each_call_is_fenced_and_answered_on_its_own,
    a_malformed_call_refuses_the_whole_request_and_changes_nothing,
    a_result_too_large_is_refused_alone,
    checkpoints_and_runs_go_through_a_batch,
    a_cancelled_task_answers_task_cancelled_in_a_batch,
    a_stale_call_beside_the_current_one_for_the_same_task_is_answered_on_its_own,
    a_forged_credential_on_a_cancelled_run_learns_nothing,
);

async fn submit_many(s: &Server, kind: &str, n: usize) -> Vec<i64> {
    let tasks: Vec<Value> = (0..n)
        .map(|i| json!({"kind": kind, "payload": i}))
        .collect();
    let (status, body) = s
        .post("/api/v1/tasks/batch", json!({ "tasks": tasks }))
        .await;
    assert_eq!(status, 201, "{body}");
    body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_i64().unwrap())
        .collect()
}

/// A multi-run task of `kind` that wants `copies` runs.
async fn submit_copies(s: &Server, kind: &str, copies: u32) -> i64 {
    let (status, body) = s
        .post("/api/v1/tasks", json!({"kind": kind, "copies": copies}))
        .await;
    assert_eq!(status, 201, "{body}");
    body["id"].as_i64().unwrap()
}

/// Claims `n` tasks of `kind` as `worker`, in id order.
async fn claim(s: &Server, kind: &str, worker: &str, n: usize) -> Vec<Value> {
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": [kind], "worker_id": worker, "limit": n}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let mut tasks = body["tasks"].as_array().unwrap().clone();
    assert_eq!(tasks.len(), n, "{body}");
    tasks.sort_by_key(|t| t["id"].as_i64());
    tasks
}

/// A lease call on the task `claimed` got: `fields` with its task, token, credential, run.
fn call(claimed: &Value, op: &str, mut fields: Value) -> Value {
    fields["task"] = claimed["id"].clone();
    fields["op"] = json!(op);
    fields["token"] = claimed["token"].clone();
    fields["credential"] = claimed["credential"].clone();
    if !claimed["run"].is_null() {
        fields["run"] = claimed["run"].clone();
    }
    fields
}

async fn acknowledge(s: &Server, calls: Vec<Value>) -> Vec<Value> {
    let (status, body) = s.post("/api/v1/leases", json!({ "leases": calls })).await;
    assert_eq!(status, 200, "{body}");
    body["results"].as_array().unwrap().clone()
}

/// The task as GET shows it, with its attempts beside its fields.
async fn task(s: &Server, id: i64) -> Value {
    let (status, body) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(status, 200, "{body}");
    let mut task = body["task"].clone();
    task["attempts"] = body["attempts"].clone();
    task
}

async fn each_call_is_fenced_and_answered_on_its_own(s: Server) {
    let ids = submit_many(&s, "k", 4).await;
    let held = claim(&s, "k", "w-1", 4).await;
    let mut forged = call(&held[1], "complete", json!({"result": "forged"}));
    forged["credential"] = json!("0".repeat(32));
    let results = acknowledge(
        &s,
        vec![
            call(&held[0], "complete", json!({"result": {"n": 0}})),
            forged,
            call(&held[2], "renew", json!({"lease_ms": 120000})),
            call(
                &held[3],
                "fail",
                json!({"error": "boom", "retry_after_ms": 60000}),
            ),
            call(&held[0], "release", json!({})),
        ],
    )
    .await;
    let ok: Vec<bool> = results.iter().map(|r| r["ok"] == true).collect();
    assert_eq!(ok, [true, false, true, true, false], "{results:?}");
    let tasks: Vec<i64> = results
        .iter()
        .map(|r| r["task"].as_i64().unwrap())
        .collect();
    assert_eq!(tasks, [ids[0], ids[1], ids[2], ids[3], ids[0]]);
    assert_eq!(results[1]["error"]["code"], "lease_lost");
    assert_eq!(
        results[4]["error"]["code"], "invalid_input",
        "a lease named twice is carried out once"
    );
    assert!(results[2]["lease_expires_at"].is_string(), "{results:?}");

    let first = task(&s, ids[0]).await;
    assert_eq!(first["state"], "succeeded");
    assert_eq!(first["result"], json!({"n": 0}));
    let forged = task(&s, ids[1]).await;
    assert_eq!(
        forged["state"], "running",
        "a forged credential changes nothing"
    );
    assert_eq!(forged["result"], Value::Null);
    let renewed = task(&s, ids[2]).await;
    assert_eq!(renewed["lease_expires_at"], results[2]["lease_expires_at"]);
    let failed = task(&s, ids[3]).await;
    assert_eq!(failed["state"], "pending");
    assert_eq!(failed["last_error"], "boom");
    assert_eq!(failed["attempts"][0]["outcome"], "error");

    // The lease already ended answers lease_lost when the request is repeated.
    let again = acknowledge(
        &s,
        vec![call(&held[0], "complete", json!({"result": {"n": 0}}))],
    )
    .await;
    assert_eq!(again[0]["error"]["code"], "lease_lost");
}

async fn a_malformed_call_refuses_the_whole_request_and_changes_nothing(s: Server) {
    submit_many(&s, "k", 2).await;
    let held = claim(&s, "k", "w-1", 2).await;
    let good = call(&held[0], "complete", json!({"result": 1}));
    let malformed = [
        (
            call(&held[1], "complete", json!({"lease_ms": 5000})),
            "leases[1]: complete does not take lease_ms",
        ),
        (
            call(&held[1], "renew", json!({"delay_ms": null})),
            "leases[1]: renew does not take delay_ms",
        ),
        (call(&held[1], "finish", json!({})), "leases[1]"),
        (
            call(&held[1], "fail", json!({"error": "   "})),
            "leases[1]: fail needs an error message",
        ),
        (
            call(&held[1], "renew", json!({"lease_ms": 10})),
            "leases[1]: lease_ms",
        ),
        (
            {
                let mut bad = call(&held[1], "release", json!({}));
                bad["run"] = json!(2_147_483_648_u64);
                bad
            },
            "leases[1]: run must be between 1 and 2147483647",
        ),
        (
            {
                let mut bad = call(&held[1], "release", json!({}));
                bad["run"] = json!(0);
                bad
            },
            "leases[1]: run must be",
        ),
        (
            json!({"op": "release", "token": 1, "credential": "0".repeat(32)}),
            "task is required",
        ),
        (
            json!({"task": held[1]["id"], "token": 1, "credential": "0".repeat(32)}),
            "op is required",
        ),
        (
            {
                let mut bad = call(&held[1], "release", json!({}));
                bad["credential"] = json!("not hex");
                bad
            },
            "credential must be",
        ),
    ];
    for (bad, says) in malformed {
        let answer = s
            .post("/api/v1/leases", json!({"leases": [good.clone(), bad]}))
            .await;
        assert_error(&answer, 422, "invalid_input");
        let message = answer.1["error"]["message"].as_str().unwrap();
        assert!(message.contains(says), "{message:?} should say {says:?}");
    }
    for empty in [
        json!({"leases": []}),
        json!({}),
        json!({"leases": [good.clone()], "x": 1}),
    ] {
        assert_error(&s.post("/api/v1/leases", empty).await, 422, "invalid_input");
    }
    let too_many: Vec<Value> = (0..1001).map(|_| good.clone()).collect();
    assert_error(
        &s.post("/api/v1/leases", json!({ "leases": too_many }))
            .await,
        422,
        "invalid_input",
    );
    let first = task(&s, held[0]["id"].as_i64().unwrap()).await;
    assert_eq!(first["state"], "running", "nothing changed: {first}");
    assert_eq!(first["attempts"].as_array().unwrap().len(), 0);
}

async fn a_result_too_large_is_refused_alone(s: Server) {
    let ids = submit_many(&s, "k", 3).await;
    let held = claim(&s, "k", "w-1", 3).await;
    let huge = "x".repeat(1_100_000);
    let results = acknowledge(
        &s,
        vec![
            call(&held[0], "complete", json!({"result": 0})),
            call(&held[1], "complete", json!({ "result": huge })),
            call(&held[2], "checkpoint", json!({ "checkpoint": huge })),
        ],
    )
    .await;
    assert_eq!(results[0]["ok"], true, "{results:?}");
    assert_eq!(results[1]["error"]["code"], "payload_too_large");
    assert_eq!(results[2]["error"]["code"], "payload_too_large");
    assert_eq!(task(&s, ids[0]).await["state"], "succeeded");
    let refused = task(&s, ids[1]).await;
    assert_eq!(refused["state"], "running");
    assert_eq!(refused["result"], Value::Null);
    assert_eq!(task(&s, ids[2]).await["checkpoint"], Value::Null);
}

async fn checkpoints_and_runs_go_through_a_batch(s: Server) {
    let copy = submit_copies(&s, "copy", 2).await;
    let single = submit_many(&s, "once", 1).await[0];
    let a = claim(&s, "copy", "w-a", 1).await.remove(0);
    let b = claim(&s, "copy", "w-b", 1).await.remove(0);
    let once = claim(&s, "once", "w-a", 1).await.remove(0);
    assert_ne!(a["run"], b["run"]);
    let results = acknowledge(
        &s,
        vec![
            call(&a, "complete", json!({"result": "a"})),
            call(
                &b,
                "checkpoint",
                json!({"checkpoint": {"at": 7}, "progress": {"pct": 70}}),
            ),
            call(&once, "checkpoint", json!({"checkpoint": {"at": 1}})),
        ],
    )
    .await;
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    assert_eq!(results[0]["run"], a["run"]);
    let results = acknowledge(
        &s,
        vec![
            call(&b, "complete", json!({"result": "b"})),
            call(&once, "release", json!({})),
        ],
    )
    .await;
    assert!(results.iter().all(|r| r["ok"] == true), "{results:?}");
    assert_eq!(task(&s, copy).await["state"], "succeeded");
    let released = task(&s, single).await;
    assert_eq!(released["state"], "pending");
    assert_eq!(released["checkpoint"], json!({"at": 1}));
    let again = claim(&s, "once", "w-b", 1).await.remove(0);
    assert_eq!(again["checkpoint"], json!({"at": 1}));
    assert!(again["token"].as_i64() > once["token"].as_i64());
}

async fn a_cancelled_task_answers_task_cancelled_in_a_batch(s: Server) {
    let ids = submit_many(&s, "k", 2).await;
    let held = claim(&s, "k", "w-1", 2).await;
    let (status, body) = s
        .post(&format!("/api/v1/tasks/{}/cancel", ids[0]), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let results = acknowledge(
        &s,
        vec![
            call(&held[0], "renew", json!({})),
            call(&held[1], "snooze", json!({"delay_ms": 60000})),
        ],
    )
    .await;
    assert_eq!(results[0]["error"]["code"], "task_cancelled");
    assert_eq!(results[1]["ok"], true);
    let results = acknowledge(&s, vec![call(&held[0], "complete", json!({}))]).await;
    assert_eq!(results[0]["error"]["code"], "task_cancelled");
    assert_eq!(task(&s, ids[0]).await["state"], "cancelled");
    assert_eq!(task(&s, ids[1]).await["attempts"][0]["outcome"], "snoozed");
}

async fn a_stale_call_beside_the_current_one_for_the_same_task_is_answered_on_its_own(s: Server) {
    let id = submit_many(&s, "k", 1).await[0];
    let first = claim(&s, "k", "w-1", 1).await.remove(0);
    let released = acknowledge(&s, vec![call(&first, "release", json!({}))]).await;
    assert_eq!(released[0]["ok"], true, "{released:?}");
    let second = claim(&s, "k", "w-1", 1).await.remove(0);
    assert_eq!(second["id"], id);
    let results = acknowledge(
        &s,
        vec![
            call(&first, "complete", json!({"result": "stale"})),
            call(&second, "complete", json!({"result": "current"})),
        ],
    )
    .await;
    assert_eq!(results[0]["error"]["code"], "lease_lost", "{results:?}");
    assert_eq!(results[1]["ok"], true, "{results:?}");
    let done = task(&s, id).await;
    assert_eq!(done["state"], "succeeded");
    assert_eq!(done["result"], "current");
}

async fn a_forged_credential_on_a_cancelled_run_learns_nothing(s: Server) {
    let id = submit_copies(&s, "copy", 2).await;
    let run = claim(&s, "copy", "w-a", 1).await.remove(0);
    assert!(run["run"].is_number(), "{run}");
    let (status, body) = s
        .post(&format!("/api/v1/tasks/{id}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200, "{body}");
    let mut forged = call(&run, "complete", json!({}));
    forged["credential"] = json!("0".repeat(32));
    let answer = acknowledge(&s, vec![forged]).await;
    assert_eq!(
        answer[0]["error"]["code"], "lease_lost",
        "a guessed credential is told nothing about the run"
    );
    let answer = acknowledge(&s, vec![call(&run, "complete", json!({}))]).await;
    assert_eq!(answer[0]["error"]["code"], "task_cancelled");
}
