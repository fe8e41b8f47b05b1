//! A real store's chunks with a gate after each one, so a test can hold a bulk change
//! between two chunks (or just hear when each has committed) without guessing at timing.

use async_trait::async_trait;
use std::sync::Arc;
use tasktable_core::TaskId;
use tasktable_store::{ChunkedUpdate, StoreResult, TaskFilter, UpdateChunkParams};
use tokio::sync::{mpsc, Semaphore};

pub struct Paced {
    inner: Arc<dyn ChunkedUpdate>,
    done: mpsc::UnboundedSender<u64>,
    gate: Semaphore,
}

impl Paced {
    /// Wraps `inner`; the receiver hears how many rows each chunk changed once it has
    /// committed. The change then waits at the gate, which lets `open` chunks through
    /// before it closes.
    pub fn new(
        inner: Arc<dyn ChunkedUpdate>,
        open: usize,
    ) -> (Arc<Self>, mpsc::UnboundedReceiver<u64>) {
        let (done, heard) = mpsc::unbounded_channel();
        let paced = Paced {
            inner,
            done,
            gate: Semaphore::new(open),
        };
        (Arc::new(paced), heard)
    }

    /// Lets the change go on, for good.
    pub fn open(&self) {
        self.gate.add_permits(Semaphore::MAX_PERMITS / 2);
    }
}

impl std::fmt::Debug for Paced {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Paced")
            .field("gate", &self.gate)
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl ChunkedUpdate for Paced {
    async fn task_ids_matching(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskId>> {
        self.inner.task_ids_matching(filter).await
    }

    async fn task_update_chunk(&self, params: &UpdateChunkParams<'_>) -> StoreResult<u64> {
        let chunk = self.inner.task_update_chunk(params).await?;
        let _ = self.done.send(chunk);
        self.gate
            .acquire()
            .await
            .expect("the gate is never closed")
            .forget();
        Ok(chunk)
    }
}
