use crate::time::to_text;
use crate::{db, now_or_db};
use chrono::{DateTime, Utc};
use sqlx::SqliteConnection;
use tasktable_core::stored::after;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::{StoreResult, Submitted};

const INSERT: &str = include_str!("../queries/task_insert.sql");
const BY_KEY: &str = include_str!("../queries/task_by_idempotency_key.sql");

/// Inserts tasks on a connection that is already inside a write transaction.
pub async fn insert(
    conn: &mut SqliteConnection,
    tasks: &[NewTask],
    now: Option<DateTime<Utc>>,
) -> StoreResult<Vec<Submitted>> {
    let now = now_or_db(conn, now).await?;
    let now_text = to_text(now);
    let mut out = Vec::with_capacity(tasks.len());
    for t in tasks {
        let run_at = match (t.run_at, t.delay) {
            (Some(at), _) => at,
            (None, Some(d)) => after(now, d),
            (None, None) => now,
        };
        let state = if t.held {
            TaskState::Held
        } else {
            TaskState::Pending
        };
        let id: Option<i64> = sqlx::query_scalar(INSERT)
            .bind(&t.kind)
            .bind(&t.queue)
            .bind(state.as_str())
            .bind(t.payload.to_string())
            .bind(&t.key)
            .bind(&t.idempotency_key)
            .bind(t.priority)
            .bind(to_text(run_at))
            .bind(i64::from(t.max_attempts))
            .bind(t.backoff.initial.as_millis() as i64)
            .bind(t.backoff.multiplier)
            .bind(t.backoff.max.as_millis() as i64)
            .bind(t.backoff.jitter)
            .bind(t.timeout.map(|d| d.as_millis() as i64))
            .bind(&now_text)
            .bind(t.target.to_column())
            .bind(t.affinity.map(|d| d.as_millis() as i64))
            .bind(t.created_by.as_ref().map(|a| a.to_column()))
            .bind(t.traceparent.as_ref().map(|tp| tp.as_str()))
            .fetch_optional(&mut *conn)
            .await
            .map_err(db)?;
        let submitted = match id {
            Some(id) => Submitted { id, created: true },
            None => {
                // The idempotency key exists: hand back the task that holds it.
                let id: i64 = sqlx::query_scalar(BY_KEY)
                    .bind(&t.idempotency_key)
                    .fetch_one(&mut *conn)
                    .await
                    .map_err(db)?;
                Submitted { id, created: false }
            }
        };
        out.push(submitted);
    }
    Ok(out)
}
