//! Creating tasks: one INSERT for the whole batch (a statement of its own for a single
//! task, which skips the batch's machinery), then one lookup for the idempotency keys that
//! already existed.

use crate::{db, micros, WAKE_CHANNEL};
use chrono::{DateTime, Utc};
use sqlx::{PgConnection, Row};
use std::collections::HashMap;
use std::sync::LazyLock;
use tasktable_core::{NewTask, TaskState};
use tasktable_store::{StoreError, StoreResult, Submitted};

/// The batch's statement and the one-row statement, separated by a line holding only `;`.
const INSERT: &str = include_str!("../queries/task_insert.sql");
const BY_KEY: &str = include_str!("../queries/task_by_idempotency_key.sql");

/// Each statement's four forms: with or without the conflict clause for idempotency keys,
/// notifying in the statement or not. `[batch, one]`.
static INSERTS: LazyLock<[[String; 4]; 2]> = LazyLock::new(|| {
    let (batch, one) = INSERT
        .split_once("\n;\n")
        .expect("task_insert.sql holds two statements");
    let forms = |sql: &str, wake: &str| {
        let form = |keyed: bool, notify: bool| {
            sql.replace("/* ON_CONFLICT */", if keyed { ON_CONFLICT } else { "" })
                .replace("/* WAKE */", if notify { wake } else { "" })
        };
        [
            form(false, false),
            form(false, true),
            form(true, false),
            form(true, true),
        ]
    };
    // The batch reads the flag and queue from the insert's answer; the one-row form's
    // RETURNING reads the row itself.
    let wake = |due: &str, queue: &str| {
        format!(", CASE WHEN {due} THEN pg_notify('{WAKE_CHANNEL}', {queue}) END AS woke")
    };
    [
        forms(batch, &wake("inserted.due", "inserted.queue")),
        forms(
            one,
            &wake("state = 'pending' AND run_at <= created_at", "queue"),
        ),
    ]
});

const ON_CONFLICT: &str =
    "ON CONFLICT (idempotency_key) WHERE idempotency_key IS NOT NULL DO NOTHING";

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
    let keyed = tasks.iter().any(|t| t.idempotency_key.is_some());
    let one = tasks.len() == 1;
    let sql =
        &INSERTS[usize::from(one)][usize::from(keyed) * 2 + usize::from(wake == Wake::AtCommit)];
    let query = sqlx::query(sql);
    // Each column once: a single value for the one-row statement, an array for the batch.
    macro_rules! column {
        ($query:expr, |$t:ident| $value:expr) => {
            if one {
                let $t = &tasks[0];
                $query.bind($value)
            } else {
                $query.bind(tasks.iter().map(|$t| $value).collect::<Vec<_>>())
            }
        };
    }
    let query = column!(query, |t| t.kind.as_str());
    let query = column!(query, |t| t.queue.as_str());
    let query = column!(query, |t| if t.held {
        TaskState::Held.as_str()
    } else {
        TaskState::Pending.as_str()
    });
    let query = column!(query, |t| &t.payload);
    let query = column!(query, |t| t.key.as_deref());
    let query = column!(query, |t| t.idempotency_key.as_deref());
    let query = column!(query, |t| t.priority);
    let query = column!(query, |t| t.run_at);
    let query = column!(query, |t| micros(t.delay.unwrap_or_default()));
    let query = column!(query, |t| t.max_attempts as i32);
    let query = column!(query, |t| t.backoff.initial.as_millis() as i64);
    let query = column!(query, |t| t.backoff.multiplier);
    let query = column!(query, |t| t.backoff.max.as_millis() as i64);
    let query = column!(query, |t| t.backoff.jitter);
    let query = column!(query, |t| t.timeout.map(|d| d.as_millis() as i64));
    let query = query.bind(now);
    let query = column!(query, |t| t.target.to_column());
    let query = column!(query, |t| t.affinity.map(|d| d.as_millis() as i64));
    let query = column!(query, |t| t.created_by.as_ref().map(|a| a.to_column()));
    let query = column!(query, |t| t.traceparent.as_ref().map(|tp| tp.as_str()));
    let rows = query.fetch_all(&mut *conn).await.map_err(db)?;

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
