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
    let waited = Command::new("timeout")
        .args(["120", common::BIN, "watch", "--after", "e0.a0.t0"])
        .args(["--event", "failed", "--count", "1", "--json"])
        .env("TASKTABLE_SERVER", &server.url)
        .env("TASKTABLE_TOKEN", common::serve::ADMIN)
        .output()
        .expect("tasktable watch");
    assert!(waited.status.success(), "the task did not fail");
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
