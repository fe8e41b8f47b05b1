//! The handlers the scenarios run: a no-op that counts, a no-op that records when it
//! started, and a long task that runs until it is told to stop.

use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tasktable::{Handler, HandlerError, TaskContext, TaskId};
use tokio::sync::Notify;

/// Counts the tasks it ran and wakes whoever waits for a count.
#[derive(Debug, Clone, Default)]
pub struct Noop {
    pub ran: Arc<AtomicU64>,
    pub changed: Arc<Notify>,
}

impl Noop {
    /// Waits until at least `n` tasks ran.
    pub async fn wait_for(&self, n: u64) {
        loop {
            let notified = self.changed.notified();
            if self.ran.load(Ordering::Relaxed) >= n {
                return;
            }
            let _ = tokio::time::timeout(std::time::Duration::from_millis(50), notified).await;
        }
    }
}

impl Handler for Noop {
    const KIND: &'static str = "noop";
    type Payload = Value;
    type Output = ();

    async fn run(&self, _ctx: TaskContext, _payload: Value) -> Result<(), HandlerError> {
        self.ran.fetch_add(1, Ordering::Relaxed);
        self.changed.notify_waiters();
        Ok(())
    }
}

/// Microseconds since the bench started, the clock every latency is measured on.
pub fn micros_since(epoch: Instant) -> i64 {
    epoch.elapsed().as_micros() as i64
}

/// Records, for each task, when it was submitted (from its payload) and when it started.
#[derive(Debug, Clone)]
pub struct Timed {
    pub epoch: Instant,
    pub starts: Arc<Mutex<Vec<(TaskId, i64, i64)>>>,
}

impl Handler for Timed {
    const KIND: &'static str = "timed";
    type Payload = Value;
    type Output = ();

    async fn run(&self, ctx: TaskContext, payload: Value) -> Result<(), HandlerError> {
        let now = micros_since(self.epoch);
        let submitted = payload.get("t").and_then(Value::as_i64).unwrap_or(now);
        self.starts
            .lock()
            .expect("starts")
            .push((ctx.task_id(), submitted, now));
        Ok(())
    }
}

/// Runs until told to stop (lease lost, cancelled, shutdown).
#[derive(Debug, Clone, Copy)]
pub struct Long;

impl Handler for Long {
    const KIND: &'static str = "long";
    type Payload = Value;
    type Output = ();

    async fn run(&self, ctx: TaskContext, _payload: Value) -> Result<(), HandlerError> {
        ctx.stopped().await;
        Ok(())
    }
}
