//! The dashboard served as `tasktable serve` serves it (API and `/ui` on one router) over a
//! fresh SQLite database, and the worker-side store calls that put tasks in each state.

use chrono::{DateTime, Utc};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{Backoff, HandlerOutcome, NewTask, Task, TaskId, TaskState};
use tasktable_server::{AppState, Role, TokenSet};
use tasktable_store::{
    Change, CheckpointParams, ClaimParams, CreateScheduleParams, FinishItem, FinishParams,
    FireNowParams, OnExisting, QueueInfo, Schedule, ScheduleRef, Store, SubmitParams, Target,
    UpdateParams,
};
use tasktable_testdb::TestDb;

pub const ADMIN: &str = "admin-token-0123456789";
pub const OPERATOR: &str = "operator-token-0123456789";

pub struct App {
    base: String,
    pub store: Arc<dyn Store>,
    /// The event streams the server has open (a live page's refresh follows one).
    pub streams: Arc<tasktable_server::live::Streams>,
    /// When set, the time store calls below happen at instead of the database's now.
    clock: Mutex<Option<DateTime<Utc>>>,
    _db: TestDb,
}

impl App {
    pub async fn start() -> App {
        let db = TestDb::fresh("sqlite")
            .await
            .expect("sqlite is always there");
        let store = db.store().await;
        let mut tokens = TokenSet::default();
        tokens.add_plain("root", Role::Admin, ADMIN).unwrap();
        tokens.add_plain("ops", Role::Operator, OPERATOR).unwrap();
        let state = AppState::new(store.clone(), tokens);
        let streams = state.streams.clone();
        let app = tasktable_server::router(state.clone()).merge(tasktable_dashboard::router(state));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await });
        App {
            base,
            store,
            streams,
            clock: Mutex::new(None),
            _db: db,
        }
    }

    /// Waits until `n` event streams are open (a page's script has connected).
    pub async fn wait_for_streams(&self, n: usize) {
        let mut count = self.streams.watch();
        let waited = tokio::time::timeout(Duration::from_secs(15), count.wait_for(|c| *c == n));
        assert!(
            matches!(waited.await, Ok(Ok(_))),
            "{} event streams open, not {n}",
            self.streams.count()
        );
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// Makes the next submits, claims, finishes and cancels happen at `t`, so seeded
    /// history spreads over time as a real one does.
    pub fn set_time(&self, t: DateTime<Utc>) {
        *self.clock.lock().unwrap() = Some(t);
    }

    fn now(&self) -> Option<DateTime<Utc>> {
        *self.clock.lock().unwrap()
    }

    /// A worker's heartbeat: `queues` empty means every queue.
    pub async fn register(
        &self,
        id: &str,
        host: &str,
        groups: &[&str],
        queues: &[&str],
        capacity: u32,
    ) {
        use tasktable_core::worker::{Protocol, Queues, WorkerFacts};
        let facts = WorkerFacts {
            id: id.into(),
            host: host.into(),
            pid: Some(4100 + capacity),
            version: "0.1.0".into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            queues: if queues.is_empty() {
                Queues::All
            } else {
                Queues::Listed(queues.iter().map(|q| q.to_string()).collect())
            },
            capacity,
            protocol: Protocol::Process,
            kinds: None,
        };
        self.store
            .worker_beat(tasktable_store::WorkerBeatParams {
                facts,
                address: Some(format!("10.0.0.{}", 10 + capacity)),
                starting: true,
                now: self.now(),
                owner: None,
                max_live_per_owner: None,
            })
            .await
            .unwrap();
    }

    pub async fn worker(&self, id: &str) -> tasktable_core::worker::WorkerInfo {
        self.store
            .worker_list(tasktable_store::WorkerListParams {
                include_gone: true,
                ..Default::default()
            })
            .await
            .unwrap()
            .into_iter()
            .find(|w| w.facts.id == id)
            .unwrap()
    }

    pub async fn submit(&self, task: NewTask) -> TaskId {
        self.store
            .task_submit(SubmitParams {
                tasks: vec![task],
                now: self.now(),
            })
            .await
            .unwrap()[0]
            .id
    }

    /// Saves the schedule `spec` (as the API takes it).
    pub async fn schedule(&self, spec: serde_json::Value) -> Schedule {
        self.store
            .schedule_create(CreateScheduleParams {
                actor: tasktable_core::Actor::rust(),
                spec: serde_json::from_value(spec).expect("a schedule spec"),
                on_existing: OnExisting::Refuse,
                now: self.now(),
            })
            .await
            .unwrap()
    }

    /// Fires schedule `id` now, as its page's button does; the task it fired.
    pub async fn fire(&self, id: i64) -> TaskId {
        self.store
            .schedule_fire_now(FireNowParams {
                actor: tasktable_core::Actor::rust(),
                schedule: ScheduleRef::Id(id),
                now: self.now(),
            })
            .await
            .unwrap()
            .tasks[0]
            .task_id
    }

    pub async fn schedule_get(&self, id: i64) -> Schedule {
        self.store
            .schedule_get(ScheduleRef::Id(id))
            .await
            .unwrap()
            .expect("schedule exists")
    }

    pub async fn task(&self, id: TaskId) -> Task {
        self.store.task_get(id).await.unwrap().expect("task exists")
    }

    pub async fn state(&self, id: TaskId) -> TaskState {
        self.task(id).await.state
    }

    pub async fn queue(&self, name: &str) -> QueueInfo {
        self.store
            .queue_list()
            .await
            .unwrap()
            .into_iter()
            .find(|q| q.name == name)
            .unwrap_or_else(|| panic!("queue {name} exists"))
    }

    /// Claims task `id` as `worker` on `host` would. The task must be the first due one of
    /// its kind on its queue.
    pub async fn claim(&self, id: TaskId, worker: &str, host: &str) -> Task {
        let task = self.task(id).await;
        let claimed = self
            .store
            .task_claim(ClaimParams {
                queue: task.queue.clone(),
                kinds: vec![task.kind.clone()],
                limit: 1,
                worker_id: worker.into(),
                worker_host: host.into(),
                worker_groups: Vec::new(),
                lease_for: Duration::from_secs(600),
                now: self.now(),
            })
            .await
            .unwrap();
        assert_eq!(
            claimed.iter().map(|t| t.id).collect::<Vec<_>>(),
            [id],
            "claimed the intended task"
        );
        claimed.into_iter().next().unwrap()
    }

    /// Ends the running attempt of `task` (as claimed) with `outcome`. A retried task is
    /// due again at once, so the next attempt can be claimed straight away.
    pub async fn finish(&self, task: &Task, outcome: HandlerOutcome) {
        let backoff = Backoff {
            initial: Duration::ZERO,
            jitter: 0.0,
            ..task.backoff
        };
        let plan = FinishPlan::for_handler(outcome, task.attempt, &backoff, 0.5);
        let applied = self
            .store
            .task_finish(FinishParams {
                items: vec![FinishItem {
                    lease: task.lease(),
                    plan,
                }],
                only_if_expired: false,
                now: self.now(),
            })
            .await
            .unwrap();
        assert_eq!(applied, [true], "the worker still held task {}", task.id);
    }

    pub async fn checkpoint(
        &self,
        task: &Task,
        checkpoint: serde_json::Value,
        progress: serde_json::Value,
    ) {
        self.store
            .task_checkpoint(CheckpointParams {
                lease: task.lease(),
                checkpoint: Some(checkpoint),
                progress: Some(progress),
            })
            .await
            .unwrap();
    }

    pub async fn cancel(&self, id: TaskId) {
        self.store
            .task_update(UpdateParams {
                actor: tasktable_core::Actor::rust(),
                target: Target::Id(id),
                change: Change::Cancel,
                now: self.now(),
                action: None,
            })
            .await
            .unwrap();
    }

    /// Submits `task` with a single attempt, and has a worker fail it with `error`.
    pub async fn failed(&self, task: NewTask, error: &str) -> TaskId {
        let id = self.submit(task.max_attempts(1)).await;
        let running = self.claim(id, "worker-7f3a", "app-1").await;
        self.finish(&running, retryable(error)).await;
        assert_eq!(self.state(id).await, TaskState::Failed);
        id
    }
}

/// A handler's retryable error.
pub fn retryable(message: &str) -> HandlerOutcome {
    HandlerOutcome::Error {
        message: message.into(),
        retry_after: None,
    }
}
