//! Operators' changes, single and bulk. The rows to change are chosen and changed inside
//! one `BEGIN IMMEDIATE` transaction, so no worker write slips in between.

use crate::query::push_filter;
use crate::time::to_text;
use crate::{db, now_or_db, SqliteStore};
use sqlx::{QueryBuilder, Row, Sqlite};
use tasktable_core::TaskState;
use tasktable_store::*;

pub async fn apply(store: &SqliteStore, p: UpdateParams) -> StoreResult<u64> {
    let op = p.change.operation();
    let mut tx = store.begin_write().await?;
    let now = now_or_db(&mut tx, p.now).await?;
    let now_text = to_text(now);

    let mut select =
        QueryBuilder::<Sqlite>::new("SELECT id, state, queue FROM tasktable_tasks WHERE ");
    match &p.target {
        Target::Id(id) => {
            select.push("id = ").push_bind(*id);
        }
        Target::Filter(f) => {
            select.push("1 = 1");
            push_filter(&mut select, f);
        }
    }
    let rows = select.build().fetch_all(&mut *tx).await.map_err(db)?;
    let mut matched = Vec::with_capacity(rows.len());
    let mut queue_of = std::collections::HashMap::new();
    for r in &rows {
        let id: i64 = r.try_get(0).map_err(db)?;
        let state: TaskState = r
            .try_get::<String, _>(1)
            .map_err(db)?
            .parse()
            .map_err(|e| StoreError::Database(Box::new(e)))?;
        queue_of.insert(id, r.try_get::<String, _>(2).map_err(db)?);
        matched.push((id, state));
    }
    let UpdateSelection { ids, running } = select_for_update(&p.target, op, &matched)?;
    let mut queues: Vec<String> = ids.iter().filter_map(|id| queue_of.remove(id)).collect();
    if ids.is_empty() {
        return Ok(0);
    }
    let ids_json =
        serde_json::to_string(&ids).map_err(|e| StoreError::InvalidInput(e.to_string()))?;

    if matches!(p.change, Change::Cancel) && !running.is_empty() {
        // The running attempt ends here; its worker learns at its next fenced write.
        let running_json =
            serde_json::to_string(&running).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
        sqlx::query(
            "INSERT INTO tasktable_attempts (task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error, \
                                             queue, kind, due_at, task_state) \
             SELECT id, attempt, worker_id, worker_host, started_at, ?, 'cancelled', 'cancelled by operator', \
                    queue, kind, run_at, 'cancelled' \
             FROM tasktable_tasks WHERE id IN (SELECT value FROM json_each(?))",
        )
        .bind(&now_text)
        .bind(running_json)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    }

    let mut qb = QueryBuilder::<Sqlite>::new("UPDATE tasktable_tasks SET updated_at = ");
    qb.push_bind(now_text.clone());
    match &p.change {
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
        .push_bind(ids_json)
        .push("))");
    let changed = qb
        .build()
        .execute(&mut *tx)
        .await
        .map_err(db)?
        .rows_affected();
    tx.commit().await.map_err(db)?;
    if p.change.may_make_due() {
        queues.sort();
        queues.dedup();
        for q in &queues {
            store.wake(q);
        }
    }
    Ok(changed)
}
