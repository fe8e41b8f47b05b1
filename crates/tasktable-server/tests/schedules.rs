//! Schedules through the API: the whole life of one, what a reader sees of its template,
//! and every kind of bad input refused with a reason and nothing changed.

mod common;

use common::Server;
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tasktable_server::Role;

on_every_backend!(
    a_schedule_is_created_shown_edited_fired_and_deleted,
    bad_schedule_requests_are_refused_and_change_nothing
);

fn nightly() -> Value {
    json!({
        "name": "nightly",
        "recurrence": {"type": "cron", "expr": "0 2 * * *", "zone": "Europe/Berlin"},
        "template": {
            "kind": "http",
            "queue": "reports",
            "payload": {"url": "https://bot:pa55word@hooks.example/x", "body": {"n": 1}},
            "priority": 3,
            "timeout_ms": 60000
        },
        "missed": {"policy": "run_all", "max": 3},
        "overlap": "skip"
    })
}

async fn a_schedule_is_created_shown_edited_fired_and_deleted(mut s: Server) {
    let (status, created) = s.post("/api/v1/schedules", nightly()).await;
    assert_eq!(status, 201, "{created}");
    let sched = &created["schedule"];
    let id = sched["id"].as_i64().unwrap();
    assert_eq!(sched["recurrence"], nightly()["recurrence"]);
    assert_eq!(sched["missed"], json!({"policy": "run_all", "max": 3}));
    assert_eq!(sched["overlap"], "skip");
    assert_eq!(sched["enabled"], true);
    assert_eq!(sched["template"]["backoff"]["initial_ms"], 5000);
    assert_eq!(sched["template"]["max_attempts"], 5, "defaults filled in");
    let upcoming: Vec<&str> = sched["upcoming"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(upcoming.len(), 5);
    for t in &upcoming {
        assert!(
            t.contains("T02:00:00+0"),
            "02:00 Berlin time, with its offset: {t}"
        );
    }
    assert_eq!(
        sched["next_run_at"]
            .as_str()
            .map(|t| t.parse::<chrono::DateTime<chrono::Utc>>().unwrap()),
        Some(
            upcoming[0]
                .parse::<chrono::DateTime<chrono::Utc>>()
                .unwrap()
        )
    );

    let (status, again) = s.post("/api/v1/schedules", nightly()).await;
    assert_eq!(status, 409, "{again}");
    assert_eq!(again["error"]["code"], "schedule_exists");

    let (status, fired) = s.post("/api/v1/schedules/nightly/fire", json!({})).await;
    assert_eq!(status, 201, "{fired}");
    let task_id = fired["task_id"].as_i64().unwrap();
    let (_, task) = s.get(&format!("/api/v1/tasks/{task_id}")).await;
    assert_eq!(task["task"]["schedule_id"], id);
    assert_eq!(task["task"]["slot_at"], fired["slot_at"]);
    assert_eq!(task["task"]["priority"], 3);
    let (_, listed) = s.get(&format!("/api/v1/tasks?schedule={id}")).await;
    assert_eq!(listed["tasks"].as_array().unwrap().len(), 1);
    let (_, shown) = s.get(&format!("/api/v1/schedules/{id}")).await;
    assert_eq!(shown["recent_tasks"][0]["id"], task_id);
    assert_eq!(shown["schedule"]["last_task_id"], task_id);

    s.as_role(Role::Reader);
    for path in ["/api/v1/schedules", "/api/v1/schedules/nightly"] {
        let text = s.get_text(path).await;
        assert!(
            !text.contains("pa55word"),
            "a reader sees the secret at {path}"
        );
        assert!(text.contains("[redacted]"), "{text}");
    }
    s.as_role(Role::Admin);

    let (status, edited) = s
        .call(
            Method::PATCH,
            "/api/v1/schedules/nightly",
            Some(json!({
                "name": "hourly",
                "recurrence": {"type": "every", "every_ms": 3600000, "start": "2030-01-01T00:00:00Z"},
                "enabled": null
            })),
        )
        .await;
    assert_eq!(status, 200, "{edited}");
    assert_eq!(edited["schedule"]["name"], "hourly");
    assert_eq!(edited["schedule"]["next_run_at"], "2030-01-01T00:00:00Z");
    assert_eq!(edited["schedule"]["upcoming"][1], "2030-01-01T01:00:00Z");

    let (status, off) = s.post("/api/v1/schedules/hourly/disable", json!({})).await;
    assert_eq!(status, 200, "{off}");
    assert_eq!(off["schedule"]["enabled"], false);
    assert_eq!(off["schedule"]["next_run_at"], Value::Null);
    assert_eq!(off["schedule"]["upcoming"], json!([]));
    let (_, on) = s.post("/api/v1/schedules/hourly/enable", json!({})).await;
    assert_eq!(on["schedule"]["enabled"], true);

    let (status, _) = s
        .call(Method::DELETE, &format!("/api/v1/schedules/{id}"), None)
        .await;
    assert_eq!(status, 200);
    let (status, gone) = s.get("/api/v1/schedules/hourly").await;
    assert_eq!(status, 404, "{gone}");
    let (_, task) = s.get(&format!("/api/v1/tasks/{task_id}")).await;
    assert_eq!(task["task"]["schedule_id"], id, "fired tasks stay");
}

async fn bad_schedule_requests_are_refused_and_change_nothing(s: Server) {
    let (status, _) = s.post("/api/v1/schedules", nightly()).await;
    assert_eq!(status, 201);
    let (_, before) = s.get("/api/v1/schedules").await;
    let with = |patch: Value| {
        let mut body = nightly();
        body["name"] = json!("other");
        for (k, v) in patch.as_object().unwrap() {
            body[k] = v.clone();
        }
        body
    };
    let bad_creates = [
        (with(json!({"name": "42"})), "number"),
        (with(json!({"name": ""})), "name"),
        (with(json!({"name": "x".repeat(256)})), "255"),
        (
            with(json!({"recurrence": {"type": "cron", "expr": "61 * * * *", "zone": "UTC"}})),
            "cron",
        ),
        (
            with(json!({"recurrence": {"type": "cron", "expr": "* * *", "zone": "UTC"}})),
            "fields",
        ),
        (
            with(json!({"recurrence": {"type": "cron", "expr": "* * * * *", "zone": "Mars/Base"}})),
            "time zone",
        ),
        (
            with(
                json!({"recurrence": {"type": "every", "every_ms": 10, "start": "2030-01-01T00:00:00Z"}}),
            ),
            "interval",
        ),
        (
            with(
                json!({"recurrence": {"type": "every", "every_ms": 1.5, "start": "2030-01-01T00:00:00Z"}}),
            ),
            "whole number",
        ),
        (
            with(json!({"recurrence": {"type": "daily", "at": "24:00:00", "zone": "UTC"}})),
            "HH:MM:SS",
        ),
        (
            with(json!({"recurrence": {"type": "daily", "at": "2:30", "zone": "UTC"}})),
            "HH:MM:SS",
        ),
        (
            with(json!({"recurrence": {"type": "hourly"}})),
            "unknown variant",
        ),
        (
            with(
                json!({"recurrence": {"type": "cron", "expr": "* * * * *", "zone": "UTC", "x": 1}}),
            ),
            "unknown field",
        ),
        (with(json!({"missed": {"policy": "run_all"}})), "needs max"),
        (
            with(json!({"missed": {"policy": "skip", "max": 3}})),
            "run_all only",
        ),
        (
            with(json!({"missed": {"policy": "run_all", "max": 0}})),
            "max",
        ),
        (
            with(json!({"missed": {"policy": "sometimes"}})),
            "unknown variant",
        ),
        (with(json!({"overlap": "never"})), "unknown variant"),
        (with(json!({"template": {"queue": "q"}})), "kind"),
        (
            with(json!({"template": {"kind": "k", "run_at": "2030-01-01T00:00:00Z"}})),
            "unknown field",
        ),
        (
            with(json!({"template": {"kind": "k", "max_attempts": 0}})),
            "max_attempts",
        ),
        (
            with(
                json!({"template": {"kind": "k", "backoff": {"initial_ms": 100, "multiplier": 1, "max_ms": 10, "jitter": 0}}}),
            ),
            "backoff",
        ),
        (
            with(json!({"template": {"kind": "k", "payload": {"t": "nul\u{0}"}}})),
            "NUL",
        ),
        (with(json!({"when": "now"})), "unknown field"),
        (json!(["other", {"type": "cron"}]), "expected a JSON object"),
    ];
    for (body, why) in bad_creates {
        let (status, answer) = s.post("/api/v1/schedules", body.clone()).await;
        assert!(
            status == StatusCode::BAD_REQUEST || status == StatusCode::UNPROCESSABLE_ENTITY,
            "{body}: {status} {answer}"
        );
        let message = answer["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(why), "{body}: {message}");
    }
    let bad_edits = [
        (
            "/api/v1/schedules/nightly",
            json!({"recurrence": {"type": "cron", "expr": "nope", "zone": "UTC"}}),
            422,
        ),
        ("/api/v1/schedules/nightly", json!({"enabled": "yes"}), 422),
        ("/api/v1/schedules/nightly", json!({"colour": "red"}), 422),
        ("/api/v1/schedules/nobody", json!({"enabled": false}), 404),
        (
            "/api/v1/schedules/99999999999999999999999",
            json!({"enabled": false}),
            400,
        ),
        ("/api/v1/schedules/%01", json!({"enabled": false}), 400),
    ];
    for (path, body, want) in bad_edits {
        let (status, answer) = s.call(Method::PATCH, path, Some(body.clone())).await;
        assert_eq!(status.as_u16(), want, "{path} {body}: {answer}");
    }
    for (path, want) in [
        ("/api/v1/schedules/nightly/explode", 404),
        ("/api/v1/schedules/nobody/fire", 404),
        ("/api/v1/schedules/nobody/enable", 404),
    ] {
        let (status, answer) = s.post(path, json!({})).await;
        assert_eq!(status.as_u16(), want, "{path}: {answer}");
    }
    let (status, answer) = s
        .post("/api/v1/schedules/nightly/disable", json!({"now": true}))
        .await;
    assert_eq!(status.as_u16(), 422, "{answer}");
    let (status, _) = s
        .call(Method::DELETE, "/api/v1/schedules/nobody", None)
        .await;
    assert_eq!(status, 404);
    let (status, _) = s.get("/api/v1/tasks?schedule=abc").await;
    assert_eq!(status, 400);

    let (_, after) = s.get("/api/v1/schedules").await;
    assert_eq!(after, before, "nothing changed");
    let (_, tasks) = s.get("/api/v1/tasks").await;
    assert_eq!(tasks["tasks"], json!([]), "nothing fired");
}
