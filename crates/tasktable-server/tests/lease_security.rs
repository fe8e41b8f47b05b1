//! Who may write under a lease: only the claimer, who alone learned the claim's random
//! credential. Task ids and fencing tokens are small numbers that readers see, so another
//! worker token that guesses them must change nothing; a worker token limited to queues
//! claims nowhere else; and no reader ever sees a credential.

mod common;

use common::{assert_error, token, Server};
use serde_json::{json, Value};
use tasktable_server::{Role, TokenSet};

const OTHER_WORKER: &str = "other-worker-token-0123456789";
const MAIL_WORKER: &str = "mail-worker-token-0123456789";

/// A server whose tokens are the usual one per role, plus a second worker token and a
/// worker token limited to the `emails` queue.
async fn server(backend: &str) -> Option<Server> {
    let mut tokens = TokenSet::default();
    for (role, t) in common::TOKENS {
        tokens.add_plain(role.as_str(), role, t).unwrap();
    }
    tokens
        .add_plain("other", Role::Worker, OTHER_WORKER)
        .unwrap();
    tokens
        .add_plain_limited("mail", MAIL_WORKER, vec!["emails".into()])
        .unwrap();
    Server::start_with(backend, tokens, |_| {}).await
}

async fn submit(s: &mut Server, body: Value) -> i64 {
    s.as_role(Role::Admin);
    let (status, answer) = s.post("/api/v1/tasks", body).await;
    assert_eq!(status, 201, "{answer}");
    answer["id"].as_i64().unwrap()
}

async fn a_second_worker_that_guesses_ids_and_tokens_changes_nothing(mut s: Server) {
    let mut ids = Vec::new();
    for i in 0..4 {
        ids.push(submit(&mut s, json!({"kind": "k", "payload": i})).await);
    }
    s.as_role(Role::Worker);
    let (status, claimed) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "honest", "limit": 4}),
        )
        .await;
    assert_eq!(status, 200, "{claimed}");
    let claimed = claimed["tasks"].as_array().unwrap().clone();
    assert_eq!(claimed.len(), 4);
    let before: Vec<Value> = {
        s.as_role(Role::Admin);
        let mut shown = Vec::new();
        for id in &ids {
            shown.push(s.get(&format!("/api/v1/tasks/{id}")).await.1);
        }
        shown
    };

    // The other token knows every id and can count tokens, but not the credentials.
    s.token = Some(OTHER_WORKER.to_owned());
    let guesses = ["0".repeat(32), "f".repeat(32), "0123456789abcdef".repeat(2)];
    let ops = [
        ("renew", json!({})),
        ("checkpoint", json!({"checkpoint": "forged", "progress": 1})),
        ("complete", json!({"result": "forged"})),
        ("fail", json!({"error": "forged", "retryable": false})),
        ("snooze", json!({"delay_ms": 0})),
        ("release", json!({})),
    ];
    for id in &ids {
        for token in 0..3 {
            for credential in &guesses {
                for (op, fields) in &ops {
                    let mut body = fields.clone();
                    body["token"] = json!(token);
                    body["credential"] = json!(credential);
                    let answer = s.post(&format!("/api/v1/leases/{id}/{op}"), body).await;
                    assert_error(&answer, 409, "lease_lost");
                }
            }
        }
        // A missing or malformed credential is a mistake, not a guess.
        for body in [
            json!({"token": 1}),
            json!({"token": 1, "credential": "abc"}),
        ] {
            let answer = s.post(&format!("/api/v1/leases/{id}/complete"), body).await;
            assert_error(&answer, 422, "invalid_input");
        }
    }

    s.as_role(Role::Admin);
    for (id, was) in ids.iter().zip(&before) {
        let now = s.get(&format!("/api/v1/tasks/{id}")).await.1;
        assert_eq!(&now, was, "task {id} is exactly as it was");
    }
    // The claimer's own calls still work.
    s.as_role(Role::Worker);
    for task in &claimed {
        let id = task["id"].as_i64().unwrap();
        let body = json!({"token": task["token"], "credential": task["credential"], "result": 1});
        let (status, answer) = s.post(&format!("/api/v1/leases/{id}/complete"), body).await;
        assert_eq!(
            (status.as_u16(), &answer["state"]),
            (200, &json!("succeeded"))
        );
    }
}

async fn a_worker_token_limited_to_queues_claims_nowhere_else(mut s: Server) {
    let elsewhere = submit(&mut s, json!({"kind": "k", "payload": 1})).await;
    let mail = submit(
        &mut s,
        json!({"kind": "k", "queue": "emails", "payload": 2}),
    )
    .await;
    s.token = Some(MAIL_WORKER.to_owned());
    for body in [
        json!({"kinds": ["k"], "worker_id": "m"}),
        json!({"kinds": ["k"], "worker_id": "m", "queue": "default"}),
        json!({"kinds": ["k"], "worker_id": "m", "queue": "emails2"}),
    ] {
        let answer = s.post("/api/v1/claim", body).await;
        assert_error(&answer, 403, "forbidden");
        assert!(
            answer.1["error"]["message"]
                .as_str()
                .unwrap()
                .contains("emails"),
            "the refusal names the queues the token may claim from: {}",
            answer.1
        );
    }
    s.as_role(Role::Reader);
    let shown = s.get(&format!("/api/v1/tasks/{elsewhere}")).await.1;
    assert_eq!(shown["task"]["state"], "pending", "nothing was claimed");

    s.token = Some(MAIL_WORKER.to_owned());
    let (status, body) = s
        .post(
            "/api/v1/claim",
            json!({"kinds": ["k"], "worker_id": "m", "queue": "emails"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["tasks"][0]["id"], mail);
}

async fn readers_never_see_a_credential(mut s: Server) {
    let id = submit(&mut s, json!({"kind": "k", "payload": 1})).await;
    s.as_role(Role::Worker);
    let (_, claimed) = s
        .post("/api/v1/claim", json!({"kinds": ["k"], "worker_id": "w"}))
        .await;
    let credential = claimed["tasks"][0]["credential"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(credential.len(), 32, "128 bits as hex: {claimed}");
    for role in [Role::Reader, Role::Operator, Role::Admin] {
        s.token = Some(token(role).to_owned());
        for path in [
            format!("/api/v1/tasks/{id}"),
            "/api/v1/tasks?limit=100".to_owned(),
        ] {
            let text = s.get_text(&path).await;
            assert!(text.contains("\"lease_token\""), "{path}: {text}");
            assert!(!text.contains(&credential), "{role} sees it at {path}");
        }
    }
}

/// Expands each named `async fn(Server)` into one test per backend, each on a [`server`].
macro_rules! on_every_backend_with_worker_tokens {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(s) = super::server("sqlite").await {
                        super::$name(s).await;
                    }
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(s) = super::server("postgres").await {
                        super::$name(s).await;
                    }
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(s) = super::server("mysql").await {
                        super::$name(s).await;
                    }
                }
            )*
        }
    };
}

on_every_backend_with_worker_tokens!(
    a_second_worker_that_guesses_ids_and_tokens_changes_nothing,
    a_worker_token_limited_to_queues_claims_nowhere_else,
    readers_never_see_a_credential,
);
