//! Decoding rows into core types.

use crate::db;
use serde_json::Value;
use sqlx::mysql::MySqlRow;
use sqlx::{Decode, MySql, Row};
use std::time::Duration;
use tasktable_core::{Attempt, Backoff, Task, TaskState};
use tasktable_store::{credential_from_db, StoreError, StoreResult};

/// Every column of `tasktable_tasks`, all of which `task_from_row` reads by name.
pub const TASK_COLUMNS: &str = "id, kind, queue, state, payload, result, checkpoint, progress, \
    task_key, idempotency_key, priority, run_at, attempt, max_attempts, backoff_initial_ms, \
    backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms, lease_token, \
    lease_credential, lease_expires_at, deadline_at, worker_id, worker_host, last_error, created_at, updated_at, \
    started_at, finished_at";

/// [`TASK_COLUMNS`] with the documents left out (typed NULLs in their place), for light
/// lists.
pub const LIGHT_TASK_COLUMNS: &str = "id, kind, queue, state, 'null' AS payload, NULL AS result, NULL AS checkpoint, NULL AS progress, \
    task_key, idempotency_key, priority, run_at, attempt, max_attempts, backoff_initial_ms, \
    backoff_multiplier, backoff_max_ms, backoff_jitter, timeout_ms, lease_token, \
    lease_credential, lease_expires_at, deadline_at, worker_id, worker_host, last_error, created_at, updated_at, \
    started_at, finished_at";

/// Every column of `tasktable_attempts`.
pub const ATTEMPT_COLUMNS: &str =
    "id, task_id, attempt, worker_id, worker_host, started_at, finished_at, outcome, error";

fn millis(v: i64) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}

fn count(v: i32) -> u32 {
    v.max(0) as u32
}

pub fn state(s: &str) -> StoreResult<TaskState> {
    s.parse().map_err(|e| StoreError::Database(Box::new(e)))
}

/// A text column (`String`, `Option<String>`, `&str`). tasktable's text columns use a
/// binary collation; MySQL flags such columns BINARY, and sqlx then takes them for
/// VARBINARY and will not decode them as strings. They hold utf8mb4 text all the same,
/// so this skips sqlx's type check (decoding still checks the UTF-8).
pub fn text<'r, T: Decode<'r, MySql>>(row: &'r MySqlRow, column: &str) -> StoreResult<T> {
    row.try_get_unchecked(column).map_err(db)
}

pub fn task_from_row(row: &MySqlRow) -> StoreResult<Task> {
    Ok(Task {
        id: row.try_get("id").map_err(db)?,
        kind: text(row, "kind")?,
        queue: text(row, "queue")?,
        state: state(text(row, "state")?)?,
        payload: row.try_get::<Value, _>("payload").map_err(db)?,
        result: row.try_get("result").map_err(db)?,
        checkpoint: row.try_get("checkpoint").map_err(db)?,
        progress: row.try_get("progress").map_err(db)?,
        key: text(row, "task_key")?,
        idempotency_key: text(row, "idempotency_key")?,
        priority: row.try_get("priority").map_err(db)?,
        run_at: row.try_get("run_at").map_err(db)?,
        attempt: count(row.try_get("attempt").map_err(db)?),
        max_attempts: count(row.try_get("max_attempts").map_err(db)?),
        backoff: Backoff {
            initial: millis(row.try_get("backoff_initial_ms").map_err(db)?),
            multiplier: row.try_get("backoff_multiplier").map_err(db)?,
            max: millis(row.try_get("backoff_max_ms").map_err(db)?),
            jitter: row.try_get("backoff_jitter").map_err(db)?,
        },
        timeout: row
            .try_get::<Option<i64>, _>("timeout_ms")
            .map_err(db)?
            .map(millis),
        lease_token: row.try_get("lease_token").map_err(db)?,
        lease_credential: credential_from_db(text(row, "lease_credential")?)?,
        lease_expires_at: row.try_get("lease_expires_at").map_err(db)?,
        deadline_at: row.try_get("deadline_at").map_err(db)?,
        worker_id: text(row, "worker_id")?,
        worker_host: text(row, "worker_host")?,
        last_error: text(row, "last_error")?,
        created_at: row.try_get("created_at").map_err(db)?,
        updated_at: row.try_get("updated_at").map_err(db)?,
        started_at: row.try_get("started_at").map_err(db)?,
        finished_at: row.try_get("finished_at").map_err(db)?,
    })
}

pub fn attempt_from_row(row: &MySqlRow) -> StoreResult<Attempt> {
    let outcome: &str = text(row, "outcome")?;
    Ok(Attempt {
        id: row.try_get("id").map_err(db)?,
        task_id: row.try_get("task_id").map_err(db)?,
        attempt: count(row.try_get("attempt").map_err(db)?),
        worker_id: text(row, "worker_id")?,
        worker_host: text(row, "worker_host")?,
        started_at: row.try_get("started_at").map_err(db)?,
        finished_at: row.try_get("finished_at").map_err(db)?,
        outcome: outcome
            .parse()
            .map_err(|e| StoreError::Database(Box::new(e)))?,
        error: text(row, "error")?,
    })
}
