//! Operators' changes, on rows the caller's transaction has chosen and (PostgreSQL,
//! MySQL) locked. What each change does to a row comes from core
//! ([`Change::effect`]) as values; this module writes them, and the history row of a
//! running attempt that a cancel ends. The transaction, and waking workers once it
//! commits, are the backend's.
//!
//! How a chunk of a bulk change locks, per database: PostgreSQL evaluates the `WHERE`
//! clause (the filter and the applicable states) on the row as the statement's snapshot
//! sees it and only then locks, so a row in another state is never locked or waited for;
//! a matching row a worker holds (a finish in flight) is waited for, then the clause is
//! evaluated again on its newest version, which drops the row if the finish moved it out.
//! InnoDB locks every row a locking read scans before it evaluates the rest of the
//! clause (under READ COMMITTED it lets go of the rows that fail it, but only after it got
//! them), so the chunk reads by primary key only (`FORCE INDEX (PRIMARY)`), the ids having
//! come from a consistent read that locks nothing; a row that left the states since is
//! waited for once and dropped. SQLite's write transaction holds the whole database, and
//! the clause only re-checks each row (`NOT INDEXED`: rowid lookups, never a scan of an
//! index on state or queue).

use crate::exec::required;
use crate::query::push_filter;
use crate::row::state;
use crate::row::TASK_COLUMNS;
use crate::{Cells, Dialect, Exec, Sql};
use chrono::{DateTime, Utc};
use std::collections::HashMap;
use tasktable_core::change::Runner;
use tasktable_core::{Actor, ChangeEffect, Task, TaskId, TaskState};
use tasktable_store::bulk::changeable;
use tasktable_store::event::NewEvent;
use tasktable_store::{
    select_for_update, Change, Checked, StoreError, StoreResult, Target, TaskFilter,
    UpdateChunkParams, UpdateParams,
};

pub use crate::backend::Changed;

/// A row as the change found it.
#[derive(Debug, Clone)]
struct Found {
    id: TaskId,
    state: TaskState,
    queue: String,
    kind: String,
    /// Who holds it, while it runs.
    worker_id: Option<String>,
    /// A multi-run task: its runs, not its row, hold the leases.
    multi_run: bool,
}

const FOUND_COLUMNS: &str = "id, state, queue, kind, worker_id, copies";

/// A change to one task: an error when it is missing or in a state the change may not
/// start from. Reads (and locks, where rows lock) the task first.
pub async fn one<E: Exec>(
    e: &mut E,
    id: TaskId,
    p: &Checked<UpdateParams>,
) -> StoreResult<Changed> {
    let now = e.now(p.now).await?;
    apply_one(e, id, &p.change, &p.actor, now).await
}

/// [`one`] for a change whose input core has checked already (a batch's action).
pub(crate) async fn apply_one<E: Exec>(
    e: &mut E,
    id: TaskId,
    change: &Change,
    actor: &Actor,
    now: DateTime<Utc>,
) -> StoreResult<Changed> {
    let mut select = Sql::new(
        e.dialect(),
        format!("SELECT {FOUND_COLUMNS} FROM tasktable_tasks WHERE id = "),
    );
    select.bind(id).push(e.dialect().lock_rows());
    let found = read(&e.fetch(select).await?)?;
    write(e, &Target::Id(id), &found, change, actor, now, None).await
}

/// One chunk of a change to a filter (see [`tasktable_store::bulk`]): locks, by primary
/// key and in id order, those of the chunk's ids that still match the filter in a state
/// the change may start from, and changes them. Id order: two changes over overlapping
/// rows lock them in the same order, so they cannot deadlock each other.
pub async fn chunk<E: Exec>(
    e: &mut E,
    p: &Checked<&UpdateChunkParams<'_>>,
) -> StoreResult<Changed> {
    let Some(filter) = changeable(p.filter, p.change.operation()) else {
        return Ok(Changed::default());
    };
    if p.ids.is_empty() {
        return Ok(Changed::default());
    }
    if e.dialect() == Dialect::MySql && p.ids.len() > Sql::MAX_IN_LIST {
        return Err(StoreError::InvalidInput(format!(
            "a chunk of a bulk change holds at most {} tasks on MySQL, not {}",
            Sql::MAX_IN_LIST,
            p.ids.len()
        )));
    }
    let now = e.now(p.now).await?;
    let d = e.dialect();
    let mut select = Sql::new(
        d,
        format!(
            "SELECT {FOUND_COLUMNS} FROM {} WHERE ",
            d.tasks_by_primary_key()
        ),
    );
    select.push_in_ids("id", p.ids);
    push_filter(&mut select, &filter);
    select.push(" ORDER BY id").push(d.lock_rows());
    let found = read(&e.fetch(select).await?)?;
    let asked = Asked {
        filter: p.filter,
        action: p.action,
    };
    write(
        e,
        &Target::Filter(filter),
        &found,
        p.change,
        p.actor,
        now,
        Some(asked),
    )
    .await
}

/// What a chunk of a change to many tasks was asked: the filter as given, and the
/// operator action the chunk is part of.
#[derive(Clone, Copy)]
struct Asked<'a> {
    filter: &'a TaskFilter,
    action: &'a str,
}

fn read(rows: &[impl Cells]) -> StoreResult<Vec<Found>> {
    rows.iter()
        .map(|r| {
            Ok(Found {
                id: required(r.int("id"), "id")?,
                state: state(&required(r.text("state"), "state")?)?,
                queue: required(r.text("queue"), "queue")?,
                kind: required(r.text("kind"), "kind")?,
                worker_id: r.text("worker_id")?,
                multi_run: r.int("copies")?.is_some(),
            })
        })
        .collect()
}

/// Applies the state machine to the rows found and writes each one's effect; rows with
/// the same effect (all of them, except a retry's of finished and waiting tasks) are
/// written by one statement. Each task changed gets its event, by `actor`.
async fn write<E: Exec>(
    e: &mut E,
    target: &Target,
    found: &[Found],
    change: &Change,
    actor: &Actor,
    now: DateTime<Utc>,
    asked: Option<Asked<'_>>,
) -> StoreResult<Changed> {
    let pairs: Vec<(TaskId, TaskState)> = found.iter().map(|r| (r.id, r.state)).collect();
    let chosen = select_for_update(target, change.operation(), &pairs)?;
    let runners = runners(e, change, found).await?;
    let mut groups: Vec<((ChangeEffect, bool), Vec<TaskId>)> = Vec::new();
    let mut moved: Vec<(&Found, Option<TaskState>)> = Vec::new();
    for row in found.iter().filter(|r| chosen.ids.contains(&r.id)) {
        let effect = if row.multi_run {
            // A new target applies to runs still to start; those going keep going.
            change.effect(row.state, now)
        } else {
            let runner = row.worker_id.as_deref().map(|id| Runner {
                id,
                groups: runners.get(id).map(Vec::as_slice).unwrap_or_default(),
            });
            change.effect_on(row.state, runner, now)
        }
        .expect("select_for_update keeps only rows the change applies to");
        moved.push((row, effect.state.filter(|s| *s != row.state)));
        let key = (effect, row.multi_run);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, ids)) => ids.push(row.id),
            None => groups.push((key, vec![row.id])),
        }
    }
    let events = events(e, asked.map(|a| a.action), change, &moved).await?;
    crate::events::record(e, now, actor, &events).await?;
    if let Some(asked) = asked {
        // The tasks it changed: an edit that set what already was recorded nothing.
        record_action(e, now, actor, asked, change, events.len() as u64).await?;
    }
    for ((effect, multi_run), ids) in &groups {
        for ids in ids.chunks(Sql::MAX_IN_LIST) {
            match (effect.state, *multi_run) {
                // A multi-run task that leaves `running` ends the runs still going, each
                // recorded in the history; their workers learn at their next fenced write.
                (Some(to), true) if to != TaskState::Running => {
                    crate::runs::end_running(e, ids, now, to).await?;
                }
                (Some(_), false) if effect.ends_attempt.is_some() => {
                    // The running attempt ends here; its worker learns at its next fenced
                    // write.
                    e.execute(history(e.dialect(), ids, now, effect)).await?;
                }
                _ => {}
            }
            e.execute(assign(e.dialect(), effect, *multi_run, ids, now))
                .await?;
        }
    }
    let mut wake = Vec::new();
    if change.may_make_due() {
        wake = found
            .iter()
            .filter(|r| chosen.ids.contains(&r.id))
            .map(|r| r.queue.clone())
            .collect();
        wake.sort();
        wake.dedup();
    }
    // Every row chosen was locked and is changed; this does not rely on affected-row
    // counts, which on MySQL leave out rows a change left as they were.
    Ok(Changed {
        count: chosen.ids.len() as u64,
        wake,
    })
}

/// The event of each task changed: what an edit changed (old and new, read before the
/// change is written) and the state it left and entered; a bulk change's are marked with
/// its action's key (the action's own event holds the filter).
async fn events<E: Exec>(
    e: &mut E,
    action: Option<&str>,
    change: &Change,
    moved: &[(&Found, Option<TaskState>)],
) -> StoreResult<Vec<NewEvent>> {
    let before: HashMap<TaskId, Task> = if change.field().is_some() && !moved.is_empty() {
        let ids: Vec<TaskId> = moved.iter().map(|(r, _)| r.id).collect();
        let mut tasks = HashMap::new();
        for ids in ids.chunks(Sql::MAX_IN_LIST) {
            let mut sql = Sql::new(
                e.dialect(),
                format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE "),
            );
            sql.push_in_ids("id", ids);
            for row in e.fetch(sql).await? {
                let task = crate::row::task_from_row(&row)?;
                tasks.insert(task.id, task);
            }
        }
        tasks
    } else {
        HashMap::new()
    };
    Ok(moved
        .iter()
        .filter_map(|(row, to)| {
            let mut detail = serde_json::Map::new();
            if let Some((field, edit)) = before.get(&row.id).and_then(|t| change.edit_detail(t)) {
                let task = &before[&row.id];
                if change.sets_what_is(task) && to.is_none() {
                    // Set to what it was: nothing changed, nothing to record.
                    return None;
                }
                detail.insert(field.into(), edit);
            }
            if let Some(to) = to {
                detail.insert(
                    "state".into(),
                    serde_json::json!({"old": row.state.as_str(), "new": to.as_str()}),
                );
            }
            Some(NewEvent {
                task_id: Some(row.id),
                queue: Some(row.queue.clone()),
                kind: Some(row.kind.clone()),
                detail: if detail.is_empty() {
                    serde_json::Value::Null
                } else {
                    detail.into()
                },
                action: action.map(str::to_owned),
                ..NewEvent::new(change.event())
            })
        })
        .collect())
}

/// Adds `changed` tasks to the action's own event, found by its key, writing it when this
/// is the action's first chunk to change any: what was asked (the filter as given, and
/// what an edit sets), with the filter's queue and kind. A key whose event another actor
/// or another change wrote is refused (the chunk, and so the step, changes nothing).
async fn record_action<E: Exec>(
    e: &mut E,
    now: DateTime<Utc>,
    actor: &Actor,
    asked: Asked<'_>,
    change: &Change,
    changed: u64,
) -> StoreResult<()> {
    if changed == 0 {
        return Ok(());
    }
    let count = i64::try_from(changed).unwrap_or(i64::MAX);
    let mut find = Sql::new(
        e.dialect(),
        "SELECT id, event, actor_kind, actor FROM tasktable_events WHERE action_key = ",
    );
    find.bind(asked.action).push(" AND task_id IS NULL");
    if let Some(row) = e.fetch(find).await?.first() {
        let id = required(row.int("id"), "id")?;
        let same = required(row.text("event"), "event")? == change.event().as_str()
            && required(row.text("actor_kind"), "actor_kind")? == actor.kind.as_str()
            && required(row.text("actor"), "actor")? == actor.name;
        if !same {
            return Err(StoreError::InvalidInput(format!(
                "action {:?} is another change's (another operation or another actor): \
                 a step names the action its own first step began",
                asked.action
            )));
        }
        let mut add = Sql::new(
            e.dialect(),
            "UPDATE tasktable_events SET action_tasks = action_tasks + ",
        );
        add.bind(count).push(" WHERE id = ").bind(id);
        return e.execute(add).await;
    }
    let mut detail = serde_json::Map::new();
    detail.insert(
        "filter".into(),
        serde_json::to_value(asked.filter).unwrap_or_default(),
    );
    if let Some((field, new)) = change.new_detail() {
        detail.insert(field.into(), new);
    }
    let event = NewEvent {
        queue: asked.filter.queue.clone(),
        kind: asked.filter.kind.clone(),
        detail: detail.into(),
        action: Some(asked.action.to_owned()),
        tasks: Some(changed),
        ..NewEvent::new(change.event())
    };
    crate::events::record_one(e, now, actor, event).await
}

/// The registry's groups of the workers running the rows found, when the change is a new
/// target (the only change that asks who runs a task).
async fn runners<E: Exec>(
    e: &mut E,
    change: &Change,
    found: &[Found],
) -> StoreResult<HashMap<String, Vec<String>>> {
    if !matches!(change, Change::SetTarget { .. }) {
        return Ok(HashMap::new());
    }
    let mut ids: Vec<&str> = found
        .iter()
        .filter(|r| r.state == TaskState::Running)
        .filter_map(|r| r.worker_id.as_deref())
        .collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return Ok(HashMap::new());
    }
    crate::workers::groups_of(e, &ids).await
}

/// The history row of each of `ids`' running attempts, ended by an operator; it names
/// the state the change leaves the task in.
fn history(d: Dialect, ids: &[TaskId], now: DateTime<Utc>, effect: &ChangeEffect) -> Sql {
    let (outcome, error) = effect.ends_attempt.expect("an effect that ends an attempt");
    let left_in = effect.state.expect("an attempt ends only with a new state");
    let mut sql = Sql::new(
        d,
        "INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, \
             finished_at, outcome, error, queue, kind, due_at, task_state) \
         SELECT id, attempt, worker_id, worker_host, started_at, ",
    );
    sql.bind(now)
        .push(", ")
        .bind(outcome.as_str())
        .push(", ")
        .bind(error)
        .push(", queue, kind, run_at, ")
        .bind(left_in.as_str())
        .push(" FROM tasktable_tasks WHERE ")
        .push_in_ids("id", ids)
        .push(" ORDER BY id");
    sql
}

/// `UPDATE ... SET` the effect's columns on `ids`. Multi-run tasks count their runs with
/// `attempt` (the runs' numbers), so it never goes back: a fresh start clears their failed
/// runs instead (their successes stand), any runs still going are over, and a new target
/// is their own (`run_target`), `target` staying the name no worker answers to.
fn assign(
    d: Dialect,
    effect: &ChangeEffect,
    multi_run: bool,
    ids: &[TaskId],
    now: DateTime<Utc>,
) -> Sql {
    let mut sql = Sql::new(d, "UPDATE tasktable_tasks SET updated_at = ");
    sql.bind(now);
    if let Some(s) = effect.state {
        sql.push(", state = ").bind(s.as_str());
        if multi_run && s != TaskState::Running {
            sql.push(", runs_active = 0");
        }
    }
    if effect.reset_attempts {
        sql.push(if multi_run {
            ", runs_failed = 0"
        } else {
            ", attempt = 0"
        });
    }
    if effect.give_back_attempt && !multi_run {
        sql.push(", attempt = attempt - 1");
    }
    if let (Some(t), true) = (&effect.target, multi_run) {
        sql.push(", run_target = ")
            .bind(crate::Arg::Text(t.to_column()));
    } else if let Some(t) = &effect.target {
        // The operator's target replaces the task's own, and ends any wait for a worker.
        sql.push(", target = ")
            .bind(crate::Arg::Text(t.to_column()))
            .push(", affinity_until = NULL");
    } else if effect.state.is_some() || effect.run_at.is_some() {
        // A task an operator moves stops waiting for its previous worker; its own target
        // applies again (`target` is read before `affinity_until` is cleared, which MySQL,
        // applying SET items left to right, needs).
        sql.push(
            ", target = CASE WHEN affinity_until IS NULL THEN target ELSE affinity_target END, \
             affinity_until = NULL",
        );
    }
    if let Some(t) = effect.run_at {
        sql.push(", run_at = ").bind(t);
    }
    if let Some(t) = effect.finished_at {
        sql.push(", finished_at = ").bind(crate::Arg::Time(t));
    }
    if effect.end_lease {
        sql.push(", lease_expires_at = NULL, deadline_at = NULL");
    }
    if let Some(p) = effect.priority {
        sql.push(", priority = ").bind(p);
    }
    if let Some(m) = effect.max_attempts {
        sql.push(", max_attempts = ")
            .bind(i32::try_from(m).unwrap_or(i32::MAX));
    }
    if let Some(p) = &effect.payload {
        sql.push(", payload = ").bind(crate::Arg::Json(p.clone()));
    }
    sql.push(" WHERE ").push_in_ids("id", ids);
    sql
}
