//! `tasktable workers` and `tasktable drain` as people run them, against a `tasktable
//! serve` child process whose in-process worker has a stable id and a group.

mod common;

use common::serve::{Server, READER};
use serde_json::Value;

#[test]
fn serves_worker_is_listed_shown_drained_and_released() {
    let server = Server::start_with(&[
        "--workers",
        "3",
        "--worker-id",
        "serve-1",
        "--group",
        "blue,green",
    ]);
    // serve registers its worker before it says it listens.
    let listed = server.tt(&["workers", "--all", "--json"]).ok().json();
    assert_eq!(listed["live"], 1);
    let w = &listed["workers"][0];
    assert_eq!(w["queues"], Value::Null, "serve's worker takes every queue");
    assert_eq!(w["groups"], serde_json::json!(["blue", "green"]));
    assert_eq!(
        (w["capacity"].as_u64(), w["state"].as_str()),
        (Some(3), Some("active"))
    );

    let table = server.tt(&["workers"]).ok().stdout;
    let row = table
        .lines()
        .find(|l| l.starts_with("serve-1 "))
        .unwrap_or_else(|| panic!("no row for serve-1 in\n{table}"));
    for cell in ["active", "0/3", "*", "blue,green"] {
        assert!(row.split_whitespace().any(|c| c == cell), "{cell} in {row}");
    }
    assert!(table.ends_with("1 live\n"), "{table}");

    let shown = server.tt(&["workers", "show", "serve-1"]).ok().stdout;
    assert!(
        shown.contains("queues       *\n") && shown.contains("running      0 of 3\n"),
        "{shown}"
    );

    let drained = server.tt(&["drain", "serve-1"]).ok().stdout;
    assert!(
        drained.starts_with("worker \"serve-1\" draining"),
        "{drained}"
    );
    let json = server
        .tt(&["workers", "show", "serve-1", "--json"])
        .ok()
        .json();
    assert_eq!(json["worker"]["state"], "draining");
    let released = server
        .tt(&["workers", "release", "serve-1", "--json"])
        .ok()
        .json();
    assert_eq!(released["worker"]["state"], "active");

    // A reader may look but not drain; an unknown worker is not found.
    server
        .tt_as(READER, &["workers", "drain", "serve-1"], None)
        .refused(5, "forbidden");
    server
        .tt(&["drain", "nobody"])
        .fails(3, "worker \"nobody\" not found");
    let json = server
        .tt(&["workers", "show", "serve-1", "--json"])
        .ok()
        .json();
    assert_eq!(json["worker"]["state"], "active", "nothing changed");
}

/// serve's worker tells the registry the kinds of its handlers, and `show` says why a
/// task of another kind waits, then that its queue is paused.
#[test]
fn show_says_why_a_pending_task_waits_from_the_kinds_workers_handle() {
    let server = Server::start_with(&["--workers", "1", "--worker-id", "serve-1"]);
    let shown = server
        .tt(&["workers", "show", "serve-1", "--json"])
        .ok()
        .json();
    let kinds = shown["worker"]["kinds"]
        .as_array()
        .unwrap_or_else(|| panic!("serve's worker says its kinds: {shown}"));
    assert!(!kinds.is_empty(), "{shown}");
    assert!(!kinds.contains(&Value::from("resize")), "{shown}");
    let text = server.tt(&["workers", "show", "serve-1"]).ok().stdout;
    let line = format!("kinds        {}\n", kinds_joined(kinds));
    assert!(text.contains(&line), "{line:?} in {text}");

    let submitted = server.tt(&["submit", "resize", "--json"]).ok().json();
    let id = submitted["id"].to_string();
    let shown = server.tt(&["show", &id, "--json"]).ok().json();
    assert_eq!(
        shown["waiting"],
        serde_json::json!([{"reason": "no_worker_for_kind",
            "text": "no live worker handles kind \"resize\" in queue \"default\""}]),
        "{shown}"
    );
    let text = server.tt(&["show", &id]).ok().stdout;
    assert!(
        text.contains(
            "  waiting     no live worker handles kind \"resize\" in queue \"default\"\n"
        ),
        "{text}"
    );

    server.tt(&["pause", "default"]).ok();
    let text = server.tt(&["show", &id]).ok().stdout;
    assert!(
        text.contains("  waiting     queue \"default\" is paused\n"),
        "{text}"
    );
}

fn kinds_joined(kinds: &[Value]) -> String {
    kinds
        .iter()
        .map(|k| k.as_str().expect("a kind"))
        .collect::<Vec<_>>()
        .join(",")
}
