//! A task's page, read once for every reader of it: the task, its ended attempts, its runs,
//! its timeline and, while it is pending, why it waits, with its payload and its events
//! shown as the reader's role may see them. The API's `GET /tasks/{id}` and the dashboard's task page both read it here.

use crate::{AppState, Role};
use tasktable_core::runs::Run;
use tasktable_core::waiting::WaitReason;
use tasktable_core::{Attempt, Task, TaskId, TaskState};
use tasktable_store::event::TimelineEntry;
use tasktable_store::StoreResult;

/// What a task's page shows.
#[derive(Debug, Clone)]
pub struct TaskDetail {
    /// The task, its payload redacted for the reader.
    pub task: Task,
    pub attempts: Vec<Attempt>,
    pub runs: Vec<Run>,
    /// Submission, claims, ends, events and log lines, oldest first.
    pub timeline: Vec<TimelineEntry>,
    /// Why it waits, while it is pending (empty otherwise).
    pub waiting: Vec<WaitReason>,
}

impl TaskDetail {
    /// Task `id` as `role` may see it; `None` when there is no such task.
    pub async fn read(state: &AppState, role: Role, id: TaskId) -> StoreResult<Option<Self>> {
        let Some(mut task) = state.store.task_get(id).await? else {
            return Ok(None);
        };
        let attempts = state.store.attempt_list(id).await?;
        let runs = state.store.run_list(id).await?;
        let events: Vec<_> = state
            .store
            .task_events(id)
            .await?
            .into_iter()
            .map(|e| state.event_for(role, e))
            .collect();
        let logs = state.store.task_logs(id).await?;
        let timeline = tasktable_store::timeline(&task, &attempts, &events, &logs);
        let waiting = match task.state {
            TaskState::Pending => state.store.task_waiting(id.into()).await?,
            _ => Vec::new(),
        };
        task.payload = state.payload_for(role, &task.kind, task.payload);
        Ok(Some(TaskDetail {
            task,
            attempts,
            runs,
            timeline,
            waiting,
        }))
    }
}
