//! A worker that is not Rust: a Python script using only the standard library works tasks
//! through the pull protocol against a real server and database, while the server's
//! rescuer takes back the lease of the task it abandons.

mod common;

use common::{token, Server};
use serde_json::{json, Value};
use std::time::Duration;
use tasktable_runtime::{Rescuer, RescuerConfig};
use tasktable_server::Role;

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

    // The rescuer a server runs, scanning often so the test does not wait long.
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let config = RescuerConfig {
        interval: Duration::from_millis(100),
        ..Default::default()
    };
    let rescuer = tokio::spawn(Rescuer::new(s.store.clone(), config).run(async {
        let _ = stopped.await;
    }));

    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/remote_worker.py");
    let run = tokio::process::Command::new("python3")
        .arg(script)
        .env("TASKTABLE_URL", &s.base)
        .env("TASKTABLE_TOKEN", token(Role::Worker))
        .env("TASKTABLE_READER_TOKEN", token(Role::Reader))
        .kill_on_drop(true)
        .output();
    let out = match tokio::time::timeout(Duration::from_secs(120), run).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) if std::env::var_os("CI").is_none() => {
            eprintln!("SKIPPED: python3 cannot be run ({e}); install Python 3 or run with CI=1 to make this fail");
            return;
        }
        Ok(Err(e)) => panic!("python3 is required in CI: {e}"),
        Err(_) => panic!("the Python worker did not finish within 120 s"),
    };
    let _ = stop.send(());
    rescuer.await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python worker failed: {stderr}");
    let summary: Value = serde_json::from_slice(&out.stdout).expect("one JSON summary line");
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
