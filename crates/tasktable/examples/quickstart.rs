//! Submits a few tasks to an embedded SQLite file and works them: a long task that
//! checkpoints, a flaky one that succeeds on its second attempt, and one that fails for
//! good. Run with `cargo run -p tasktable --example quickstart`.

#![allow(clippy::print_stdout)] // printing the outcome is the point of this example

use serde::{Deserialize, Serialize};
use serde_json::json;
use std::time::Duration;
use tasktable::{
    Backoff, Client, Handler, HandlerError, NewTask, TaskContext, TaskFilter, Worker, WorkerEvent,
};

#[derive(Serialize, Deserialize)]
struct Resize {
    image: String,
    sizes: u32,
}

struct ResizeImage;

impl Handler for ResizeImage {
    const KIND: &'static str = "resize_image";
    type Payload = Resize;
    type Output = serde_json::Value;

    async fn run(&self, ctx: TaskContext, job: Resize) -> Result<serde_json::Value, HandlerError> {
        // Resume where an earlier attempt (on any worker) left off.
        let done: u32 = ctx.checkpoint()?.unwrap_or(0);
        for size in done..job.sizes {
            ctx.save_checkpoint(&(size + 1)).await?;
            ctx.set_progress(&json!({"done": size + 1, "of": job.sizes}))
                .await?;
        }
        Ok(json!({"image": job.image, "sizes": job.sizes}))
    }
}

struct CallWebhook;

impl Handler for CallWebhook {
    const KIND: &'static str = "call_webhook";
    type Payload = String;
    type Output = ();

    async fn run(&self, ctx: TaskContext, url: String) -> Result<(), HandlerError> {
        if ctx.attempt() == 1 {
            return Err(HandlerError::retry(format!(
                "{url}: 503 Service Unavailable"
            )));
        }
        if url.contains("gone") {
            return Err(HandlerError::permanent(format!("{url}: 410 Gone")));
        }
        Ok(())
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    tracing_subscriber::fmt()
        .with_env_filter("tasktable=info")
        .init();
    let path = "tasktable-quickstart.db";
    for suffix in ["", "-wal", "-shm"] {
        let _ = std::fs::remove_file(format!("{path}{suffix}"));
    }
    let store = tasktable::connect(path).await?;
    store.migrate().await?;
    let client = Client::new(store.clone());

    let quick = Backoff {
        initial: Duration::from_millis(200),
        ..Backoff::default()
    };
    let mut tasks = vec![
        NewTask::new("call_webhook", json!("https://example.test/hooks/1")).backoff(quick),
        NewTask::new("call_webhook", json!("https://example.test/gone")).backoff(quick),
    ];
    for (i, image) in ["cat.png", "dog.png", "owl.png"].iter().enumerate() {
        let payload = Resize {
            image: image.to_string(),
            sizes: 5,
        };
        tasks.push(
            Client::task::<ResizeImage>(&payload)?
                .priority(i as i32)
                .key(*image),
        );
    }
    let submitted = client.submit_many(tasks).await?;
    println!("submitted {} tasks", submitted.len());

    let worker = Worker::builder(store.clone())
        .concurrency(4)
        .register(ResizeImage)
        .register(CallWebhook)
        .build()?;
    let mut events = worker.subscribe();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(worker.run(async move {
        let _ = stop_rx.await;
    }));

    // Work until nothing is waiting or running.
    while let Ok(event) = events.recv().await {
        if let WorkerEvent::Finished { .. } = event {
            let queues = client.queues().await?;
            let open: u64 = queues
                .iter()
                .flat_map(|q| &q.counts)
                .filter(|(state, _)| !state.is_finished())
                .map(|(_, n)| n)
                .sum();
            if open == 0 {
                break;
            }
        }
    }
    let _ = stop_tx.send(());
    running.await?;

    println!(
        "\n{:>3}  {:<14} {:<10} {:>8}  {:<32} result / last error",
        "id", "kind", "state", "attempts", "ran on"
    );
    let page = client.list(TaskFilter::default(), None, 100).await?;
    for t in page.tasks.iter().rev() {
        let outcome = match (t.state, &t.result, &t.last_error) {
            (tasktable::TaskState::Succeeded, Some(r), _) => r.to_string(),
            (tasktable::TaskState::Succeeded, None, _) => "ok".to_owned(),
            (_, _, Some(e)) => e.clone(),
            _ => String::new(),
        };
        println!(
            "{:>3}  {:<14} {:<10} {:>8}  {:<32} {}",
            t.id,
            t.kind,
            t.state.as_str(),
            t.attempt,
            t.worker_id.as_deref().unwrap_or("-"),
            outcome
        );
    }
    for t in page.tasks.iter().filter(|t| t.kind == "call_webhook") {
        for a in client.attempts(t.id).await? {
            println!(
                "task {} attempt {}: {} {}",
                t.id,
                a.attempt,
                a.outcome,
                a.error.unwrap_or_default()
            );
        }
    }
    println!("\nthe tasks are rows: sqlite3 {path} 'SELECT id, kind, state, attempt FROM tasktable_tasks'");
    Ok(())
}
