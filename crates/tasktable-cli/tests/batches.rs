//! `tasktable batch`: create, list, show (and --watch), start, pause, stop, resume and
//! edit a batch against a `tasktable serve` child process on each backend; the test plays
//! the batch's runner through the store on the server's database.

mod common;

use common::serve::Server;
use serde_json::json;
use std::time::Duration;
use tasktable::outcome::{FinishPlan, HandlerOutcome};
use tasktable::store::{BatchSaveParams, ClaimParams, FinishItem, FinishParams, ItemFailure};
use tasktable_testdb::TestDb;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_batch_is_created_followed_and_controlled() {
    a_batch_is_created_followed_and_controlled("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_batch_is_created_followed_and_controlled() {
    a_batch_is_created_followed_and_controlled("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mysql_a_batch_is_created_followed_and_controlled() {
    a_batch_is_created_followed_and_controlled("mysql").await;
}

async fn a_batch_is_created_followed_and_controlled(backend: &str) {
    let Some(db) = TestDb::fresh(backend).await else {
        return;
    };
    let server = Server::start_with(&["--workers", "0", "--database-url", db.url()]);
    let created = server
        .tt(&[
            "batch",
            "create",
            "notify",
            "--items",
            "300",
            "--parallelism",
            "4",
            "--rate",
            "50",
            "--error-budget",
            "2",
            "--held",
            "--data",
            r#"{"campaign": 1}"#,
            "--json",
        ])
        .json();
    assert_eq!(created["created"], json!(true), "{created}");
    let id = created["id"].to_string();
    let listed = server.tt(&["batch", "ls"]).ok().stdout;
    let row = listed
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("the batch is listed:\n{listed}"));
    assert!(
        row.contains("waiting") && row.contains("0/300 items"),
        "{row}"
    );
    let started = server.tt(&["batch", "start", &id]).ok().stdout;
    assert!(started.contains("queued"), "{started}");

    // A runner claims it and saves progress with a failed item.
    let store = db.store().await;
    let task = store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["notify".into()],
            limit: 1,
            worker_id: "edge".into(),
            worker_host: "edge".into(),
            worker_groups: Vec::new(),
            lease_for: Duration::from_secs(30),
            now: None,
        })
        .await
        .unwrap()
        .pop()
        .expect("the batch is claimed");
    store
        .batch_save(BatchSaveParams {
            lease: task.lease(),
            low_water: 120,
            end: Some(300),
            errors: 1,
            failures: vec![ItemFailure {
                item: 17,
                error: "no such user".into(),
                tries: 3,
                failed_at: None,
            }],
            items_per_second: Some(60.0),
            lease_for: Duration::from_secs(30),
            data_version: 0,
            now: None,
        })
        .await
        .unwrap();
    let shown = server.tt(&["batch", "show", &id]).ok().stdout;
    for want in [
        "status       running",
        "progress     120/300 items, 1 failed",
        "errors       1 of a budget of 2",
        "rate         60 items/s",
        "eta          3s",
        "item 17",
        "no such user",
    ] {
        assert!(shown.contains(want), "{want:?} in:\n{shown}");
    }
    let pausing = server.tt(&["batch", "pause", &id]).ok().stdout;
    assert!(pausing.contains("pausing"), "{pausing}");
    let applied = store
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease: task.lease(),
                plan: FinishPlan::for_handler(
                    HandlerOutcome::Hold {
                        reason: "paused".into(),
                    },
                    task.attempt,
                    &task.backoff,
                    0.5,
                ),
            }],
            only_if_expired: false,
            now: None,
        })
        .await
        .unwrap();
    assert_eq!(applied, [true]);
    // --watch follows it until it is paused, then shows it.
    let watched = server.tt(&["batch", "show", &id, "--watch"]).ok().stdout;
    assert!(watched.contains("status       paused"), "{watched}");
    let edited = server
        .tt(&["batch", "edit", &id, "--error-budget", "5"])
        .ok()
        .stdout;
    assert!(edited.contains("error budget 5, 1 spent"), "{edited}");
    let edited = server
        .tt(&["batch", "edit", &id, "--error-budget", "6", "--json"])
        .json();
    assert_eq!(edited["batch"]["error_budget"], json!(6));
    for (op, status) in [
        ("resume", "queued"),
        ("stop", "stopped"),
        ("resume", "queued"),
    ] {
        let out = server.tt(&["batch", op, &id]).ok().stdout;
        assert!(
            out.contains(&format!("batch {id}: {status}")),
            "{op}: {out}"
        );
    }

    // Refusals: a start of a batch not waiting, a bad spec, an unknown batch, no edit.
    server
        .tt(&["batch", "start", &id])
        .fails(4, "only a batch that waits for its start");
    server
        .tt(&["batch", "create", "notify", "--parallelism", "0"])
        .fails(1, "parallelism must be 1 to 10000");
    server
        .tt(&["batch", "pause", "999999"])
        .fails(3, "not found");
    server
        .tt(&["batch", "edit", &id])
        .fails(2, "give --error-budget, --data, or both");
    server
        .tt(&["batch", "create", "notify", "--data", "{not json"])
        .fails(2, "--data is not valid JSON");
    let listed = server.tt(&["batch", "ls", "--json"]).json();
    assert_eq!(
        listed["batches"].as_array().map(Vec::len),
        Some(1),
        "{listed}"
    );
}
