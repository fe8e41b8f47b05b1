//! Operators' changes. One task is chosen and changed inside one `BEGIN IMMEDIATE`
//! transaction, so no worker write slips in between. A filter is changed one chunk at a
//! time (`tasktable_store::bulk`), each chunk a `BEGIN IMMEDIATE` transaction of its own:
//! the writer connection goes back to the pool between chunks, and the pool hands it out
//! first come, first served, so a group of claims and finishes that queued behind one
//! chunk runs before the next.

use crate::query::push_filter;
use crate::time::to_text;
use crate::{db, now_or_db, SqliteStore};
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};
use tasktable_core::{TaskId, TaskState};
use tasktable_store::bulk::changeable;
use tasktable_store::*;

/// A change to one task: an error when it is missing or in a state the change may not
/// start from.
pub async fn one(
    store: &SqliteStore,
    id: TaskId,
    change: &Change,
    now: Option<DateTime<Utc>>,
) -> StoreResult<u64> {
    let mut tx = store.begin_write().await?;
    let now = now_or_db(&mut tx, now).await?;
    let rows = sqlx::query("SELECT id, state, queue FROM tasktable_tasks WHERE id = ?")
        .bind(id)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let found = read(&rows)?;
    let changed = write(&mut tx, &Target::Id(id), &found, change, now).await?;
    tx.commit().await.map_err(db)?;
    store.wake_changed(change, &found);
    Ok(changed)
}

/// The ids a filter matches, read on a reader connection, so the writer is not held while
/// the planner's index is read.
pub async fn ids_matching(store: &SqliteStore, filter: &TaskFilter) -> StoreResult<Vec<TaskId>> {
    let mut conn = store.reader.acquire().await.map_err(db)?;
    let mut select = QueryBuilder::<Sqlite>::new("SELECT id FROM tasktable_tasks WHERE 1 = 1");
    push_filter(&mut select, filter);
    select.push(" ORDER BY id");
    select
        .build_query_scalar()
        .fetch_all(&mut *conn)
        .await
        .map_err(db)
}

/// One chunk of a change to a filter (see [`ChunkedUpdate::task_update_chunk`]). SQLite
/// locks the whole database, so the applicable states in the `WHERE` clause only re-check
/// each row.
pub async fn chunk(store: &SqliteStore, p: &UpdateChunkParams<'_>) -> StoreResult<u64> {
    let Some(filter) = changeable(p.filter, p.change.operation()) else {
        return Ok(0);
    };
    if p.ids.is_empty() {
        return Ok(0);
    }
    let mut tx = store.begin_write().await?;
    let now = now_or_db(&mut tx, p.now).await?;
    // NOT INDEXED: rowid lookups of the listed ids, never a scan of an index on state or
    // queue, which the planner may prefer for the rest of the clause.
    let mut select = QueryBuilder::<Sqlite>::new(
        "SELECT id, state, queue FROM tasktable_tasks NOT INDEXED \
         WHERE id IN (SELECT value FROM json_each(",
    );
    select.push_bind(json(p.ids)?).push("))");
    push_filter(&mut select, &filter);
    select.push(" ORDER BY id");
    let rows = select.build().fetch_all(&mut *tx).await.map_err(db)?;
    let found = read(&rows)?;
    let changed = write(&mut tx, &Target::Filter(filter), &found, p.change, now).await?;
    tx.commit().await.map_err(db)?;
    store.wake_changed(p.change, &found);
    Ok(changed)
}

fn json(ids: &[TaskId]) -> StoreResult<String> {
    serde_json::to_string(ids).map_err(|e| StoreError::InvalidInput(e.to_string()))
}

type Found = (TaskId, TaskState, String);

fn read(rows: &[SqliteRow]) -> StoreResult<Vec<Found>> {
    rows.iter()
        .map(|r| {
            let state = r
                .try_get::<String, _>(1)
                .map_err(db)?
                .parse()
                .map_err(|e| StoreError::Database(Box::new(e)))?;
            Ok((r.try_get(0).map_err(db)?, state, r.try_get(2).map_err(db)?))
        })
        .collect()
}

impl SqliteStore {
    /// Wakes idle workers of the queues of `found` when `change` may have made tasks due.
    fn wake_changed(&self, change: &Change, found: &[Found]) {
        if !change.may_make_due() {
            return;
        }
        let mut queues: Vec<&str> = found.iter().map(|r| r.2.as_str()).collect();
        queues.sort_unstable();
        queues.dedup();
        for q in queues {
            self.wake(q);
        }
    }
}

/// Applies the state machine to the rows found and changes those it allows, writing the
/// history of the running attempts a cancel ends; returns how many rows changed.
async fn write(
    conn: &mut SqliteConnection,
    target: &Target,
    found: &[Found],
    change: &Change,
    now: DateTime<Utc>,
) -> StoreResult<u64> {
    let pairs: Vec<(TaskId, TaskState)> = found.iter().map(|r| (r.0, r.1)).collect();
    let UpdateSelection { ids, running } = select_for_update(target, change.operation(), &pairs)?;
    if ids.is_empty() {
        return Ok(0);
    }
    let now_text = to_text(now);

    if matches!(change, Change::Cancel) && !running.is_empty() {
        // The running attempt ends here; its worker learns at its next fenced write.
        sqlx::query(
            "INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error, \
                                             queue, kind, due_at, task_state) \
             SELECT id, attempt, worker_id, worker_host, started_at, ?, 'cancelled', 'cancelled by operator', \
                    queue, kind, run_at, 'cancelled' \
             FROM tasktable_tasks WHERE id IN (SELECT value FROM json_each(?))",
        )
        .bind(&now_text)
        .bind(json(&running)?)
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    }

    let mut qb = QueryBuilder::<Sqlite>::new("UPDATE tasktable_tasks SET updated_at = ");
    qb.push_bind(now_text.clone());
    match change {
        Change::Cancel => {
            qb.push(", state = 'cancelled', lease_expires_at = NULL, deadline_at = NULL, finished_at = ")
                .push_bind(now_text.clone());
        }
        Change::Retry => {
            qb.push(
                ", attempt = CASE WHEN state IN ('failed', 'cancelled') THEN 0 ELSE attempt END",
            )
            .push(", state = 'pending', finished_at = NULL, run_at = ")
            .push_bind(now_text.clone());
        }
        Change::Reschedule { run_at } => {
            qb.push(", run_at = ").push_bind(to_text(*run_at));
        }
        Change::SetPriority { priority } => {
            qb.push(", priority = ").push_bind(*priority);
        }
        Change::SetMaxAttempts { max_attempts } => {
            qb.push(", max_attempts = ")
                .push_bind(i64::from(*max_attempts));
        }
        Change::EditPayload { payload } => {
            qb.push(", payload = ").push_bind(payload.to_string());
        }
        Change::Hold => {
            qb.push(", state = 'held'");
        }
        Change::Release => {
            qb.push(", state = 'pending'");
        }
    }
    qb.push(" WHERE id IN (SELECT value FROM json_each(")
        .push_bind(json(&ids)?)
        .push("))");
    Ok(qb
        .build()
        .execute(&mut *conn)
        .await
        .map_err(db)?
        .rows_affected())
}
