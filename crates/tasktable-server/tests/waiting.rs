//! Claims waiting for work (`wait_ms`) against real databases: while nothing is due they
//! run no claim of their own, and a task that becomes due by the clock, which no wake-up
//! announces, still reaches one of them at the next due check.

mod common;

use common::{all_tokens, token, Server};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tasktable_conformance::freeze::Freezable;
use tasktable_server::doorbell::Doorbells;
use tasktable_server::Role;
use tokio::sync::watch;
use tokio::task::JoinSet;

const WAITING: usize = 20;

macro_rules! on_every_backend_here {
    ($($name:ident),*) => {
        $(
            mod $name {
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn sqlite() { super::$name("sqlite").await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn postgres() { super::$name("postgres").await }
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn mysql() { super::$name("mysql").await }
            }
        )*
    };
}

on_every_backend_here!(idle_waiting_claims_run_no_claims_and_a_task_due_by_the_clock_wakes_one);

/// Waits until the count `rx` follows satisfies `check`; fails after 30 s.
async fn until(what: &str, rx: &mut watch::Receiver<u64>, check: impl FnMut(&u64) -> bool) {
    tokio::time::timeout(Duration::from_secs(30), rx.wait_for(check))
        .await
        .unwrap_or_else(|_| panic!("{what}: not within 30 s"))
        .expect("the counter lives as long as the server");
}

async fn idle_waiting_claims_run_no_claims_and_a_task_due_by_the_clock_wakes_one(backend: &str) {
    let mut counted: Option<Arc<Freezable>> = None;
    let mut bells: Option<Arc<Doorbells>> = None;
    let Some(s) = Server::start_wrapped(
        backend,
        all_tokens(),
        |store| {
            let wrapped = Freezable::new(store);
            counted = Some(wrapped.clone());
            wrapped
        },
        |state| {
            state.limits.due_check = Duration::from_millis(100);
            bells = Some(state.doorbells.clone());
        },
    )
    .await
    else {
        return;
    };
    let (counted, bells) = (counted.unwrap(), bells.unwrap());

    let mut claims = JoinSet::new();
    for n in 0..WAITING {
        let request = s
            .http
            .post(format!("{}/api/v1/claim", s.base))
            .bearer_auth(token(Role::Worker))
            .json(&json!({"kinds": ["later"], "worker_id": format!("w-{n}"), "wait_ms": 60000}));
        claims.spawn(async move {
            let answer: Value = request.send().await.unwrap().json().await.unwrap();
            answer["tasks"].as_array().unwrap().clone()
        });
    }
    // Each waiting claim runs its first claim, then waits at the queue's one bell.
    let mut claimed = counted.claims();
    until("every claim ran its first claim", &mut claimed, |n| {
        *n == WAITING as u64
    })
    .await;
    assert_eq!(bells.watched_queues(), 1);
    let mut checks = bells.checks();
    let from = *checks.borrow();
    until("five due checks ran", &mut checks, |n| *n >= from + 5).await;
    assert_eq!(
        *claimed.borrow(),
        WAITING as u64,
        "waiting claims ran no claim while nothing was due"
    );

    // A task due in 300 ms: no wake-up announces it when it becomes due.
    let (status, body) = s
        .post("/api/v1/tasks", json!({"kind": "later", "delay_ms": 300}))
        .await;
    assert_eq!(status, 201, "{body}");
    let id = body["id"].clone();
    let first = claims.join_next().await.unwrap().unwrap();
    assert_eq!(first.len(), 1, "the first claim to return took the task");
    assert_eq!(first[0]["id"], id);
    assert_eq!(claims.len(), WAITING - 1, "the others still wait");
}
