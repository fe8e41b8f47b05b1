//! Creating tasks: one INSERT per task, inside the caller's transaction. MySQL has no
//! `INSERT ... RETURNING` (PostgreSQL inserts the batch in one statement and reads the ids
//! back); here each row's id is the statement's `LAST_INSERT_ID()`, which is only
//! unambiguous for a single-row insert.

use crate::clock;
use crate::db;
use crate::retry::error_number;
use chrono::{DateTime, Utc};
use sqlx::MySqlConnection;
use tasktable_core::stored::after;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::{StoreError, StoreResult, Submitted};

const INSERT: &str = include_str!("../queries/task_insert.sql");
const BY_KEY: &str = include_str!("../queries/task_by_idempotency_key.sql");

/// Duplicate entry for a unique key; here always the idempotency key.
const DUPLICATE_KEY: u16 = 1062;

pub struct Inserted {
    /// One per input task, in input order.
    pub submitted: Vec<Submitted>,
    /// Queues that got a task due now.
    pub due_queues: Vec<String>,
}

/// Inserts validated tasks on `conn`, which must be inside a transaction so the batch is
/// all or nothing.
pub async fn insert(
    conn: &mut MySqlConnection,
    tasks: &[NewTask],
    now: Option<DateTime<Utc>>,
) -> StoreResult<Inserted> {
    let mut out = Inserted {
        submitted: Vec::with_capacity(tasks.len()),
        due_queues: Vec::new(),
    };
    if tasks.is_empty() {
        return Ok(out);
    }
    let now = clock::now(conn, now).await?;
    for t in tasks {
        let run_at = match (t.run_at, t.delay) {
            (Some(at), _) => clock::truncate(at),
            (None, Some(d)) => after(now, d),
            (None, None) => now,
        };
        let state = if t.held {
            TaskState::Held
        } else {
            TaskState::Pending
        };
        let inserted = sqlx::query(INSERT)
            .bind(&t.kind)
            .bind(&t.queue)
            .bind(state.as_str())
            .bind(&t.payload)
            .bind(&t.key)
            .bind(&t.idempotency_key)
            .bind(t.priority)
            .bind(clock::at(run_at))
            .bind(t.max_attempts as i32)
            .bind(t.backoff.initial.as_millis() as i64)
            .bind(t.backoff.multiplier)
            .bind(t.backoff.max.as_millis() as i64)
            .bind(t.backoff.jitter)
            .bind(t.timeout.map(|d| d.as_millis() as i64))
            .bind(clock::at(now))
            .bind(clock::at(now))
            .bind(t.target.to_column())
            .bind(t.affinity.map(|d| d.as_millis() as i64))
            .bind(t.created_by.as_ref().map(|a| a.to_column()))
            .bind(t.traceparent.as_ref().map(|tp| tp.as_str()))
            .execute(&mut *conn)
            .await
            .map_err(db);
        match inserted {
            Ok(done) => {
                out.submitted.push(Submitted {
                    id: done.last_insert_id() as i64,
                    created: true,
                });
                if !t.held && run_at <= now {
                    out.due_queues.push(t.queue.clone());
                }
            }
            // The key exists, from an earlier submit or earlier in this batch. A racing
            // submit that holds the same key uncommitted makes our insert wait for it;
            // if it commits we land here, if it rolls back our insert goes through.
            Err(e) if error_number(&e) == Some(DUPLICATE_KEY) && t.idempotency_key.is_some() => {
                let id: Option<i64> = sqlx::query_scalar(BY_KEY)
                    .bind(&t.idempotency_key)
                    .fetch_optional(&mut *conn)
                    .await
                    .map_err(db)?;
                let id = id.ok_or_else(|| {
                    StoreError::Database(
                        format!(
                            "idempotency key {:?} collided but no task holds it",
                            t.idempotency_key
                        )
                        .into(),
                    )
                })?;
                out.submitted.push(Submitted { id, created: false });
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
