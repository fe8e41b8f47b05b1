//! `tasktable submit --copies` and what `show` and `ls` say about a multi-run task,
//! against a `tasktable serve` child process on each backend. Workers of the test's own
//! run copies through the store on the server's database.

mod common;

use common::serve::Server;
use serde_json::json;
use std::time::Duration;
use tasktable::outcome::{FinishPlan, HandlerOutcome};
use tasktable::store::{ClaimParams, FinishItem, FinishParams};
use tasktable::Store;
use tasktable_testdb::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_copies_are_submitted_and_their_runs_shown() {
    copies_are_submitted_and_their_runs_shown("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_copies_are_submitted_and_their_runs_shown() {
    copies_are_submitted_and_their_runs_shown("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mysql_copies_are_submitted_and_their_runs_shown() {
    copies_are_submitted_and_their_runs_shown("mysql").await;
}

/// `worker` claims one run of the `k` task and ends it with `outcome`.
async fn run_once(store: &dyn Store, worker: &str, outcome: HandlerOutcome) {
    let claimed = store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["k".into()],
            limit: 1,
            worker_id: worker.into(),
            worker_host: "edge".into(),
            worker_groups: Vec::new(),
            lease_for: Duration::from_secs(30),
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1, "{worker} gets a run");
    let t = &claimed[0];
    let applied = store
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: t.lease(),
                plan: FinishPlan::for_handler(outcome, t.attempt, &t.backoff, 0.5),
            }],
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(applied, [true]);
}

async fn copies_are_submitted_and_their_runs_shown(backend: &str) {
    let Some(db) = TestDb::fresh(backend).await else {
        return;
    };
    let server = Server::start_with(&["--workers", "0", "--database-url", db.url()]);
    let submitted = server
        .tt(&[
            "submit",
            "k",
            "--copies",
            "3",
            "--at-once",
            "2",
            "--max-failed-runs",
            "1",
            "--json",
        ])
        .json();
    let task = &submitted["task"];
    assert_eq!(
        (&task["copies"], &task["at_once"], &task["max_failed_runs"]),
        (&json!(3), &json!(2), &json!(1)),
        "{submitted}"
    );
    let id = submitted["id"].to_string();

    let store = db.store().await;
    run_once(
        &*store,
        "edge-1",
        HandlerOutcome::Succeeded { result: None },
    )
    .await;
    run_once(
        &*store,
        "edge-2",
        HandlerOutcome::Error {
            message: "disk full".into(),
            retry_after: Some(Duration::ZERO),
        },
    )
    .await;
    let text = server.tt(&["show", &id]).ok().stdout;
    assert!(
        text.contains("\n  runs        1 of 3 done, 1 failed (1 allowed)\n"),
        "{text}"
    );
    assert!(text.contains("\n  at once     2\n"), "{text}");
    assert!(text.contains("\nruns\n"), "{text}");
    let lines: Vec<&str> = text.lines().collect();
    let first = lines
        .iter()
        .find(|l| l.trim_start().starts_with("1 ") && l.contains("edge-1"))
        .unwrap_or_else(|| panic!("run 1 is listed:\n{text}"));
    assert!(first.contains("succeeded"), "{first}");
    let second = lines
        .iter()
        .find(|l| l.trim_start().starts_with("2 ") && l.contains("edge-2 on edge"))
        .unwrap_or_else(|| panic!("run 2 is listed:\n{text}"));
    assert!(
        second.contains("error") && second.contains("disk full"),
        "{second}"
    );
    let shown = server.tt(&["show", &id, "--json"]).json();
    assert_eq!(shown["runs"].as_array().map(Vec::len), Some(2), "{shown}");
    let listed = server.tt(&["ls"]).ok().stdout;
    assert!(listed.contains("1/3 done"), "{listed}");

    // Options of copies without --copies are usage errors; nothing is submitted.
    for args in [
        &["submit", "k", "--at-once", "2"][..],
        &["submit", "k", "--repeat"][..],
        &["submit", "k", "--max-failed-runs", "1"][..],
        &["submit", "k", "--idempotency-key", "x", "--rearm", "all"][..],
    ] {
        let refused = server.tt(args);
        refused.fails(2, "required arguments were not provided");
        assert!(refused.stderr.contains("--copies"), "{refused:?}");
    }
    server
        .tt(&["submit", "k", "--copies", "2", "--affinity", "5s"])
        .fails(2, "cannot be used with");
    server.tt(&["submit", "k", "--copies", "0"]).fails(
        2,
        "is not a number of copies from 1, \"all\" or \"all_joining\"",
    );
    // A broadcast with no worker registered has nowhere to go.
    let refused = server.tt(&["submit", "k", "--copies", "all"]);
    assert!(refused.stderr.contains("no active worker"), "{refused:?}");
    // Values the server refuses: nothing is submitted either.
    let refused = server.tt(&["submit", "k", "--copies", "2", "--at-once", "3"]);
    assert!(refused.stderr.contains("at_once"), "{refused:?}");
    let count = server.tt(&["ls", "--json"]).json()["tasks"]
        .as_array()
        .map(Vec::len);
    assert_eq!(count, Some(1), "nothing more was submitted");
    drop(server);
    drop(db);
}
