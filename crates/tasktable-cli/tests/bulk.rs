//! Work on many tasks at once against a real `tasktable serve`.
//!
//! `tasktable purge`: tasks that finished three hours ago (made through the store at
//! pinned times, on the server's own SQLite file) are counted, deleted and archived by
//! state and age, and bad requests are refused. A bulk change on a terminal asks with the
//! exact count and shows its progress.

mod common;

use chrono::{Duration, Utc};
use common::serve::{Server, READER};
use serde_json::json;
use tasktable::outcome::{FinishPlan, HandlerOutcome};
use tasktable::store::{ClaimParams, FinishItem, FinishParams, SubmitParams};
use tasktable::{NewTask, Store};

/// Tasks that ended three hours ago: 4 succeeded, 2 failed, 2 cancelled; their ids.
async fn finished_long_ago(store: &dyn Store) -> Vec<i64> {
    let then = Utc::now() - Duration::hours(3);
    let tasks = (0..8).map(|i| NewTask::new("k", json!(i))).collect();
    store
        .task_submit(SubmitParams {
            tasks,
            now: Some(then),
        })
        .await
        .unwrap();
    let claimed = store
        .task_claim(ClaimParams {
            queue: "default".into(),
            kinds: vec!["k".into()],
            limit: 8,
            worker_id: "w".into(),
            worker_host: "h".into(),
            worker_groups: Vec::new(),
            lease_for: std::time::Duration::from_secs(30),
            now: Some(then),
        })
        .await
        .unwrap();
    let items = claimed
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let outcome = match i {
                0..4 => HandlerOutcome::Succeeded { result: None },
                4..6 => HandlerOutcome::Failed {
                    message: "no".into(),
                },
                _ => HandlerOutcome::Cancel {
                    reason: "stop".into(),
                },
            };
            FinishItem {
                lease: t.lease(),
                plan: FinishPlan::for_handler(outcome, t.attempt, &t.backoff, 0.5),
            }
        })
        .collect();
    store
        .task_finish(FinishParams {
            items,
            only_if_expired: false,
            now: Some(then + Duration::seconds(1)),
        })
        .await
        .unwrap();
    claimed.iter().map(|t| t.id).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purge_counts_deletes_and_archives_by_state_and_age() {
    let server = Server::start();
    let url = format!(
        "sqlite://{}",
        server.dir.path().join("tasktable.db").display()
    );
    let store = tasktable::sqlite::SqliteStore::open(&url).await.unwrap();
    let ids = finished_long_ago(&store).await;

    server.tt(&["purge"]).fails(2, "--succeeded");
    server
        .tt_as(READER, &["purge", "--succeeded", "1h"], None)
        .refused(5, "reader");
    let dry = server
        .tt(&[
            "purge",
            "--succeeded",
            "1h",
            "--failed",
            "4h",
            "--dry-run",
            "--json",
        ])
        .json();
    assert_eq!(dry["tasks"], json!({"succeeded": 4, "failed": 0}), "{dry}");
    assert!(
        store.task_get(ids[0]).await.unwrap().is_some(),
        "a dry run changes nothing"
    );

    let done = server
        .tt(&[
            "purge",
            "--succeeded",
            "1h",
            "--failed",
            "1h",
            "--batch",
            "3",
            "--json",
        ])
        .json();
    assert_eq!(
        done["tasks"],
        json!({"succeeded": 4, "failed": 2}),
        "{done}"
    );
    for id in &ids[..6] {
        assert!(
            store.task_get(*id).await.unwrap().is_none(),
            "task {id} deleted"
        );
    }
    let archived = server.tt(&["purge", "--cancelled", "2h", "--archive"]).ok();
    assert_eq!(
        archived.stdout.trim(),
        "archived 2 tasks cancelled",
        "{archived:?}"
    );
    for id in &ids[6..] {
        assert!(store.task_get(*id).await.unwrap().is_none());
        let (task, attempts) = store
            .task_get_archived(*id)
            .await
            .unwrap()
            .expect("archived");
        assert_eq!((task.id, attempts.len()), (*id, 1));
    }
}

#[test]
fn a_bulk_change_on_a_terminal_asks_with_the_exact_count_and_shows_progress() {
    let server = Server::start();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.jsonl");
    let lines: String = (0..1203)
        .map(|n| format!("{{\"payload\": {n}}}\n"))
        .collect();
    std::fs::write(&file, lines).unwrap();
    server
        .tt(&["submit", "k", "--file", file.to_str().unwrap()])
        .ok();
    let (code, refused) = server.tt_on_terminal(&["hold", "--kind", "k"], "n\n");
    assert_eq!(code, 1, "{refused}");
    assert!(
        refused.contains("hold every task with kind \"k\" (1203 tasks match now)? [y/N]"),
        "{refused}"
    );
    assert!(
        refused.contains("not confirmed; nothing changed"),
        "{refused}"
    );
    let held = || {
        server
            .tt(&["ls", "--state", "held", "--json", "--limit", "1"])
            .json()["tasks"]
            .as_array()
            .map_or(0, Vec::len)
    };
    assert_eq!(held(), 0, "nothing held");
    let (code, shown) = server.tt_on_terminal(&["hold", "--kind", "k"], "y\n");
    assert_eq!(code, 0, "{shown}");
    assert!(shown.contains("(1203 tasks match now)"), "{shown}");
    // The bar counts the tasks changed so far, a step of 1000 at a time.
    assert!(shown.contains("/1203 tasks"), "{shown}");
    assert!(shown.contains("1203 tasks: held"), "{shown}");
    let stats = server.tt(&["stats", "--json"]).json();
    assert_eq!(
        (&stats["totals"]["held"], &stats["totals"]["pending"]),
        (&json!(1203), &json!(0)),
        "{stats}"
    );
}
