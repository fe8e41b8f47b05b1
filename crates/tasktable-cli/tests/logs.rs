//! What `tasktable serve` logs, read back from its stderr: with `--log-format json` one
//! JSON object a line; a WARN line for a task that failed for good naming it, its kind,
//! queue, attempt, worker and error, never its payload; INFO lines for a schedule's
//! missed slots and for a batch that starts, pauses and ends; and one WARN line when the
//! database goes away, one INFO line when it is back, however many calls failed between.

mod common;

use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use chrono::{SecondsFormat, SubsecRound as _, TimeDelta, Utc};
use common::serve::Server;
use serde_json::{json, Value};
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tasktable::schedule::ScheduleSpec;
use tasktable::store::{CreateScheduleParams, OnExisting};
use tasktable::Actor;
use tasktable_dbserver::{Backend, Database, StopMode};
use tokio::sync::watch;

#[test]
fn a_task_that_fails_for_good_is_a_warn_line_in_json() {
    // A worker of the built-in handlers, whose `http` may not reach the loopback address:
    // the request is refused, a permanent failure of the task's only attempt.
    let server = Server::start_watched(&["--workers", "1", "--log-format", "json"], |_| {});
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
    // Every line is JSON (`lines` says which is not), and one names the task.
    let line = &server
        .wait_for_log(Duration::from_secs(120), |_| {
            lines(&server).into_iter().find(|l| l["task_id"] == id)
        })
        .unwrap_or_else(|| panic!("no line names task {id}:\n{}", server.log_text()));
    let log = server.log_text();
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
    let server = Server::start_watched(&["--workers", "0", "--log-format", "json"], |_| {});
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
    let line = server
        .wait_for_log(Duration::from_secs(120), |_| {
            lines(&server).into_iter().find(|l| l["task_id"] == id)
        })
        .unwrap_or_else(|| panic!("no line names task {id}:\n{}", server.log_text()));
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

/// The complete JSON lines `tasktable serve --log-format json` wrote so far (a line still
/// being written is left for the next read).
fn lines(server: &Server) -> Vec<Value> {
    let log = server.log_text();
    let complete = log.rfind('\n').map_or("", |end| &log[..end]);
    complete
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// The lines whose message is `message`.
fn with_message(lines: &[Value], message: &str) -> Vec<Value> {
    lines
        .iter()
        .filter(|l| l["message"] == message)
        .cloned()
        .collect()
}

/// Waits (two minutes at most) until the log holds `n` lines with `message` that
/// `matching` accepts, and returns them: the server's own signal that it got there, heard
/// at each line it writes.
async fn wait_for(
    server: &Server,
    message: &str,
    n: usize,
    matching: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    tokio::task::block_in_place(|| {
        server
            .wait_for_log(Duration::from_secs(120), |_| {
                let found: Vec<Value> = with_message(&lines(server), message)
                    .into_iter()
                    .filter(|l| matching(l))
                    .collect();
                (found.len() >= n).then_some(found)
            })
            .unwrap_or_else(|| {
                panic!(
                    "{n} {message:?} lines did not come within two minutes:\n{}",
                    server.log_text()
                )
            })
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_catching_up_missed_slots_says_which_it_fired_and_which_it_skipped() {
    // A schedule created two hours ago (its creation pinned there) whose every slot
    // since was missed: a slot every 10 minutes from 5 minutes after the creation, so
    // 12 slots are over a minute old when serve starts. `run_all` with `max: 3` fires
    // the newest 3 late and skips the 9 before them.
    let dir = tempfile::tempdir().expect("temp dir");
    let db = format!("sqlite://{}", dir.path().join("tasktable.db").display());
    let now = Utc::now().trunc_subsecs(0);
    let created = now - TimeDelta::hours(2);
    let first = created + TimeDelta::minutes(5);
    let slot =
        |k: i64| (first + TimeDelta::minutes(10 * k)).to_rfc3339_opts(SecondsFormat::Millis, true);
    let store = tasktable::connect(&db).await.expect("the database");
    store.migrate().await.expect("migrated");
    let spec: ScheduleSpec = serde_json::from_value(json!({
        "name": "hourly-report",
        "recurrence": {"type": "every", "every_ms": 600_000, "start": first},
        "template": {"kind": "report"},
        "missed": {"policy": "run_all", "max": 3},
    }))
    .expect("a schedule");
    store
        .schedule_create(CreateScheduleParams {
            spec,
            on_existing: OnExisting::Refuse,
            actor: Actor::rust(),
            now: Some(created),
        })
        .await
        .expect("created");
    drop(store);

    let server = Server::start_watched(
        &[
            "--workers",
            "0",
            "--log-format",
            "json",
            "--database-url",
            &db,
        ],
        |_| {},
    );
    let caught_up = &wait_for(&server, "schedule caught up missed slots", 1, |_| true).await[0];
    assert_eq!(caught_up["level"], "INFO", "{caught_up}");
    assert_eq!(caught_up["schedule"], "hourly-report", "{caught_up}");
    assert_eq!(caught_up["caught_up"], 3, "{caught_up}");
    assert_eq!(caught_up["first_slot"], slot(9), "{caught_up}");
    assert_eq!(caught_up["last_slot"], slot(11), "{caught_up}");
    assert_eq!(
        caught_up["slots"],
        format!("{}, {}, {}", slot(9), slot(10), slot(11)),
        "{caught_up}"
    );
    let skipped = &wait_for(&server, "schedule skipped slots", 1, |_| true).await[0];
    assert_eq!(skipped["schedule"], "hourly-report", "{skipped}");
    assert_eq!(skipped["reason"], "missed", "{skipped}");
    assert_eq!(skipped["skipped"], 9, "{skipped}");
    assert_eq!(skipped["more"], false, "{skipped}");
    assert_eq!(skipped["first_slot"], slot(0), "{skipped}");
    assert_eq!(skipped["last_slot"], slot(8), "{skipped}");
    let fired = &wait_for(&server, "schedule fired", 1, |_| true).await[0];
    assert_eq!(fired["tasks"], 3, "{fired}");
    assert_eq!(fired["caught_up"], 3, "{fired}");
    assert_eq!(fired["missed_skipped"], 9, "{fired}");
    // The three tasks are there to run, one per slot fired.
    let listed = server.tt(&["ls", "--kind", "report", "--json"]).json();
    assert_eq!(
        listed["tasks"].as_array().map(Vec::len),
        Some(3),
        "{listed}"
    );
}

/// A local service for `http_batch` items: item 3 is refused for good (404), and once
/// `end` is set every item says it is past the end. Tells the highest index posted.
struct Items {
    end: AtomicBool,
    highest: watch::Sender<u64>,
}

async fn post_item(State(items): State<Arc<Items>>, Json(body): Json<Value>) -> Response {
    let index = body["index"].as_u64().expect("an index");
    items.highest.send_modify(|h| *h = (*h).max(index));
    if items.end.load(Ordering::SeqCst) {
        return Json(json!({"past_end": true})).into_response();
    }
    if index == 3 {
        return (StatusCode::NOT_FOUND, "no such item").into_response();
    }
    Json(json!({"ok": true})).into_response()
}

async fn serve_items() -> (Arc<Items>, String) {
    let items = Arc::new(Items {
        end: AtomicBool::new(false),
        highest: watch::Sender::new(0),
    });
    let app = Router::new()
        .route("/items", post(post_item))
        .with_state(items.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (items, format!("http://{addr}/items"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_starting_pausing_and_ending_is_one_line_each_not_one_an_item() {
    let (items, url) = serve_items().await;
    let server = Server::start_watched(
        &[
            "--workers",
            "1",
            "--http-allow-net",
            "127.0.0.0/8",
            "--log-format",
            "json",
        ],
        |_| {},
    );
    // Open-ended: it runs until the service says an index is past the end.
    let created = server
        .tt(&[
            "batch",
            "create",
            "http_batch",
            "--parallelism",
            "1",
            "--rate",
            "200",
            "--error-budget",
            "5",
            "--data",
            &json!({"url": url}).to_string(),
            "--json",
        ])
        .json();
    let id = created["id"].as_i64().expect("an id");
    let this = move |l: &Value| l["task_id"] == id;

    let started = &wait_for(&server, "batch started", 1, this).await[0];
    assert_eq!(started["level"], "INFO", "{started}");
    assert_eq!(started["kind"], "http_batch", "{started}");
    assert_eq!(started["queue"], "default", "{started}");
    assert_eq!(started["attempt"], 1, "{started}");
    assert_eq!(started["from"], 0, "{started}");
    assert!(started.get("items").is_none(), "open-ended: {started}");

    // Past the item that fails, pause it.
    let mut highest = items.highest.subscribe();
    tokio::time::timeout(Duration::from_secs(120), highest.wait_for(|h| *h >= 10))
        .await
        .expect("items are posted")
        .unwrap();
    server.tt(&["batch", "pause", &id.to_string()]).ok();
    let paused = &wait_for(&server, "batch paused", 1, this).await[0];
    assert_eq!(paused["kind"], "http_batch", "{paused}");
    assert_eq!(paused["queue"], "default", "{paused}");
    assert_eq!(paused["failed"], 1, "{paused}");
    let done_at_pause = paused["done"].as_u64().expect("done");
    assert!(done_at_pause >= 10, "{paused}");

    server.tt(&["batch", "resume", &id.to_string()]).ok();
    // A pause gives its attempt back: the batch starts again from where it paused.
    let resumed = &wait_for(&server, "batch started", 2, this).await[1];
    assert_eq!(resumed["attempt"], 1, "{resumed}");
    assert_eq!(resumed["from"], done_at_pause, "{resumed}");
    assert_eq!(resumed["failed"], 1, "{resumed}");
    // One at a time: an item past the pause's low-water mark posted means the one before
    // it was done after the resume.
    tokio::time::timeout(
        Duration::from_secs(120),
        highest.wait_for(|h| *h > done_at_pause),
    )
    .await
    .expect("items are posted after the resume")
    .unwrap();

    items.end.store(true, Ordering::SeqCst);
    let ended = &wait_for(&server, "batch ended", 1, this).await[0];
    assert_eq!(ended["outcome"], "succeeded", "{ended}");
    assert_eq!(ended["failed"], 1, "{ended}");
    let done = ended["done"].as_u64().expect("done");
    assert!(done > done_at_pause, "{ended}");
    assert_eq!(ended["items"], done, "the end found is the size: {ended}");

    // The batch's hundreds of items made four lines, none of them an item's.
    let told: Vec<Value> = lines(&server)
        .into_iter()
        .filter(|l| this(l))
        .map(|l| l["message"].clone())
        .collect();
    assert_eq!(
        told,
        [
            "batch started",
            "batch paused",
            "batch started",
            "batch ended"
        ],
        "{}",
        server.log_text()
    );
}

/// Not asked for by the throwaway server, which trusts its local users: here only to be
/// kept out of the log.
const DB_PASSWORD: &str = "db-password-never-logged";

/// `tasktable_store_errors_total` summed over its calls, and whether the database
/// answered the scrape (`tasktable_store_up`).
fn scrape(server: &Server) -> (f64, bool) {
    let out = Command::new("curl")
        .args(["-sS", "-H"])
        .arg(format!("authorization: Bearer {}", common::serve::READER))
        .arg(format!("{}/metrics", server.url))
        .output()
        .expect("curl");
    assert!(out.status.success(), "curl /metrics: {out:?}");
    let body = String::from_utf8_lossy(&out.stdout);
    let errors = body
        .lines()
        .filter(|l| l.starts_with("tasktable_store_errors_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    (errors, body.lines().any(|l| l == "tasktable_store_up 1"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_that_goes_away_is_one_warn_line_and_one_info_line_when_it_is_back() {
    let dir = tasktable_dbserver::run_dir("tasktable-logs-").expect("a run directory");
    let mut db = match Database::start(Backend::Postgres, dir.path()).await {
        Ok(db) => db,
        Err(why) => return tasktable_testdb::unreachable("a throwaway PostgreSQL", &why),
    };
    let url = db
        .url()
        .replacen("postgres@", &format!("postgres:{DB_PASSWORD}@"), 1);
    let server = Server::start_watched(&["--workers", "1", "--log-format", "json"], |cmd| {
        cmd.env("DATABASE_URL", &url);
    });
    wait_for(&server, "worker started", 1, |_| true).await;

    db.stop(StopMode::Clean).await.expect("stopped");
    let away = wait_for(&server, "database unreachable", 1, |_| true).await[0].clone();
    // The parts go on failing (each failed call is counted) while the log stays quiet:
    // a scrape that the database could not answer waited out the pool as they do.
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let (errors, up) = scrape(&server);
        if errors >= 4.0 && !up {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{errors} failed calls in three minutes"
        );
    }
    db.start_again().await.expect("started again");
    let back = wait_for(&server, "database reachable again", 1, |_| true).await[0].clone();
    // It works again, and saying so once was enough.
    server.tt(&["submit", "later", "null"]).ok();
    let listed = server.tt(&["ls", "--kind", "later", "--json"]).json();
    assert_eq!(listed["tasks"].as_array().map(Vec::len), Some(1));

    let all = lines(&server);
    assert_eq!(
        with_message(&all, "database unreachable").len(),
        1,
        "{}",
        server.log_text()
    );
    assert_eq!(
        with_message(&all, "database reachable again").len(),
        1,
        "{}",
        server.log_text()
    );
    assert_eq!(away["level"], "WARN", "{away}");
    assert_eq!(away["backend"], "postgres", "{away}");
    let shown = db.url().replacen("postgres@", "postgres:[redacted]@", 1);
    assert_eq!(away["url"], shown, "{away}");
    assert!(
        away["error"].as_str().is_some_and(|e| !e.is_empty()),
        "{away}"
    );
    assert_eq!(back["level"], "INFO", "{back}");
    assert!(back["away_ms"].as_u64().is_some_and(|ms| ms > 0), "{back}");
    // No part of tasktable warned of its own failed calls; sqlx's pool may say what
    // it did with its connections.
    let warned: Vec<&Value> = all
        .iter()
        .filter(|l| l["level"] == "WARN" || l["level"] == "ERROR")
        .filter(|l| {
            l["target"]
                .as_str()
                .is_some_and(|t| t.starts_with("tasktable"))
        })
        .filter(|l| l["message"] != "database unreachable")
        .filter(|l| {
            !l["message"]
                .as_str()
                .is_some_and(|m| m.contains("wake listener lost"))
        })
        .collect();
    assert!(warned.is_empty(), "{warned:#?}");
    assert!(
        !server.log_text().contains(DB_PASSWORD),
        "the password reached the log:\n{}",
        server.log_text()
    );
}
