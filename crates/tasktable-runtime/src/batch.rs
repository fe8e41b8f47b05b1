//! Batches ([`tasktable_core::batch`], docs/batches.md): what users implement
//! ([`BatchHandler`]: an optional pre-start hook and one call per index) and the runner
//! that drives it as the handler of its kind: a sliding window of indices, at most P
//! items at once, a token per item under a rate limit, per-item retries, the error
//! budget, and a fenced save every second that also brings operators' pause, stop,
//! budget and data to the runner.

mod runner;

use crate::context::TaskContext;
use crate::handler::{ErasedHandler, HandlerError};
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::HandlerOutcome;

/// How often a running batch saves its progress and hears operators' actions.
pub const SAVE_EVERY: Duration = Duration::from_secs(1);

/// What one item came to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Item {
    /// The item is finished: it counts as done, and the low-water mark may move past it.
    Done,
    /// The index is past the last item: an open-ended batch ends here (the items above
    /// it that run already are not counted).
    PastEnd,
}

/// Runs the items of batches of one kind: register it with
/// [`WorkerBuilder::register_batch`](crate::WorkerBuilder::register_batch), and submit
/// each batch as a task of its kind, `NewTask::new(KIND, data).batch(spec)`
/// (docs/batches.md). Each item answers an [`Item`] (re-exported by `tasktable` as
/// `BatchItem`).
///
/// ```
/// # use tasktable_runtime::{BatchContext, BatchHandler, HandlerError, Item as BatchItem};
/// # #[derive(serde::Deserialize)]
/// # struct Campaign { text: String }
/// # struct User;
/// # impl Campaign {
/// #     async fn user(&self, i: u64) -> std::io::Result<Option<User>> { Ok((i < 9).then_some(User)) }
/// # }
/// # mod push {
/// #     pub async fn send(_: &super::User, _: &str) -> std::io::Result<()> { Ok(()) }
/// # }
/// struct Notify;
/// impl BatchHandler for Notify {
///     const KIND: &'static str = "notify_users";
///     type Data = Campaign;
///     async fn item(&self, _: &BatchContext, index: u64, c: &Campaign) -> Result<BatchItem, HandlerError> {
///         match c.user(index).await? {
///             Some(user) => { push::send(&user, &c.text).await?; Ok(BatchItem::Done) }
///             None => Ok(BatchItem::PastEnd), // an open-ended batch ends here
///         }
///     }
/// }
/// # fn main() {}
/// ```
pub trait BatchHandler: Send + Sync + 'static {
    /// The task kind of the batches it runs.
    const KIND: &'static str;
    /// The batch's data (its task's payload), which every item reads.
    type Data: DeserializeOwned + Send + Sync + 'static;

    /// Runs once on each worker before its first item (downloads, caches), under the
    /// batch's `prestart_timeout` rather than the task's timeout. An error ends the
    /// attempt as a handler error would.
    fn prestart(
        &self,
        _ctx: &BatchContext,
        _data: &Self::Data,
    ) -> impl Future<Output = Result<(), HandlerError>> + Send {
        async { Ok(()) }
    }

    /// Runs item `index`. An error is retried per the batch's item retries (a permanent
    /// one at once is final); a final error spends the error budget.
    fn item(
        &self,
        ctx: &BatchContext,
        index: u64,
        data: &Self::Data,
    ) -> impl Future<Output = Result<Item, HandlerError>> + Send;
}

/// What a batch handler sees: the batch's task as claimed (its id, attempt and fencing
/// token), and through it the signal to stop ([`TaskContext::stopped`]: a lost lease, a
/// cancel, shutdown). An operator's pause or stop is no such signal: the items in flight
/// run to their end before the runner gives the task back.
#[derive(Clone, Debug)]
pub struct BatchContext {
    task: TaskContext,
}

impl BatchContext {
    /// The batch's task, as claimed: its id, attempt and fencing token.
    pub fn task(&self) -> &TaskContext {
        &self.task
    }
}

/// A batch handler as the worker holds handlers.
pub(crate) struct Batched<H>(pub H);

impl<H: BatchHandler> ErasedHandler for Batched<H> {
    fn call(
        self: Arc<Self>,
        ctx: TaskContext,
        payload: Value,
    ) -> BoxFuture<'static, HandlerOutcome> {
        Box::pin(async move { runner::run(&self.0, BatchContext { task: ctx }, payload).await })
    }
}
