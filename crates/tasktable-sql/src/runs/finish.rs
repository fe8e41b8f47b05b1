//! The end of a run: lock its task, check the run's fence, record the attempt, and move
//! the task as core says; the ends of runs an operator's change ends; the rescuer's list
//! of expired runs.

use crate::row::{task_from_row, TASK_COLUMNS};
use crate::{Arg, Exec, Sql};
use chrono::{DateTime, Utc};
use std::collections::{HashMap, HashSet};
use tasktable_core::outcome::FinishAction;
use tasktable_core::runs::{Run, RunState};
use tasktable_core::stored::{self};
use tasktable_core::{AttemptOutcome, Task, TaskId, TaskState};
use tasktable_store::{FinishItem, StoreResult};

use super::rows::*;
/// What ending a run did: whether it applied, and the queue whose workers should look
/// again (a slot of a task that wants more runs came free).
#[derive(Debug, Default)]
pub struct Ended {
    /// Whether the run's fence held and its end was written.
    pub applied: bool,
    /// The queue whose workers should look again once the transaction commits.
    pub wake: Option<String>,
}

/// Ends one run under its lease, inside the caller's write transaction: locks the task,
/// checks the run's fence (and, for the rescuer, that its lease or deadline passed),
/// records the attempt, and moves the task as core's
/// [`Runs::after_run`](tasktable_core::runs::Runs::after_run) says.
pub async fn finish_in<E: Exec>(
    e: &mut E,
    item: &FinishItem,
    run: u32,
    only_if_expired: bool,
    now: Option<DateTime<Utc>>,
) -> StoreResult<Ended> {
    let d = e.dialect();
    let now = e.now(now).await?;
    let mut sql = Sql::new(
        d,
        format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE id = "),
    );
    sql.bind(item.lease.task_id).push(d.lock_rows());
    let Some(task) = e.fetch(sql).await?.first().map(task_from_row).transpose()? else {
        return Ok(Ended::default());
    };
    let (Some(runs), Some(counts)) = (task.runs, task.run_counts) else {
        return Ok(Ended::default());
    };
    let Some((row, credential)) = get(e, task.id, run).await? else {
        return Ok(Ended::default());
    };
    let expired = row.lease_expires_at.is_some_and(|t| t <= now);
    if row.state != RunState::Running
        || row.lease_token != item.lease.token
        || credential.is_none()
        || credential != item.lease.credential
        || (only_if_expired && !expired)
    {
        return Ok(Ended::default());
    }
    let plan = &item.plan;
    let end = runs.after_run(
        counts,
        plan.outcome,
        &plan.action,
        runs.max_failed.unwrap_or(0),
    );
    let result = match &plan.action {
        FinishAction::Complete { result } => result.clone(),
        _ => None,
    };
    let mut sql = Sql::new(d, "UPDATE tasktable_runs SET state = ");
    sql.bind(plan.outcome.as_str())
        .push(", finished_at = ")
        .bind(now)
        .push(", lease_expires_at = NULL, result = ");
    push_json(&mut sql, result);
    sql.push(", error = ")
        .bind(Arg::Text(plan.error.clone()))
        .push(" WHERE task_id = ")
        .bind(task.id)
        .push(" AND run = ")
        .bind(Arg::Int32(run as i32));
    e.execute(sql).await?;
    history(
        e,
        &task,
        &row,
        plan.outcome,
        plan.error.as_deref(),
        end.state,
        now,
    )
    .await?;
    if end.state.is_finished() {
        end_running(e, &[task.id], now, end.state).await?;
    }
    let mut sql = Sql::new(d, "UPDATE tasktable_tasks SET state = ");
    sql.bind(end.state.as_str())
        .push(", runs_active = ")
        .bind(int(end.counts.active))
        .push(", runs_succeeded = ")
        .bind(int(end.counts.succeeded))
        .push(", runs_failed = ")
        .bind(int(end.counts.failed))
        .push(", updated_at = ")
        .bind(now);
    if let Some(error) = &plan.error {
        sql.push(", last_error = ").bind(error.as_str());
    }
    if let Some(after) = end.next_run_after {
        let at = stored::after(now, after);
        sql.push(", run_at = ").bind(at.max(task.run_at));
    }
    if end.state.is_finished() {
        sql.push(", finished_at = ").bind(now);
    }
    sql.push(" WHERE id = ").bind(task.id);
    e.execute(sql).await?;
    let wake = (!end.state.is_finished()).then(|| task.queue.clone());
    Ok(Ended {
        applied: true,
        wake,
    })
}

/// The history row of a run that ended, as the hot finish writes a task's.
#[allow(clippy::too_many_arguments)]
async fn history<E: Exec>(
    e: &mut E,
    task: &Task,
    run: &Run,
    outcome: AttemptOutcome,
    error: Option<&str>,
    left_in: TaskState,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut sql = Sql::new(
        e.dialect(),
        "INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, \
         finished_at, outcome, error, queue, kind, due_at, task_state) VALUES (",
    );
    sql.bind(task.id)
        .push(", ")
        .bind(Arg::Int32(run.run as i32))
        .push(", ")
        .bind(run.worker_id.as_str())
        .push(", ")
        .bind(Arg::Text(run.worker_host.clone()))
        .push(", ")
        .bind(run.started_at)
        .push(", ")
        .bind(now)
        .push(", ")
        .bind(outcome.as_str())
        .push(", ")
        .bind(Arg::Text(error.map(str::to_owned)))
        .push(", ")
        .bind(task.queue.as_str())
        .push(", ")
        .bind(task.kind.as_str())
        .push(", ")
        .bind(task.run_at)
        .push(", ")
        .bind(left_in.as_str())
        .push(")");
    e.execute(sql).await
}

/// Ends the runs still going of tasks that left `running` for `left_in` (their task
/// ended, or an operator moved it): each is recorded as cancelled and its lease is over,
/// so its worker learns at its next fenced write. The tasks' `runs_active` is the
/// caller's to write.
pub async fn end_running<E: Exec>(
    e: &mut E,
    ids: &[TaskId],
    now: DateTime<Utc>,
    left_in: TaskState,
) -> StoreResult<()> {
    let d = e.dialect();
    let mut sql = Sql::new(
        d,
        "INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, \
         finished_at, outcome, error, queue, kind, due_at, task_state) \
         SELECT r.task_id, r.run, r.worker_id, r.worker_host, r.started_at, ",
    );
    sql.bind(now)
        .push(", 'cancelled', ")
        .bind(Arg::Text(Some(format!("the task is {left_in}"))))
        .push(", t.queue, t.kind, t.run_at, ")
        .bind(left_in.as_str())
        .push(
            " FROM tasktable_runs r JOIN tasktable_tasks t ON t.id = r.task_id \
             WHERE r.state = 'running' AND ",
        )
        .push_in_ids("r.task_id", ids)
        .push(" ORDER BY r.task_id, r.run");
    e.execute(sql).await?;
    let mut sql = Sql::new(
        d,
        "UPDATE tasktable_runs SET state = 'cancelled', lease_expires_at = NULL, finished_at = ",
    );
    sql.bind(now)
        .push(" WHERE state = 'running' AND ")
        .push_in_ids("task_id", ids);
    e.execute(sql).await
}

/// Runs whose lease ran out at `now`, oldest expiry first, as their workers saw their
/// tasks: for the rescuer, which ends each with a fenced finish.
pub async fn list_expired<E: Exec>(
    e: &mut E,
    limit: u32,
    now: Option<DateTime<Utc>>,
) -> StoreResult<Vec<Task>> {
    let now = e.now(now).await?;
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {RUN_COLUMNS} FROM tasktable_runs r WHERE r.state = 'running' AND r.lease_expires_at <= "),
    );
    sql.bind(now)
        .push(" ORDER BY r.lease_expires_at LIMIT ")
        .bind(i64::from(limit));
    let runs = e
        .fetch(sql)
        .await?
        .iter()
        .map(run_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    if runs.is_empty() {
        return Ok(Vec::new());
    }
    let ids: HashSet<TaskId> = runs.iter().map(|(r, _)| r.task_id).collect();
    let ids: Vec<TaskId> = ids.into_iter().collect();
    let tasks: HashMap<TaskId, Task> = crate::row::get_many(e, &ids)
        .await?
        .into_iter()
        .map(|t| (t.id, t))
        .collect();
    runs.into_iter()
        .filter_map(|(run, credential)| {
            let task = tasks.get(&run.task_id)?.clone();
            Some(as_claimed(task, &run, credential))
        })
        .collect()
}
