use serde::Serialize;
use std::sync::Arc;
use tasktable_core::{Attempt, NewTask, Task, TaskId};
use tasktable_runtime::Handler;
use tasktable_store::*;

/// Submits, finds and changes tasks. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    store: Arc<dyn Store>,
}

impl Client {
    pub fn new(store: Arc<dyn Store>) -> Self {
        Client { store }
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// A task for handler `H` with a typed payload, to adjust and submit.
    pub fn task<H: Handler>(payload: &H::Payload) -> Result<NewTask, serde_json::Error>
    where
        H::Payload: Serialize,
    {
        Ok(NewTask::new(H::KIND, serde_json::to_value(payload)?))
    }

    pub async fn submit(&self, task: NewTask) -> StoreResult<Submitted> {
        let mut out = self.submit_many(vec![task]).await?;
        Ok(out.remove(0))
    }

    /// All or none; results in the order given.
    pub async fn submit_many(&self, tasks: Vec<NewTask>) -> StoreResult<Vec<Submitted>> {
        self.store
            .task_submit(SubmitParams { tasks, now: None })
            .await
    }

    pub async fn get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        self.store.task_get(id).await
    }

    pub async fn list(
        &self,
        filter: TaskFilter,
        after: Option<TaskId>,
        limit: u32,
    ) -> StoreResult<TaskPage> {
        self.store
            .task_list(ListParams {
                filter,
                after,
                limit,
                light: false,
            })
            .await
    }

    pub async fn attempts(&self, id: TaskId) -> StoreResult<Vec<Attempt>> {
        self.store.attempt_list(id).await
    }

    /// Applies an operator's change to one task or to every task a filter matches;
    /// returns how many changed.
    pub async fn update(&self, target: Target, change: Change) -> StoreResult<u64> {
        self.store
            .task_update(UpdateParams {
                target,
                change,
                now: None,
            })
            .await
    }

    pub async fn cancel(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Cancel).await.map(drop)
    }

    pub async fn retry(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Retry).await.map(drop)
    }

    pub async fn hold(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Hold).await.map(drop)
    }

    pub async fn release(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Release).await.map(drop)
    }

    pub async fn pause(&self, queue: &str) -> StoreResult<()> {
        self.store
            .queue_set_paused(QueuePauseParams {
                queue: queue.into(),
                paused: true,
            })
            .await
    }

    pub async fn resume(&self, queue: &str) -> StoreResult<()> {
        self.store
            .queue_set_paused(QueuePauseParams {
                queue: queue.into(),
                paused: false,
            })
            .await
    }

    /// Replaces a queue's policy: what may run at once, how fast tasks start, one task
    /// per worker, fair shares ([`tasktable_core::policy`]). The default clears it.
    pub async fn set_policy(
        &self,
        queue: &str,
        policy: tasktable_core::policy::QueuePolicy,
    ) -> StoreResult<()> {
        self.store
            .queue_set_policy(QueuePolicyParams {
                queue: queue.into(),
                policy,
            })
            .await
    }

    pub async fn queues(&self) -> StoreResult<Vec<QueueInfo>> {
        self.store.queue_list().await
    }
}
