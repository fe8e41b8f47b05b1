//! What `tasktable serve` logs about tasks, read back from its stderr: with
//! `--log-format json` one JSON object a line, and a WARN line for a task that failed for
//! good naming it, its kind, queue, attempt, worker and error, never its payload.

mod common;

use common::serve::Server;
use serde_json::Value;
use std::process::Command;

#[test]
fn a_task_that_fails_for_good_is_a_warn_line_in_json() {
    // A worker of the built-in handlers, whose `http` may not reach the loopback address:
    // the request is refused, a permanent failure of the task's only attempt.
    let server = Server::start_with(&["--workers", "1", "--log-format", "json"]);
    let id = server
        .tt(&[
            "submit",
            "http",
            r#"{"url": "http://127.0.0.1:9/hook", "headers": {"authorization": "Bearer SECRET-IN-PAYLOAD"}}"#,
            "--max-attempts",
            "1",
            "--json",
        ])
        .ok()
        .json()["id"]
        .as_i64()
        .expect("an id");
    server.wait_for_event("failed");
    let log = std::fs::read_to_string(server.dir.path().join("serve.log")).expect("serve.log");
    let lines: Vec<Value> = log
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let line = lines
        .iter()
        .find(|l| l["task_id"] == id)
        .unwrap_or_else(|| panic!("no line names task {id}:\n{log}"));
    assert_eq!(line["level"], "WARN", "{line}");
    assert_eq!(line["message"], "task failed for good", "{line}");
    assert_eq!(line["kind"], "http", "{line}");
    assert_eq!(line["queue"], "default", "{line}");
    assert_eq!(line["attempt"], 1, "{line}");
    assert_eq!(line["outcome"], "failed", "{line}");
    assert!(
        line["worker"].as_str().is_some_and(|w| !w.is_empty()),
        "{line}"
    );
    assert!(
        line["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{line}"
    );
    assert!(line["timestamp"].is_string(), "{line}");
    assert!(
        !log.contains("SECRET-IN-PAYLOAD"),
        "a payload reached the log:\n{log}"
    );
}

/// `curl` the server's API as admin with a JSON body; the answer's JSON.
fn call(server: &Server, path: &str, body: &str) -> Value {
    let out = Command::new("curl")
        .args(["-sS", "-X", "POST", "-H", "content-type: application/json"])
        .arg("-H")
        .arg(format!("authorization: Bearer {}", common::serve::ADMIN))
        .args(["-d", body])
        .arg(format!("{}{path}", server.url))
        .output()
        .expect("curl");
    assert!(out.status.success(), "curl {path}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{path}: {e}: {out:?}"))
}

#[test]
fn a_pull_workers_failed_attempt_is_logged_with_its_worker_and_attempt() {
    let server = Server::start_with(&["--workers", "0", "--log-format", "json"]);
    let id = server
        .tt(&["submit", "remote", "null", "--max-attempts", "3", "--json"])
        .ok()
        .json()["id"]
        .as_i64()
        .expect("an id");
    let claimed = call(
        &server,
        "/api/v1/claim",
        r#"{"kinds": ["remote"], "worker_id": "py-logs", "limit": 1}"#,
    );
    let task = &claimed["tasks"][0];
    assert_eq!(task["id"], id, "{claimed}");
    let failed = call(
        &server,
        &format!("/api/v1/leases/{id}/fail"),
        &serde_json::json!({"token": task["token"], "credential": task["credential"], "error": "upstream said no"})
            .to_string(),
    );
    assert!(failed.get("error").is_none(), "{failed}");
    let log = std::fs::read_to_string(server.dir.path().join("serve.log")).expect("serve.log");
    let line: Value = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|l| l["task_id"] == id)
        .unwrap_or_else(|| panic!("no line names task {id}:\n{log}"));
    assert_eq!(line["level"], "WARN", "{line}");
    assert_eq!(
        line["message"], "attempt failed; the task will be retried",
        "{line}"
    );
    assert_eq!(line["worker"], "py-logs", "{line}");
    assert_eq!(line["attempt"], 1, "{line}");
    assert_eq!(line["outcome"], "error", "{line}");
    assert_eq!(line["error"], "upstream said no", "{line}");
}
