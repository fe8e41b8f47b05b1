//! The claim of runs: lock the queue's open multi-run tasks, ask core which this worker
//! may start a run of, insert the runs and move the counters.

use crate::exec::required;
use crate::rules::push_claim_counters;
use crate::{Arg, Cells, Dialect, Exec, Sql};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tasktable_core::runs::{Run, RunCounts, Runs, WorkerRuns};
use tasktable_core::stored::{self, after};
use tasktable_core::{Target, Task, TaskId};
use tasktable_store::{new_lease_credentials, ClaimParams, StoreError, StoreResult};

use super::rows::*;
/// Most open tasks one claim of runs reads.
const WINDOW: i64 = 200;

/// Whether `queue` has an open multi-run task due at `now` (one probe of an index).
pub async fn any_open<E: Exec>(e: &mut E, queue: &str, now: DateTime<Utc>) -> StoreResult<bool> {
    let d = e.dialect();
    let mut sql = Sql::new(d, format!("SELECT t.id FROM {} WHERE ", open_source(d)));
    push_open(&mut sql, queue, now);
    sql.push(" LIMIT 1");
    Ok(!e.fetch(sql).await?.is_empty())
}

/// Where open multi-run tasks are read from: the partial index of them (SQLite,
/// PostgreSQL) or the targeted part of the claim index (MySQL).
fn open_source(d: Dialect) -> &'static str {
    match d {
        Dialect::MySql => "tasktable_tasks t FORCE INDEX (tasktable_tasks_claim)",
        Dialect::Sqlite | Dialect::Postgres => "tasktable_tasks t",
    }
}

/// The test of an open multi-run task of `queue` due at `now`, written as the partial
/// index's predicate so that the planner uses it.
fn push_open(sql: &mut Sql, queue: &str, now: DateTime<Utc>) {
    sql.push(&format!(
        "t.target = '{MULTI_RUN_TARGET}' AND t.state IN ('pending', 'running') AND t.queue = "
    ))
    .bind(queue)
    .push(" AND t.run_at <= ")
    .bind(now);
    if sql.dialect() == Dialect::MySql {
        sql.push(" AND t.targeted = 1");
    }
}

/// An open task as a claim of runs reads it.
struct Open {
    id: TaskId,
    runs: Runs,
    counts: RunCounts,
    timeout_ms: Option<i64>,
}

/// Claims up to `p.limit` runs, one per task, in claim order, inside the caller's write
/// transaction.
pub async fn claim_in<E: Exec>(e: &mut E, p: &ClaimParams) -> StoreResult<Vec<Task>> {
    let d = e.dialect();
    if p.limit == 0 || p.kinds.is_empty() {
        return Ok(Vec::new());
    }
    let now = e.now(p.now).await?;
    let mut sql = Sql::new(
        d,
        format!(
            "SELECT t.id, t.copies, t.at_once, t.repeat_runs, t.joining_runs, t.runs_active, \
             t.runs_succeeded, t.runs_failed, t.timeout_ms FROM {} WHERE ",
            open_source(d)
        ),
    );
    push_open(&mut sql, &p.queue, now);
    let kinds: Vec<&str> = p.kinds.iter().map(String::as_str).collect();
    sql.push(" AND ")
        .push_in_texts("t.kind", &kinds)
        .push(
            " AND (t.runs_active < t.at_once AND t.runs_active + t.runs_succeeded < t.copies \
             OR t.joining_runs = ",
        )
        .bind(true)
        .push(") AND (t.run_target IS NULL OR ");
    let position = d.position_fn();
    for (i, needle) in Target::needles(&p.worker_id, &p.worker_groups)
        .into_iter()
        .enumerate()
    {
        if i > 0 {
            sql.push(" OR ");
        }
        sql.push(&format!("{position}(t.run_target, "))
            .bind(needle)
            .push(") > 0");
    }
    sql.push(
        ") AND NOT EXISTS (SELECT 1 FROM tasktable_queues q WHERE q.name = t.queue AND q.paused = ",
    )
    .bind(true)
    .push(") ORDER BY t.priority DESC, t.run_at, t.id LIMIT ")
    .bind(WINDOW);
    let open = e
        .fetch(sql)
        .await?
        .iter()
        .map(open_from_row)
        .collect::<StoreResult<Vec<Open>>>()?;
    if open.is_empty() {
        return Ok(Vec::new());
    }
    // Chosen from an unlocked read, then locked by primary key in id order (as every
    // other writer of several tasks locks them) and chosen again on the locked rows: a
    // claimer waits a moment for another's claim of the same task instead of passing it
    // over, and locks only what it may take.
    let ids: Vec<TaskId> = open.iter().map(|o| o.id).collect();
    let mine = worker_runs(e, &ids, &p.worker_id).await?;
    let mut chosen: Vec<TaskId> = open
        .iter()
        .filter(|o| {
            o.runs
                .may_start(o.counts, mine.get(&o.id).copied().unwrap_or_default())
        })
        .take(p.limit as usize)
        .map(|o| o.id)
        .collect();
    chosen.sort_unstable();
    let mut picked = Vec::with_capacity(chosen.len());
    for id in chosen {
        let mut sql = Sql::new(
            d,
            format!(
                "SELECT id, copies, at_once, repeat_runs, joining_runs, runs_active, \
                 runs_succeeded, runs_failed, timeout_ms FROM {} WHERE id = ",
                d.tasks_by_primary_key()
            ),
        );
        sql.bind(id)
            .push(&format!(
                " AND target = '{MULTI_RUN_TARGET}' AND state IN ('pending', 'running')"
            ))
            .push(d.lock_rows());
        let Some(o) = e.fetch(sql).await?.first().map(open_from_row).transpose()? else {
            continue;
        };
        let worker = worker_runs(e, &[id], &p.worker_id).await?;
        let worker = worker.get(&id).copied().unwrap_or_default();
        if o.runs.may_start(o.counts, worker) {
            let joins = o.runs.joins(o.counts, worker);
            picked.push((o, joins));
        }
    }
    let until = after(now, p.lease_for);
    let credentials = new_lease_credentials(picked.len());
    let mut started = Vec::with_capacity(picked.len());
    for ((o, joins), credential) in picked.iter().zip(credentials) {
        // The task's counters move as any claim moves them (its attempt numbers the
        // run); the lease is the run's row's.
        let mut sql = Sql::new(d, "UPDATE tasktable_tasks SET ");
        push_claim_counters(&mut sql, "");
        sql.push(", runs_active = runs_active + 1, ");
        if *joins {
            // A worker that joined a broadcast: its run is a copy more.
            sql.push("copies = copies + 1, at_once = at_once + 1, ");
        }
        sql.push("worker_id = ")
            .bind(p.worker_id.as_str())
            .push(", worker_host = ")
            .bind(p.worker_host.as_str())
            .push(", started_at = ")
            .bind(now)
            .push(", updated_at = ")
            .bind(now)
            .push(" WHERE id = ")
            .bind(o.id);
        e.execute(sql).await?;
        let mut sql = Sql::new(
            d,
            "SELECT attempt, lease_token FROM tasktable_tasks WHERE id = ",
        );
        sql.bind(o.id);
        let row = e.fetch(sql).await?;
        let row = row
            .first()
            .ok_or_else(|| StoreError::Database("a claimed task vanished".into()))?;
        let run = required(row.int("attempt"), "attempt")?;
        let token = required(row.int("lease_token"), "lease_token")?;
        let (deadline, expires) = stored::lease_ends(now, until, o.timeout_ms);
        let resumed = take_over(e, o.id).await?;
        let mut sql = Sql::new(
            d,
            "INSERT INTO tasktable_runs (task_id, run, worker_id, worker_host, state, \
             lease_token, lease_credential, lease_expires_at, deadline_at, checkpoint, progress, \
             resumed_from, started_at) VALUES (",
        );
        sql.bind(o.id)
            .push(", ")
            .bind(Arg::Int32(run as i32))
            .push(", ")
            .bind(p.worker_id.as_str())
            .push(", ")
            .bind(p.worker_host.as_str())
            .push(", 'running', ")
            .bind(token)
            .push(", ")
            .bind(credential.to_hex())
            .push(", ")
            .bind(expires)
            .push(", ")
            .bind(Arg::Time(deadline))
            .push(", ");
        push_json(
            &mut sql,
            resumed.as_ref().and_then(|r| r.checkpoint.clone()),
        );
        sql.push(", ");
        push_json(&mut sql, resumed.as_ref().and_then(|r| r.progress.clone()));
        sql.push(", NULL, ").bind(now).push(")");
        // resumed_from is written below, by number, so that the statement's shape does not
        // depend on it.
        e.execute(sql).await?;
        if let Some(r) = &resumed {
            let mut sql = Sql::new(d, "UPDATE tasktable_runs SET resumed_from = ");
            sql.bind(Arg::Int32(r.run as i32))
                .push(" WHERE task_id = ")
                .bind(o.id)
                .push(" AND run = ")
                .bind(Arg::Int32(run as i32));
            e.execute(sql).await?;
        }
        started.push((o.id, run as u32));
    }
    if started.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<TaskId> = started.iter().map(|(id, _)| *id).collect();
    let tasks = crate::row::get_many(e, &ids).await?;
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        let run = started
            .iter()
            .find(|(id, _)| *id == task.id)
            .map(|(_, n)| *n)
            .expect("fetched by these ids");
        let row = get(e, task.id, run)
            .await?
            .ok_or_else(|| StoreError::Database("a run just inserted is missing".into()))?;
        out.push(as_claimed(task, &row.0, row.1)?);
    }
    out.sort_by(Task::claim_order);
    Ok(out)
}

fn open_from_row(r: &impl Cells) -> StoreResult<Open> {
    let n = |c: &str| -> StoreResult<u32> { Ok(r.int(c)?.unwrap_or(0).max(0) as u32) };
    Ok(Open {
        id: required(r.int("id"), "id")?,
        runs: Runs {
            copies: n("copies")?,
            at_once: n("at_once")?,
            repeat: r.boolean("repeat_runs")?.unwrap_or(false),
            max_failed: None,
            broadcast: false,
            joining: r.boolean("joining_runs")?.unwrap_or(false),
        },
        counts: RunCounts {
            active: n("runs_active")?,
            succeeded: n("runs_succeeded")?,
            failed: n("runs_failed")?,
        },
        timeout_ms: r.int("timeout_ms")?,
    })
}

/// What `worker` has done with each of `ids` so far.
async fn worker_runs<E: Exec>(
    e: &mut E,
    ids: &[TaskId],
    worker: &str,
) -> StoreResult<HashMap<TaskId, WorkerRuns>> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT task_id, state FROM tasktable_runs WHERE ",
    );
    // A run given back before its handler started (claimed ahead of a free slot) is not
    // one the worker ran: a joining broadcast still joins it.
    sql.push_in_ids("task_id", ids)
        .push(" AND worker_id = ")
        .bind(worker)
        .push(" AND (error IS NULL OR error <> ")
        .bind(tasktable_core::outcome::GIVEN_BACK)
        .push(")");
    let mut out: HashMap<TaskId, WorkerRuns> = HashMap::new();
    for row in e.fetch(sql).await? {
        let entry = out
            .entry(required(row.int("task_id"), "task_id")?)
            .or_default();
        entry.ran = true;
        match required(row.text("state"), "state")?.as_str() {
            "running" => entry.running = true,
            "succeeded" => entry.succeeded = true,
            _ => {}
        }
    }
    Ok(out)
}

/// The earliest run of `task` that ended without succeeding or being cancelled, with a
/// checkpoint no later run took over: a new run resumes from it.
async fn take_over<E: Exec>(e: &mut E, task: TaskId) -> StoreResult<Option<Run>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {RUN_COLUMNS} FROM tasktable_runs r WHERE r.task_id = "),
    );
    sql.bind(task).push(
        " AND r.state NOT IN ('running', 'succeeded', 'cancelled') AND r.checkpoint IS NOT NULL \
         AND NOT EXISTS (SELECT 1 FROM tasktable_runs n WHERE n.task_id = r.task_id \
         AND n.resumed_from = r.run) ORDER BY r.run LIMIT 1",
    );
    match e.fetch(sql).await?.first() {
        Some(row) => Ok(Some(run_from_row(row)?.0)),
        None => Ok(None),
    }
}
