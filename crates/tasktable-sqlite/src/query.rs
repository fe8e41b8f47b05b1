//! Reads: one task, filtered pages, attempt history, queues.

use crate::db;
use crate::row::{attempt_from_row, task_from_row, LIGHT_TASK_COLUMNS, TASK_COLUMNS};
use crate::time::to_text;
use sqlx::{QueryBuilder, Row, Sqlite, SqliteConnection};
use tasktable_core::{Attempt, Task, TaskId, TaskState};
use tasktable_store::*;

pub async fn get(conn: &mut SqliteConnection, id: TaskId) -> StoreResult<Option<Task>> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE id = ?");
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    row.as_ref().map(task_from_row).transpose()
}

/// Appends ` AND ...` for every set field of the filter.
pub fn push_filter(qb: &mut QueryBuilder<'_, Sqlite>, f: &TaskFilter) {
    if let Some(v) = &f.queue {
        qb.push(" AND queue = ").push_bind(v.clone());
    }
    if let Some(v) = &f.kind {
        qb.push(" AND kind = ").push_bind(v.clone());
    }
    if !f.states.is_empty() {
        qb.push(" AND state IN (");
        let mut sep = qb.separated(", ");
        for s in &f.states {
            sep.push_bind(s.as_str());
        }
        qb.push(")");
    }
    if let Some(v) = &f.key {
        qb.push(" AND task_key = ").push_bind(v.clone());
    }
    if let Some(v) = &f.idempotency_key {
        qb.push(" AND idempotency_key = ").push_bind(v.clone());
    }
    if let Some(t) = f.created_after {
        qb.push(" AND created_at >= ").push_bind(to_text(t));
    }
    if let Some(t) = f.created_before {
        qb.push(" AND created_at < ").push_bind(to_text(t));
    }
    if let Some(t) = f.updated_after {
        qb.push(" AND updated_at >= ").push_bind(to_text(t));
    }
    if let Some(t) = f.updated_before {
        qb.push(" AND updated_at < ").push_bind(to_text(t));
    }
    if let Some(v) = &f.error_contains {
        // instr() rather than LIKE: no wildcard escaping, and case-sensitive as documented.
        qb.push(" AND instr(last_error, ")
            .push_bind(v.clone())
            .push(") > 0");
    }
}

pub async fn list(conn: &mut SqliteConnection, p: &ListParams) -> StoreResult<TaskPage> {
    let columns = if p.light {
        LIGHT_TASK_COLUMNS
    } else {
        TASK_COLUMNS
    };
    let mut qb =
        QueryBuilder::<Sqlite>::new(format!("SELECT {columns} FROM tasktable_tasks WHERE 1 = 1"));
    push_filter(&mut qb, &p.filter);
    if let Some(after) = p.after {
        qb.push(" AND id < ").push_bind(after);
    }
    qb.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(p.limit) + 1);
    let rows = qb.build().fetch_all(conn).await.map_err(db)?;
    let tasks = rows
        .iter()
        .map(task_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(TaskPage::from_overfetch(tasks, p.limit))
}

/// Counts matches of `p.filter`, stopping at `p.cap`: the inner LIMIT bounds the rows read.
pub async fn count(conn: &mut SqliteConnection, p: &CountParams) -> StoreResult<u64> {
    let mut qb = QueryBuilder::<Sqlite>::new(
        "SELECT count(*) FROM (SELECT 1 FROM tasktable_tasks WHERE 1 = 1",
    );
    push_filter(&mut qb, &p.filter);
    qb.push(" LIMIT ")
        .push_bind(i64::try_from(p.cap).unwrap_or(i64::MAX))
        .push(") AS matched");
    let n: i64 = qb.build_query_scalar().fetch_one(conn).await.map_err(db)?;
    Ok(n.max(0) as u64)
}

pub async fn attempts(conn: &mut SqliteConnection, task_id: TaskId) -> StoreResult<Vec<Attempt>> {
    let rows = sqlx::query("SELECT * FROM tasktable_attempts WHERE task_id = ? ORDER BY id")
        .bind(task_id)
        .fetch_all(conn)
        .await
        .map_err(db)?;
    rows.iter().map(attempt_from_row).collect()
}

pub async fn queues(conn: &mut SqliteConnection) -> StoreResult<Vec<QueueInfo>> {
    let counts =
        sqlx::query("SELECT queue, state, count(*) FROM tasktable_tasks GROUP BY queue, state")
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?;
    let paused = sqlx::query("SELECT name, paused FROM tasktable_queues")
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;
    let mut out: Vec<QueueInfo> = Vec::new();
    fn entry<'a>(out: &'a mut Vec<QueueInfo>, name: &str) -> &'a mut QueueInfo {
        if let Some(i) = out.iter().position(|q| q.name == name) {
            return &mut out[i];
        }
        out.push(QueueInfo {
            name: name.to_owned(),
            paused: false,
            counts: Vec::new(),
        });
        out.last_mut().expect("just pushed")
    }
    for r in &paused {
        let name: String = r.try_get(0).map_err(db)?;
        entry(&mut out, &name).paused = r.try_get(1).map_err(db)?;
    }
    for r in &counts {
        let name: String = r.try_get(0).map_err(db)?;
        let state: String = r.try_get(1).map_err(db)?;
        let n: i64 = r.try_get(2).map_err(db)?;
        if let Ok(state) = state.parse::<TaskState>() {
            entry(&mut out, &name).counts.push((state, n as u64));
        }
    }
    for q in &mut out {
        q.counts.sort();
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}
