//! Submits a run's tasks through the API at a steady pace across the fault window, so
//! faults land while tasks flow. Every task has an idempotency key, so a batch whose
//! answer was lost (the API killed mid-request, the database restarting) is sent again
//! until it is answered, and creates nothing twice. The ids the API answers make the
//! ledger that "no task lost" checks against.

use crate::behaviour::Behaviour;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// The id the API gave each submitted task, by submission index.
pub type Ledger = Arc<Mutex<Vec<Option<i64>>>>;

const BATCH_EVERY: Duration = Duration::from_millis(250);

pub async fn submit_all(
    http: reqwest::Client,
    base: String,
    seed: u64,
    specs: Vec<Behaviour>,
    within: Duration,
    ledger: Ledger,
    stop: CancellationToken,
) -> Result<(), String> {
    let rounds = (within.as_millis() / BATCH_EVERY.as_millis()).max(1) as usize;
    let batch = specs.len().div_ceil(rounds).clamp(1, 1000);
    let started = Instant::now();
    for (round, chunk) in specs.chunks(batch).enumerate() {
        tokio::select! {
            () = tokio::time::sleep_until(started + BATCH_EVERY * round as u32) => {}
            () = stop.cancelled() => return Ok(()),
        }
        let first = round * batch;
        let tasks: Vec<Value> = chunk
            .iter()
            .enumerate()
            .map(|(i, b)| b.submission(first + i, seed))
            .collect();
        let body = json!({ "tasks": tasks });
        let ids = loop {
            match send(&http, &base, &body).await? {
                Some(ids) => break ids,
                None if stop.is_cancelled() => return Ok(()),
                None => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        if ids.len() != chunk.len() {
            return Err(format!(
                "a batch of {} tasks was answered with {} ids",
                chunk.len(),
                ids.len()
            ));
        }
        let mut ledger = ledger.lock().expect("ledger");
        for (i, id) in ids.into_iter().enumerate() {
            ledger[first + i] = Some(id);
        }
    }
    Ok(())
}

/// The ids of one batch; `None` when there was no answer to trust (retry).
async fn send(
    http: &reqwest::Client,
    base: &str,
    body: &Value,
) -> Result<Option<Vec<i64>>, String> {
    let sent = http
        .post(format!("{base}/api/v1/tasks/batch"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await;
    let Ok(response) = sent else {
        return Ok(None);
    };
    let status = response.status();
    if status.is_server_error() {
        return Ok(None);
    }
    let Ok(answer) = response.json::<Value>().await else {
        return Ok(None);
    };
    if !status.is_success() {
        return Err(format!(
            "the API refused a batch of tasks ({status}): {answer}"
        ));
    }
    answer["tasks"]
        .as_array()
        .map(|tasks| {
            tasks
                .iter()
                .map(|t| t["id"].as_i64())
                .collect::<Option<Vec<_>>>()
        })
        .ok_or_else(|| format!("a batch was answered without ids: {answer}"))
        .map(|ids| ids.ok_or_else(|| "a batch answer has a task without an id".to_owned()))?
        .map(Some)
}
