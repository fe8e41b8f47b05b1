//! The pull protocol against real databases: the same leases and fencing as in-process
//! workers, over HTTP.

mod common;

use common::{assert_error, Server};
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tasktable_runtime::{Rescuer, RescuerConfig};

on_every_backend!(
    claim_renew_checkpoint_complete,
    long_poll_claim_wakes_on_submit_and_times_out_empty,
    stale_and_cancelled_leases_are_refused_and_change_nothing,
    failures_retry_with_the_attempt_counted_or_fail_for_good,
    snooze_and_release_give_the_attempt_back,
    an_abandoned_lease_is_rescued_and_its_old_token_refused,
    targeted_tasks_go_to_the_workers_and_groups_they_name,
);

async fn submit(s: &Server, body: Value) -> i64 {
    let (status, answer) = s.post("/api/v1/tasks", body).await;
    assert_eq!(status, 201, "{answer}");
    answer["id"].as_i64().unwrap()
}

/// What a claim hands its worker: every lease call sends the token and credential back.
#[derive(Debug, Clone)]
struct Held {
    token: i64,
    credential: String,
}

impl Held {
    fn of(task: &Value) -> Self {
        Held {
            token: task["token"].as_i64().unwrap(),
            credential: task["credential"].as_str().unwrap().to_owned(),
        }
    }

    /// `fields` with this lease's token and credential added.
    fn with(&self, mut fields: Value) -> Value {
        fields["token"] = json!(self.token);
        fields["credential"] = json!(self.credential);
        fields
    }
}

async fn claim_one(s: &Server, kind: &str) -> (i64, Held, Value) {
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": [kind], "worker_id": "py-1"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let task = body["tasks"][0].clone();
    assert!(task.is_object(), "a task was claimed: {body}");
    (task["id"].as_i64().unwrap(), Held::of(&task), task)
}

async fn task(s: &Server, id: i64) -> Value {
    s.get(&format!("/api/v1/tasks/{id}")).await.1
}

async fn claim_renew_checkpoint_complete(s: Server) {
    let id = submit(
        &s,
        json!({"kind": "resize", "payload": {"w": 10}, "timeout_ms": 60_000}),
    )
    .await;
    let (claimed_id, lease, claimed) = claim_one(&s, "resize").await;
    assert_eq!(claimed_id, id);
    assert_eq!(claimed["payload"], json!({"w": 10}));
    assert_eq!(claimed["attempt"], 1);
    assert!(
        claimed["deadline_at"].is_string(),
        "a task with a timeout has a deadline"
    );
    let first_expiry = claimed["lease_expires_at"].as_str().unwrap().to_owned();

    let (status, body) = s
        .post(
            &format!("/api/v1/leases/{id}/renew"),
            lease.with(json!({"lease_ms": 120_000})),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert!(
        body["lease_expires_at"].as_str().unwrap() > first_expiry.as_str(),
        "renew moves the lease on"
    );
    // The deadline caps the lease: 60 s of timeout beats 120 s asked for.
    assert_eq!(
        task(&s, id).await["task"]["lease_expires_at"],
        claimed["deadline_at"]
    );

    let (status, _) = s
        .post(
            &format!("/api/v1/leases/{id}/checkpoint"),
            lease.with(json!({"checkpoint": {"row": 5}, "progress": {"done": 50}})),
        )
        .await;
    assert_eq!(status, 200);
    let shown = task(&s, id).await;
    assert_eq!(shown["task"]["checkpoint"], json!({"row": 5}));
    assert_eq!(shown["task"]["progress"], json!({"done": 50}));

    let (status, body) = s
        .post(
            &format!("/api/v1/leases/{id}/complete"),
            lease.with(json!({"result": {"url": "/img/1"}})),
        )
        .await;
    assert_eq!(
        (status.as_u16(), body["state"].as_str()),
        (200, Some("succeeded")),
        "{body}"
    );
    let shown = task(&s, id).await;
    assert_eq!(shown["task"]["result"], json!({"url": "/img/1"}));
    assert_eq!(shown["attempts"][0]["outcome"], "succeeded");
    assert_eq!(shown["attempts"][0]["worker_id"], "py-1");
    assert_error(
        &s.post(
            &format!("/api/v1/leases/{id}/complete"),
            lease.with(json!({})),
        )
        .await,
        409,
        "lease_lost",
    );
}

async fn long_poll_claim_wakes_on_submit_and_times_out_empty(s: Server) {
    let started = Instant::now();
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "w", "wait_ms": 300}),
        )
        .await;
    assert_eq!((status.as_u16(), &body["tasks"]), (200, &json!([])));
    assert!(
        started.elapsed() >= Duration::from_millis(300),
        "an empty claim waits as long as asked"
    );

    // A claim waiting up to 30 s returns as soon as a task is submitted.
    let waiting = {
        let http = s.http.clone();
        let url = format!("{}/api/v1/claim", s.base);
        let token = s.token.clone().unwrap();
        tokio::spawn(async move {
            let body = json!({"kinds": ["k"], "worker_id": "w", "wait_ms": 30_000});
            let resp = http
                .post(url)
                .bearer_auth(token)
                .json(&body)
                .send()
                .await
                .unwrap();
            resp.json::<Value>().await.unwrap()
        })
    };
    // Whether the submit lands before the claim starts waiting or while it waits, the
    // claim must hand the task out at once rather than after its 30 s.
    let id = submit(&s, json!({"kind": "k", "payload": 1})).await;
    let body = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("woken well before its 30 s")
        .unwrap();
    assert_eq!(body["tasks"][0]["id"], id);
}

async fn stale_and_cancelled_leases_are_refused_and_change_nothing(s: Server) {
    let id = submit(&s, json!({"kind": "k", "payload": 1})).await;
    let (_, lease, _) = claim_one(&s, "k").await;
    let stale = Held {
        token: lease.token - 1,
        ..lease.clone()
    };
    let guessed = Held {
        credential: "0".repeat(32),
        ..lease.clone()
    };
    for wrong in [&stale, &guessed] {
        for (op, body) in [
            ("renew", json!({})),
            ("checkpoint", json!({"checkpoint": 1})),
            ("complete", json!({"result": "forged"})),
            ("fail", json!({"error": "x", "retryable": false})),
        ] {
            let answer = s
                .post(&format!("/api/v1/leases/{id}/{op}"), wrong.with(body))
                .await;
            assert_error(&answer, 409, "lease_lost");
        }
    }
    let shown = task(&s, id).await;
    assert_eq!(shown["task"]["state"], "running");
    assert_eq!(shown["task"]["checkpoint"], Value::Null);
    assert_eq!(shown["attempts"], json!([]));

    s.post(&format!("/api/v1/tasks/{id}/cancel"), json!({}))
        .await;
    // Only the claimer learns that the task was cancelled.
    let answer = s
        .post(
            &format!("/api/v1/leases/{id}/renew"),
            guessed.with(json!({})),
        )
        .await;
    assert_error(&answer, 409, "lease_lost");
    let answer = s
        .post(&format!("/api/v1/leases/{id}/renew"), lease.with(json!({})))
        .await;
    assert_error(&answer, 409, "task_cancelled");
    let answer = s
        .post(
            &format!("/api/v1/leases/{id}/complete"),
            lease.with(json!({"result": 1})),
        )
        .await;
    assert_error(&answer, 409, "task_cancelled");
    let shown = task(&s, id).await;
    assert_eq!(
        (shown["task"]["state"].as_str(), &shown["task"]["result"]),
        (Some("cancelled"), &Value::Null)
    );
}

async fn failures_retry_with_the_attempt_counted_or_fail_for_good(s: Server) {
    let fast = json!({"initial_ms": 0, "multiplier": 1.0, "max_ms": 0, "jitter": 0.0});
    let id = submit(
        &s,
        json!({"kind": "k", "payload": 1, "max_attempts": 2, "backoff": fast}),
    )
    .await;
    let (_, lease, _) = claim_one(&s, "k").await;
    let (_, body) = s
        .post(
            &format!("/api/v1/leases/{id}/fail"),
            lease.with(json!({"error": "flaky"})),
        )
        .await;
    assert_eq!(body["state"], "pending");
    let (_, lease, claimed) = claim_one(&s, "k").await;
    assert_eq!(claimed["attempt"], 2);
    let (_, body) = s
        .post(
            &format!("/api/v1/leases/{id}/fail"),
            lease.with(json!({"error": "flaky again"})),
        )
        .await;
    assert_eq!(body["state"], "failed", "no attempts left");

    let id = submit(&s, json!({"kind": "k", "payload": 2, "max_attempts": 9})).await;
    let (_, lease, _) = claim_one(&s, "k").await;
    let (_, body) = s
        .post(
            &format!("/api/v1/leases/{id}/fail"),
            lease.with(json!({"error": "bad input", "retryable": false})),
        )
        .await;
    assert_eq!(
        body["state"], "failed",
        "a permanent failure ends it at once"
    );
    let shown = task(&s, id).await;
    assert_eq!(shown["attempts"][0]["outcome"], "failed");

    let id = submit(&s, json!({"kind": "k", "payload": 3})).await;
    let (_, lease, _) = claim_one(&s, "k").await;
    let (_, body) = s
        .post(
            &format!("/api/v1/leases/{id}/fail"),
            lease.with(json!({"error": "rate limited", "retry_after_ms": 3_600_000})),
        )
        .await;
    assert_eq!(body["state"], "pending");
    let run_at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(body["run_at"].clone()).unwrap();
    let wait = run_at - s.store.db_now().await.unwrap();
    assert!(
        wait > chrono::Duration::minutes(59),
        "retry_after is honoured: {wait}"
    );
    assert_error(
        &s.post(&format!("/api/v1/leases/{id}/fail"), lease.with(json!({})))
            .await,
        422,
        "invalid_input",
    );
}

async fn snooze_and_release_give_the_attempt_back(s: Server) {
    let id = submit(&s, json!({"kind": "k", "payload": 1})).await;
    let (_, lease, _) = claim_one(&s, "k").await;
    let (_, body) = s
        .post(
            &format!("/api/v1/leases/{id}/snooze"),
            lease.with(json!({"delay_ms": 0})),
        )
        .await;
    assert_eq!(body["state"], "pending");
    assert_eq!(task(&s, id).await["task"]["attempt"], 0);
    let (_, lease, _) = claim_one(&s, "k").await;
    s.post(
        &format!("/api/v1/leases/{id}/checkpoint"),
        lease.with(json!({"checkpoint": "half"})),
    )
    .await;
    let (_, body) = s
        .post(
            &format!("/api/v1/leases/{id}/release"),
            lease.with(json!({})),
        )
        .await;
    assert_eq!(body["state"], "pending");
    let (_, _, claimed) = claim_one(&s, "k").await;
    assert_eq!(
        claimed["attempt"], 1,
        "neither snooze nor release spent an attempt"
    );
    assert_eq!(
        claimed["checkpoint"], "half",
        "the next worker resumes from the checkpoint"
    );
    assert_error(
        &s.post(
            &format!("/api/v1/leases/{id}/release"),
            lease.with(json!({"result": 1})),
        )
        .await,
        422,
        "invalid_input",
    );
}

async fn an_abandoned_lease_is_rescued_and_its_old_token_refused(s: Server) {
    let fast = json!({"initial_ms": 0, "multiplier": 1.0, "max_ms": 0, "jitter": 0.0});
    let id = submit(&s, json!({"kind": "k", "payload": 1, "backoff": fast})).await;
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "gone", "lease_ms": 1000}),
        )
        .await;
    assert_eq!(status, 200);
    let lease = Held::of(&body["tasks"][0]);
    // The worker vanishes. Rescue as a server would, at a database time past the lease.
    let later = s.store.db_now().await.unwrap() + chrono::Duration::seconds(2);
    let rescued = Rescuer::new(s.store.clone(), RescuerConfig::default())
        .run_once(Some(later))
        .await
        .unwrap();
    assert_eq!(rescued, 1);
    let shown = task(&s, id).await;
    assert_eq!(shown["task"]["state"], "pending");
    assert_eq!(shown["attempts"][0]["outcome"], "lease_expired");
    assert_error(
        &s.post(
            &format!("/api/v1/leases/{id}/complete"),
            lease.with(json!({"result": 1})),
        )
        .await,
        409,
        "lease_lost",
    );
}

#[tokio::test]
async fn a_waiting_claim_returns_at_once_when_the_server_stops() {
    let stop = tokio_util::sync::CancellationToken::new();
    let mut tokens = tasktable_server::TokenSet::default();
    tokens
        .add_plain(
            "w",
            tasktable_server::Role::Worker,
            common::token(tasktable_server::Role::Worker),
        )
        .unwrap();
    let Some(s) = Server::start_with("sqlite", tokens, |state| state.stop = stop.clone()).await
    else {
        return;
    };
    let http = s.http.clone();
    let url = format!("{}/api/v1/claim", s.base);
    let waiting = tokio::spawn(async move {
        let body = json!({"kinds": ["k"], "worker_id": "w", "wait_ms": 60_000});
        let resp = http
            .post(url)
            .bearer_auth(common::token(tasktable_server::Role::Worker))
            .json(&body)
            .send()
            .await
            .unwrap();
        (resp.status(), resp.json::<Value>().await.unwrap())
    });
    stop.cancel();
    let (status, body) = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("well before its 60 s")
        .unwrap();
    assert_eq!((status.as_u16(), &body["tasks"]), (200, &json!([])));
}

async fn targeted_tasks_go_to_the_workers_and_groups_they_name(s: Server) {
    // A worker claims for the groups its heartbeat registered.
    let (status, body) = s
        .post(
            "/api/v1/heartbeat",
            json!({"worker_id": "py-a", "groups": ["gpu"]}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    let for_gpu = submit(&s, json!({"kind": "k", "target": {"groups": ["gpu"]}})).await;
    let for_b = submit(&s, json!({"kind": "k", "target": {"workers": ["py-b"]}})).await;
    let claim = |worker: &'static str, groups: Value| {
        let s = &s;
        async move {
            let (status, body) = s
                .post(
                    "/api/v1/claim",
                    json!({"kinds": ["k"], "worker_id": worker, "groups": groups, "limit": 10}),
                )
                .await;
            assert_eq!(status, 200, "{body}");
            body["tasks"].as_array().unwrap().clone()
        }
    };
    assert!(
        claim("py-a", json!([])).await.is_empty(),
        "neither is for py-a"
    );
    let got = claim("py-a", json!(["gpu"])).await;
    assert_eq!(got.len(), 1);
    assert_eq!(got[0]["id"].as_i64(), Some(for_gpu));
    let lease = Held::of(&got[0]);
    let got = claim("py-b", json!([])).await;
    assert_eq!(got[0]["id"].as_i64(), Some(for_b));

    // A new target that leaves py-a out: the task waits again, its attempt given back, and
    // py-a is told why at its next call; its result is refused.
    let (status, body) = s
        .post(
            &format!("/api/v1/tasks/{for_gpu}/set-target"),
            json!({"target": {"workers": ["py-c"]}}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["task"]["state"], "pending");
    assert_eq!(body["task"]["attempt"], 0);
    let answer = s
        .post(
            &format!("/api/v1/leases/{for_gpu}/renew"),
            lease.with(json!({})),
        )
        .await;
    assert_error(&answer, 409, "task_retargeted");
    let answer = s
        .post(
            &format!("/api/v1/leases/{for_gpu}/complete"),
            lease.with(json!({"result": 1})),
        )
        .await;
    assert_error(&answer, 409, "task_retargeted");
    let shown = task(&s, for_gpu).await;
    assert_eq!(shown["task"]["state"], "pending");
    assert_eq!(shown["attempts"][0]["outcome"], "retargeted");
    let got = claim("py-c", json!([])).await;
    assert_eq!(got[0]["id"].as_i64(), Some(for_gpu));
    assert_eq!(got[0]["attempt"], 1);
}
