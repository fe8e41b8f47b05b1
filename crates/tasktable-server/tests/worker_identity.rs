//! Worker identity bound to tokens, through the API: a worker id belongs to the token that
//! first used it (a heartbeat, or a claim of an id the registry does not hold), and no
//! other token may beat, leave or claim as it; a token limited to queues or groups
//! registers workers only within them; a worker claims only for the groups it
//! registered; a token owns at most its cap of live workers; the registry is read a page
//! at a time. Every refusal changes nothing.

mod common;

use common::{assert_error, Server};
use reqwest::StatusCode;
use serde_json::{json, Value};
use tasktable_server::auth::WorkerLimits;
use tasktable_server::{Role, TokenSet};

const TEAM_A: &str = "team-a-worker-token-0123456789";
const TEAM_B: &str = "team-b-worker-token-0123456789";
const MAIL: &str = "mail-worker-token-0123456789";
const GPU: &str = "gpu-worker-token-0123456789";
const ADMIN: &str = "admin-token-for-identity-01234";
const CAP: u32 = 3;

/// A server with an admin token, two unlimited worker tokens, one limited to the queue
/// `emails` and one to the group `gpu`; each token owns at most [`CAP`] live workers.
async fn start(backend: &str) -> Option<Server> {
    let mut tokens = TokenSet::default();
    tokens.add_plain("admin", Role::Admin, ADMIN).unwrap();
    tokens.add_plain("team-a", Role::Worker, TEAM_A).unwrap();
    tokens.add_plain("team-b", Role::Worker, TEAM_B).unwrap();
    tokens
        .add_plain_limited("mail", MAIL, vec!["emails".into()])
        .unwrap();
    let gpu = WorkerLimits {
        queues: None,
        groups: Some(vec!["gpu".into()]),
    };
    tokens.add_plain_worker("gpu", GPU, gpu).unwrap();
    let mut s = Server::start_with(backend, tokens, |state| {
        state.limits.max_workers_per_token = CAP;
    })
    .await?;
    s.token = Some(ADMIN.into());
    Some(s)
}

macro_rules! on_three_backends {
    ($($name:ident),* $(,)?) => {
        on_three_backends!(@in sqlite; $($name),*);
        on_three_backends!(@in postgres; $($name),*);
        on_three_backends!(@in mysql; $($name),*);
    };
    (@in $backend:ident; $($name:ident),*) => {
        mod $backend {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(server) = super::start(stringify!($backend)).await {
                        super::$name(server).await;
                    }
                }
            )*
        }
    };
}

on_three_backends!(
    another_tokens_worker_id_cannot_be_beaten_left_or_claimed_as,
    a_claim_registers_an_unknown_id_to_its_token,
    limited_tokens_register_workers_only_within_their_limits,
    a_claim_names_only_groups_its_worker_registered,
    a_token_owns_at_most_its_cap_of_live_workers,
    the_registry_is_read_a_page_at_a_time,
);

async fn as_token(s: &mut Server, token: &str, path: &str, body: Value) -> (StatusCode, Value) {
    s.token = Some(token.into());
    let answer = s.post(path, body).await;
    s.token = Some(ADMIN.into());
    answer
}

fn beat(id: &str, host: &str) -> Value {
    json!({"worker_id": id, "host": host, "groups": [], "starting": true})
}

fn claim_as(id: &str) -> Value {
    json!({"worker_id": id, "kinds": ["job"], "limit": 5})
}

async fn worker(s: &Server, id: &str) -> Value {
    let (status, shown) = s.get(&format!("/api/v1/workers/{id}")).await;
    assert_eq!(status, 200, "{shown}");
    shown["worker"].clone()
}

async fn submit(s: &Server, body: Value) -> i64 {
    let (status, answer) = s.post("/api/v1/tasks", body).await;
    assert_eq!(status, 201, "{answer}");
    answer["id"].as_i64().unwrap()
}

async fn another_tokens_worker_id_cannot_be_beaten_left_or_claimed_as(mut s: Server) {
    let (status, _) = as_token(&mut s, TEAM_A, "/api/v1/heartbeat", beat("w1", "a.example")).await;
    assert_eq!(status, 200);
    assert_eq!(worker(&s, "w1").await["owner"], "team-a");
    // A task aimed at w1 alone, and a multi-run task for three distinct workers.
    let aimed = submit(&s, json!({"kind": "job", "target": {"workers": ["w1"]}})).await;

    let stolen = as_token(&mut s, TEAM_B, "/api/v1/heartbeat", beat("w1", "b.example")).await;
    assert_error(&stolen, 403, "worker_not_owned");
    let left = as_token(&mut s, TEAM_B, "/api/v1/leave", json!({"worker_id": "w1"})).await;
    assert_error(&left, 403, "worker_not_owned");
    let claimed = as_token(&mut s, TEAM_B, "/api/v1/claim", claim_as("w1")).await;
    assert_error(&claimed, 403, "worker_not_owned");
    let w1 = worker(&s, "w1").await;
    assert_eq!(
        (&w1["host"], &w1["state"], &w1["owner"]),
        (&json!("a.example"), &json!("active"), &json!("team-a")),
        "the refusals changed nothing: {w1}"
    );
    let (_, task) = s.get(&format!("/api/v1/tasks/{aimed}")).await;
    assert_eq!(task["task"]["state"], "pending", "{task}");

    // Its own token claims the task aimed at it, and leaves.
    let (status, got) = as_token(&mut s, TEAM_A, "/api/v1/claim", claim_as("w1")).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["tasks"][0]["id"], aimed);
    let (status, _) = as_token(&mut s, TEAM_A, "/api/v1/leave", json!({"worker_id": "w1"})).await;
    assert_eq!(status, 200);
    assert_eq!(worker(&s, "w1").await["state"], "gone");
    // Gone, the id is still team-a's.
    let back = as_token(&mut s, TEAM_B, "/api/v1/heartbeat", beat("w1", "b.example")).await;
    assert_error(&back, 403, "worker_not_owned");
}

async fn a_claim_registers_an_unknown_id_to_its_token(mut s: Server) {
    let (status, got) = as_token(&mut s, TEAM_B, "/api/v1/claim", claim_as("fresh")).await;
    assert_eq!(status, 200, "{got}");
    let fresh = worker(&s, "fresh").await;
    assert_eq!(
        (&fresh["owner"], &fresh["protocol"], &fresh["queues"]),
        (&json!("team-b"), &json!("pull"), &json!(["default"])),
        "{fresh}"
    );
    let taken = as_token(&mut s, TEAM_A, "/api/v1/claim", claim_as("fresh")).await;
    assert_error(&taken, 403, "worker_not_owned");
    // An in-process worker's id is no token's to take.
    s.store
        .worker_beat(tasktable_store::WorkerBeatParams::new(
            common::worker_facts("local"),
        ))
        .await
        .unwrap();
    let local = as_token(&mut s, TEAM_A, "/api/v1/claim", claim_as("local")).await;
    assert_error(&local, 403, "worker_not_owned");
    assert_eq!(worker(&s, "local").await["protocol"], "process");
}

async fn limited_tokens_register_workers_only_within_their_limits(mut s: Server) {
    // Every queue, or a queue outside its own: refused; its own queue: registered.
    for queues in [json!(null), json!(["emails", "default"])] {
        let body = json!({"worker_id": "m1", "queues": queues});
        let refused = as_token(&mut s, MAIL, "/api/v1/heartbeat", body).await;
        assert_error(&refused, 403, "forbidden");
    }
    let (status, registry) = s.get("/api/v1/workers?include_gone=true").await;
    assert_eq!(status, 200);
    assert_eq!(registry["workers"], json!([]));
    let body = json!({"worker_id": "m1", "queues": ["emails"]});
    assert_eq!(
        as_token(&mut s, MAIL, "/api/v1/heartbeat", body).await.0,
        200
    );

    // A group outside the token's: refused at the heartbeat and the claim.
    let body = json!({"worker_id": "g1", "groups": ["gpu", "cpu"]});
    let refused = as_token(&mut s, GPU, "/api/v1/heartbeat", body).await;
    assert_error(&refused, 403, "forbidden");
    let body = json!({"worker_id": "g1", "groups": ["gpu"]});
    assert_eq!(
        as_token(&mut s, GPU, "/api/v1/heartbeat", body).await.0,
        200
    );
    let mut claim = claim_as("g1");
    claim["groups"] = json!(["cpu"]);
    let refused = as_token(&mut s, GPU, "/api/v1/claim", claim).await;
    assert_error(&refused, 403, "forbidden");
    let g1 = worker(&s, "g1").await;
    assert_eq!(
        (&g1["groups"], &g1["owner"]),
        (&json!(["gpu"]), &json!("gpu"))
    );
}

async fn a_claim_names_only_groups_its_worker_registered(mut s: Server) {
    let body = json!({"worker_id": "w1", "groups": ["blue"]});
    assert_eq!(
        as_token(&mut s, TEAM_A, "/api/v1/heartbeat", body).await.0,
        200
    );
    let green = submit(&s, json!({"kind": "job", "target": {"groups": ["green"]}})).await;
    let mut claim = claim_as("w1");
    claim["groups"] = json!(["blue", "green"]);
    let refused = as_token(&mut s, TEAM_A, "/api/v1/claim", claim.clone()).await;
    assert_error(&refused, 403, "worker_groups_unregistered");
    let (_, task) = s.get(&format!("/api/v1/tasks/{green}")).await;
    assert_eq!(task["task"]["state"], "pending");
    // Registered by a heartbeat first, the group may be claimed for.
    let body = json!({"worker_id": "w1", "groups": ["blue", "green"]});
    assert_eq!(
        as_token(&mut s, TEAM_A, "/api/v1/heartbeat", body).await.0,
        200
    );
    let (status, got) = as_token(&mut s, TEAM_A, "/api/v1/claim", claim).await;
    assert_eq!(status, 200, "{got}");
    assert_eq!(got["tasks"][0]["id"], green);
}

async fn a_token_owns_at_most_its_cap_of_live_workers(mut s: Server) {
    for i in 0..CAP {
        let (status, _) = as_token(
            &mut s,
            TEAM_A,
            "/api/v1/heartbeat",
            beat(&format!("a{i}"), "h"),
        )
        .await;
        assert_eq!(status, 200);
    }
    let over = as_token(&mut s, TEAM_A, "/api/v1/heartbeat", beat("a-over", "h")).await;
    assert_error(&over, 403, "too_many_workers");
    let over = as_token(&mut s, TEAM_A, "/api/v1/claim", claim_as("a-over")).await;
    assert_error(&over, 403, "too_many_workers");
    let (_, missing) = s.get("/api/v1/workers/a-over").await;
    assert_eq!(
        missing["error"]["code"], "not_found",
        "nothing was registered"
    );
    // A broadcast goes to the live workers: CAP of team-a's and one of team-b's.
    assert_eq!(
        as_token(&mut s, TEAM_B, "/api/v1/heartbeat", beat("b0", "h"))
            .await
            .0,
        200
    );
    let (_, registry) = s.get("/api/v1/workers").await;
    assert_eq!(registry["live"], CAP + 1);
    // One that leaves frees its place.
    assert_eq!(
        as_token(&mut s, TEAM_A, "/api/v1/leave", json!({"worker_id": "a0"}))
            .await
            .0,
        200
    );
    assert_eq!(
        as_token(&mut s, TEAM_A, "/api/v1/heartbeat", beat("a-over", "h"))
            .await
            .0,
        200
    );
    // A claim under the gone id would bring it back: over the cap, it is refused.
    let gone = as_token(&mut s, TEAM_A, "/api/v1/claim", claim_as("a0")).await;
    assert_error(&gone, 403, "too_many_workers");
    assert_eq!(worker(&s, "a0").await["state"], "gone");
}

async fn the_registry_is_read_a_page_at_a_time(mut s: Server) {
    for (token, id) in [
        (TEAM_A, "w3"),
        (TEAM_A, "w1"),
        (TEAM_B, "w2"),
        (TEAM_B, "w4"),
    ] {
        assert_eq!(
            as_token(&mut s, token, "/api/v1/heartbeat", beat(id, "h"))
                .await
                .0,
            200
        );
    }
    let ids = |page: &Value| -> Vec<String> {
        page["workers"]
            .as_array()
            .unwrap()
            .iter()
            .map(|w| w["id"].as_str().unwrap().to_owned())
            .collect()
    };
    let (status, first) = s.get("/api/v1/workers?limit=3").await;
    assert_eq!(status, 200, "{first}");
    assert_eq!(
        (ids(&first), &first["next"], &first["live"]),
        (
            vec!["w1".into(), "w2".into(), "w3".into()],
            &json!("w3"),
            &json!(4)
        )
    );
    let (_, second) = s.get("/api/v1/workers?limit=3&after=w3").await;
    assert_eq!(
        (ids(&second), &second["next"]),
        (vec!["w4".to_owned()], &json!(null))
    );
    let (_, whole) = s.get("/api/v1/workers").await;
    assert_eq!((ids(&whole).len(), &whole["next"]), (4, &json!(null)));
    for bad in [
        "limit=0",
        "limit=1001",
        "limit=ten",
        "limit=-1",
        "after=%01",
        "after=",
    ] {
        let answer = s.get(&format!("/api/v1/workers?{bad}")).await;
        assert_error(&answer, 400, "invalid_query");
    }
}
