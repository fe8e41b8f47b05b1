//! A worker that is not Rust: a Python script using only the standard library works tasks
//! through the pull protocol against a real server and database; the test takes back the
//! lease of the task it abandons, as a server's rescuer does, and the worker's stale token
//! is refused.

mod common;

use common::{token, Server};
use serde_json::{json, Value};
use std::process::Stdio;
use std::time::Duration;
use tasktable_runtime::{Rescuer, RescuerConfig};
use tasktable_server::Role;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

on_every_backend!(python_worker_completes_tasks_and_its_stale_token_is_refused);

async fn python_worker_completes_tasks_and_its_stale_token_is_refused(s: Server) {
    let tasks: Vec<Value> = (0..20)
        .map(|n| json!({"kind": "double", "payload": {"n": n}}))
        .collect();
    let (status, body) = s
        .post("/api/v1/tasks/batch", json!({ "tasks": tasks }))
        .await;
    assert_eq!(status, 201, "{body}");
    let fast = json!({"initial_ms": 0, "multiplier": 1.0, "max_ms": 0, "jitter": 0.0});
    let (_, abandoned) = s
        .post("/api/v1/tasks", json!({"kind": "abandon", "backoff": fast}))
        .await;
    let abandoned = abandoned["id"].as_i64().unwrap();

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/remote_worker.py");
    let spawned = tokio::process::Command::new("python3")
        .arg(script)
        .env("TASKTABLE_SERVER", &s.base)
        .env("TASKTABLE_TOKEN", token(Role::Worker))
        .env("TASKTABLE_READER_TOKEN", token(Role::Reader))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn();
    let mut child = match spawned {
        Ok(child) => child,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: python3 cannot be run ({e}); install Python 3 or run with CI=1 to make this fail");
            return;
        }
        Err(e) => panic!("python3 is required in CI: {e}"),
    };
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut stdin = child.stdin.take().unwrap();
    let within =
        |what: &'static str| move |_| panic!("the Python worker did not {what} within 120 s");

    // The worker says which task it abandoned; rescue it as a server's rescuer would, at
    // the database time just past its lease, and tell the worker.
    let line = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .unwrap_or_else(within("abandon a task"))
        .unwrap()
        .expect("the worker names the task it abandoned");
    let said: Value = serde_json::from_str(&line).expect("a JSON line");
    assert_eq!(said["abandoned"], abandoned);
    let lease_end = s
        .store
        .task_get(abandoned)
        .await
        .unwrap()
        .unwrap()
        .lease_expires_at
        .unwrap();
    let rescuer = Rescuer::new(s.store.clone(), RescuerConfig::default());
    let rescued = rescuer
        .run_once(Some(lease_end + chrono::Duration::milliseconds(1)))
        .await
        .unwrap();
    assert_eq!(rescued, 1, "the abandoned lease is taken back");
    stdin.write_all(b"rescued\n").await.unwrap();

    let summary = tokio::time::timeout(Duration::from_secs(120), lines.next_line())
        .await
        .unwrap_or_else(within("finish"))
        .unwrap();
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python worker failed: {stderr}");
    let summary: Value =
        serde_json::from_str(&summary.expect("a summary line")).expect("one JSON summary line");
    assert_eq!(summary["completed"], 20);
    assert_eq!(summary["stale_status"], 409);
    assert_eq!(summary["stale_code"], "lease_lost");
    assert!(
        summary["second_token"].as_i64() > summary["first_token"].as_i64(),
        "the re-claim got a newer token"
    );

    // The database agrees with what the worker saw.
    let (_, page) = s.get("/api/v1/tasks?kind=double&limit=100").await;
    let tasks = page["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 20);
    for task in tasks {
        assert_eq!(task["state"], "succeeded", "{task}");
        assert_eq!(
            task["result"]["doubled"],
            task["payload"]["n"].as_i64().unwrap() * 2
        );
        assert_eq!(task["progress"], json!({"pct": 50}));
        assert_eq!(task["attempt"], 1);
        assert_eq!(task["worker_id"], "py-worker");
    }
    let (_, shown) = s.get(&format!("/api/v1/tasks/{abandoned}")).await;
    assert_eq!(shown["task"]["state"], "succeeded");
    assert_eq!(
        shown["task"]["result"], "done by the live worker",
        "the stale complete was refused"
    );
    let outcomes: Vec<(&str, &str)> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["worker_id"].as_str().unwrap(),
                a["outcome"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        outcomes,
        [("py-frozen", "lease_expired"), ("py-worker", "succeeded")]
    );
}
