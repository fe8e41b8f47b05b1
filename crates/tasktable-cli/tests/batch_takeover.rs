//! A batch whose worker process is killed (SIGKILL) mid-batch is taken over by another
//! `tasktable worker` process once its lease runs out: every item is posted at least
//! once, and the items posted twice are fewer than the batch's window. Real processes, a
//! real local HTTP service for the `http_batch` items, and each backend.

mod common;

use axum::extract::State;
use axum::routing::post;
use axum::{Json, Router};
use common::serve::{command, finish, Server, ADMIN};
use serde_json::{json, Value};
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_testdb::TestDb;
use tokio::sync::watch;

/// Posts per index, and the count of all posts, told to whoever waits.
struct Items {
    calls: Mutex<Vec<u32>>,
    total: watch::Sender<u64>,
}

async fn item(State(items): State<Arc<Items>>, Json(body): Json<Value>) -> Json<Value> {
    let index = body["index"].as_u64().expect("an index") as usize;
    // A little work per item, so that the kill lands mid-batch.
    tokio::time::sleep(Duration::from_millis(2)).await;
    items.calls.lock().unwrap()[index] += 1;
    items.total.send_modify(|t| *t += 1);
    Json(json!({"ok": true}))
}

async fn serve_items(n: usize) -> (Arc<Items>, String) {
    let items = Arc::new(Items {
        calls: Mutex::new(vec![0; n]),
        total: watch::Sender::new(0),
    });
    let app = Router::new()
        .route("/items", post(item))
        .with_state(items.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (items, format!("http://{addr}/items"))
}

fn worker(db: &str, id: &str) -> Child {
    command(&[
        "worker",
        "--database-url",
        db,
        "--http-allow-net",
        "127.0.0.0/8",
        "--worker-id",
        id,
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .expect("start tasktable worker")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_sqlite_a_killed_batch_worker_is_taken_over_repeating_less_than_the_window() {
    a_killed_batch_worker_is_taken_over("sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_killed_batch_worker_is_taken_over_repeating_less_than_the_window() {
    a_killed_batch_worker_is_taken_over("postgres").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_mysql_a_killed_batch_worker_is_taken_over_repeating_less_than_the_window() {
    a_killed_batch_worker_is_taken_over("mysql").await;
}

async fn a_killed_batch_worker_is_taken_over(backend: &str) {
    let Some(db) = TestDb::fresh(backend).await else {
        return;
    };
    let (n, window) = (4000usize, 300u64);
    let (items, url) = serve_items(n).await;
    let server = Server::start_with(&["--workers", "0", "--database-url", db.url()]);
    let data = json!({"url": url}).to_string();
    let created = server
        .tt(&[
            "batch",
            "create",
            "http_batch",
            "--items",
            &n.to_string(),
            "--parallelism",
            "8",
            "--window",
            &window.to_string(),
            "--data",
            &data,
            "--json",
        ])
        .json();
    let id = created["id"].to_string();

    let mut first = worker(db.url(), "first");
    let mut total = items.total.subscribe();
    tokio::time::timeout(Duration::from_secs(120), total.wait_for(|t| *t >= 1000))
        .await
        .expect("the first worker posts items")
        .unwrap();
    first.kill().expect("SIGKILL");
    first.wait().unwrap();
    let at_kill = *items.total.borrow();
    assert!(
        (at_kill as usize) < n,
        "killed mid-batch ({at_kill} of {n})"
    );

    // The second worker's rescuer takes the batch back once the lease runs out (30 s).
    let mut second = worker(db.url(), "second");
    // `batch show --watch` follows the batch until it ends.
    let mut watch = command(&["batch", "show", &id, "--watch", "--json"]);
    watch
        .env("TASKTABLE_SERVER", &server.url)
        .env("TASKTABLE_TOKEN", ADMIN);
    let done = tokio::time::timeout(
        Duration::from_secs(180),
        tokio::task::spawn_blocking(move || finish(watch, None)),
    )
    .await
    .expect("the second worker ends the batch")
    .unwrap()
    .json();
    assert_eq!(done["batch"]["status"], "succeeded", "{done}");
    second.kill().unwrap();
    second.wait().unwrap();
    assert_eq!(done["batch"]["low_water"], json!(n));
    let calls = items.calls.lock().unwrap().clone();
    assert!(calls.iter().all(|c| *c >= 1), "no item is skipped");
    let repeated: u64 = calls.iter().map(|c| u64::from(c - 1)).sum();
    assert!(
        repeated < window,
        "{repeated} items posted twice, window {window}"
    );
    let shown = server.tt(&["show", &id, "--json"]).json();
    let outcomes: Vec<&str> = shown["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["outcome"].as_str().unwrap())
        .collect();
    assert_eq!(outcomes, ["lease_expired", "succeeded"], "{shown}");
}
