use serde::Serialize;
use std::sync::Arc;
use tasktable_core::{Actor, Attempt, NewTask, Task, TaskId};
use tasktable_runtime::Handler;
use tasktable_store::*;

/// Submits, finds and changes tasks: what an application and its operators do to the
/// tasks table, with every change recorded in the event log under the client's
/// [`Actor`]. Cheap to clone; clones share the store.
///
/// Calls the client does not wrap (schedules, batches, the worker registry, statistics)
/// are on its [`store`](Client::store).
///
/// ```
/// use serde_json::json;
/// use tasktable::{Change, Client, NewTask, TaskFilter, TaskState, Target};
///
/// # #[tokio::main]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let dir = tempfile::tempdir()?;
/// # let url = format!("sqlite://{}", dir.path().join("tasks.db").display());
/// let store = tasktable::connect(&url).await?; // sqlite://tasks.db, postgres://...
/// store.migrate().await?;
/// let client = Client::new(store);
///
/// let task = NewTask::new("send_email", json!("ada@example.com"))
///     .idempotency_key("welcome-ada") // a repeat returns the first task
///     .held(true); // waits for a release
/// let first = client.submit(task.clone()).await?;
/// let again = client.submit(task).await?;
/// assert!(first.created && !again.created && again.id == first.id);
///
/// // An operator's change, on one task or on every task a filter matches.
/// let held = TaskFilter::default().kind("send_email").state(TaskState::Held);
/// let released = client.update(Target::Filter(held), Change::Release).await?;
/// assert_eq!(released, 1);
/// let task = client.get(first.id).await?.expect("the task exists");
/// assert_eq!(task.state, TaskState::Pending);
///
/// client.pause("default").await?; // workers stop claiming; running tasks finish
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct Client {
    store: Arc<dyn Store>,
    actor: Actor,
}

impl Client {
    /// A client on `store`, [shielded](tasktable_store::Shielded) so that no call is cut
    /// off half way, whose changes the event log records as Rust code's (`rust`).
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

    /// The shielded store the client calls, for what it does not wrap: schedules,
    /// batches, the worker registry, statistics.
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    /// A task for handler `H` with a typed payload, to adjust and submit. Fails only
    /// when the payload cannot be turned into JSON.
    pub fn task<H: Handler>(payload: &H::Payload) -> Result<NewTask, serde_json::Error>
    where
        H::Payload: Serialize,
    {
        Ok(NewTask::new(H::KIND, serde_json::to_value(payload)?))
    }

    /// Submits one task, `pending` (or `held` when it asks to be) and due when it says
    /// (now by default). A task whose idempotency key another task holds is not created:
    /// that task's id comes back with `created: false`. Idle workers of its queue are
    /// woken: in this process on every backend, in others only on PostgreSQL (elsewhere
    /// they find it at their next poll).
    ///
    /// # Errors
    ///
    /// [`StoreError::InvalidTask`] or [`StoreError::PayloadTooLarge`] when the task fails
    /// its checks; nothing is created.
    pub async fn submit(&self, task: NewTask) -> StoreResult<Submitted> {
        let mut out = self.submit_many(vec![task]).await?;
        Ok(out.remove(0))
    }

    /// All or none; results in the order given. Tasks that name no submitter are
    /// recorded as this client's actor's, and tasks that name no trace continue the
    /// current span's, when an OpenTelemetry layer follows it
    /// ([`tasktable_runtime::trace`]): their attempts run in spans of that trace.
    pub async fn submit_many(&self, mut tasks: Vec<NewTask>) -> StoreResult<Vec<Submitted>> {
        let traceparent = tasktable_runtime::trace::current_traceparent();
        for t in &mut tasks {
            t.created_by.get_or_insert_with(|| self.actor.clone());
            if t.traceparent.is_none() {
                t.traceparent.clone_from(&traceparent);
            }
        }
        self.store
            .task_submit(SubmitParams { tasks, now: None })
            .await
    }

    /// The task as it is now, with its payload, result, checkpoint and progress; `None`
    /// when no task has the id (never submitted, or taken by retention).
    pub async fn get(&self, id: TaskId) -> StoreResult<Option<Task>> {
        self.store.task_get(id).await
    }

    /// A page of the tasks `filter` matches, newest (highest id) first: at most `limit`
    /// (1 to [`MAX_PAGE_SIZE`]) with ids below `after`. Pass the page's
    /// [`next`](TaskPage::next) as `after` for the page that follows.
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

    /// A task's attempt history, oldest first: for each attempt that ended, the worker
    /// and host that ran it, when, its outcome and its error. Empty for a task never run.
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
    /// attempts ended, operators' changes, each given once by
    /// [`Follower::next`](feed::Follower::next), which waits for them; resume later from
    /// [`Follower::cursor`](feed::Follower::cursor) without a gap
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
                action: None,
            })
            .await
    }

    /// Cancels a held, pending or running task; a running handler is told to stop
    /// ([`StopReason::Cancelled`](crate::StopReason::Cancelled)) and what it returns is
    /// dropped.
    ///
    /// # Errors
    ///
    /// [`StoreError::NotFound`] for an unknown id, [`StoreError::IllegalTransition`] for a
    /// task already finished. The other one-task changes below fail the same way.
    pub async fn cancel(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Cancel).await.map(drop)
    }

    /// Makes a pending, failed or cancelled task due now; a failed or cancelled one gets
    /// a fresh set of attempts.
    pub async fn retry(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Retry).await.map(drop)
    }

    /// Keeps a pending task from being claimed until [`Client::release`].
    pub async fn hold(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Hold).await.map(drop)
    }

    /// Lets a held task be claimed again, at its `run_at` as it was.
    pub async fn release(&self, id: TaskId) -> StoreResult<()> {
        self.update(Target::Id(id), Change::Release).await.map(drop)
    }

    /// Stops every worker, in-process or pulling over HTTP, from claiming from `queue`;
    /// running tasks go on to their end. Pausing a paused queue changes nothing.
    pub async fn pause(&self, queue: &str) -> StoreResult<()> {
        self.store
            .queue_set_paused(QueuePauseParams {
                actor: self.actor.clone(),
                queue: queue.into(),
                paused: true,
            })
            .await
    }

    /// Lets workers claim from `queue` again, and wakes its idle workers.
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

    /// Every queue that has tasks, a pause or a policy, with its task counts by state,
    /// sorted by name.
    pub async fn queues(&self) -> StoreResult<Vec<QueueInfo>> {
        self.store.queue_list().await
    }
}
