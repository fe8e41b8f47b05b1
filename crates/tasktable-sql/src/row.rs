//! Decoding rows into core types, once for every backend.

use crate::exec::required;
use crate::{Cells, Dialect, Exec, Sql};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::runs::{RunCounts, Runs};
use tasktable_core::trace::TraceParent;
use tasktable_core::{Attempt, Backoff, Target, Task, TaskId, TaskState};
use tasktable_store::{credential_from_db, StoreError, StoreResult};

/// Every column of `tasktable_tasks`, all of which [`task_from_row`] reads by name.
pub const TASK_COLUMNS: &str = "id, kind, queue, state, payload, result, checkpoint, progress, \
    task_key, idempotency_key, priority, run_at, attempt, max_attempts, backoff_initial_ms, \
    backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms, lease_token, \
    lease_credential, lease_expires_at, deadline_at, worker_id, worker_host, last_error, created_at, updated_at, \
    started_at, finished_at, schedule_id, slot_at, target, affinity_ms, affinity_until, \
    affinity_target, copies, at_once, repeat_runs, joining_runs, max_failed_runs, runs_active, runs_succeeded, \
    runs_failed, run_target, created_by, traceparent";

/// Every column of `tasktable_attempts` that [`attempt_from_row`] reads.
pub const ATTEMPT_COLUMNS: &str =
    "id, task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error";

/// [`TASK_COLUMNS`] with the documents left out (typed NULLs in their place), for light
/// lists.
pub fn light_task_columns(dialect: Dialect) -> String {
    let (null_json, null) = dialect.json_literals();
    TASK_COLUMNS.replacen(
        "payload, result, checkpoint, progress",
        &format!(
            "{null_json} AS payload, {null} AS result, {null} AS checkpoint, {null} AS progress"
        ),
        1,
    )
}

fn millis(v: i64) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}

fn whole(v: i64) -> u32 {
    v.clamp(0, i64::from(u32::MAX)) as u32
}

/// A `state` column's text as a [`TaskState`]; any other text is a database error.
pub fn state(text: &str) -> StoreResult<TaskState> {
    text.parse().map_err(|e| StoreError::Database(Box::new(e)))
}

/// A target column as stored (core's form, NULL for any worker).
pub fn target(column: Option<&str>) -> StoreResult<Target> {
    Target::from_column(column).ok_or_else(|| {
        StoreError::Database(format!("a task's target column holds {column:?}").into())
    })
}

/// A task from a row of [`TASK_COLUMNS`] (or [`light_task_columns`]). Its `target` is
/// the task's own: read from `affinity_target` while a retry waits for its previous
/// worker, and from `run_target` for a multi-run task. A required column that is NULL,
/// or a value that cannot be read, is a database error.
pub fn task_from_row(row: &impl Cells) -> StoreResult<Task> {
    let int = |c: &str| required(row.int(c), c);
    let text = |c: &str| required(row.text(c), c);
    let time = |c: &str| required(row.time(c), c);
    let affinity_until = row.time("affinity_until")?;
    let state = state(&text("state")?)?;
    let (runs, run_counts) = runs_from_row(row)?;
    Ok(Task {
        id: int("id")?,
        kind: text("kind")?,
        queue: text("queue")?,
        state,
        payload: row.json("payload")?.unwrap_or(Value::Null),
        result: row.json("result")?,
        checkpoint: row.json("checkpoint")?,
        progress: row.json("progress")?,
        key: row.text("task_key")?,
        idempotency_key: row.text("idempotency_key")?,
        priority: int("priority")?.clamp(i32::MIN.into(), i32::MAX.into()) as i32,
        run_at: time("run_at")?,
        attempt: whole(int("attempt")?),
        max_attempts: whole(int("max_attempts")?),
        backoff: Backoff {
            initial: millis(int("backoff_initial_ms")?),
            multiplier: required(row.float("backoff_multiplier"), "backoff_multiplier")?,
            max: millis(int("backoff_max_ms")?),
            jitter: required(row.float("backoff_jitter"), "backoff_jitter")?,
        },
        timeout: row.int("timeout_ms")?.map(millis),
        lease_token: int("lease_token")?,
        lease_credential: credential_from_db(row.text("lease_credential")?.as_deref())?,
        lease_expires_at: row.time("lease_expires_at")?,
        deadline_at: row.time("deadline_at")?,
        worker_id: row.text("worker_id")?,
        worker_host: row.text("worker_host")?,
        last_error: row.text("last_error")?,
        created_at: time("created_at")?,
        updated_at: time("updated_at")?,
        started_at: row.time("started_at")?,
        finished_at: row.time("finished_at")?,
        schedule_id: row.int("schedule_id")?,
        slot_at: row.time("slot_at")?,
        target: target(
            row.text(target_column(affinity_until.is_some(), runs.is_some()))?
                .as_deref(),
        )?,
        affinity: row.int("affinity_ms")?.map(millis),
        // A task its worker claimed during the wait no longer waits (the columns are
        // reset when the attempt ends).
        affinity_until: affinity_until.filter(|_| state != TaskState::Running),
        runs,
        run_counts,
        run: None,
        // Read where the query returns it (a task from before version 14 has none).
        created_by: row
            .text("created_by")
            .unwrap_or(None)
            .as_deref()
            .and_then(tasktable_core::Actor::from_column),
        // Read where the query returns it; a value that does not parse is no trace.
        traceparent: row
            .text("traceparent")
            .unwrap_or(None)
            .as_deref()
            .and_then(TraceParent::parse),
    })
}

/// A multi-run task's request and counters (`copies` is NULL for a task that runs once).
fn runs_from_row(row: &impl Cells) -> StoreResult<(Option<Runs>, Option<RunCounts>)> {
    let Some(copies) = row.int("copies")? else {
        return Ok((None, None));
    };
    let n = |c: &str| -> StoreResult<u32> { Ok(whole(row.int(c)?.unwrap_or(0))) };
    let runs = Runs {
        copies: whole(copies),
        at_once: n("at_once")?,
        repeat: row.boolean("repeat_runs")?.unwrap_or(false),
        max_failed: Some(n("max_failed_runs")?),
        broadcast: false,
        joining: row.boolean("joining_runs")?.unwrap_or(false),
    };
    let counts = RunCounts {
        active: n("runs_active")?,
        succeeded: n("runs_succeeded")?,
        failed: n("runs_failed")?,
    };
    Ok((Some(runs), Some(counts)))
}

/// Where a task's own target is: while a retry waits for its previous worker, `target`
/// names that worker (so that claims need nothing else) and `affinity_target` keeps the
/// task's own; a multi-run task's `target` is always [`crate::runs::MULTI_RUN_TARGET`]
/// and `run_target` is its own.
fn target_column(waiting_for_its_worker: bool, multi_run: bool) -> &'static str {
    if multi_run {
        "run_target"
    } else if waiting_for_its_worker {
        "affinity_target"
    } else {
        "target"
    }
}

/// An attempt's history row from a row of [`ATTEMPT_COLUMNS`].
pub fn attempt_from_row(row: &impl Cells) -> StoreResult<Attempt> {
    let outcome = required(row.text("outcome"), "outcome")?;
    Ok(Attempt {
        id: required(row.int("id"), "id")?,
        task_id: required(row.int("task_id"), "task_id")?,
        attempt: whole(required(row.int("attempt"), "attempt")?),
        worker_id: row.text("worker_id")?,
        worker_host: row.text("worker_host")?,
        started_at: row.time("started_at")?,
        finished_at: required(row.time("finished_at"), "finished_at")?,
        outcome: outcome
            .parse()
            .map_err(|e| StoreError::Database(Box::new(e)))?,
        error: row.text("error")?,
    })
}

/// Task `id`, if there is one.
pub async fn get<E: Exec>(e: &mut E, id: TaskId) -> StoreResult<Option<Task>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE id = "),
    );
    sql.bind(id);
    let rows = e.fetch(sql).await?;
    rows.first().map(task_from_row).transpose()
}

/// Tasks by id, in no particular order (at most [`Sql::MAX_IN_LIST`] a call on MySQL).
pub async fn get_many<E: Exec>(e: &mut E, ids: &[TaskId]) -> StoreResult<Vec<Task>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE "),
    );
    sql.push_in_ids("id", ids);
    e.fetch(sql).await?.iter().map(task_from_row).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn light_columns_name_every_column_once() {
        for d in Dialect::ALL {
            let light = light_task_columns(d);
            assert_eq!(
                light.matches(", ").count(),
                TASK_COLUMNS.matches(", ").count(),
                "{light}"
            );
            assert!(light.contains("AS payload") && light.contains("AS progress"));
        }
    }
}
