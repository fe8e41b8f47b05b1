//! Operators' changes. The rows to change are locked (`FOR UPDATE`) and changed inside
//! one transaction, so no worker write slips in between: a worker's fenced finish either
//! commits first (and the row is seen in its new state) or waits and then finds its lease
//! gone.
//!
//! One task is locked whatever its state, so a wrong state can be reported. A filter is
//! changed one chunk at a time (`tasktable_store::bulk`), each chunk a transaction of its
//! own whose `SELECT ... FOR UPDATE` of the chunk's ids carries the filter and the
//! applicable states in its `WHERE` clause: PostgreSQL evaluates the clause on the row as
//! the statement's snapshot sees it and only then locks, so a row in another state is
//! never locked and never waited for. A row that matches but is locked (a worker's finish
//! in flight) is waited for, then the clause is evaluated again on its newest version,
//! which drops the row if the finish moved it out.

use crate::query::push_filter;
use crate::row::state;
use crate::{db, WAKE_CHANNEL};
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::{PgConnection, PgPool, Postgres, QueryBuilder, Row};
use tasktable_core::{TaskId, TaskState};
use tasktable_store::bulk::changeable;
use tasktable_store::*;

/// A change to one task: an error when it is missing or in a state the change may not
/// start from. Returns how many rows changed, and the queues to wake (empty unless the
/// change may make tasks due).
pub async fn one(
    pool: &PgPool,
    id: TaskId,
    change: &Change,
    now: Option<DateTime<Utc>>,
) -> StoreResult<(u64, Vec<String>)> {
    let mut tx = pool.begin().await.map_err(db)?;
    let now = clock(&mut tx, now).await?;
    let rows = sqlx::query("SELECT id, state FROM tasktable_tasks WHERE id = $1 FOR UPDATE")
        .bind(id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let found = read(&rows)?;
    let out = write(&mut tx, &Target::Id(id), &found, change, now).await?;
    tx.commit().await.map_err(db)?;
    Ok(out)
}

/// The ids a filter matches, read without locks.
pub async fn ids_matching(pool: &PgPool, filter: &TaskFilter) -> StoreResult<Vec<TaskId>> {
    let mut select = QueryBuilder::<Postgres>::new("SELECT id FROM tasktable_tasks WHERE TRUE");
    push_filter(&mut select, filter);
    select.push(" ORDER BY id");
    select
        .build_query_scalar()
        .fetch_all(pool)
        .await
        .map_err(db)
}

/// One chunk of a change to a filter (see [`ChunkedUpdate::task_update_chunk`]): how
/// many rows changed, and the queues to wake.
pub async fn chunk(pool: &PgPool, p: &UpdateChunkParams<'_>) -> StoreResult<(u64, Vec<String>)> {
    let Some(filter) = changeable(p.filter, p.change.operation()) else {
        return Ok((0, Vec::new()));
    };
    if p.ids.is_empty() {
        return Ok((0, Vec::new()));
    }
    let mut tx = pool.begin().await.map_err(db)?;
    let now = clock(&mut tx, p.now).await?;
    // Id order: two changes over overlapping rows lock them in the same order, so they
    // cannot deadlock each other.
    let mut select =
        QueryBuilder::<Postgres>::new("SELECT id, state FROM tasktable_tasks WHERE id = ANY(");
    select.push_bind(p.ids).push(")");
    push_filter(&mut select, &filter);
    select.push(" ORDER BY id FOR UPDATE");
    let rows = select.build().fetch_all(&mut *tx).await.map_err(db)?;
    let found = read(&rows)?;
    let out = write(&mut tx, &Target::Filter(filter), &found, p.change, now).await?;
    tx.commit().await.map_err(db)?;
    Ok(out)
}

/// One clock for the whole transaction.
async fn clock(conn: &mut PgConnection, now: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
    sqlx::query_scalar("SELECT coalesce($1::timestamptz, now())")
        .bind(now)
        .fetch_one(conn)
        .await
        .map_err(db)
}

fn read(rows: &[PgRow]) -> StoreResult<Vec<(TaskId, TaskState)>> {
    rows.iter()
        .map(|r| {
            Ok((
                r.try_get("id").map_err(db)?,
                state(r.try_get("state").map_err(db)?)?,
            ))
        })
        .collect()
}

/// Applies the state machine to the locked rows and changes those it allows, writing the
/// history of the running attempts a cancel ends. Returns how many rows changed and the
/// queues to wake, whose notifications go out when the transaction commits.
async fn write(
    conn: &mut PgConnection,
    target: &Target,
    found: &[(TaskId, TaskState)],
    change: &Change,
    now: DateTime<Utc>,
) -> StoreResult<(u64, Vec<String>)> {
    let UpdateSelection { ids, running } = select_for_update(target, change.operation(), found)?;
    if ids.is_empty() {
        return Ok((0, Vec::new()));
    }

    if matches!(change, Change::Cancel) && !running.is_empty() {
        // The running attempt ends here; its worker learns at its next fenced write.
        sqlx::query(
            "INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error, \
                                             queue, kind, due_at, task_state) \
             SELECT id, attempt, worker_id, worker_host, started_at, $1, 'cancelled', 'cancelled by operator', \
                    queue, kind, run_at, 'cancelled' \
             FROM tasktable_tasks WHERE id = ANY($2) ORDER BY id",
        )
        .bind(now)
        .bind(&running)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }

    // SET expressions read the row as it was before this UPDATE, so their order is free.
    let mut qb = QueryBuilder::<Postgres>::new("UPDATE tasktable_tasks SET updated_at = ");
    qb.push_bind(now);
    match change {
        Change::Cancel => {
            qb.push(", state = 'cancelled', lease_expires_at = NULL, deadline_at = NULL, finished_at = ")
                .push_bind(now);
        }
        Change::Retry => {
            qb.push(
                ", attempt = CASE WHEN state IN ('failed', 'cancelled') THEN 0 ELSE attempt END",
            )
            .push(", state = 'pending', finished_at = NULL, run_at = ")
            .push_bind(now);
        }
        Change::Reschedule { run_at } => {
            qb.push(", run_at = ").push_bind(*run_at);
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
    qb.push(" WHERE id = ANY(")
        .push_bind(ids)
        .push(") RETURNING queue");
    let queues: Vec<String> = qb
        .build_query_scalar()
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let changed = queues.len() as u64;
    let mut wake = Vec::new();
    if change.may_make_due() {
        wake = queues;
        wake.sort();
        wake.dedup();
        // Delivered when the transaction commits, and only if it does.
        sqlx::query("SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q")
            .bind(WAKE_CHANNEL)
            .bind(&wake)
            .execute(&mut *conn)
            .await
            .map_err(db)?;
    }
    Ok((changed, wake))
}
