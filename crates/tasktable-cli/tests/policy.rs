//! `tasktable policy` as people run it, against a `tasktable serve` child process on a
//! fresh database of each backend: a queue's policy set, shown, listed by `stats` and
//! cleared; and bad input refused, by the flags or by the server, with nothing changed
//! (looked up in the store itself).

mod common;

use common::serve::{Server, READER};
use serde_json::{json, Value};
use std::sync::Arc;
use tasktable::policy::{QueuePolicy, Rate};
use tasktable::Store;
use tasktable_testdb::TestDb;

/// A server on a fresh database of `backend`, and a store of its own on that database;
/// `None` when the backend's server is unreachable outside CI.
async fn serve_on(backend: &str) -> Option<(TestDb, Arc<dyn Store>, Server)> {
    let db = TestDb::fresh(backend).await?;
    let store = db.store().await;
    let server = Server::start_with(&["--workers", "0", "--database-url", db.url()]);
    let log = std::fs::read_to_string(server.dir.path().join("serve.log")).unwrap_or_default();
    assert!(log.contains(&format!("backend=\"{backend}\"")), "{log}");
    Some((db, store, server))
}

/// The policy of `queue` as the store has it (none when the queue is not listed).
async fn stored(store: &Arc<dyn Store>, queue: &str) -> QueuePolicy {
    store
        .queue_list()
        .await
        .expect("queue list")
        .into_iter()
        .find(|q| q.name == queue)
        .map(|q| q.policy)
        .unwrap_or_default()
}

/// The queue `name` in `stats --json`.
fn listed(server: &Server, name: &str) -> Value {
    let stats = server.tt(&["stats", "--json"]).json();
    stats["queues"]
        .as_array()
        .expect("queues")
        .iter()
        .find(|q| q["name"] == name)
        .unwrap_or_else(|| panic!("no queue {name:?} in {stats}"))
        .clone()
}

/// The lines of the counts table of `stats`, before the blank line.
fn counts_table(server: &Server) -> Vec<String> {
    let text = server.tt(&["stats"]).ok().stdout;
    let (counts, _) = text
        .split_once("\n\n")
        .unwrap_or_else(|| panic!("two tables:\n{text}"));
    counts.lines().map(str::to_owned).collect()
}

fn row<'a>(table: &'a [String], start: &str) -> &'a str {
    table
        .iter()
        .find(|l| l.starts_with(start))
        .unwrap_or_else(|| panic!("no row {start:?} in {table:#?}"))
}

const DESCRIBED: &str = "at most 4 running; at most 2 of kind \"pdf\" running; \
                         2.5 starts/s (burst 3); per key 30 starts/min (burst 1); \
                         one per worker; fair share among workers";

const ALL_FLAGS: [&str; 14] = [
    "policy",
    "reports",
    "--max-running",
    "4",
    "--kind-limit",
    "pdf=2",
    "--rate",
    "2.5",
    "--burst",
    "3",
    "--key-rate",
    "0.5",
    "--one-per-worker",
    "--fair-share",
];

fn all_flags_policy() -> QueuePolicy {
    QueuePolicy {
        max_running: Some(4),
        kind_max_running: [("pdf".to_owned(), 2)].into(),
        rate: Some(Rate::per_second(2.5).with_burst(3)),
        key_rate: Some(Rate::per_second(0.5)),
        one_per_worker: true,
        fair_share: true,
    }
}

fn all_flags_json() -> Value {
    json!({
        "max_running": 4,
        "kind_max_running": {"pdf": 2},
        "rate": {"per_second": 2.5, "burst": 3},
        "key_rate": {"per_second": 0.5},
        "one_per_worker": true,
        "fair_share": true,
    })
}

async fn a_policy_is_set_shown_listed_and_cleared(backend: &str) {
    let Some((db, store, server)) = serve_on(backend).await else {
        return;
    };
    server.tt(&["submit", "pdf", "--queue", "reports"]).ok();
    server.tt(&["submit", "email"]).ok();

    // No flag shows the policy, and sets nothing.
    let none = server.tt(&["policy", "reports"]).ok().stdout;
    assert_eq!(
        none, "queue \"reports\": no policy; nothing holds its claims back\n",
        "{none}"
    );
    assert_eq!(stored(&store, "reports").await, QueuePolicy::default());
    assert!(
        counts_table(&server)[0].ends_with("TOTAL"),
        "no POLICY column while no queue has a policy"
    );

    let set = server.tt(&ALL_FLAGS).ok().stdout;
    assert_eq!(set, format!("queue \"reports\": {DESCRIBED}\n"));
    assert_eq!(stored(&store, "reports").await, all_flags_policy());

    // The flags replace the whole policy; --json prints the server's answer.
    let answer = server
        .tt(&["policy", "reports", "--max-running", "1", "--json"])
        .json();
    assert_eq!(
        answer,
        json!({"name": "reports", "policy": {"max_running": 1}})
    );
    let mut with_json = ALL_FLAGS.to_vec();
    with_json.push("--json");
    assert_eq!(
        server.tt(&with_json).json(),
        json!({"name": "reports", "policy": all_flags_json()})
    );

    // The no-flag form shows it, as text and as the answer of a set.
    assert_eq!(
        server.tt(&["policy", "reports"]).ok().stdout,
        format!("queue \"reports\": {DESCRIBED}\n")
    );
    assert_eq!(
        server.tt(&["policy", "reports", "--json"]).json(),
        json!({"name": "reports", "policy": all_flags_json()})
    );
    // Reading it needs no more than a reader.
    let read = server
        .tt_as(READER, &["policy", "reports"], None)
        .ok()
        .stdout;
    assert_eq!(read, format!("queue \"reports\": {DESCRIBED}\n"));

    // stats shows it beside the queue, paused or not; --json is the server's document.
    server.tt(&["pause", "reports"]).ok();
    let table = counts_table(&server);
    assert!(table[0].ends_with("TOTAL  POLICY"), "{table:#?}");
    assert!(
        row(&table, "reports (paused)").ends_with(&format!("  {DESCRIBED}")),
        "{table:#?}"
    );
    assert!(row(&table, "default").ends_with("  -"), "{table:#?}");
    assert!(row(&table, "all queues").ends_with(" 2"), "{table:#?}");
    let reports = listed(&server, "reports");
    assert_eq!(
        (&reports["policy"], &reports["paused"]),
        (&all_flags_json(), &json!(true))
    );
    assert_eq!(listed(&server, "default")["policy"], json!({}));
    server.tt(&["resume", "reports"]).ok();

    // --clear sends {}; the policy is gone everywhere.
    let cleared = server.tt(&["policy", "reports", "--clear"]).ok().stdout;
    assert_eq!(
        cleared,
        "queue \"reports\": no policy; nothing holds its claims back\n"
    );
    assert_eq!(stored(&store, "reports").await, QueuePolicy::default());
    assert_eq!(listed(&server, "reports")["policy"], json!({}));
    assert!(counts_table(&server)[0].ends_with("TOTAL"));
    assert_eq!(
        server
            .tt(&["policy", "reports", "--clear", "--json"])
            .json(),
        json!({"name": "reports", "policy": {}})
    );

    // A queue the server does not know has no policy.
    assert_eq!(
        server.tt(&["policy", "nowhere", "--json"]).json(),
        json!({"name": "nowhere", "policy": {}})
    );
    drop(server);
    drop(db);
}

async fn bad_policy_input_is_refused_and_changes_nothing(backend: &str) {
    let Some((db, store, server)) = serve_on(backend).await else {
        return;
    };
    server.tt(&ALL_FLAGS).ok();
    let unchanged = || async {
        assert_eq!(stored(&store, "reports").await, all_flags_policy());
        assert_eq!(
            server.tt(&["policy", "reports", "--json"]).json()["policy"],
            all_flags_json()
        );
    };

    // The flags' own checks: usage errors (2) before any request.
    let nonsense = server.tt(&["policy", "reports", "--kind-limit", "nonsense"]);
    nonsense.fails(2, "invalid value 'nonsense' for '--kind-limit <KIND=N>'");
    assert!(
        nonsense.stderr.contains("write it like pdf=2"),
        "{nonsense:?}"
    );
    server
        .tt(&["policy", "reports", "--kind-limit", "pdf=two"])
        .fails(2, "is not a whole number");
    server
        .tt(&["policy", "reports", "--rate", "fast"])
        .fails(2, "\"fast\" is not a number of starts per second");
    server
        .tt(&["policy", "reports", "--rate", "inf"])
        .fails(2, "is not a number of starts per second");
    let burst = server.tt(&["policy", "reports", "--burst", "3"]);
    burst.fails(2, "the following required arguments were not provided");
    assert!(burst.stderr.contains("--rate <PER_SECOND>"), "{burst:?}");
    let key_burst = server.tt(&["policy", "reports", "--key-burst", "3", "--rate", "1"]);
    key_burst.fails(2, "the following required arguments were not provided");
    assert!(
        key_burst.stderr.contains("--key-rate <PER_SECOND>"),
        "{key_burst:?}"
    );
    server
        .tt(&["policy", "reports", "--clear", "--fair-share"])
        .fails(
            2,
            "the argument '--clear' cannot be used with '--fair-share'",
        );
    server
        .tt(&[
            "policy",
            "reports",
            "--kind-limit",
            "pdf=1",
            "--kind-limit",
            "pdf=2",
        ])
        .refused(2, "--kind-limit names kind \"pdf\" twice");
    unchanged().await;

    // The server's checks: its message and code, one line, exit code 1.
    server
        .tt(&["policy", "reports", "--rate", "0"])
        .refused(
            1,
            "rate.per_second must be a number from one a day (1.1574074074074073e-5) to 1000000 (invalid_input)",
        );
    server
        .tt(&["policy", "reports", "--key-rate", "2", "--key-burst", "0"])
        .refused(
            1,
            "key_rate.burst must be from 1 to 1000000 (invalid_input)",
        );
    server
        .tt(&["policy", "reports", "--max-running", "1000001"])
        .refused(1, "max_running must be at most 1000000 (invalid_input)");
    // A reader may look but not set.
    server
        .tt_as(READER, &["policy", "reports", "--clear"], None)
        .refused(5, "forbidden");
    unchanged().await;
    drop(server);
    drop(db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_is_set_shown_listed_and_cleared_on_sqlite() {
    a_policy_is_set_shown_listed_and_cleared("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_is_set_shown_listed_and_cleared_on_postgres() {
    a_policy_is_set_shown_listed_and_cleared("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_policy_is_set_shown_listed_and_cleared_on_mysql() {
    a_policy_is_set_shown_listed_and_cleared("mysql").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_policy_input_is_refused_and_changes_nothing_on_sqlite() {
    bad_policy_input_is_refused_and_changes_nothing("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_policy_input_is_refused_and_changes_nothing_on_postgres() {
    bad_policy_input_is_refused_and_changes_nothing("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_policy_input_is_refused_and_changes_nothing_on_mysql() {
    bad_policy_input_is_refused_and_changes_nothing("mysql").await;
}
