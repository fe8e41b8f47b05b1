//! `tasktable submit --affinity` and what `tasktable show` says about it, against a
//! `tasktable serve` child process on each backend (SQLite, PostgreSQL, MySQL/MariaDB). A
//! worker of the test's own ends an attempt through the store on the server's database, so
//! the retry waits for it.

mod common;

use chrono::{DateTime, Utc};
use common::serve::{Server, ADMIN};
use serde_json::{json, Value};
use std::time::Duration;
use tasktable::outcome::{FinishPlan, HandlerOutcome};
use tasktable::store::{ClaimParams, FinishItem, FinishParams, WorkerBeatParams};
use tasktable::worker::{Protocol, Queues, WorkerFacts};
use tasktable::Store;
use tasktable_testdb::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_an_affinity_is_submitted_shown_and_refused_when_bad() {
    an_affinity_is_submitted_shown_and_refused_when_bad("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_an_affinity_is_submitted_shown_and_refused_when_bad() {
    an_affinity_is_submitted_shown_and_refused_when_bad("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mysql_an_affinity_is_submitted_shown_and_refused_when_bad() {
    an_affinity_is_submitted_shown_and_refused_when_bad("mysql").await;
}

/// Registers `worker` (live from now on), claims the `k` tasks as it and fails each
/// attempt retryably; returns the ids claimed.
async fn fail_once_as(store: &dyn Store, worker: &str) -> Vec<i64> {
    store
        .worker_beat(WorkerBeatParams {
            facts: WorkerFacts {
                id: worker.into(),
                host: "test-host".into(),
                pid: None,
                version: "test".into(),
                groups: Vec::new(),
                queues: Queues::All,
                capacity: 10,
                protocol: Protocol::Process,
                kinds: None,
            },
            address: None,
            starting: true,
            now: None,
            owner: None,
            max_live_per_owner: None,
        })
        .await
        .unwrap();
    let claimed = store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["k".into()],
            limit: 10,
            worker_id: worker.into(),
            worker_host: "test-host".into(),
            worker_groups: Vec::new(),
            lease_for: Duration::from_secs(30),
            now: None,
        })
        .await
        .unwrap();
    let items = claimed
        .iter()
        .map(|t| FinishItem {
            lease: t.lease(),
            plan: FinishPlan::for_handler(
                HandlerOutcome::Error {
                    message: "try again".into(),
                    retry_after: None,
                },
                t.attempt,
                &t.backoff,
                0.5,
            ),
        })
        .collect();
    let applied = store
        .task_finish(FinishParams {
            items,
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert!(applied.iter().all(|a| *a), "{applied:?}");
    claimed.iter().map(|t| t.id).collect()
}

fn task_count(server: &Server) -> usize {
    server.tt(&["ls", "--json"]).json()["tasks"]
        .as_array()
        .expect("tasks")
        .len()
}

async fn an_affinity_is_submitted_shown_and_refused_when_bad(backend: &str) {
    let Some(db) = TestDb::fresh(backend).await else {
        return;
    };
    let server = Server::start_with(&["--workers", "0", "--database-url", db.url()]);

    let submitted = server
        .tt(&["submit", "k", "--affinity", "45s", "--json"])
        .json();
    let id = submitted["id"].as_i64().expect("id");
    assert_eq!(submitted["task"]["affinity_ms"], 45_000, "{submitted}");
    let id_s = id.to_string();
    let shown = server.tt(&["show", &id_s, "--json"]).json();
    assert_eq!(
        (
            &shown["task"]["affinity_ms"],
            &shown["task"]["affinity_until"]
        ),
        (&json!(45_000), &Value::Null),
        "{shown}"
    );
    let text = server.tt(&["show", &id_s]).ok().stdout;
    assert!(text.contains("\n  affinity    45s\n"), "{text}");
    assert!(!text.contains("waits for"), "no attempt failed yet: {text}");

    // What is not a duration, no wait at all, or a wait past 10 years is a usage error,
    // and nothing is submitted.
    for (value, why) in [
        ("0s", "\"0s\" is no wait: an affinity is at least 1ms"),
        ("0", "\"0\" is no wait"),
        ("nonsense", "\"nonsense\" is not a duration"),
        (
            "3651d",
            "\"3651d\" is too long: an affinity is at most 10 years",
        ),
    ] {
        let refused = server.tt(&["submit", "k", "--affinity", value]);
        refused.fails(2, why);
        assert!(refused.stderr.contains("--affinity"), "{refused:?}");
    }
    assert_eq!(task_count(&server), 1, "nothing more was submitted");

    // From a file, --affinity fills the lines that set no affinity_ms of their own.
    let file = server
        .tt_as(
            ADMIN,
            &[
                "submit",
                "other",
                "--file",
                "-",
                "--affinity",
                "2m",
                "--json",
            ],
            Some("{\"payload\": 1}\n{\"payload\": 2, \"affinity_ms\": 5000}\n"),
        )
        .json();
    let waits: Vec<Value> = file["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| {
            server.tt(&["show", &t["id"].to_string(), "--json"]).json()["task"]["affinity_ms"]
                .clone()
        })
        .collect();
    assert_eq!(waits, [json!(120_000), json!(5000)]);
    let refused = server.tt_as(
        ADMIN,
        &["submit", "other", "--file", "-", "--affinity", "0s"],
        Some("{\"payload\": 1}\n"),
    );
    refused.fails(2, "at least 1ms");
    assert_eq!(task_count(&server), 3, "nothing more was submitted");

    // A failed attempt: the retry waits for the worker that ran it.
    let store = db.store().await;
    assert_eq!(fail_once_as(&*store, "affine-1").await, vec![id]);
    let task = server.tt(&["show", &id_s, "--json"]).json()["task"].clone();
    assert_eq!(
        (&task["state"], &task["worker_id"], &task["affinity_ms"]),
        (&json!("pending"), &json!("affine-1"), &json!(45_000)),
        "{task}"
    );
    let until: DateTime<Utc> = serde_json::from_value(task["affinity_until"].clone())
        .unwrap_or_else(|e| panic!("affinity_until is a time while it waits ({e}): {task}"));
    let text = server.tt(&["show", &id_s]).ok().stdout;
    let line = format!(
        "\n  affinity    45s\n              waits for worker affine-1 until {}\n",
        until.format("%Y-%m-%d %H:%M:%SZ")
    );
    assert!(text.contains(&line), "{line:?} in:\n{text}");
    drop(server);
    drop(db);
}
