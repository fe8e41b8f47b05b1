//! Operators' changes, single and bulk. The rows to change are locked (`FOR UPDATE`) and
//! changed inside one transaction, so no worker write slips in between: a worker's fenced
//! finish either commits first (and the row is seen in its new state) or waits and then
//! finds its lease gone.
//!
//! InnoDB takes row locks while it scans, in the order of the index it scans, not in
//! the order of ORDER BY (PostgreSQL locks after sorting, in id order). A filter read
//! through a secondary index can therefore lock rows in an order a concurrent claim or
//! another bulk change does not share, and InnoDB may end one of them with a deadlock;
//! the store then runs the whole change again (see `retry`).

use crate::clock;
use crate::db;
use crate::query::{marks, push_filter, MAX_IN_LIST};
use crate::row::{state, text};
use sqlx::{MySql, MySqlConnection, QueryBuilder, Row};
use std::collections::HashMap;
use tasktable_core::{TaskId, TaskState};
use tasktable_store::*;

/// Returns how many rows changed, and the queues to wake (empty unless the change may
/// make tasks due).
pub async fn apply(
    conn: &mut MySqlConnection,
    p: &UpdateParams,
) -> StoreResult<(u64, Vec<String>)> {
    let op = p.change.operation();
    // One clock for the whole change.
    let now = clock::now(conn, p.now).await?;

    let mut select =
        QueryBuilder::<MySql>::new("SELECT id, state, queue FROM tasktable_tasks WHERE ");
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
    let found = select.build().fetch_all(&mut *conn).await.map_err(db)?;
    let mut rows = Vec::with_capacity(found.len());
    let mut queue_of: HashMap<TaskId, String> = HashMap::with_capacity(found.len());
    for r in &found {
        let id: TaskId = r.try_get("id").map_err(db)?;
        let s: TaskState = state(text(r, "state")?)?;
        queue_of.insert(id, text(r, "queue")?);
        rows.push((id, s));
    }
    let UpdateSelection { ids, running } = select_for_update(&p.target, op, &rows)?;
    if ids.is_empty() {
        return Ok((0, Vec::new()));
    }

    if matches!(p.change, Change::Cancel) {
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
            let mut q = sqlx::query(&sql).bind(now);
            for id in chunk {
                q = q.bind(id);
            }
            q.execute(&mut *conn).await.map_err(db)?;
        }
    }

    for chunk in ids.chunks(MAX_IN_LIST) {
        let mut qb = QueryBuilder::<MySql>::new("UPDATE tasktable_tasks SET updated_at = ");
        qb.push_bind(now);
        push_change(&mut qb, &p.change, now);
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
    if p.change.may_make_due() {
        wake = ids.iter().filter_map(|id| queue_of.remove(id)).collect();
        wake.sort();
        wake.dedup();
    }
    Ok((changed, wake))
}

/// Appends `, column = ...` for a change. MySQL applies these assignments left to right,
/// each seeing the ones before it (PostgreSQL evaluates all against the old row), so an
/// assignment that reads a column comes before the one that changes that column.
fn push_change(
    qb: &mut QueryBuilder<'_, MySql>,
    change: &Change,
    now: chrono::DateTime<chrono::Utc>,
) {
    match change {
        Change::Cancel => {
            qb.push(", state = 'cancelled', lease_expires_at = NULL, deadline_at = NULL, finished_at = ")
                .push_bind(now);
        }
        Change::Retry => {
            // `attempt` reads the old state, so it must come before `state`.
            qb.push(
                ", attempt = CASE WHEN state IN ('failed', 'cancelled') THEN 0 ELSE attempt END",
            )
            .push(", state = 'pending', finished_at = NULL, run_at = ")
            .push_bind(now);
        }
        Change::Reschedule { run_at } => {
            qb.push(", run_at = ").push_bind(clock::truncate(*run_at));
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
