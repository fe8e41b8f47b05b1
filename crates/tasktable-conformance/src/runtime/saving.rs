//! A batch's progress saves run beside its items: a save that waits for the database
//! (here for a row lock, as a database that answers slowly or is briefly unreachable
//! keeps it waiting) never stops the items in flight from being polled, so their own
//! timers and answers are heard on time.

use super::{fast, finished, get, start, submit, wait_event, PATIENCE};
use crate::freeze::Freezable;
use crate::RowLocks;
use serde_json::json;
use std::sync::Arc;
use tasktable_core::batch::BatchSpec;
use tasktable_core::{NewTask, TaskState};
use tasktable_runtime::*;
use tokio::sync::{mpsc, Semaphore};

const ITEMS: usize = 8;

/// Items that start, say so, wait for their gate to open, end and say so.
struct Gated {
    gates: Arc<Vec<Semaphore>>,
    started: mpsc::UnboundedSender<u64>,
    ended: mpsc::UnboundedSender<u64>,
}

impl BatchHandler for Gated {
    const KIND: &'static str = "gated";
    type Data = serde_json::Value;

    async fn item(
        &self,
        _: &BatchContext,
        index: u64,
        _: &Self::Data,
    ) -> Result<Item, HandlerError> {
        let _ = self.started.send(index);
        let gate = self.gates[index as usize].acquire().await;
        drop(gate.expect("gates stay open"));
        let _ = self.ended.send(index);
        Ok(Item::Done)
    }
}

async fn next(rx: &mut mpsc::UnboundedReceiver<u64>, what: &str) -> u64 {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("the handler is alive")
}

/// Eight items in a window of eight: four end, so the runner saves early; that save waits
/// for the task's row, which another transaction holds; the other four, opened only once
/// the save is seen waiting, end while it still waits. When the lock goes, the save and
/// the batch complete.
pub async fn items_go_on_while_a_save_waits_for_the_database(db: &impl RowLocks) {
    let store = db.store().await;
    let spec = BatchSpec::items(ITEMS as u64)
        .parallelism(ITEMS as u32)
        .window(ITEMS as u64);
    let id = submit(&*store, NewTask::new("gated", json!({})).batch(spec)).await;
    let gates: Arc<Vec<Semaphore>> = Arc::new((0..ITEMS).map(|_| Semaphore::new(0)).collect());
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let (ended_tx, mut ended) = mpsc::unbounded_channel();
    // Counts the saves the runner sends, so the test knows when one waits on the lock.
    let counted = Freezable::new(store.clone());
    let mut saves = counted.saves();
    let worker = fast(counted.clone())
        .register_batch(Gated {
            gates: gates.clone(),
            started: started_tx,
            ended: ended_tx,
        })
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let running = start(worker);
    for _ in 0..ITEMS {
        next(&mut started, "every item to start").await;
    }
    let lock = db.lock_row(id).await;
    // A save sent from now on waits for the row.
    let before_lock = *saves.borrow_and_update();
    for gate in &gates[..ITEMS / 2] {
        gate.add_permits(1);
    }
    for _ in 0..ITEMS / 2 {
        next(&mut ended, "the first half to end").await;
    }
    tokio::time::timeout(PATIENCE, saves.wait_for(|n| *n > before_lock))
        .await
        .expect("the early save to be sent")
        .expect("the store is alive");
    // Sent, it reaches the locked row within a round trip or two: each look is one.
    tokio::time::timeout(PATIENCE, async { while db.lock_waiters().await == 0 {} })
        .await
        .expect("the early save to wait for the locked row");
    for gate in &gates[ITEMS / 2..] {
        gate.add_permits(1);
    }
    for _ in 0..ITEMS / 2 {
        next(&mut ended, "the second half to end while the save waits").await;
    }
    assert!(db.lock_waiters().await > 0, "the save still waits");
    lock.release().await;
    wait_event(&mut events, "the batch to end", finished(id)).await;
    assert_eq!(get(&*store, id).await.state, TaskState::Succeeded);
    let batch = store.batch_get(id).await.unwrap().expect("a batch");
    assert_eq!(batch.low_water, ITEMS as u64);
    running.shutdown().await;
}
