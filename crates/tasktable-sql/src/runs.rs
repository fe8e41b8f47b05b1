//! Multi-run tasks ([`tasktable_core::runs`]): their submit, the claim of a run, and the
//! fenced writes under a run's lease, written once for the three backends.
//!
//! A multi-run task's row holds its request and counters, and `target` is
//! [`MULTI_RUN_TARGET`], a name no worker answers to: the hot claim's lanes never take
//! it, and nothing on the hot path changes for tasks that run once. Its own target is in
//! `run_target`. A store learns that a queue has open multi-run tasks when a hot claim
//! comes back short ([`OpenRuns`]), and then claims runs here, in a write transaction of
//! its own: lock the open tasks of the queue (passing over rows others hold), ask core
//! which this worker may start a run of, insert each run (numbered by the task's
//! `attempt` counter, fenced by the task's `lease_token` counter, which grows on every
//! claim) and move the counters. A run's renewal, checkpoint and end are fenced on the
//! run's row exactly as a task's are on the task's; the end of a run locks its task
//! first (as the claim does, so the two never wait on each other in opposite orders),
//! writes the attempt's history row, and applies [`Runs::after_run`].

use crate::exec::required;
use crate::row::{task_from_row, TASK_COLUMNS};
use crate::rules::{self, push_claim_counters, Val};
use crate::{query, Arg, Cells, Dialect, Exec, Sql};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tasktable_core::outcome::FinishAction;
use tasktable_core::runs::{Rearm, Run, RunCounts, RunState, Runs, WorkerRuns};
use tasktable_core::stored::{self, after};
use tasktable_core::{AttemptOutcome, Lease, Target, Task, TaskId, TaskState};
use tasktable_store::{
    credential_from_db, new_lease_credentials, CheckpointParams, ClaimParams, FinishItem,
    LeaseStatus, StoreError, StoreResult, Submitted,
};

/// The `target` of every multi-run task: no worker id or group has `|m|` in its needles
/// (`|w:...|`, `|g:...|`), so the hot claim's targeted lane never matches it.
pub const MULTI_RUN_TARGET: &str = "|m|";

/// Most open tasks one claim of runs reads.
const WINDOW: i64 = 200;

/// How long a store trusts that a queue has no open multi-run task, or none the worker
/// may start a run of, before a short hot claim asks again. A store's own multi-run
/// submits and the ends of its runs ask again at once ([`OpenRuns::stir`]).
pub const RECHECK: Duration = Duration::from_secs(1);

/// What a store knows of the open multi-run tasks of the queues it claims from.
#[derive(Debug, Default)]
pub struct OpenRuns {
    /// Queues found without an open multi-run task, and when.
    none: Mutex<HashMap<String, Instant>>,
    /// (queue, worker) pairs whose claim of runs found nothing, and when.
    nothing_for: Mutex<HashMap<(String, String), Instant>>,
}

impl OpenRuns {
    /// Whether a short hot claim of `worker` from `queue` should look for runs. A claim
    /// at a pinned time (`pinned`) always looks: what this remembers is about the real
    /// clock, and such a claim must answer for the time it names.
    pub fn due(&self, queue: &str, worker: &str, pinned: bool) -> bool {
        if pinned {
            return true;
        }
        let fresh = |at: &Instant| at.elapsed() < RECHECK;
        if self
            .none
            .lock()
            .expect("not poisoned")
            .get(queue)
            .is_some_and(fresh)
        {
            return false;
        }
        !self
            .nothing_for
            .lock()
            .expect("not poisoned")
            .get(&(queue.to_owned(), worker.to_owned()))
            .is_some_and(fresh)
    }

    /// `queue` has no open multi-run task.
    pub fn found_none(&self, queue: &str) {
        let mut none = self.none.lock().expect("not poisoned");
        if none.len() >= 1024 {
            none.retain(|_, at| at.elapsed() < RECHECK);
        }
        none.insert(queue.to_owned(), Instant::now());
    }

    /// `worker` may start a run of none of `queue`'s open multi-run tasks.
    pub fn found_nothing_for(&self, queue: &str, worker: &str) {
        let mut nothing = self.nothing_for.lock().expect("not poisoned");
        if nothing.len() >= 4096 {
            nothing.retain(|_, at| at.elapsed() < RECHECK);
        }
        nothing.insert((queue.to_owned(), worker.to_owned()), Instant::now());
    }

    /// A multi-run task of `queue` was submitted, or one of its runs ended: claims look
    /// again at once.
    pub fn stir(&self, queue: &str) {
        self.none.lock().expect("not poisoned").remove(queue);
        self.nothing_for
            .lock()
            .expect("not poisoned")
            .retain(|(q, _), _| q != queue);
    }
}

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

fn int(v: u32) -> i32 {
    i32::try_from(v).unwrap_or(i32::MAX)
}

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
    let tasks = query::get_many(e, &ids).await?;
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

fn push_json(sql: &mut Sql, v: Option<Value>) {
    match v {
        Some(v) => {
            sql.bind(Arg::Json(v));
        }
        None => {
            sql.push("NULL");
        }
    }
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

/// The columns of `tasktable_runs` that [`run_from_row`] reads.
pub const RUN_COLUMNS: &str = "r.task_id, r.run, r.worker_id, r.worker_host, r.state, \
    r.lease_token, r.lease_credential, r.lease_expires_at, r.deadline_at, r.checkpoint, \
    r.progress, r.result, r.error, r.resumed_from, r.started_at, r.finished_at";

/// A run, and its lease's credential (which [`Run`] never shows).
fn run_from_row(row: &impl Cells) -> StoreResult<(Run, Option<tasktable_core::LeaseCredential>)> {
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
async fn get<E: Exec>(
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

/// The task as the worker of one of its runs sees it: the run's lease, worker, times,
/// checkpoint and number.
fn as_claimed(
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
fn push_fence(sql: &mut Sql, lease: &Lease, run: u32) {
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

/// What ending a run did: whether it applied, and the queue whose workers should look
/// again (a slot of a task that wants more runs came free).
#[derive(Debug, Default)]
pub struct Ended {
    pub applied: bool,
    pub wake: Option<String>,
}

/// Ends one run under its lease, inside the caller's write transaction: locks the task,
/// checks the run's fence (and, for the rescuer, that its lease or deadline passed),
/// records the attempt, and moves the task as core's [`Runs::after_run`] says.
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
    let tasks: HashMap<TaskId, Task> = query::get_many(e, &ids)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_store_remembers_empty_queues_and_idle_workers_until_stirred() {
        let open = OpenRuns::default();
        assert!(open.due("q", "a", false));
        open.found_nothing_for("q", "a");
        assert!(!open.due("q", "a", false));
        assert!(open.due("q", "b", false), "another worker still looks");
        assert!(open.due("q", "a", true), "a pinned claim always looks");
        open.found_none("q");
        assert!(!open.due("q", "b", false));
        assert!(open.due("other", "b", false));
        open.stir("q");
        assert!(open.due("q", "a", false) && open.due("q", "b", false));
    }
}
