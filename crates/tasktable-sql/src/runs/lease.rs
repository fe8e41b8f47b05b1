//! A run's lease: its status, its renewal and its checkpoints, fenced on the run's row.

use crate::{Arg, Exec, Sql};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tasktable_core::runs::{Run, RunState};
use tasktable_core::stored::after;
use tasktable_core::{AttemptOutcome, Lease, TaskId};
use tasktable_store::{CheckpointParams, LeaseStatus, StoreResult};

use super::rows::*;

/// A task's runs, in order.
pub async fn list<E: Exec>(e: &mut E, task: TaskId) -> StoreResult<Vec<Run>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {RUN_COLUMNS} FROM tasktable_runs r WHERE r.task_id = "),
    );
    sql.bind(task).push(" ORDER BY r.run");
    e.fetch(sql)
        .await?
        .iter()
        .map(|r| run_from_row(r).map(|(run, _)| run))
        .collect()
}

/// The status of a run's lease after a fenced write (which changed nothing when the
/// lease is no longer held): held, cancelled (the run was, with its task) or lost.
pub async fn status<E: Exec>(e: &mut E, lease: &Lease, run: u32) -> StoreResult<LeaseStatus> {
    let Some((row, credential)) = get(e, lease.task_id, run).await? else {
        return Ok(LeaseStatus::Lost);
    };
    let ours =
        row.lease_token == lease.token && credential.is_some() && credential == lease.credential;
    Ok(match row.state {
        RunState::Running if ours => LeaseStatus::Held {
            expires_at: row.lease_expires_at,
        },
        RunState::Ended(AttemptOutcome::Cancelled) if ours => LeaseStatus::Cancelled,
        _ => LeaseStatus::Lost,
    })
}

/// Extends a run's lease, never past its deadline, inside the caller's transaction.
pub async fn renew_in<E: Exec>(
    e: &mut E,
    lease: &Lease,
    run: u32,
    lease_for: Duration,
    now: Option<DateTime<Utc>>,
) -> StoreResult<LeaseStatus> {
    let now = e.now(now).await?;
    let until = after(now, lease_for);
    let mut sql = Sql::new(
        e.dialect(),
        "UPDATE tasktable_runs SET lease_expires_at = CASE WHEN deadline_at IS NOT NULL \
         AND deadline_at < ",
    );
    sql.bind(until)
        .push(" THEN deadline_at ELSE ")
        .bind(until)
        .push(" END");
    push_fence(&mut sql, lease, run);
    e.execute(sql).await?;
    status(e, lease, run).await
}

/// Saves a run's checkpoint and progress, inside the caller's transaction.
pub async fn checkpoint_in<E: Exec>(
    e: &mut E,
    p: &CheckpointParams,
    run: u32,
) -> StoreResult<LeaseStatus> {
    if p.checkpoint.is_some() || p.progress.is_some() {
        let mut sql = Sql::new(e.dialect(), "UPDATE tasktable_runs SET ");
        let mut first = true;
        for (column, value) in [("checkpoint", &p.checkpoint), ("progress", &p.progress)] {
            if let Some(v) = value {
                if !first {
                    sql.push(", ");
                }
                first = false;
                sql.push(column).push(" = ").bind(Arg::Json(v.clone()));
            }
        }
        push_fence(&mut sql, &p.lease, run);
        e.execute(sql).await?;
    }
    status(e, &p.lease, run).await
}
