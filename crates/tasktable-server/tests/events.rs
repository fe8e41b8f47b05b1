//! The event log through the API: each operator change is recorded with the token that
//! made it (as `cli` when the command line sent it), the audit filters and pages it,
//! readers see edited secrets redacted, and a task's view tells its timeline.

mod common;

use common::Server;
use reqwest::Method;
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::time::Duration;
use tasktable_server::Role;

/// An open server-sent events stream, read message by message.
struct Stream {
    resp: reqwest::Response,
    buffer: String,
}

impl Stream {
    async fn open(s: &Server, last_id: Option<&str>) -> Stream {
        let mut req = s
            .request(Method::GET, "/api/v1/events")
            .header("accept", "text/event-stream");
        if let Some(id) = last_id {
            req = req.header("last-event-id", id);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        Stream {
            resp,
            buffer: String::new(),
        }
    }

    /// The next message: its id and its data; keep-alive comments are skipped.
    async fn next(&mut self) -> (String, Value) {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let message: String = self.buffer.drain(..end + 2).collect();
                let mut id = None;
                let mut data = String::new();
                for line in message.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if let Some(id) = id {
                    return (id, serde_json::from_str(&data).unwrap());
                }
                continue;
            }
            let chunk = tokio::time::timeout(Duration::from_secs(20), self.resp.chunk())
                .await
                .expect("a message within 20 s")
                .unwrap()
                .expect("the stream stays open");
            self.buffer.push_str(std::str::from_utf8(&chunk).unwrap());
        }
    }
}

on_every_backend!(
    operator_changes_reach_the_audit_with_their_token,
    a_tasks_view_tells_its_timeline,
    readers_see_edited_secrets_redacted_in_the_log,
    a_stream_consumer_that_disconnects_resumes_without_a_gap,
    a_pull_workers_log_lines_join_the_tasks_history,
    polling_the_feed_as_json_reads_on_from_its_cursor
);

async fn submit(s: &Server, body: Value) -> i64 {
    let (status, answer) = s.post("/api/v1/tasks", body).await;
    assert_eq!(status, 201, "{answer}");
    answer["id"].as_i64().unwrap()
}

async fn operator_changes_reach_the_audit_with_their_token(mut s: Server) {
    let a = submit(&s, json!({"kind": "mail", "queue": "mail"})).await;
    let b = submit(&s, json!({"kind": "mail", "queue": "mail"})).await;
    s.as_role(Role::Operator);
    let (status, _) = s
        .post(
            &format!("/api/v1/tasks/{a}/set-priority"),
            json!({"priority": 4}),
        )
        .await;
    assert_eq!(status, 200);
    let resp = s
        .request(Method::POST, &format!("/api/v1/tasks/{b}/cancel"))
        .header("user-agent", "tasktable-cli/0.1.0")
        .json(&json!({}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    s.as_role(Role::Admin);
    let (status, _) = s.post("/api/v1/queues/mail/pause", json!({})).await;
    assert_eq!(status, 200);

    s.as_role(Role::Reader);
    let (status, page) = s.get("/api/v1/audit?limit=2").await;
    assert_eq!(status, 200, "{page}");
    let events = page["events"].as_array().unwrap();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["event"], "queue_paused");
    assert_eq!(events[0]["queue"], "mail");
    assert_eq!(
        events[0]["actor"],
        json!({"kind": "token", "name": "admin", "role": "admin"})
    );
    assert_eq!(events[1]["event"], "cancelled");
    assert_eq!(
        events[1]["actor"],
        json!({"kind": "cli", "name": "operator", "role": "operator"})
    );
    let next = page["next"].as_i64().expect("a full page has a next");
    let (_, rest) = s.get(&format!("/api/v1/audit?limit=2&before={next}")).await;
    let rest = rest["events"].as_array().unwrap().clone();
    assert_eq!(rest.len(), 1);
    assert_eq!(rest[0]["event"], "edited");
    assert_eq!(rest[0]["task_id"], a);
    assert_eq!(rest[0]["detail"], json!({"priority": {"old": 0, "new": 4}}));

    let (_, mine) = s.get("/api/v1/audit?actor=operator").await;
    assert_eq!(mine["events"].as_array().unwrap().len(), 2);
    assert_eq!(mine["next"], Value::Null);
    let (_, by_cli) = s
        .get("/api/v1/audit?actor_kind=cli&event=cancelled,held")
        .await;
    assert_eq!(by_cli["events"].as_array().unwrap().len(), 1);
    let (_, of_a) = s.get(&format!("/api/v1/audit?task={a}")).await;
    assert_eq!(of_a["events"].as_array().unwrap().len(), 1);
    let (_, none) = s.get("/api/v1/audit?from=2999-01-01T00:00:00Z").await;
    assert!(none["events"].as_array().unwrap().is_empty());
}

async fn a_tasks_view_tells_its_timeline(mut s: Server) {
    let id = submit(&s, json!({"kind": "job", "max_attempts": 3})).await;
    s.as_role(Role::Worker);
    let (status, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["job"], "worker_id": "w7"}),
        )
        .await;
    assert_eq!(status, 200, "{claimed}");
    let task = &claimed["tasks"][0];
    let lease = json!({
        "token": task["token"],
        "credential": task["credential"],
        "error": "try again",
    });
    let (status, answer) = s.post(&format!("/api/v1/leases/{id}/fail"), lease).await;
    assert_eq!(status, 200, "{answer}");
    s.as_role(Role::Operator);
    let (status, _) = s.post(&format!("/api/v1/tasks/{id}/hold"), json!({})).await;
    assert_eq!(status, 200);

    s.as_role(Role::Reader);
    let (_, view) = s.get(&format!("/api/v1/tasks/{id}")).await;
    let timeline = view["timeline"].as_array().unwrap();
    let seen: Vec<(&str, Option<&str>)> = timeline
        .iter()
        .map(|e| (e["event"].as_str().unwrap(), e["actor"]["name"].as_str()))
        .collect();
    assert_eq!(
        seen,
        [
            ("submitted", Some("admin")),
            ("claimed", Some("w7")),
            ("error", Some("w7")),
            ("held", Some("operator")),
        ],
        "{view}"
    );
    assert_eq!(
        view["task"]["created_by"],
        json!({"kind": "token", "name": "admin", "role": "admin"})
    );
    assert_eq!(timeline[2]["attempt"], 1);
    assert_eq!(timeline[2]["detail"]["error"], "try again");
    assert_eq!(timeline[1]["actor"]["kind"], "worker");
    let times: Vec<&str> = timeline.iter().map(|e| e["at"].as_str().unwrap()).collect();
    let mut sorted = times.clone();
    sorted.sort_by_key(|t| chrono::DateTime::parse_from_rfc3339(t).unwrap());
    assert_eq!(times, sorted, "oldest first");
}

async fn readers_see_edited_secrets_redacted_in_the_log(mut s: Server) {
    let id = submit(
        &s,
        json!({"kind": "http", "payload": {"url": "https://a:old-pa55@x.example/", "headers": {}}}),
    )
    .await;
    let edited =
        json!({"url": "https://a:new-pa55@x.example/", "headers": {"Authorization": "sekr1t"}});
    let (status, answer) = s
        .post(
            &format!("/api/v1/tasks/{id}/edit-payload"),
            json!({"payload": edited}),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    s.as_role(Role::Reader);
    for path in [format!("/api/v1/tasks/{id}"), "/api/v1/audit".to_owned()] {
        let text = s.get_text(&path).await;
        for secret in ["old-pa55", "new-pa55", "sekr1t"] {
            assert!(!text.contains(secret), "a reader sees {secret} at {path}");
        }
    }
    s.as_role(Role::Operator);
    let (_, log) = s.get("/api/v1/audit").await;
    assert_eq!(
        log["events"][0]["detail"]["payload"]["new"], edited,
        "an operator sees what they may edit"
    );
}

async fn a_stream_consumer_that_disconnects_resumes_without_a_gap(mut s: Server) {
    s.as_role(Role::Reader);
    let mut stream = Stream::open(&s, None).await;
    s.as_role(Role::Operator);
    let a = submit(&s, json!({"kind": "job"})).await;
    let b = submit(&s, json!({"kind": "job"})).await;
    let (_, first) = stream.next().await;
    let (resume_from, second) = stream.next().await;
    assert_eq!(
        [&first["event"], &first["task_id"], &second["task_id"]],
        [&json!("submitted"), &json!(a), &json!(b)]
    );
    assert_eq!(first["source"], "task");
    drop(stream);

    // While it is away: a cancel, a submit, and an attempt that ends.
    let (status, _) = s
        .post(&format!("/api/v1/tasks/{b}/cancel"), json!({}))
        .await;
    assert_eq!(status, 200);
    let c = submit(&s, json!({"kind": "job"})).await;
    s.as_role(Role::Worker);
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["job"], "worker_id": "w1"}),
        )
        .await;
    let t = &claimed["tasks"][0];
    assert_eq!(t["id"], a);
    let (status, _) = s
        .post(
            &format!("/api/v1/leases/{a}/complete"),
            json!({"token": t["token"], "credential": t["credential"]}),
        )
        .await;
    assert_eq!(status, 200);

    s.as_role(Role::Reader);
    let mut resumed = Stream::open(&s, Some(&resume_from)).await;
    // No gap: everything that happened while it was away comes (and, at least once,
    // what the window holds may come again).
    let want: BTreeSet<(String, i64)> = [("cancelled", b), ("submitted", c), ("succeeded", a)]
        .into_iter()
        .map(|(e, t)| (e.to_owned(), t))
        .collect();
    let mut got = BTreeSet::new();
    while !want.is_subset(&got) {
        let (_, item) = resumed.next().await;
        let event = item["event"].as_str().unwrap().to_owned();
        got.insert((event, item["task_id"].as_i64().unwrap()));
    }

    // A bad cursor is refused.
    let resp = s
        .request(Method::GET, "/api/v1/events")
        .header("accept", "text/event-stream")
        .header("last-event-id", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 400);
}

async fn polling_the_feed_as_json_reads_on_from_its_cursor(mut s: Server) {
    s.as_role(Role::Reader);
    let (status, start) = s.get("/api/v1/events").await;
    assert_eq!(status, 200, "{start}");
    assert_eq!(start["events"], json!([]), "from now on");
    let cursor = start["cursor"].as_str().unwrap().to_owned();
    s.as_role(Role::Operator);
    let a = submit(&s, json!({"kind": "job", "queue": "q1"})).await;
    submit(&s, json!({"kind": "job", "queue": "q2"})).await;
    s.as_role(Role::Reader);
    let (_, page) = s
        .get(&format!(
            "/api/v1/events?after={cursor}&queue=q1&event=submitted,held"
        ))
        .await;
    let ids: Vec<i64> = page["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["task_id"].as_i64().unwrap())
        .collect();
    assert_eq!(ids, [a]);
    let next = page["cursor"].as_str().unwrap();
    assert_ne!(next, cursor);
    for (path, status, code) in [
        ("/api/v1/events?after=e1.a2", 400, "invalid_query"),
        ("/api/v1/events?event=exploded", 400, "invalid_query"),
        ("/api/v1/events?task=x", 400, "invalid_query"),
        ("/api/v1/events?queue=%00", 422, "invalid_input"),
        ("/api/v1/events?colour=red", 400, "invalid_query"),
    ] {
        common::assert_error(&s.get(path).await, status, code);
    }
}

async fn a_pull_workers_log_lines_join_the_tasks_history(mut s: Server) {
    let id = submit(&s, json!({"kind": "job"})).await;
    s.as_role(Role::Worker);
    let (_, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["job"], "worker_id": "w3"}),
        )
        .await;
    let t = &claimed["tasks"][0];
    let lease = |extra: Value| {
        let mut body = json!({"token": t["token"], "credential": t["credential"]});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        body
    };
    let long = "x".repeat(5000);
    let (status, answer) = s
        .post(
            &format!("/api/v1/leases/{id}/log"),
            lease(json!({"lines": ["fetched 3 pages", long]})),
        )
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer, json!({"saved": true}));
    // In a batched acknowledgement too, beside the call that completes the task.
    let mut log = lease(json!({"lines": ["done"]}));
    log["task"] = json!(id);
    log["op"] = json!("log");
    let mut complete = lease(json!({}));
    complete["task"] = json!(id);
    complete["op"] = json!("complete");
    let (status, answer) = s
        .post("/api/v1/leases", json!({"leases": [complete, log]}))
        .await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!(answer["results"][0]["ok"], true, "{answer}");
    assert_eq!(answer["results"][1]["ok"], true, "{answer}");
    // The lease is gone: a late line is refused and appends nothing.
    let (status, answer) = s
        .post(
            &format!("/api/v1/leases/{id}/log"),
            lease(json!({"lines": ["too late"]})),
        )
        .await;
    assert_eq!(status, 409, "{answer}");

    s.as_role(Role::Reader);
    let (_, view) = s.get(&format!("/api/v1/tasks/{id}")).await;
    let lines: Vec<&str> = view["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "log")
        .map(|e| e["detail"]["line"].as_str().unwrap())
        .collect();
    assert_eq!(lines.len(), 3, "{view}");
    assert_eq!(lines[0], "fetched 3 pages");
    assert_eq!(lines[1].len(), 1024, "a long line is cut to 1 KiB");
    assert_eq!(lines[2], "done");
}
