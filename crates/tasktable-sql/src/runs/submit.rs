//! The submit of multi-run tasks: marking them, re-arming a repeat, resolving a
//! broadcast's workers.

use crate::exec::required;
use crate::{Arg, Cells, Exec, Sql};
use chrono::{DateTime, Utc};
use tasktable_core::runs::Rearm;
use tasktable_core::{Target, TaskId, TaskState};
use tasktable_store::{new_lease_credentials, StoreError, StoreResult, Submitted};

use super::finish::end_running;
use super::rows::*;
/// After the tasks of a submit are inserted: makes the multi-run ones so (their request,
/// zeroed counters, their own target kept aside, and a lease credential nobody holds, so
/// that no write meant for a task that runs once can match the row), and re-arms the
/// existing ones a repeated idempotency key found when the submit asks. `submitted[i]` is
/// the answer for `tasks[i]`, and `aimed[i]` the workers a broadcast goes to; tasks that
/// existed already are left alone.
pub async fn mark_submitted<E: Exec>(
    e: &mut E,
    tasks: &[tasktable_core::NewTask],
    submitted: &[Submitted],
    aimed: &[Option<Target>],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let d = e.dialect();
    let credentials = new_lease_credentials(tasks.len());
    for (i, ((task, s), credential)) in tasks.iter().zip(submitted).zip(credentials).enumerate() {
        if let (false, Some(rearm)) = (s.created, task.rearm) {
            self::rearm(e, s.id, rearm, now).await?;
            continue;
        }
        let (Some(runs), true) = (&task.runs, s.created) else {
            continue;
        };
        let mut sql = Sql::new(d, "UPDATE tasktable_tasks SET copies = ");
        sql.bind(int(runs.copies))
            .push(", at_once = ")
            .bind(int(runs.at_once))
            .push(", repeat_runs = ")
            .bind(runs.repeat)
            .push(", joining_runs = ")
            .bind(runs.joining)
            .push(", max_failed_runs = ")
            .bind(int(runs.failures_allowed(task.max_attempts)))
            .push(", runs_active = 0, runs_succeeded = 0, runs_failed = 0, run_target = ");
        match aimed.get(i).and_then(Option::as_ref) {
            Some(workers) => sql.bind(Arg::Text(workers.to_column())),
            None => sql.push("target"),
        };
        sql.push(&format!(
            ", target = '{MULTI_RUN_TARGET}', lease_credential = "
        ))
        .bind(credential.to_hex())
        .push(" WHERE id = ")
        .bind(s.id);
        e.execute(sql).await?;
    }
    Ok(())
}

/// Re-arms the existing task `id` that a submit's idempotency key named, if it is a
/// multi-run task ([`Rearm`]); a task that runs once is left as it is.
async fn rearm<E: Exec>(e: &mut E, id: TaskId, how: Rearm, now: DateTime<Utc>) -> StoreResult<()> {
    let d = e.dialect();
    let mut sql = Sql::new(d, "SELECT state, copies FROM tasktable_tasks WHERE id = ");
    sql.bind(id).push(d.lock_rows());
    let Some(row) = e.fetch(sql).await?.into_iter().next() else {
        return Ok(());
    };
    if row.int("copies")?.is_none() {
        return Ok(());
    }
    let state = crate::row::state(&required(row.text("state"), "state")?)?;
    // A held task stays held: a rearm changes its runs, not an operator's hold.
    let reopen = match how {
        Rearm::All => state != TaskState::Held,
        Rearm::Failed => matches!(state, TaskState::Failed | TaskState::Cancelled),
    };
    let mut sql = Sql::new(
        d,
        "UPDATE tasktable_tasks SET runs_failed = 0, updated_at = ",
    );
    sql.bind(now);
    if matches!(how, Rearm::All) {
        end_running(e, &[id], now, TaskState::Pending).await?;
        // Successes are forgotten: their workers may run it again.
        let mut forget = Sql::new(
            d,
            "DELETE FROM tasktable_runs WHERE state = 'succeeded' AND task_id = ",
        );
        forget.bind(id);
        e.execute(forget).await?;
        sql.push(", runs_active = 0, runs_succeeded = 0");
    }
    if reopen {
        sql.push(", state = 'pending', finished_at = NULL, run_at = ")
            .bind(now);
    }
    sql.push(" WHERE id = ").bind(id);
    e.execute(sql).await
}

/// Resolves the broadcasts among `tasks` against the registry as it is now: each goes to
/// the workers core's [`tasktable_core::runs::broadcast_to`] names, one copy each, all at
/// once. Answers, per task, the workers a broadcast is aimed at (which
/// [`mark_submitted`] writes as its target, however many). A broadcast that no worker
/// would take is refused.
pub async fn resolve_broadcasts<E: Exec>(
    e: &mut E,
    tasks: &mut [tasktable_core::NewTask],
) -> StoreResult<Vec<Option<Target>>> {
    let mut aimed = vec![None; tasks.len()];
    if !tasks.iter().any(|t| t.runs.is_some_and(|r| r.broadcast)) {
        return Ok(aimed);
    }
    let workers = crate::workers::list(
        e,
        &tasktable_store::WorkerListParams {
            include_gone: false,
            ..Default::default()
        },
    )
    .await?;
    for (index, task) in tasks.iter_mut().enumerate() {
        let Some(runs) = task.runs.as_mut().filter(|r| r.broadcast) else {
            continue;
        };
        let ids = tasktable_core::runs::broadcast_to(&workers, &task.queue, &task.target);
        if ids.is_empty() {
            return Err(StoreError::InvalidInput(format!(
                "task #{index} is a broadcast, and no active worker takes queue {:?} and is \
                 allowed by its target",
                task.queue
            )));
        }
        let n = u32::try_from(ids.len()).unwrap_or(u32::MAX);
        runs.copies = n;
        runs.at_once = n;
        // A joining broadcast keeps its own target, so that workers that join can find it.
        if !runs.joining {
            aimed[index] = Some(Target::Workers(ids));
        }
    }
    Ok(aimed)
}
