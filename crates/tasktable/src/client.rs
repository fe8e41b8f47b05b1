use serde::Serialize;
use std::sync::Arc;
use tasktable_core::{Actor, Attempt, NewTask, Task, TaskId};
use tasktable_runtime::Handler;
use tasktable_store::*;

/// Submits, finds and changes tasks. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Client {
    store: Arc<dyn Store>,
    actor: Actor,
}

impl Client {
    /// A client whose changes the event log records as Rust code's (`rust`).
    pub fn new(store: Arc<dyn Store>) -> Self {
        Client {
            store: Shielded::wrap(store),
            actor: Actor::rust(),
        }
    }

    /// The same client, its changes recorded as made by `actor`: the user of your own
    /// application on whose behalf it acts, say
    /// (`Actor::new(ActorKind::Rust, "alice@example.com", None)`).
    pub fn acting_as(&self, actor: Actor) -> Self {
        Client {
            store: self.store.clone(),
            actor,
        }
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

    /// All or none; results in the order given. Tasks that name no submitter are
    /// recorded as this client's actor's.
    pub async fn submit_many(&self, mut tasks: Vec<NewTask>) -> StoreResult<Vec<Submitted>> {
        for t in &mut tasks {
            t.created_by.get_or_insert_with(|| self.actor.clone());
        }
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

    /// What happened to a task, oldest first: its submit, each attempt's claim and end,
    /// and every operator change ([`TimelineEntry`]).
    pub async fn timeline(&self, id: TaskId) -> StoreResult<Option<Vec<TimelineEntry>>> {
        let Some(task) = self.store.task_get(id).await? else {
            return Ok(None);
        };
        let attempts = self.store.attempt_list(id).await?;
        let events = self.store.task_events(id).await?;
        let logs = self.store.task_logs(id).await?;
        Ok(Some(timeline(&task, &attempts, &events, &logs)))
    }

    /// Follows what happens, live, from `from` (`None`: from now on): tasks submitted,
    /// attempts ended, operators' changes, each given once by [`Follower::next`], which
    /// waits for them; resume later from [`Follower::cursor`] without a gap
    /// ([`tasktable_store::feed`]).
    pub async fn follow(
        &self,
        filter: feed::FeedFilter,
        from: Option<feed::FeedCursor>,
    ) -> StoreResult<feed::Follower> {
        feed::Follower::start(self.store.clone(), filter, from).await
    }

    /// A page of the event log, newest first: `limit` events below the id `before`.
    pub async fn audit(
        &self,
        filter: EventFilter,
        before: Option<i64>,
        limit: u32,
    ) -> StoreResult<Vec<Event>> {
        self.store
            .event_list(EventListParams {
                filter,
                before,
                limit,
            })
            .await
    }

    /// Applies an operator's change to one task or to every task a filter matches;
    /// returns how many changed.
    pub async fn update(&self, target: Target, change: Change) -> StoreResult<u64> {
        self.store
            .task_update(UpdateParams {
                actor: self.actor.clone(),
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
                actor: self.actor.clone(),
                queue: queue.into(),
                paused: true,
            })
            .await
    }

    pub async fn resume(&self, queue: &str) -> StoreResult<()> {
        self.store
            .queue_set_paused(QueuePauseParams {
                actor: self.actor.clone(),
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
                actor: self.actor.clone(),
                queue: queue.into(),
                policy,
            })
            .await
    }

    pub async fn queues(&self) -> StoreResult<Vec<QueueInfo>> {
        self.store.queue_list().await
    }
}
