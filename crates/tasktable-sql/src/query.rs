//! Reads: one task, filtered pages and counts, attempt history, queues, where a lease
//! stands, whether a queue has due work; and the one write among them, pausing a queue.

use crate::row::{attempt_from_row, light_task_columns, state, task_from_row};
pub use crate::row::{get, get_many};
use crate::row::{ATTEMPT_COLUMNS, TASK_COLUMNS};
use crate::{exec::count as count_cell, exec::required, Cells, Exec, Sql};
use tasktable_core::{Attempt, Lease, TaskId, TaskState};
use tasktable_store::{
    credential_from_db, lost_lease_status, outcome_from_db, Checked, CountParams, DueParams,
    LeaseRow, LeaseStatus, ListParams, QueueInfo, QueuePauseParams, StoreResult, TaskFilter,
    TaskPage,
};

/// Appends ` AND ...` for every set field of the filter.
pub fn push_filter(sql: &mut Sql, f: &TaskFilter) {
    let equal = [
        ("queue", &f.queue),
        ("kind", &f.kind),
        ("task_key", &f.key),
        ("idempotency_key", &f.idempotency_key),
    ];
    for (column, value) in equal {
        if let Some(v) = value {
            sql.push(&format!(" AND {column} = ")).bind(v.as_str());
        }
    }
    if let Some(id) = f.schedule_id {
        // The key range reaches the schedule's tasks through the key's unique index.
        let (low, high) = crate::schedules::key_range(id);
        sql.push(" AND idempotency_key >= ")
            .bind(low)
            .push(" AND idempotency_key < ")
            .bind(high)
            .push(" AND schedule_id = ")
            .bind(id);
    }
    if let Some(id) = f.id_at_least {
        sql.push(" AND id >= ").bind(id);
    }
    if let Some(id) = f.id_below {
        sql.push(" AND id < ").bind(id);
    }
    if !f.states.is_empty() {
        let states: Vec<&str> = f.states.iter().map(|s| s.as_str()).collect();
        sql.push(" AND ").push_in_texts("state", &states);
    }
    let times = [
        ("created_at >= ", f.created_after),
        ("created_at < ", f.created_before),
        ("updated_at >= ", f.updated_after),
        ("updated_at < ", f.updated_before),
    ];
    for (test, value) in times {
        if let Some(t) = value {
            sql.push(" AND ").push(test).bind(t);
        }
    }
    if let Some(v) = &f.error_contains {
        // Only a task's current error matches: a succeeded task's is history.
        let standing: Vec<&str> = TaskState::ALL
            .into_iter()
            .filter(|s| s.has_current_error())
            .map(TaskState::as_str)
            .collect();
        let position = sql.dialect().position_fn();
        sql.push(" AND ").push_in_texts("state", &standing);
        sql.push(&format!(" AND {position}(last_error, "))
            .bind(v.as_str())
            .push(") > 0");
    }
}

/// A page of tasks, newest first.
pub async fn list<E: Exec>(e: &mut E, p: &Checked<ListParams>) -> StoreResult<TaskPage> {
    let columns = if p.light {
        light_task_columns(e.dialect())
    } else {
        TASK_COLUMNS.to_owned()
    };
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {columns} FROM tasktable_tasks WHERE 1 = 1"),
    );
    push_filter(&mut sql, &p.filter);
    if let Some(after) = p.after {
        sql.push(" AND id < ").bind(after);
    }
    sql.push(" ORDER BY id DESC LIMIT ")
        .bind(i64::from(p.limit) + 1);
    let tasks = e
        .fetch(sql)
        .await?
        .iter()
        .map(task_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(TaskPage::from_overfetch(tasks, p.limit))
}

/// Counts matches of `p.filter`, stopping at `p.cap`: the inner LIMIT bounds the rows read.
pub async fn count<E: Exec>(e: &mut E, p: &Checked<CountParams>) -> StoreResult<u64> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT count(*) AS n FROM (SELECT 1 AS one FROM tasktable_tasks WHERE 1 = 1",
    );
    push_filter(&mut sql, &p.filter);
    sql.push(" LIMIT ")
        .bind(i64::try_from(p.cap).unwrap_or(i64::MAX))
        .push(") AS matched");
    let rows = e.fetch(sql).await?;
    rows.first().map_or(Ok(0), |r| count_cell(r, "n"))
}

/// The ids a filter matches, in id order.
pub async fn ids_matching<E: Exec>(e: &mut E, filter: &TaskFilter) -> StoreResult<Vec<TaskId>> {
    let mut sql = Sql::new(e.dialect(), "SELECT id FROM tasktable_tasks WHERE 1 = 1");
    push_filter(&mut sql, filter);
    sql.push(" ORDER BY id");
    e.fetch(sql)
        .await?
        .iter()
        .map(|r| required(r.int("id"), "id"))
        .collect()
}

/// A task's attempt history, oldest first (by the history row's id); empty for an
/// unknown task.
pub async fn attempts<E: Exec>(e: &mut E, task_id: TaskId) -> StoreResult<Vec<Attempt>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {ATTEMPT_COLUMNS} FROM tasktable_attempts WHERE task_id = "),
    );
    sql.bind(task_id).push(" ORDER BY id");
    e.fetch(sql).await?.iter().map(attempt_from_row).collect()
}

/// Every queue that has tasks or a row in `tasktable_queues`, with counts by state,
/// sorted by name in byte order.
pub async fn queues<E: Exec>(e: &mut E) -> StoreResult<Vec<QueueInfo>> {
    let counts = Sql::new(
        e.dialect(),
        "SELECT queue, state, count(*) AS n FROM tasktable_tasks GROUP BY queue, state",
    );
    let counts = e.fetch(counts).await?;
    let paused = Sql::new(
        e.dialect(),
        "SELECT name, paused, policy FROM tasktable_queues",
    );
    let paused = e.fetch(paused).await?;
    let mut out: Vec<QueueInfo> = Vec::new();
    fn entry(out: &mut Vec<QueueInfo>, name: String) -> &mut QueueInfo {
        if let Some(i) = out.iter().position(|q| q.name == name) {
            return &mut out[i];
        }
        out.push(QueueInfo {
            name,
            paused: false,
            policy: Default::default(),
            counts: Vec::new(),
        });
        out.last_mut().expect("just pushed")
    }
    for r in &paused {
        let paused = required(r.boolean("paused"), "paused")?;
        let policy = crate::limits::policy_from_row(r)?;
        let queue = entry(&mut out, required(r.text("name"), "name")?);
        queue.paused = paused;
        queue.policy = policy;
    }
    for r in &counts {
        let state = state(&required(r.text("state"), "state")?)?;
        let n = count_cell(r, "n")?;
        entry(&mut out, required(r.text("queue"), "queue")?)
            .counts
            .push((state, n));
    }
    for q in &mut out {
        q.counts.sort();
    }
    // Byte order, whatever the database's collation.
    out.sort_by(|a, b| a.name.as_bytes().cmp(b.name.as_bytes()));
    Ok(out)
}

/// Where a lease stands, changing nothing ([`tasktable_store::Store::lease_status`]): a
/// run's by its run row, a task's by its row and, for a pending task, how its latest
/// attempt ended (a new target's take-back), judged by [`lost_lease_status`]. The hot
/// path's `lease_rows.sql` reads the same columns for all of a batch's misses inside its
/// own statement; this is the read for one lease, outside any write.
pub async fn lease_status<E: Exec>(e: &mut E, lease: &Lease) -> StoreResult<LeaseStatus> {
    if let Some(run) = lease.run {
        return crate::runs::status(e, lease, run).await;
    }
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT t.state, t.lease_token, t.lease_credential, t.lease_expires_at, \
         CASE WHEN t.state = 'pending' THEN (SELECT a.outcome FROM tasktable_attempts a \
         WHERE a.task_id = t.id ORDER BY a.id DESC LIMIT 1) END AS last_outcome \
         FROM tasktable_tasks t WHERE t.id = ",
    );
    sql.bind(lease.task_id);
    let rows = e.fetch(sql).await?;
    let Some(r) = rows.first() else {
        return Ok(LeaseStatus::Lost);
    };
    let row = LeaseRow {
        state: state(&required(r.text("state"), "state")?)?,
        token: required(r.int("lease_token"), "lease_token")?,
        credential: credential_from_db(r.text("lease_credential")?.as_deref())?,
        last_outcome: outcome_from_db(r.text("last_outcome")?.as_deref()),
    };
    let holds = row.state == TaskState::Running
        && row.token == lease.token
        && row.credential.is_some()
        && row.credential == lease.credential;
    Ok(if holds {
        LeaseStatus::Held {
            expires_at: r.time("lease_expires_at")?,
        }
    } else {
        lost_lease_status(*lease, Some(row))
    })
}

/// More kinds than this are not named in the query: it asks for any kind instead, which
/// only makes a waiting claim look again when it did not have to.
const MAX_DUE_KINDS: usize = 64;

/// Whether a queue that is not paused has a pending task of one of the kinds due now.
/// The claim index (queue, priority, run_at) finds the first such task, or runs out.
pub async fn has_due<E: Exec>(e: &mut E, p: &DueParams) -> StoreResult<bool> {
    let now = e.now(None).await?;
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT 1 AS due FROM tasktable_tasks WHERE state = 'pending' AND queue = ",
    );
    sql.bind(p.queue.as_str()).push(" AND run_at <= ").bind(now);
    if !p.kinds.is_empty() && p.kinds.len() <= MAX_DUE_KINDS {
        let kinds: Vec<&str> = p.kinds.iter().map(String::as_str).collect();
        sql.push(" AND ").push_in_texts("kind", &kinds);
    }
    sql.push(" AND NOT EXISTS (SELECT 1 FROM tasktable_queues q WHERE q.name = ")
        .bind(p.queue.as_str())
        .push(" AND q.paused) LIMIT 1");
    Ok(!e.fetch(sql).await?.is_empty())
}

/// Pauses or resumes a queue (waking its workers is the caller's part).
pub async fn set_paused<E: Exec>(e: &mut E, p: &QueuePauseParams) -> StoreResult<()> {
    let now = e.now(None).await?;
    let mut was = Sql::new(
        e.dialect(),
        "SELECT paused FROM tasktable_queues WHERE name = ",
    );
    was.bind(p.queue.as_str()).push(e.dialect().lock_rows());
    let was_paused = match e.fetch(was).await?.first() {
        Some(row) => row.boolean("paused")?.unwrap_or(false),
        None => false,
    };
    let mut sql = Sql::new(
        e.dialect(),
        "INSERT INTO tasktable_queues (name, paused, updated_at) VALUES (",
    );
    sql.bind(p.queue.as_str())
        .push(", ")
        .bind(p.paused)
        .push(", ")
        .bind(now)
        .push(")");
    let upsert = e.dialect().upsert(&["name"], &["paused", "updated_at"]);
    sql.push(&upsert);
    e.execute(sql).await?;
    if was_paused == p.paused {
        // Already so: nothing changed, nothing to record.
        return Ok(());
    }
    let event = tasktable_store::NewEvent {
        queue: Some(p.queue.clone()),
        ..tasktable_store::NewEvent::new(if p.paused {
            tasktable_core::EventKind::QueuePaused
        } else {
            tasktable_core::EventKind::QueueResumed
        })
    };
    crate::events::record_one(e, now, &p.actor, event).await
}
