//! Reads: one task, filtered pages, attempt history, queues. Plain `SELECT`s are
//! consistent reads in InnoDB: they take no locks and never wait for writers.

use crate::clock;
use crate::db;
use crate::row::{
    attempt_from_row, state, task_from_row, text, ATTEMPT_COLUMNS, LIGHT_TASK_COLUMNS, TASK_COLUMNS,
};
use sqlx::{MySql, MySqlPool, QueryBuilder, Row};
use std::collections::BTreeMap;
use tasktable_core::{Attempt, Task, TaskId};
use tasktable_store::*;

/// Most values in one `IN (...)` list. MySQL has no arrays to bind (PostgreSQL's
/// `= ANY($1)`), so a list of ids is one placeholder each, and a statement may have at
/// most 65,535 placeholders; longer lists are sent in chunks of this size.
pub const MAX_IN_LIST: usize = 1000;

/// `?, ?, ?`: one placeholder per value of an `IN (...)` list.
pub fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

pub async fn get(pool: &MySqlPool, id: TaskId) -> StoreResult<Option<Task>> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE id = ?");
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(db)?;
    row.as_ref().map(task_from_row).transpose()
}

/// Tasks by id, read on `conn` (inside the caller's transaction), in no particular order.
pub async fn get_many(conn: &mut sqlx::MySqlConnection, ids: &[TaskId]) -> StoreResult<Vec<Task>> {
    let mut tasks = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(MAX_IN_LIST) {
        let sql = format!(
            "SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE id IN ({})",
            marks(chunk.len())
        );
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.bind(id);
        }
        for row in q.fetch_all(&mut *conn).await.map_err(db)? {
            tasks.push(task_from_row(&row)?);
        }
    }
    Ok(tasks)
}

/// Appends ` AND ...` for every set field of the filter.
pub fn push_filter(qb: &mut QueryBuilder<'_, MySql>, f: &TaskFilter) {
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
        qb.push(" AND created_at >= ").push_bind(clock::at(t));
    }
    if let Some(t) = f.created_before {
        qb.push(" AND created_at < ").push_bind(clock::at(t));
    }
    if let Some(t) = f.updated_after {
        qb.push(" AND updated_at >= ").push_bind(clock::at(t));
    }
    if let Some(t) = f.updated_before {
        qb.push(" AND updated_at < ").push_bind(clock::at(t));
    }
    if let Some(v) = &f.error_contains {
        // INSTR() rather than LIKE: no wildcard escaping; case-sensitive because the
        // column's collation is binary.
        qb.push(" AND INSTR(last_error, ")
            .push_bind(v.clone())
            .push(") > 0");
    }
}

pub async fn list(pool: &MySqlPool, p: &ListParams) -> StoreResult<TaskPage> {
    let columns = if p.light {
        LIGHT_TASK_COLUMNS
    } else {
        TASK_COLUMNS
    };
    let mut qb =
        QueryBuilder::<MySql>::new(format!("SELECT {columns} FROM tasktable_tasks WHERE TRUE"));
    push_filter(&mut qb, &p.filter);
    if let Some(after) = p.after {
        qb.push(" AND id < ").push_bind(after);
    }
    qb.push(" ORDER BY id DESC LIMIT ")
        .push_bind(i64::from(p.limit) + 1);
    let rows = qb.build().fetch_all(pool).await.map_err(db)?;
    let tasks = rows
        .iter()
        .map(task_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(TaskPage::from_overfetch(tasks, p.limit))
}

/// Counts matches of `p.filter`, stopping at `p.cap`: the inner LIMIT bounds the rows read.
pub async fn count(pool: &MySqlPool, p: &CountParams) -> StoreResult<u64> {
    let mut qb = QueryBuilder::<MySql>::new(
        "SELECT count(*) FROM (SELECT 1 FROM tasktable_tasks WHERE TRUE",
    );
    push_filter(&mut qb, &p.filter);
    qb.push(" LIMIT ")
        .push_bind(i64::try_from(p.cap).unwrap_or(i64::MAX))
        .push(") AS matched");
    let n: i64 = qb.build_query_scalar().fetch_one(pool).await.map_err(db)?;
    Ok(n.max(0) as u64)
}

pub async fn attempts(pool: &MySqlPool, task_id: TaskId) -> StoreResult<Vec<Attempt>> {
    let sql =
        format!("SELECT {ATTEMPT_COLUMNS} FROM tasktable_attempts WHERE task_id = ? ORDER BY id");
    let rows = sqlx::query(&sql)
        .bind(task_id)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    rows.iter().map(attempt_from_row).collect()
}

pub async fn queues(pool: &MySqlPool) -> StoreResult<Vec<QueueInfo>> {
    // MySQL has no FULL JOIN: counts and pause flags are read apart and merged here,
    // sorted by byte order as the other stores sort them.
    let counts = sqlx::query(
        "SELECT queue, state, COUNT(*) AS n FROM tasktable_tasks GROUP BY queue, state",
    )
    .fetch_all(pool)
    .await
    .map_err(db)?;
    let paused = sqlx::query("SELECT name, paused FROM tasktable_queues")
        .fetch_all(pool)
        .await
        .map_err(db)?;
    let mut out: BTreeMap<String, QueueInfo> = BTreeMap::new();
    for r in &paused {
        let name: String = text(r, "name")?;
        let is_paused: bool = r.try_get("paused").map_err(db)?;
        queue_entry(&mut out, name).paused = is_paused;
    }
    for r in &counts {
        let name: String = text(r, "queue")?;
        let s = state(text(r, "state")?)?;
        let n: i64 = r.try_get("n").map_err(db)?;
        queue_entry(&mut out, name).counts.push((s, n as u64));
    }
    Ok(out
        .into_values()
        .map(|mut q| {
            q.counts.sort();
            q
        })
        .collect())
}

fn queue_entry(out: &mut BTreeMap<String, QueueInfo>, name: String) -> &mut QueueInfo {
    out.entry(name.clone()).or_insert_with(|| QueueInfo {
        name,
        paused: false,
        counts: Vec::new(),
    })
}
