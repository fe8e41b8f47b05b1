//! Scenario 16: a batch with a no-op item handler at parallelism 100 and no rate limit,
//! on one worker: items per second, and the database writes (saves) a running batch
//! costs, for sizes a factor apart, so that it shows the saves do not grow with N.
//!
//! The saves are counted by the runtime's own counter (`tasktable_batch_saves_total`),
//! read from a Prometheus recorder this scenario installs; the scenarios before it run
//! without one.

use crate::report::Row;
use crate::scenarios::{load_row, spawn_worker, BenchResult, Ctx};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde_json::{json, Value};
use std::sync::OnceLock;
use std::time::{Duration, Instant};
use tasktable::batch::BatchSpec;
use tasktable::{BatchContext, BatchHandler, BatchItem, HandlerError, NewTask, TaskState, Worker};

struct Noop;

impl BatchHandler for Noop {
    const KIND: &'static str = "bench_batch";
    type Data = Value;
    async fn item(&self, _: &BatchContext, _: u64, _: &Value) -> Result<BatchItem, HandlerError> {
        Ok(BatchItem::Done)
    }
}

fn recorder() -> &'static PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE.get_or_init(|| {
        PrometheusBuilder::new()
            .install_recorder()
            .expect("no other recorder in the bench")
    })
}

/// The sum of a counter's series in the recorder's text.
fn counter(handle: &PrometheusHandle, name: &str) -> f64 {
    handle
        .render()
        .lines()
        .filter(|l| l.starts_with(name) && !l.starts_with('#'))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

pub async fn batch(ctx: &mut Ctx) -> BenchResult<()> {
    let metrics = recorder();
    for n in ctx.scale.batch_items.clone() {
        let db = crate::db::BenchDb::fresh(ctx.backend).await?;
        let store = db.store().await;
        let spec = BatchSpec::items(n).parallelism(100);
        let id = store
            .task_submit(tasktable::store::SubmitParams {
                tasks: vec![NewTask::new(Noop::KIND, json!({})).batch(spec)],
                now: None,
            })
            .await
            .map_err(|e| e.to_string())?[0]
            .id;
        let worker = Worker::builder(store.clone())
            .concurrency(1)
            .register_batch(Noop)
            .build()
            .map_err(|e| e.to_string())?;
        let mut events = worker.subscribe();
        let saves_before = counter(metrics, tasktable::metrics::BATCH_SAVES_TOTAL);
        let started = Instant::now();
        let (stop, handle) = spawn_worker(worker);
        let give_up = Duration::from_secs(3600);
        tokio::time::timeout(give_up, async {
            loop {
                match events.recv().await {
                    Ok(tasktable::WorkerEvent::Finished { task_id, .. }) if task_id == id => return,
                    Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                    Err(e) => panic!("worker events: {e}"),
                }
            }
        })
        .await
        .map_err(|_| "the batch did not end within an hour".to_owned())?;
        let secs = started.elapsed().as_secs_f64();
        let saves = counter(metrics, tasktable::metrics::BATCH_SAVES_TOTAL) - saves_before;
        let _ = stop.send(());
        let _ = handle.await;
        let task = store
            .task_get(id)
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| "the batch is gone".to_owned())?;
        if task.state != TaskState::Succeeded {
            return Err(format!(
                "the batch ended {:?}: {:?}",
                task.state, task.last_error
            ));
        }
        let mut row = Row::new(
            "16 batch",
            format!("{n} items, no-op handler, parallelism 100, no rate limit, one worker"),
        );
        load_row(&mut row);
        row.set("items", n);
        row.set("secs", (secs * 100.0).round() / 100.0);
        row.set("items_per_sec", (n as f64 / secs).round());
        row.set("saves", saves);
        row.set("saves_per_sec", (saves / secs * 10.0).round() / 10.0);
        eprintln!(
            "16 batch: {n} items in {secs:.2} s = {:.0} items/s, {saves} saves ({:.1}/s)",
            n as f64 / secs,
            saves / secs
        );
        ctx.report.push(row);
    }
    Ok(())
}
