//! Operators' changes, single and bulk. The rows to change are locked (`FOR UPDATE`) and
//! changed inside one transaction, so no worker write slips in between: a worker's fenced
//! finish either commits first (and the row is seen in its new state) or waits and then
//! finds its lease gone.

use crate::query::push_filter;
use crate::row::state;
use crate::{db, WAKE_CHANNEL};
use chrono::{DateTime, Utc};
use sqlx::{PgPool, Postgres, QueryBuilder, Row};
use tasktable_core::{TaskId, TaskState};
use tasktable_store::*;

/// Returns how many rows changed, and the queues to wake (empty unless the change may
/// make tasks due).
pub async fn apply(pool: &PgPool, p: UpdateParams) -> StoreResult<(u64, Vec<String>)> {
    let op = p.change.operation();
    let mut tx = pool.begin().await.map_err(db)?;
    // One clock for the whole change.
    let now: DateTime<Utc> = sqlx::query_scalar("SELECT coalesce($1::timestamptz, now())")
        .bind(p.now)
        .fetch_one(&mut *tx)
        .await
        .map_err(db)?;

    // Locks in id order, so two bulk changes over overlapping rows cannot deadlock.
    let mut select = QueryBuilder::<Postgres>::new("SELECT id, state FROM tasktable_tasks WHERE ");
    match &p.target {
        Target::Id(id) => {
            select.push("id = ").push_bind(*id);
        }
        Target::Filter(f) => {
            select.push("TRUE");
            push_filter(&mut select, f);
        }
    }
    select.push(" ORDER BY id FOR UPDATE");
    let rows = select.build().fetch_all(&mut *tx).await.map_err(db)?;
    let rows = rows
        .iter()
        .map(|r| {
            Ok((
                r.try_get("id").map_err(db)?,
                state(r.try_get("state").map_err(db)?)?,
            ))
        })
        .collect::<StoreResult<Vec<(TaskId, TaskState)>>>()?;
    let UpdateSelection { ids, running } = select_for_update(&p.target, op, &rows)?;
    if ids.is_empty() {
        return Ok((0, Vec::new()));
    }

    if matches!(p.change, Change::Cancel) && !running.is_empty() {
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
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }

    // SET expressions read the row as it was before this UPDATE, so their order is free.
    let mut qb = QueryBuilder::<Postgres>::new("UPDATE tasktable_tasks SET updated_at = ");
    qb.push_bind(now);
    match &p.change {
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
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let changed = queues.len() as u64;
    let mut wake = Vec::new();
    if p.change.may_make_due() {
        wake = queues;
        wake.sort();
        wake.dedup();
        // Delivered when the transaction commits, and only if it does.
        sqlx::query("SELECT pg_notify($1, q) FROM unnest($2::text[]) AS q")
            .bind(WAKE_CHANNEL)
            .bind(&wake)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
    }
    tx.commit().await.map_err(db)?;
    Ok((changed, wake))
}
