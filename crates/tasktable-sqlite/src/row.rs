//! Decoding rows into core types.

use crate::time::{from_text, opt_from_text};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;
use sqlx::Row;
use std::time::Duration;
use tasktable_core::{Attempt, Backoff, Task};
use tasktable_store::{credential_from_db, StoreError, StoreResult};

/// Every column of `tasktable_tasks`, in the order `task_from_row` reads them by name.
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

fn db(e: sqlx::Error) -> StoreError {
    StoreError::database(e)
}

fn json(s: Option<String>) -> StoreResult<Option<Value>> {
    s.map(|s| serde_json::from_str(&s))
        .transpose()
        .map_err(|e| StoreError::Database(format!("bad JSON in database: {e}").into()))
}

fn millis(v: i64) -> Duration {
    Duration::from_millis(v.max(0) as u64)
}

pub fn task_from_row(row: &SqliteRow) -> StoreResult<Task> {
    let state: String = row.try_get("state").map_err(db)?;
    Ok(Task {
        id: row.try_get("id").map_err(db)?,
        kind: row.try_get("kind").map_err(db)?,
        queue: row.try_get("queue").map_err(db)?,
        state: state
            .parse()
            .map_err(|e| StoreError::Database(Box::new(e)))?,
        payload: json(row.try_get("payload").map_err(db)?)?.unwrap_or(Value::Null),
        result: json(row.try_get("result").map_err(db)?)?,
        checkpoint: json(row.try_get("checkpoint").map_err(db)?)?,
        progress: json(row.try_get("progress").map_err(db)?)?,
        key: row.try_get("task_key").map_err(db)?,
        idempotency_key: row.try_get("idempotency_key").map_err(db)?,
        priority: row.try_get("priority").map_err(db)?,
        run_at: from_text(row.try_get("run_at").map_err(db)?)?,
        attempt: row.try_get::<i64, _>("attempt").map_err(db)?.max(0) as u32,
        max_attempts: row.try_get::<i64, _>("max_attempts").map_err(db)?.max(0) as u32,
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
        lease_credential: credential_from_db(row.try_get("lease_credential").map_err(db)?)?,
        lease_expires_at: opt_from_text(row.try_get("lease_expires_at").map_err(db)?)?,
        deadline_at: opt_from_text(row.try_get("deadline_at").map_err(db)?)?,
        worker_id: row.try_get("worker_id").map_err(db)?,
        worker_host: row.try_get("worker_host").map_err(db)?,
        last_error: row.try_get("last_error").map_err(db)?,
        created_at: from_text(row.try_get("created_at").map_err(db)?)?,
        updated_at: from_text(row.try_get("updated_at").map_err(db)?)?,
        started_at: opt_from_text(row.try_get("started_at").map_err(db)?)?,
        finished_at: opt_from_text(row.try_get("finished_at").map_err(db)?)?,
    })
}

pub fn attempt_from_row(row: &SqliteRow) -> StoreResult<Attempt> {
    let outcome: String = row.try_get("outcome").map_err(db)?;
    Ok(Attempt {
        id: row.try_get("id").map_err(db)?,
        task_id: row.try_get("task_id").map_err(db)?,
        attempt: row.try_get::<i64, _>("attempt").map_err(db)?.max(0) as u32,
        worker_id: row.try_get("worker_id").map_err(db)?,
        worker_host: row.try_get("worker_host").map_err(db)?,
        started_at: opt_from_text(row.try_get("started_at").map_err(db)?)?,
        finished_at: from_text(row.try_get("finished_at").map_err(db)?)?,
        outcome: outcome
            .parse()
            .map_err(|e| StoreError::Database(Box::new(e)))?,
        error: row.try_get("error").map_err(db)?,
    })
}
