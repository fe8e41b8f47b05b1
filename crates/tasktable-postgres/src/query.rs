//! Reads: one task, filtered pages, attempt history, queues.

use crate::db;
use crate::row::{
    attempt_from_row, state, task_from_row, ATTEMPT_COLUMNS, LIGHT_TASK_COLUMNS, TASK_COLUMNS,
};
use sqlx::{PgPool, Postgres, QueryBuilder, Row};
use tasktable_core::{Attempt, Task, TaskId};
use tasktable_store::*;

pub async fn get(pool: &PgPool, id: TaskId) -> StoreResult<Option<Task>> {
    let sql = format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE id = $1");
    let row = sqlx::query(&sql)
        .bind(id)
        .fetch_optional(pool)
        .await
        .map_err(db)?;
    row.as_ref().map(task_from_row).transpose()
}

/// Appends ` AND ...` for every set field of the filter.
pub fn push_filter(qb: &mut QueryBuilder<'_, Postgres>, f: &TaskFilter) {
    if let Some(v) = &f.queue {
        qb.push(" AND queue = ").push_bind(v.clone());
    }
    if let Some(v) = &f.kind {
        qb.push(" AND kind = ").push_bind(v.clone());
    }
    if !f.states.is_empty() {
        let states: Vec<&'static str> = f.states.iter().map(|s| s.as_str()).collect();
        qb.push(" AND state = ANY(").push_bind(states).push(")");
    }
    if let Some(v) = &f.key {
        qb.push(" AND task_key = ").push_bind(v.clone());
    }
    if let Some(v) = &f.idempotency_key {
        qb.push(" AND idempotency_key = ").push_bind(v.clone());
    }
    if let Some(t) = f.created_after {
        qb.push(" AND created_at >= ").push_bind(t);
    }
    if let Some(t) = f.created_before {
        qb.push(" AND created_at < ").push_bind(t);
    }
    if let Some(t) = f.updated_after {
        qb.push(" AND updated_at >= ").push_bind(t);
    }
    if let Some(t) = f.updated_before {
        qb.push(" AND updated_at < ").push_bind(t);
    }
    if let Some(v) = &f.error_contains {
        // strpos() rather than LIKE: no wildcard escaping, and case-sensitive as documented.
        qb.push(" AND strpos(last_error, ")
            .push_bind(v.clone())
            .push(") > 0");
    }
}

pub async fn list(pool: &PgPool, p: &ListParams) -> StoreResult<TaskPage> {
    let columns = if p.light {
        LIGHT_TASK_COLUMNS
    } else {
        TASK_COLUMNS
    };
    let mut qb =
        QueryBuilder::<Postgres>::new(format!("SELECT {columns} FROM tasktable_tasks WHERE TRUE"));
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
pub async fn count(pool: &PgPool, p: &CountParams) -> StoreResult<u64> {
    let mut qb = QueryBuilder::<Postgres>::new(
        "SELECT count(*) FROM (SELECT 1 FROM tasktable_tasks WHERE TRUE",
    );
    push_filter(&mut qb, &p.filter);
    qb.push(" LIMIT ")
        .push_bind(i64::try_from(p.cap).unwrap_or(i64::MAX))
        .push(") AS matched");
    let n: i64 = qb.build_query_scalar().fetch_one(pool).await.map_err(db)?;
    Ok(n.max(0) as u64)
}

pub async fn attempts(pool: &PgPool, task_id: TaskId) -> StoreResult<Vec<Attempt>> {
    let sql =
        format!("SELECT {ATTEMPT_COLUMNS} FROM tasktable_attempts WHERE task_id = $1 ORDER BY id");
    let rows = sqlx::query(&sql)
        .bind(task_id)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    rows.iter().map(attempt_from_row).collect()
}

pub async fn queues(pool: &PgPool) -> StoreResult<Vec<QueueInfo>> {
    // One query: every queue that has tasks or a row in tasktable_queues, with its counts,
    // sorted by byte order (COLLATE "C") as the SQLite store sorts them.
    let rows = sqlx::query(
        "SELECT coalesce(c.queue, q.name) AS name, coalesce(q.paused, false) AS paused, c.state, c.n \
         FROM (SELECT queue, state, count(*) AS n FROM tasktable_tasks GROUP BY queue, state) c \
         FULL JOIN tasktable_queues q ON q.name = c.queue \
         ORDER BY coalesce(c.queue, q.name) COLLATE \"C\"",
    )
    .fetch_all(pool)
    .await
    .map_err(db)?;
    let mut out: Vec<QueueInfo> = Vec::new();
    for r in &rows {
        let name: String = r.try_get("name").map_err(db)?;
        if out.last().is_none_or(|q| q.name != name) {
            out.push(QueueInfo {
                name,
                paused: r.try_get("paused").map_err(db)?,
                counts: Vec::new(),
            });
        }
        let q = out.last_mut().expect("just pushed");
        if let Some(s) = r.try_get::<Option<&str>, _>("state").map_err(db)? {
            let n: i64 = r.try_get("n").map_err(db)?;
            q.counts.push((state(s)?, n as u64));
        }
    }
    for q in &mut out {
        q.counts.sort();
    }
    Ok(out)
}
