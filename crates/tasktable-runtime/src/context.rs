//! What a running handler can see and do: its task, its checkpoint, progress, and a
//! signal for when it must stop.

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;
use tasktable_core::{Lease, Task, TaskId};
use tasktable_store::{CheckpointParams, LeaseStatus, Store, StoreError};
use tokio_util::sync::CancellationToken;

/// Why a handler is asked to stop. Whatever it returns afterwards is discarded (for
/// `Shutdown`, the task is given back without spending the attempt).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    /// Another worker may have the task now: the lease could not be renewed.
    LeaseLost,
    /// An operator cancelled the task.
    Cancelled,
    /// An operator changed the task's target to leave this worker out: the task waits for
    /// an allowed worker, and this attempt is not spent.
    Retargeted,
    /// The worker is shutting down and the grace period is over.
    Shutdown,
}

/// Why a fenced write from a handler did not happen.
#[derive(Debug, thiserror::Error)]
pub enum ContextError {
    /// The attempt was told to stop, before the write or by the database's answer to
    /// it; nothing was written, and the handler should stop.
    #[error("the task's lease is gone ({0:?}); stop working on it")]
    Stopped(StopReason),
    /// The value could not be turned into JSON; nothing was sent.
    #[error("cannot store the value as JSON: {0}")]
    Serialize(#[from] serde_json::Error),
    /// The store refused the write (a document over its size limit, say) or could not
    /// be reached; it says nothing of the lease.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Handed to a handler for one attempt. Cheap to clone.
#[derive(Clone, Debug)]
pub struct TaskContext {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    task: Task,
    store: Arc<dyn Store>,
    stop: CancellationToken,
    /// The worker's: cancelled when its graceful shutdown begins.
    shutdown: CancellationToken,
    reason: OnceLock<StopReason>,
    checkpoint: Mutex<Option<Value>>,
    /// The worker's lease length, for writes that renew the lease (a batch's saves).
    lease_for: Duration,
}

impl TaskContext {
    pub(crate) fn new(
        task: Task,
        store: Arc<dyn Store>,
        lease_for: Duration,
        shutdown: CancellationToken,
    ) -> Self {
        let checkpoint = Mutex::new(task.checkpoint.clone());
        TaskContext {
            inner: Arc::new(Inner {
                task,
                store,
                stop: CancellationToken::new(),
                shutdown,
                reason: OnceLock::new(),
                checkpoint,
                lease_for,
            }),
        }
    }

    /// The id of the task this attempt runs.
    pub fn task_id(&self) -> TaskId {
        self.inner.task.id
    }
    /// The task's kind: the [`Handler::KIND`](crate::Handler::KIND) it was claimed for.
    pub fn kind(&self) -> &str {
        &self.inner.task.kind
    }
    /// The queue the task was claimed from.
    pub fn queue(&self) -> &str {
        &self.inner.task.queue
    }
    /// The task's business key (a customer, a tenant; what a queue's `key_rate` counts
    /// by), if it has one. Not unique, and not its idempotency key.
    pub fn key(&self) -> Option<&str> {
        self.inner.task.key.as_deref()
    }
    /// This attempt's number, from 1.
    pub fn attempt(&self) -> u32 {
        self.inner.task.attempt
    }
    /// The attempts the task allows, as it was claimed: once [`TaskContext::attempt`]
    /// reaches it, a retryable error fails the task for good. An operator may change it
    /// while the attempt runs; the store decides with the value it finds then.
    pub fn max_attempts(&self) -> u32 {
        self.inner.task.max_attempts
    }
    /// The task as it was claimed.
    pub fn task(&self) -> &Task {
        &self.inner.task
    }
    /// The lease this attempt runs under, with its credential: the store accepts this
    /// attempt's writes only while it holds.
    pub fn lease(&self) -> Lease {
        self.inner.task.lease()
    }

    /// This attempt's fencing token: greater than the token of every earlier claim of the
    /// task. Pass it to systems the handler writes to, so they can refuse a write from an
    /// attempt that has lost its lease but does not know it yet (a paused process, a slow
    /// network): keep the highest token seen per task and accept a write only with a
    /// token at least that high.
    ///
    /// ```sql
    /// UPDATE invoices SET sent = true, fence = $token
    ///  WHERE task_id = $task AND fence <= $token
    /// ```
    pub fn fencing_token(&self) -> i64 {
        self.inner.task.lease_token
    }

    /// The last checkpoint saved for this task, by this attempt or an earlier one on any
    /// worker; `None` when there is none.
    pub fn checkpoint<T: DeserializeOwned>(&self) -> Result<Option<T>, serde_json::Error> {
        let value = self
            .inner
            .checkpoint
            .lock()
            .expect("checkpoint lock")
            .clone();
        value.map(serde_json::from_value).transpose()
    }

    /// Saves a checkpoint, fenced by this attempt's lease. Returns
    /// [`ContextError::Stopped`] when the lease is gone: the checkpoint was not saved and
    /// the handler should stop.
    pub async fn save_checkpoint<T: Serialize>(&self, value: &T) -> Result<(), ContextError> {
        let value = serde_json::to_value(value)?;
        self.write(Some(value.clone()), None).await?;
        *self.inner.checkpoint.lock().expect("checkpoint lock") = Some(value);
        Ok(())
    }

    /// Records progress (any JSON, for people watching), fenced like a checkpoint.
    pub async fn set_progress<T: Serialize>(&self, value: &T) -> Result<(), ContextError> {
        let value = serde_json::to_value(value)?;
        self.write(None, Some(value)).await
    }

    /// Appends a line to this task's log, shown in its history (the API's timeline, the
    /// dashboard, `tasktable show`), fenced like a checkpoint. A line is kept up to 1 KiB;
    /// a task keeps 1,000 lines, the last of which then says later ones were dropped.
    /// Each call is one write: for many lines at once, [`TaskContext::log_lines`].
    pub async fn log(&self, line: impl Into<String>) -> Result<(), ContextError> {
        self.log_lines(vec![line.into()]).await
    }

    /// Appends several lines to this task's log, in writes of up to 100 lines.
    pub async fn log_lines(&self, lines: Vec<String>) -> Result<(), ContextError> {
        for chunk in lines.chunks(tasktable_store::MAX_LOG_LINES_PER_CALL) {
            if let Some(reason) = self.stop_reason() {
                return Err(ContextError::Stopped(reason));
            }
            let status = self
                .inner
                .store
                .task_log(tasktable_store::LogParams {
                    lease: self.lease(),
                    lines: chunk.to_vec(),
                    now: None,
                })
                .await?;
            self.heed(&status).map_err(ContextError::Stopped)?;
        }
        Ok(())
    }

    async fn write(
        &self,
        checkpoint: Option<Value>,
        progress: Option<Value>,
    ) -> Result<(), ContextError> {
        if let Some(reason) = self.stop_reason() {
            return Err(ContextError::Stopped(reason));
        }
        let status = self
            .inner
            .store
            .task_checkpoint(CheckpointParams {
                lease: self.lease(),
                checkpoint,
                progress,
            })
            .await?;
        self.heed(&status).map_err(ContextError::Stopped)
    }

    /// What the database said of this attempt's lease, acted on: a lease that no longer
    /// holds stops the attempt, for the reason it gives.
    pub(crate) fn heed(&self, status: &LeaseStatus) -> Result<(), StopReason> {
        let reason = match status {
            LeaseStatus::Held { .. } => return Ok(()),
            LeaseStatus::Cancelled => StopReason::Cancelled,
            LeaseStatus::Retargeted => StopReason::Retargeted,
            LeaseStatus::Lost => StopReason::LeaseLost,
        };
        self.stop(reason);
        Err(reason)
    }

    /// Resolves once the handler must stop; await it in a `select!` beside the work.
    pub async fn stopped(&self) -> StopReason {
        self.inner.stop.cancelled().await;
        self.stop_reason().unwrap_or(StopReason::Shutdown)
    }

    /// Resolves once the worker begins a graceful shutdown. The handler then has the
    /// worker's `shutdown_grace` to finish, or to save where it got to and give the task
    /// back (`HandlerOutcome::Interrupted`; a batch winds down so); past it, it is stopped
    /// ([`stopped`](Self::stopped) says [`StopReason::Shutdown`]) and its task released as
    /// interrupted.
    pub async fn shutting_down(&self) {
        self.inner.shutdown.cancelled().await
    }

    /// Whether the worker's graceful shutdown has begun ([`shutting_down`](Self::shutting_down)).
    pub fn is_shutting_down(&self) -> bool {
        self.inner.shutdown.is_cancelled()
    }

    /// `Some` once the handler must stop; for handlers that poll between steps.
    pub fn stop_reason(&self) -> Option<StopReason> {
        self.inner.reason.get().copied()
    }

    /// Whether the handler must stop: [`TaskContext::stop_reason`] is `Some`.
    pub fn is_stopped(&self) -> bool {
        self.stop_reason().is_some()
    }

    pub(crate) fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    pub(crate) fn lease_for(&self) -> Duration {
        self.inner.lease_for
    }

    /// The first reason wins; later ones are ignored.
    pub(crate) fn stop(&self, reason: StopReason) {
        let _ = self.inner.reason.set(reason);
        self.inner.stop.cancel();
    }
}
