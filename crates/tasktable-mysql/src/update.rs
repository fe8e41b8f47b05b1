//! Operators' changes. The rows to change are locked (`FOR UPDATE`) and changed inside
//! one transaction, so no worker write slips in between: a worker's fenced finish either
//! commits first (and the row is seen in its new state) or waits and then finds its lease
//! gone.
//!
//! One task is locked whatever its state, so a wrong state can be reported. A filter is
//! changed one chunk at a time (`tasktable_store::bulk`), each chunk a transaction of its
//! own. InnoDB locks every row a locking read scans before it evaluates the rest of the
//! `WHERE` clause (under READ COMMITTED it lets go of the rows that fail it, but only
//! after it got them, waiting for their holders), so a locking read that walked the
//! filter would wait for rows in states the change does not apply to. The ids come from
//! a consistent read instead, which locks nothing, and each chunk locks exactly its ids by
//! primary key, the applicable states and the filter checked again on each row's newest
//! version; a row that left them since the ids were read is waited for once and dropped.

use crate::clock;
use crate::db;
use crate::query::{marks, push_filter, MAX_IN_LIST};
use crate::row::{state, text};
use chrono::{DateTime, Utc};
use sqlx::mysql::MySqlRow;
use sqlx::{MySql, MySqlConnection, MySqlPool, QueryBuilder, Row};
use tasktable_core::{TaskId, TaskState};
use tasktable_store::bulk::changeable;
use tasktable_store::*;

/// A change to one task: an error when it is missing or in a state the change may not
/// start from. Returns how many rows changed, and the queues to wake (empty unless the
/// change may make tasks due).
pub async fn one(
    conn: &mut MySqlConnection,
    id: TaskId,
    change: &Change,
    now: Option<DateTime<Utc>>,
) -> StoreResult<(u64, Vec<String>)> {
    let now = clock::now(conn, now).await?;
    let rows = sqlx::query("SELECT id, state, queue FROM tasktable_tasks WHERE id = ? FOR UPDATE")
        .bind(id)
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let found = read(&rows)?;
    write(conn, &Target::Id(id), &found, change, now).await
}

/// The ids a filter matches: a consistent read, which takes no locks.
pub async fn ids_matching(pool: &MySqlPool, filter: &TaskFilter) -> StoreResult<Vec<TaskId>> {
    let mut select = QueryBuilder::<MySql>::new("SELECT id FROM tasktable_tasks WHERE TRUE");
    push_filter(&mut select, filter);
    select.push(" ORDER BY id");
    select
        .build_query_scalar()
        .fetch_all(pool)
        .await
        .map_err(db)
}

/// One chunk of a change to a filter (see [`ChunkedUpdate::task_update_chunk`]): how
/// many rows changed, and the queues to wake. Chunks of more than [`MAX_IN_LIST`] ids are
/// refused: each id list must be one statement.
pub async fn chunk(
    conn: &mut MySqlConnection,
    p: &UpdateChunkParams<'_>,
) -> StoreResult<(u64, Vec<String>)> {
    let Some(filter) = changeable(p.filter, p.change.operation()) else {
        return Ok((0, Vec::new()));
    };
    if p.ids.is_empty() {
        return Ok((0, Vec::new()));
    }
    if p.ids.len() > MAX_IN_LIST {
        return Err(StoreError::InvalidInput(format!(
            "a chunk of a bulk change holds at most {MAX_IN_LIST} tasks on MySQL, not {}",
            p.ids.len()
        )));
    }
    let now = clock::now(conn, p.now).await?;
    // The primary key, forced: any other index would scan (and lock) rows beyond these.
    // Id order, so two changes over overlapping rows cannot deadlock each other.
    let mut lock = QueryBuilder::<MySql>::new(
        "SELECT id, state, queue FROM tasktable_tasks FORCE INDEX (PRIMARY) WHERE id IN (",
    );
    let mut sep = lock.separated(", ");
    for id in p.ids {
        sep.push_bind(*id);
    }
    lock.push(")");
    push_filter(&mut lock, &filter);
    lock.push(" ORDER BY id FOR UPDATE");
    let rows = lock.build().fetch_all(&mut *conn).await.map_err(db)?;
    let found = read(&rows)?;
    write(conn, &Target::Filter(filter), &found, p.change, now).await
}

type Found = (TaskId, TaskState, String);

fn read(rows: &[MySqlRow]) -> StoreResult<Vec<Found>> {
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("id").map_err(db)?,
                state(text(r, "state")?)?,
                text(r, "queue")?,
            ))
        })
        .collect()
}

/// Applies the state machine to the locked rows and changes those it allows, writing the
/// history of the running attempts a cancel ends. Returns how many rows changed and the
/// queues to wake.
async fn write(
    conn: &mut MySqlConnection,
    target: &Target,
    found: &[Found],
    change: &Change,
    now: DateTime<Utc>,
) -> StoreResult<(u64, Vec<String>)> {
    let pairs: Vec<(TaskId, TaskState)> = found.iter().map(|r| (r.0, r.1)).collect();
    let UpdateSelection { ids, running } = select_for_update(target, change.operation(), &pairs)?;
    if ids.is_empty() {
        return Ok((0, Vec::new()));
    }

    if matches!(change, Change::Cancel) {
        // The running attempt ends here; its worker learns at its next fenced write.
        for chunk in running.chunks(MAX_IN_LIST) {
            let sql = format!(
                "INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error, \
                                                 queue, kind, due_at, task_state) \
                 SELECT id, attempt, worker_id, worker_host, started_at, ?, 'cancelled', 'cancelled by operator', \
                        queue, kind, run_at, 'cancelled' \
                 FROM tasktable_tasks WHERE id IN ({}) ORDER BY id",
                marks(chunk.len())
            );
            let mut q = sqlx::query(&sql).bind(clock::at(now));
            for id in chunk {
                q = q.bind(id);
            }
            q.execute(&mut *conn).await.map_err(db)?;
        }
    }

    for chunk in ids.chunks(MAX_IN_LIST) {
        let mut qb = QueryBuilder::<MySql>::new("UPDATE tasktable_tasks SET updated_at = ");
        qb.push_bind(clock::at(now));
        push_change(&mut qb, change, now);
        qb.push(" WHERE id IN (");
        let mut sep = qb.separated(", ");
        for id in chunk {
            sep.push_bind(*id);
        }
        qb.push(")");
        qb.build().execute(&mut *conn).await.map_err(db)?;
    }

    // Every row chosen was locked and is changed; this does not rely on the affected row
    // count, which does not count rows a change left as they were.
    let changed = ids.len() as u64;
    let mut wake = Vec::new();
    if change.may_make_due() {
        wake = found
            .iter()
            .filter(|r| ids.contains(&r.0))
            .map(|r| r.2.clone())
            .collect();
        wake.sort();
        wake.dedup();
    }
    Ok((changed, wake))
}

/// Appends `, column = ...` for a change. MySQL applies these assignments left to right,
/// each seeing the ones before it (PostgreSQL evaluates all against the old row), so an
/// assignment that reads a column comes before the one that changes that column.
fn push_change(qb: &mut QueryBuilder<'_, MySql>, change: &Change, now: DateTime<Utc>) {
    match change {
        Change::Cancel => {
            qb.push(", state = 'cancelled', lease_expires_at = NULL, deadline_at = NULL, finished_at = ")
                .push_bind(clock::at(now));
        }
        Change::Retry => {
            // `attempt` reads the old state, so it must come before `state`.
            qb.push(
                ", attempt = CASE WHEN state IN ('failed', 'cancelled') THEN 0 ELSE attempt END",
            )
            .push(", state = 'pending', finished_at = NULL, run_at = ")
            .push_bind(clock::at(now));
        }
        Change::Reschedule { run_at } => {
            qb.push(", run_at = ")
                .push_bind(clock::at(clock::truncate(*run_at)));
        }
        Change::SetPriority { priority } => {
            qb.push(", priority = ").push_bind(*priority);
        }
        Change::SetMaxAttempts { max_attempts } => {
            qb.push(", max_attempts = ").push_bind(*max_attempts as i32);
        }
        Change::EditPayload { payload } => {
            qb.push(", payload = ").push_bind(payload.clone());
        }
        Change::Hold => {
            qb.push(", state = 'held'");
        }
        Change::Release => {
            qb.push(", state = 'pending'");
        }
    }
}
