//! Creating tasks: one INSERT for the whole batch, then one lookup for the idempotency
//! keys that already existed.

use crate::{db, micros};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};
use std::collections::HashMap;
use std::sync::LazyLock;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::{StoreError, StoreResult, Submitted};

const INSERT: &str = include_str!("../queries/task_insert.sql");
const BY_KEY: &str = include_str!("../queries/task_by_idempotency_key.sql");

/// The insert's four forms: with or without the conflict clause for idempotency keys,
/// notifying in the statement or not.
static INSERTS: LazyLock<[String; 4]> = LazyLock::new(|| {
    let form = |keyed: bool, notify: bool| {
        INSERT
            .replace(
                "/* ON_CONFLICT */",
                if keyed {
                    "ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING"
                } else {
                    ""
                },
            )
            .replace(
                "/* WAKE */",
                if notify {
                    ", CASE WHEN inserted.due THEN pg_notify('tasktable_wake', inserted.queue) END AS woke"
                } else {
                    ""
                },
            )
    };
    [
        form(false, false),
        form(false, true),
        form(true, false),
        form(true, true),
    ]
});

/// Who sends the wake-ups of the tasks an insert makes due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// The statement notifies; PostgreSQL delivers when the enclosing transaction
    /// commits. For inserts inside a transaction that this module does not end.
    AtCommit,
    /// The caller sends them once the autocommitted statement has returned
    /// ([`Inserted::due_queues`]).
    ByCaller,
}

pub struct Inserted {
    /// One per input task, in input order.
    pub submitted: Vec<Submitted>,
    /// Queues that got a task due now (with [`Wake::AtCommit`], NOTIFY is already queued
    /// for them).
    pub due_queues: Vec<String>,
}

/// Inserts validated tasks on `conn`, inside whatever transaction it is in (or as one
/// autocommitted statement); `wake` says who sends the wake-ups.
pub async fn insert(
    conn: &mut PgConnection,
    tasks: &[NewTask],
    now: Option<DateTime<Utc>>,
    wake: Wake,
) -> StoreResult<Inserted> {
    if tasks.is_empty() {
        return Ok(Inserted {
            submitted: Vec::new(),
            due_queues: Vec::new(),
        });
    }
    let state = |t: &NewTask| {
        if t.held {
            TaskState::Held
        } else {
            TaskState::Pending
        }
    };
    let keyed = tasks.iter().any(|t| t.idempotency_key.is_some());
    let sql = &INSERTS[usize::from(keyed) * 2 + usize::from(wake == Wake::AtCommit)];
    let rows = sqlx::query(sql)
        .bind(tasks.iter().map(|t| t.kind.as_str()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.queue.as_str()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| state(t).as_str()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.payload.clone()).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.key.clone()).collect::<Vec<_>>())
        .bind(
            tasks
                .iter()
                .map(|t| t.idempotency_key.clone())
                .collect::<Vec<_>>(),
        )
        .bind(tasks.iter().map(|t| t.priority).collect::<Vec<_>>())
        .bind(tasks.iter().map(|t| t.run_at).collect::<Vec<_>>())
        .bind(
            tasks
                .iter()
                .map(|t| micros(t.delay.unwrap_or_default()))
                .collect::<Vec<_>>(),
        )
        .bind(
            tasks
                .iter()
                .map(|t| t.max_attempts as i32)
                .collect::<Vec<_>>(),
        )
        .bind(
            tasks
                .iter()
                .map(|t| t.backoff.initial.as_millis() as i64)
                .collect::<Vec<_>>(),
        )
        .bind(
            tasks
                .iter()
                .map(|t| t.backoff.multiplier)
                .collect::<Vec<_>>(),
        )
        .bind(
            tasks
                .iter()
                .map(|t| t.backoff.max.as_millis() as i64)
                .collect::<Vec<_>>(),
        )
        .bind(tasks.iter().map(|t| t.backoff.jitter).collect::<Vec<_>>())
        .bind(
            tasks
                .iter()
                .map(|t| t.timeout.map(|d| d.as_millis() as i64))
                .collect::<Vec<_>>(),
        )
        .bind(now)
        .bind(
            tasks
                .iter()
                .map(|t| t.target.to_column())
                .collect::<Vec<_>>(),
        )
        .bind(
            tasks
                .iter()
                .map(|t| t.affinity.map(|d| d.as_millis() as i64))
                .collect::<Vec<_>>(),
        )
        .bind(
            tasks
                .iter()
                .map(|t| t.created_by.as_ref().map(|a| a.to_column()))
                .collect::<Vec<_>>(),
        )
        .fetch_all(&mut *conn)
        .await
        .map_err(db)?;

    let mut ids: Vec<Option<i64>> = vec![None; tasks.len()];
    let mut due_queues = Vec::new();
    for row in &rows {
        let ord: i64 = row.try_get("ord").map_err(db)?;
        let slot = usize::try_from(ord - 1)
            .ok()
            .filter(|i| *i < tasks.len())
            .ok_or_else(|| {
                StoreError::Database(format!("insert returned position {ord}").into())
            })?;
        ids[slot] = row.try_get("id").map_err(db)?;
        if row.try_get::<Option<bool>, _>("due").map_err(db)? == Some(true) {
            due_queues.push(tasks[slot].queue.clone());
        }
    }

    // Inputs that were not inserted carry an idempotency key that exists already, from an
    // earlier submit or from earlier in this batch.
    let missing: Vec<String> = tasks
        .iter()
        .zip(&ids)
        .filter(|(_, id)| id.is_none())
        .filter_map(|(t, _)| t.idempotency_key.clone())
        .collect();
    let existing: HashMap<String, i64> = if missing.is_empty() {
        HashMap::new()
    } else {
        sqlx::query_as(BY_KEY)
            .bind(&missing)
            .fetch_all(&mut *conn)
            .await
            .map_err(db)?
            .into_iter()
            .collect()
    };
    let submitted = tasks
        .iter()
        .zip(ids)
        .enumerate()
        .map(|(index, (t, id))| match id {
            Some(id) => Ok(Submitted { id, created: true }),
            None => t
                .idempotency_key
                .as_ref()
                .and_then(|k| existing.get(k))
                .map(|&id| Submitted { id, created: false })
                .ok_or_else(|| {
                    StoreError::Database(
                        format!(
                            "task #{index} was neither created nor found by its idempotency key"
                        )
                        .into(),
                    )
                }),
        })
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(Inserted {
        submitted,
        due_queues,
    })
}
