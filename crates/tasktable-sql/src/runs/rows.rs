//! A run's row: its columns, reading it, the task as the run's worker sees it and the
//! fence of its lease; and the helpers every part of [`super`] shares.

use crate::exec::required;
use crate::rules::{self, Val};
use crate::{Arg, Cells, Exec, Sql};
use serde_json::Value;
use tasktable_core::runs::{Run, RunState};
use tasktable_core::{Lease, Task, TaskId};
use tasktable_store::{credential_from_db, StoreError, StoreResult};

/// The `target` of every multi-run task: no worker id or group has `|m|` in its needles
/// (`|w:...|`, `|g:...|`), so the hot claim's targeted lane never matches it.
pub const MULTI_RUN_TARGET: &str = "|m|";

pub(super) fn int(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

/// The columns of `tasktable_runs` (aliased `r`) that a run is read from.
pub const RUN_COLUMNS: &str = "r.task_id, r.run, r.worker_id, r.worker_host, r.state, \
    r.lease_token, r.lease_credential, r.lease_expires_at, r.deadline_at, r.checkpoint, \
    r.progress, r.result, r.error, r.resumed_from, r.started_at, r.finished_at";

/// A run, and its lease's credential (which [`Run`] never shows).
pub(super) fn run_from_row(
    row: &impl Cells,
) -> StoreResult<(Run, Option<tasktable_core::LeaseCredential>)> {
    let state = required(row.text("state"), "state")?;
    let run = Run {
        task_id: required(row.int("task_id"), "task_id")?,
        run: required(row.int("run"), "run")?.max(0) as u32,
        worker_id: required(row.text("worker_id"), "worker_id")?,
        worker_host: row.text("worker_host")?,
        state: state
            .parse::<RunState>()
            .map_err(|e| StoreError::Database(Box::new(e)))?,
        lease_token: required(row.int("lease_token"), "lease_token")?,
        lease_expires_at: row.time("lease_expires_at")?,
        deadline_at: row.time("deadline_at")?,
        checkpoint: row.json("checkpoint")?,
        progress: row.json("progress")?,
        result: row.json("result")?,
        error: row.text("error")?,
        resumed_from: row.int("resumed_from")?.map(|n| n.max(0) as u32),
        started_at: required(row.time("started_at"), "started_at")?,
        finished_at: row.time("finished_at")?,
    };
    let credential = credential_from_db(row.text("lease_credential")?.as_deref())?;
    Ok((run, credential))
}

/// One run, with its credential.
pub(super) async fn get<E: Exec>(
    e: &mut E,
    task: TaskId,
    run: u32,
) -> StoreResult<Option<(Run, Option<tasktable_core::LeaseCredential>)>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {RUN_COLUMNS} FROM tasktable_runs r WHERE r.task_id = "),
    );
    sql.bind(task)
        .push(" AND r.run = ")
        .bind(Arg::Int32(run as i32));
    e.fetch(sql).await?.first().map(run_from_row).transpose()
}

/// The task as the worker of one of its runs sees it: the run's lease, worker, times,
/// checkpoint and number.
pub(super) fn as_claimed(
    mut task: Task,
    run: &Run,
    credential: Option<tasktable_core::LeaseCredential>,
) -> StoreResult<Task> {
    task.run = Some(run.run);
    task.attempt = run.run;
    task.lease_token = run.lease_token;
    task.lease_credential = credential;
    task.lease_expires_at = run.lease_expires_at;
    task.deadline_at = run.deadline_at;
    task.worker_id = Some(run.worker_id.clone());
    task.worker_host = run.worker_host.clone();
    task.checkpoint = run.checkpoint.clone();
    task.progress = run.progress.clone();
    task.started_at = Some(run.started_at);
    task.finished_at = run.finished_at;
    task.result = run.result.clone();
    Ok(task)
}

/// The fence of a run's lease: `AND` its run, token and credential, still running.
pub(super) fn push_fence(sql: &mut Sql, lease: &Lease, run: u32) {
    sql.push(" WHERE task_id = ")
        .bind(lease.task_id)
        .push(" AND run = ")
        .bind(Arg::Int32(run as i32))
        .push(" AND ");
    // A run's credential is never NULL: a lease without one matches no run.
    let credential = lease.credential.map(|c| c.to_hex()).unwrap_or_default();
    rules::push_fence(
        sql,
        "",
        &Val::Arg(Arg::Int(lease.token)),
        &Val::Arg(credential.into()),
    );
}

pub(super) fn push_json(sql: &mut Sql, v: Option<Value>) {
    match v {
        Some(v) => {
            sql.bind(Arg::Json(v));
        }
        None => {
            sql.push("NULL");
        }
    }
}
