//! The REST API against real databases: submitting, finding and changing tasks.

mod common;

use common::{assert_error, Server};
use serde_json::{json, Value};

on_every_backend!(
    submit_applies_defaults_and_options,
    idempotent_submit_returns_the_existing_task_and_says_so,
    batch_submit_is_all_or_none,
    list_filters_and_pages,
    show_includes_the_attempt_history,
    every_operation_moves_a_task_as_the_state_machine_says,
    bulk_changes_count_and_refuse_an_empty_filter,
    bulk_changes_go_in_steps_and_dry_runs_count,
    queues_pause_resume_and_stats_count,
    stats_report_throughput_success_and_latency_per_kind,
);

async fn submit_applies_defaults_and_options(s: Server) {
    let (status, body) = s
        .post(
            "/api/v1/tasks",
            json!({"kind": "email", "payload": {"to": "ada"}}),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["created"], true);
    let task = &body["task"];
    assert_eq!(task["id"], body["id"]);
    assert_eq!(task["state"], "pending");
    assert_eq!(task["queue"], "default");
    assert_eq!(task["payload"], json!({"to": "ada"}));
    assert_eq!(task["max_attempts"], 5);
    assert_eq!(
        task["backoff"],
        json!({"initial_ms": 5000, "multiplier": 2.0, "max_ms": 3_600_000, "jitter": 0.1})
    );

    let (status, body) = s
        .post(
            "/api/v1/tasks",
            json!({
                "kind": "report", "queue": "slow", "payload": [1, 2], "key": "user-7",
                "priority": -3, "delay_ms": 60_000, "max_attempts": 9, "timeout_ms": 1500,
                "backoff": {"initial_ms": 10, "multiplier": 3.0, "max_ms": 1000, "jitter": 0.0},
                "held": true, "affinity_ms": 45_000
            }),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    let task = &body["task"];
    assert_eq!(task["state"], "held");
    assert_eq!(
        (task["queue"].as_str(), task["key"].as_str()),
        (Some("slow"), Some("user-7"))
    );
    assert_eq!(
        (task["priority"].as_i64(), task["max_attempts"].as_i64()),
        (Some(-3), Some(9))
    );
    assert_eq!(task["timeout_ms"], 1500);
    assert_eq!(
        (&task["affinity_ms"], &task["affinity_until"]),
        (&json!(45_000), &json!(null))
    );
    assert_eq!(task["backoff"]["initial_ms"], 10);
    let created: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(task["created_at"].clone()).unwrap();
    let run_at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(task["run_at"].clone()).unwrap();
    let delay = (run_at - created).num_milliseconds();
    assert!(
        (59_000..=61_000).contains(&delay),
        "run_at is created_at + 60 s, got {delay} ms"
    );
}

async fn idempotent_submit_returns_the_existing_task_and_says_so(s: Server) {
    let task = json!({"kind": "charge", "payload": {"cents": 100}, "idempotency_key": "order-1"});
    let (first, one) = s.post("/api/v1/tasks", task).await;
    assert_eq!(first, 201);
    let repeat = json!({"kind": "charge", "payload": {"cents": 999}, "idempotency_key": "order-1"});
    let (again, two) = s.post("/api/v1/tasks", repeat).await;
    assert_eq!(again, 200, "a repeat is not a creation: {two}");
    assert_eq!(two["created"], false);
    assert_eq!(two["id"], one["id"]);
    assert_eq!(
        two["task"]["payload"],
        json!({"cents": 100}),
        "the first task is returned as it was"
    );
    assert_eq!(s.task_count().await, 1);
}

async fn batch_submit_is_all_or_none(s: Server) {
    let good = json!({"kind": "a", "payload": 1});
    let bad = json!({"kind": "b", "payload": 2, "max_attempts": 0});
    let answer = s
        .post("/api/v1/tasks/batch", json!({"tasks": [good, good, bad]}))
        .await;
    assert_error(&answer, 422, "invalid_input");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("#2"),
        "names the bad task: {}",
        answer.1
    );
    assert_eq!(
        s.task_count().await,
        0,
        "nothing of a refused batch is written"
    );

    let tasks: Vec<Value> = (0..3)
        .map(|i| json!({"kind": "a", "payload": i, "idempotency_key": format!("k{i}")}))
        .collect();
    let (status, body) = s.post("/api/v1/tasks/batch", json!({"tasks": tasks})).await;
    assert_eq!(status, 201, "{body}");
    let created: Vec<bool> = body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["created"].as_bool().unwrap())
        .collect();
    assert_eq!(created, [true, true, true]);
    let (status, body) = s.post("/api/v1/tasks/batch", json!({"tasks": tasks})).await;
    assert_eq!(status, 200, "all repeats: {body}");
    assert!(body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["created"] == false));
    assert_eq!(s.task_count().await, 3);
}

async fn list_filters_and_pages(s: Server) {
    for i in 0..7 {
        let queue = if i % 2 == 0 { "even" } else { "odd" };
        let body = json!({"kind": "k", "queue": queue, "payload": i, "key": format!("key-{i}")});
        assert_eq!(s.post("/api/v1/tasks", body).await.0, 201);
    }
    s.post(
        "/api/v1/tasks",
        json!({"kind": "other", "payload": null, "held": true}),
    )
    .await;

    let (_, body) = s.get("/api/v1/tasks?queue=even&kind=k").await;
    let payloads: Vec<i64> = body["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["payload"].as_i64().unwrap())
        .collect();
    assert_eq!(payloads, [6, 4, 2, 0], "newest first");
    let (_, body) = s.get("/api/v1/tasks?state=held").await;
    assert_eq!(body["tasks"].as_array().unwrap().len(), 1);
    assert_eq!(body["tasks"][0]["kind"], "other");
    let (_, body) = s.get("/api/v1/tasks?state=held,pending&key=key-3").await;
    assert_eq!(body["tasks"][0]["payload"], 3);

    let mut seen = Vec::new();
    let mut path = "/api/v1/tasks?kind=k&limit=3".to_owned();
    loop {
        let (status, page) = s.get(&path).await;
        assert_eq!(status, 200, "{page}");
        assert!(page["tasks"].as_array().unwrap().len() <= 3);
        seen.extend(
            page["tasks"]
                .as_array()
                .unwrap()
                .iter()
                .map(|t| t["payload"].as_i64().unwrap()),
        );
        match page["next"].as_i64() {
            Some(next) => path = format!("/api/v1/tasks?kind=k&limit=3&after={next}"),
            None => break,
        }
    }
    assert_eq!(seen, [6, 5, 4, 3, 2, 1, 0], "pages cover every task once");
}

async fn show_includes_the_attempt_history(s: Server) {
    let (_, body) = s
        .post("/api/v1/tasks", json!({"kind": "k", "payload": 1}))
        .await;
    let id = body["id"].as_i64().unwrap();
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "w1", "worker_host": "box-1"}),
        )
        .await;
    let task = &claimed["tasks"][0];
    let (status, _) = s
        .post(
            &format!("/api/v1/leases/{id}/fail"),
            json!({"token": task["token"], "credential": task["credential"], "error": "smtp down"}),
        )
        .await;
    assert_eq!(status, 200);

    let (status, body) = s.get(&format!("/api/v1/tasks/{id}")).await;
    assert_eq!(status, 200);
    assert_eq!(body["task"]["state"], "pending");
    assert_eq!(body["task"]["last_error"], "smtp down");
    let attempts = body["attempts"].as_array().unwrap();
    assert_eq!(attempts.len(), 1);
    assert_eq!(attempts[0]["attempt"], 1);
    assert_eq!(attempts[0]["outcome"], "error");
    assert_eq!(attempts[0]["worker_id"], "w1");
    assert_eq!(attempts[0]["worker_host"], "box-1");
    assert_eq!(attempts[0]["error"], "smtp down");

    assert_error(&s.get("/api/v1/tasks/999999").await, 404, "not_found");
}

async fn every_operation_moves_a_task_as_the_state_machine_says(s: Server) {
    let (_, body) = s
        .post("/api/v1/tasks", json!({"kind": "k", "payload": {"v": 1}}))
        .await;
    let id = body["id"].as_i64().unwrap();
    let op = |name: &str| format!("/api/v1/tasks/{id}/{name}");

    let (status, body) = s.post(&op("hold"), json!({})).await;
    assert_eq!(
        (status.as_u16(), body["task"]["state"].as_str()),
        (200, Some("held"))
    );
    assert_error(
        &s.post(&op("hold"), json!({})).await,
        409,
        "illegal_transition",
    );
    let (_, body) = s.post(&op("release"), json!({})).await;
    assert_eq!(body["task"]["state"], "pending");
    let (_, body) = s.post(&op("set-priority"), json!({"priority": 42})).await;
    assert_eq!(body["task"]["priority"], 42);
    let (_, body) = s
        .post(&op("set-max-attempts"), json!({"max_attempts": 12}))
        .await;
    assert_eq!(body["task"]["max_attempts"], 12);
    let (_, body) = s
        .post(&op("edit-payload"), json!({"payload": {"v": 2}}))
        .await;
    assert_eq!(body["task"]["payload"], json!({"v": 2}));
    let (_, body) = s
        .post(&op("reschedule"), json!({"run_at": "2100-01-01T00:00:00Z"}))
        .await;
    assert_eq!(body["task"]["run_at"], "2100-01-01T00:00:00Z");
    let (status, body) = s.post(&op("reschedule"), json!({"delay_ms": 5000})).await;
    assert_eq!(status, 200, "{body}");
    let (_, body) = s.post(&op("cancel"), json!({})).await;
    assert_eq!(body["task"]["state"], "cancelled");
    let answer = s.post(&op("reschedule"), json!({"delay_ms": 1})).await;
    assert_error(&answer, 409, "illegal_transition");
    assert!(
        answer.1["error"]["message"]
            .as_str()
            .unwrap()
            .contains("it was cancelled"),
        "{}",
        answer.1
    );
    let (_, body) = s.post(&op("edit-payload"), json!({"payload": 3})).await;
    assert_eq!(
        body["task"]["payload"], 3,
        "a cancelled task's payload may be fixed before a retry"
    );
    let (_, body) = s.post(&op("retry"), json!({})).await;
    assert_eq!(body["task"]["state"], "pending");
    assert_eq!(
        body["task"]["attempt"], 0,
        "a retry after cancel gets fresh attempts"
    );

    assert_error(&s.post(&op("explode"), json!({})).await, 404, "not_found");
    assert_error(
        &s.post("/api/v1/tasks/424242/cancel", json!({})).await,
        404,
        "not_found",
    );
    // An operation without values also takes an empty body, declared as JSON all the same:
    // without the content type (as a cross-site form would send it) nothing changes.
    for content_type in [
        None,
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
    ] {
        let mut req = s.request(reqwest::Method::POST, &op("hold"));
        if let Some(t) = content_type {
            req = req.header("content-type", t);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 415, "{content_type:?}");
        let body: Value = resp.json().await.unwrap();
        assert_eq!(body["error"]["code"], "unsupported_media_type");
    }
    assert_eq!(
        s.get(&format!("/api/v1/tasks/{id}")).await.1["task"]["state"],
        "pending"
    );
    let resp = s
        .request(reqwest::Method::POST, &op("hold"))
        .header("content-type", "application/json; charset=utf-8")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
}

async fn bulk_changes_count_and_refuse_an_empty_filter(s: Server) {
    for i in 0..5 {
        let kind = if i < 3 { "mail" } else { "sms" };
        s.post("/api/v1/tasks", json!({"kind": kind, "payload": i}))
            .await;
    }
    let (status, body) = s
        .post(
            "/api/v1/tasks/bulk/hold",
            json!({"filter": {"kind": "mail"}}),
        )
        .await;
    assert_eq!(
        (status.as_u16(), body["changed"].as_u64()),
        (200, Some(3)),
        "{body}"
    );
    let (_, body) = s
        .post(
            "/api/v1/tasks/bulk/hold",
            json!({"filter": {"kind": "mail"}}),
        )
        .await;
    assert_eq!(body["changed"], 0, "already held: skipped, not an error");
    let (_, body) = s
        .post(
            "/api/v1/tasks/bulk/set-priority",
            json!({"filter": {"states": ["held"]}, "priority": 7}),
        )
        .await;
    assert_eq!(body["changed"], 3);
    let (_, page) = s.get("/api/v1/tasks?state=held").await;
    assert!(page["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["priority"] == 7));

    assert_error(
        &s.post("/api/v1/tasks/bulk/cancel", json!({"filter": {}}))
            .await,
        422,
        "invalid_input",
    );
    assert_error(
        &s.post("/api/v1/tasks/bulk/cancel", json!({})).await,
        422,
        "invalid_input",
    );
    assert_error(
        &s.post(
            "/api/v1/tasks/bulk/cancel",
            json!({"filter": {"colour": "red"}}),
        )
        .await,
        422,
        "invalid_input",
    );
    let (_, page) = s.get("/api/v1/tasks?state=cancelled").await;
    assert!(
        page["tasks"].as_array().unwrap().is_empty(),
        "refused bulk changes changed nothing"
    );
}

async fn bulk_changes_go_in_steps_and_dry_runs_count(s: Server) {
    let mut ids = Vec::new();
    for i in 0..7 {
        let (_, body) = s
            .post("/api/v1/tasks", json!({"kind": "mail", "payload": i}))
            .await;
        ids.push(body["id"].as_i64().unwrap());
    }
    s.post(&format!("/api/v1/tasks/{}/hold", ids[0]), json!({}))
        .await;
    let filter = json!({"kind": "mail"});
    // A dry run counts the tasks the change applies to (six pending, not the held one),
    // and changes nothing.
    let (status, body) = s
        .post(
            "/api/v1/tasks/bulk/hold",
            json!({"filter": filter, "dry_run": true}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body, json!({"changed": 0, "matching": 6}));
    let (_, held) = s.get("/api/v1/tasks?state=held").await;
    assert_eq!(held["tasks"].as_array().unwrap().len(), 1);
    // Steps of four, newest first: the second ends the walk.
    let (_, first) = s
        .post(
            "/api/v1/tasks/bulk/hold",
            json!({"filter": filter, "limit": 4}),
        )
        .await;
    let action = first["action"].as_str().expect("an action key").to_owned();
    assert_eq!(
        first,
        json!({"changed": 4, "next": ids[3], "action": action})
    );
    for (i, id) in ids.iter().enumerate() {
        let (_, t) = s.get(&format!("/api/v1/tasks/{id}")).await;
        let held = i == 0 || i >= 3;
        assert_eq!(
            t["task"]["state"],
            if held { "held" } else { "pending" },
            "task {i}"
        );
    }
    let (_, second) = s
        .post(
            "/api/v1/tasks/bulk/hold",
            json!({"filter": filter, "limit": 4, "after": first["next"], "action": action}),
        )
        .await;
    assert_eq!(
        second,
        json!({"changed": 2, "next": null, "action": action})
    );
    // Both steps are one action: one row of the audit, which counts the six tasks; each
    // task's history has its own row.
    let (_, audit) = s.get("/api/v1/audit?event=held").await;
    let rows = audit["events"].as_array().unwrap();
    let own: Vec<&Value> = rows.iter().filter(|e| e["task_id"].is_null()).collect();
    assert_eq!(own.len(), 1, "{audit}");
    assert_eq!(
        (&own[0]["action"], &own[0]["tasks"], &own[0]["detail"]),
        (
            &json!(action),
            &json!(6),
            &json!({"filter": {"kind": "mail"}})
        ),
        "{audit}"
    );
    assert!(
        rows.iter()
            .all(|e| e["task_id"].is_null() || e["action"].is_null()),
        "tasks' rows of the action are left to their histories: {audit}"
    );
    let (_, of_action) = s.get(&format!("/api/v1/audit?action={action}")).await;
    assert_eq!(
        of_action["events"].as_array().unwrap().len(),
        7,
        "{of_action}"
    );
    let (_, shown) = s.get(&format!("/api/v1/tasks/{}", ids[5])).await;
    assert!(
        shown["timeline"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["event"] == "held"),
        "{shown}"
    );
    let (_, none) = s
        .post(
            "/api/v1/tasks/bulk/hold",
            json!({"filter": filter, "limit": 4}),
        )
        .await;
    assert_eq!((&none["changed"], &none["next"]), (&json!(0), &Value::Null));
    // An edit leaves its tasks in the filter: the steps still end.
    let (mut after, mut changed) = (Value::Null, 0);
    loop {
        // A whole number is one however JSON writes it.
        let mut body = json!({"filter": filter, "priority": 3, "limit": 3.0});
        if !after.is_null() {
            body["after"] = after.clone();
        }
        let (status, step) = s.post("/api/v1/tasks/bulk/set-priority", body).await;
        assert_eq!(status, 200, "{step}");
        changed += step["changed"].as_u64().unwrap();
        after = step["next"].clone();
        if after.is_null() {
            break;
        }
    }
    assert_eq!(changed, 7);
    // Bad steps are refused and change nothing.
    for bad in [
        json!({"filter": filter, "limit": 0}),
        json!({"filter": filter, "limit": 1001}),
        json!({"filter": filter, "limit": -1}),
        json!({"filter": filter, "after": ids[3]}),
        json!({"filter": filter, "limit": 2, "after": "x"}),
        json!({"filter": filter, "dry_run": true, "limit": 2}),
        json!({"filter": filter, "dry_run": "yes"}),
        json!({"filter": filter, "dry_run": true, "action": "a"}),
        json!({"filter": filter, "action": ""}),
        json!({"filter": filter, "action": "no spaces"}),
        json!({"filter": filter, "action": "x".repeat(65)}),
        json!({"filter": filter, "action": 7}),
        json!({"filter": filter, "limit": null}),
        json!({"filter": filter, "action": null}),
        // Another operation's action.
        json!({"filter": filter, "action": action}),
    ] {
        assert_error(
            &s.post("/api/v1/tasks/bulk/release", bad.clone()).await,
            422,
            "invalid_input",
        );
    }
    let (_, held) = s.get("/api/v1/tasks?state=held").await;
    assert_eq!(
        held["tasks"].as_array().unwrap().len(),
        7,
        "nothing released"
    );
    // A step or a dry run that reaches no task still refuses what the change would.
    for step in [json!({"limit": 5}), json!({"dry_run": true})] {
        let mut bad = json!({"filter": {"kind": "none"}, "max_attempts": 0});
        bad.as_object_mut()
            .unwrap()
            .extend(step.as_object().unwrap().clone());
        assert_error(
            &s.post("/api/v1/tasks/bulk/set-max-attempts", bad).await,
            422,
            "invalid_input",
        );
    }
}

async fn queues_pause_resume_and_stats_count(s: Server) {
    s.post(
        "/api/v1/tasks",
        json!({"kind": "k", "queue": "q1", "payload": 1}),
    )
    .await;
    s.post(
        "/api/v1/tasks",
        json!({"kind": "k", "queue": "q1", "payload": 2, "held": true}),
    )
    .await;
    let (status, body) = s.post("/api/v1/queues/q1/pause", json!({})).await;
    assert_eq!(
        (status.as_u16(), &body),
        (200, &json!({"name": "q1", "paused": true}))
    );
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"queue": "q1", "kinds": ["k"], "worker_id": "w"}),
        )
        .await;
    assert_eq!(
        claimed["tasks"],
        json!([]),
        "a paused queue hands out nothing"
    );
    let (_, queues) = s.get("/api/v1/queues").await;
    assert_eq!(queues["queues"][0]["paused"], true);
    assert_eq!(queues["queues"][0]["counts"]["pending"], 1);
    assert_eq!(queues["queues"][0]["counts"]["held"], 1);
    s.post("/api/v1/queues/q1/resume", json!({})).await;
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"queue": "q1", "kinds": ["k"], "worker_id": "w"}),
        )
        .await;
    assert_eq!(claimed["tasks"].as_array().unwrap().len(), 1);
    let (_, stats) = s.get("/api/v1/stats").await;
    assert_eq!(stats["totals"]["running"], 1);
    assert_eq!(stats["totals"]["held"], 1);
    assert_error(
        &s.post("/api/v1/queues/q1/drain", json!({})).await,
        404,
        "not_found",
    );
}

async fn stats_report_throughput_success_and_latency_per_kind(s: Server) {
    for n in 0..3 {
        s.post(
            "/api/v1/tasks",
            json!({"kind": "mail", "queue": "q", "payload": n, "max_attempts": 1}),
        )
        .await;
    }
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"queue": "q", "kinds": ["mail"], "worker_id": "w", "limit": 2}),
        )
        .await;
    let leases = claimed["tasks"].as_array().unwrap();
    assert_eq!(leases.len(), 2, "{claimed}");
    let lease = |i: usize| {
        let t = &leases[i];
        (t["id"].as_i64().unwrap(), &t["token"], &t["credential"])
    };
    let (id, token, credential) = lease(0);
    let (status, body) = s
        .post(
            &format!("/api/v1/leases/{id}/complete"),
            json!({"token": token, "credential": credential, "result": {"sent": true}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let (id, token, credential) = lease(1);
    let (status, body) = s
        .post(
            &format!("/api/v1/leases/{id}/fail"),
            json!({"token": token, "credential": credential, "error": "mailbox full"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");

    let (status, stats) = s.get("/api/v1/stats?window=15m&queue=q").await;
    assert_eq!(status, 200, "{stats}");
    assert_eq!(stats["window"]["seconds"], 900);
    let groups = stats["groups"].as_array().unwrap();
    assert_eq!(groups.len(), 1, "{stats}");
    let g = &groups[0];
    assert_eq!(
        (g["queue"].as_str(), g["kind"].as_str()),
        (Some("q"), Some("mail"))
    );
    assert_eq!(g["active"], json!({"held": 0, "pending": 1, "running": 0}));
    assert!(g["oldest_due_at"].is_string(), "the third task waits: {g}");
    assert_eq!(
        (g["submitted"].as_u64(), g["succeeded"].as_u64()),
        (Some(3), Some(1))
    );
    assert_eq!(g["failed"], 1, "one attempt of one spent: failed for good");
    assert_eq!(g["success_rate"], 0.5);
    assert_eq!(g["run_seconds"]["count"], 2);
    assert!(g["run_seconds"]["p50"].as_f64().is_some(), "{g}");
    assert!((g["submitted_per_min"].as_f64().unwrap() - 3.0 / 15.0).abs() < 1e-9);
    let points = stats["series"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 15, "one point a minute");
    let sum = |field: &str| {
        points
            .iter()
            .map(|p| p[field].as_u64().unwrap())
            .sum::<u64>()
    };
    assert_eq!(
        (sum("submitted"), sum("succeeded"), sum("failed")),
        (3, 1, 1)
    );

    let (_, other) = s.get("/api/v1/stats?queue=elsewhere").await;
    assert_eq!(other["groups"], json!([]), "a filter that matches nothing");
    assert_eq!(other["window"]["seconds"], 3600, "one hour by default");
}
