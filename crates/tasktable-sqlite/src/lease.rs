//! The worker's side of a task: claim, renew, checkpoint, finish, and the rescuer's scan.
//! Every write after the claim is fenced by `(id, lease_token, lease_credential, state =
//! 'running')`.

use crate::sql::Row;
use crate::time::{from_text, to_text};
use crate::{db, now_or_db, SqliteBackend};
use chrono::{DateTime, Utc};
use sqlx::{Row as _, SqliteConnection};
use std::collections::HashMap;
use std::sync::LazyLock;
use tasktable_core::stored::after;
use tasktable_core::{Lease, Target, Task, TaskState};
use tasktable_sql::hot::expand;
use tasktable_sql::row::{task_from_row, TASK_COLUMNS};
use tasktable_sql::rules::{ClaimWrite, Val};
use tasktable_sql::{rules, Dialect};
use tasktable_store::*;

static CLAIM_SELECT: LazyLock<String> = LazyLock::new(|| {
    expand(
        include_str!("../queries/task_claim_select.sql"),
        &[("queue_paused", include_str!("../queries/queue_paused.sql"))],
    )
});
/// The claim's update, with the claim's transition (`rules::claim_write`) in its place.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    let write = rules::claim_write(
        Dialect::Sqlite,
        "",
        &ClaimWrite {
            now: Val::Sql("?2"),
            lease_until: Val::Sql("?3"),
            worker_id: Val::Sql("?4"),
            worker_host: Val::Sql("?5"),
            credential: Val::Sql("json_extract(?6, '$.\"' || id || '\"')"),
        },
    );
    expand(
        include_str!("../queries/task_claim.sql"),
        &[(rules::CLAIM_WRITE, &write)],
    )
});
/// task_renew.sql, fenced (`rules::fence`).
static RENEW: LazyLock<String> = LazyLock::new(|| {
    let file = include_str!("../queries/task_renew.sql");
    rules::fenced(file, Dialect::Sqlite, "", "?3", "?4")
});
/// task_checkpoint.sql, fenced (`rules::fence`).
static CHECKPOINT: LazyLock<String> = LazyLock::new(|| {
    let file = include_str!("../queries/task_checkpoint.sql");
    rules::fenced(file, Dialect::Sqlite, "", "?4", "?5")
});
const LEASE_ROWS: &str = include_str!("../queries/lease_rows.sql");
const FINISH_LOCK: &str = include_str!("../queries/task_finish_lock.sql");
/// The history insert, under the finish's fence, with core's retry rule.
static ATTEMPT_INSERT: LazyLock<String> = LazyLock::new(|| {
    with_retry_state(&expand(
        include_str!("../queries/attempt_insert.sql"),
        &[
            ("finish_items", FINISH_ITEMS),
            (rules::FENCE, &FINISH_FENCE),
        ],
    ))
});
/// The fence of a finish's items (`rules::fence`).
static FINISH_FENCE: LazyLock<String> =
    LazyLock::new(|| rules::fence(Dialect::Sqlite, "", "i_token", "i_credential"));
/// The finish, with core's affinity rule (which names the retry rule), retry rule and
/// the fence.
static FINISH: LazyLock<String> = LazyLock::new(|| {
    let affinity = rules::affinity(
        Dialect::Sqlite,
        "",
        &format!("coalesce(i_state, {{{}}}) = 'pending'", rules::RETRY_STATE),
        "i_run_at",
    );
    with_retry_state(&expand(
        include_str!("../queries/task_finish.sql"),
        &[
            (rules::AFFINITY, &affinity),
            ("finish_items", FINISH_ITEMS),
            (rules::FENCE, &FINISH_FENCE),
        ],
    ))
});
/// Most items a finish writes per statement: bounds the JSON text bound as one value (a
/// result may be large, and SQLite caps a value at 1e9 bytes).
const FINISH_CHUNK: usize = 500;
/// The chosen items of a finish as rows, from the JSON array bound as ?1 ([`items_json`]):
/// one array per item, in input order.
const FINISH_ITEMS: &str = "SELECT key AS i_ord,
       json_extract(value, '$[0]') AS i_id,
       json_extract(value, '$[1]') AS i_state,
       json_extract(value, '$[2]') AS i_run_at,
       json_extract(value, '$[3]') AS i_refund,
       json_extract(value, '$[4]') AS i_result,
       json_extract(value, '$[5]') AS i_error,
       json_extract(value, '$[6]') AS i_outcome,
       json_extract(value, '$[7]') AS i_token,
       json_extract(value, '$[8]') AS i_credential
    FROM json_each(?1)";
const QUEUES_TO_WAKE: &str = include_str!("../queries/queues_to_wake.sql");
static LIST_EXPIRED: LazyLock<String> = LazyLock::new(|| {
    expand(
        include_str!("../queries/task_list_expired.sql"),
        &[("task_columns", TASK_COLUMNS)],
    )
});

/// `sql` with core's retry rule, read from the unaliased task row.
fn with_retry_state(sql: &str) -> String {
    expand(sql, &[(rules::RETRY_STATE, &rules::retry_state(""))])
}

pub async fn claim(store: &SqliteBackend, p: &ClaimParams) -> StoreResult<Vec<Task>> {
    if p.limit == 0 || p.kinds.is_empty() {
        return Ok(Vec::new());
    }
    let p = p.clone();
    store
        .write(move |conn| Box::pin(async move { claim_in(conn, p).await }))
        .await
}

async fn claim_in(tx: &mut SqliteConnection, p: ClaimParams) -> StoreResult<Vec<Task>> {
    let kinds =
        serde_json::to_string(&p.kinds).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
    let needles = serde_json::to_string(&Target::needles(&p.worker_id, &p.worker_groups))
        .map_err(|e| StoreError::InvalidInput(e.to_string()))?;
    let now = now_or_db(&mut *tx, p.now).await?;
    let now_text = to_text(now);
    let ids: Vec<i64> = sqlx::query_scalar(&CLAIM_SELECT)
        .bind(&p.queue)
        .bind(&now_text)
        .bind(&kinds)
        .bind(i64::from(p.limit))
        .bind(needles)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    let ids_json =
        serde_json::to_string(&ids).map_err(|e| StoreError::InvalidInput(e.to_string()))?;
    let credentials: serde_json::Map<String, serde_json::Value> = ids
        .iter()
        .zip(new_lease_credentials(ids.len()))
        .map(|(id, c)| (id.to_string(), c.to_hex().into()))
        .collect();
    let rows = sqlx::query(&CLAIM)
        .bind(ids_json)
        .bind(&now_text)
        .bind(to_text(after(now, p.lease_for)))
        .bind(&p.worker_id)
        .bind(&p.worker_host)
        .bind(serde_json::Value::Object(credentials).to_string())
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    let mut tasks = rows
        .into_iter()
        .map(|r| task_from_row(&Row(r)))
        .collect::<StoreResult<Vec<_>>>()?;
    tasks.sort_by(Task::claim_order);
    Ok(tasks)
}

async fn lost_status(conn: &mut SqliteConnection, lease: Lease) -> StoreResult<LeaseStatus> {
    let row = sqlx::query(LEASE_ROWS)
        .bind(lease.task_id)
        .fetch_optional(conn)
        .await
        .map_err(db)?;
    let row = match row {
        Some(r) => {
            let state: String = r.try_get(0).map_err(db)?;
            match state.parse::<TaskState>() {
                Ok(state) => Some(LeaseRow {
                    state,
                    token: r.try_get(1).map_err(db)?,
                    credential: credential_from_db(r.try_get(2).map_err(db)?)?,
                    last_outcome: outcome_from_db(r.try_get(3).map_err(db)?),
                }),
                Err(_) => None,
            }
        }
        None => None,
    };
    Ok(lost_lease_status(lease, row))
}

pub async fn renew(store: &SqliteBackend, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
    if p.leases.is_empty() {
        return Ok(Vec::new());
    }
    store
        .write(move |conn| Box::pin(async move { renew_in(conn, p).await }))
        .await
}

async fn renew_in(tx: &mut SqliteConnection, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
    let now = now_or_db(&mut *tx, p.now).await?;
    let until = to_text(after(now, p.lease_for));
    let mut out = Vec::with_capacity(p.leases.len());
    for lease in &p.leases {
        let expires: Option<String> = sqlx::query_scalar(&RENEW)
            .bind(&until)
            .bind(lease.task_id)
            .bind(lease.token)
            .bind(lease.credential.map(|c| c.to_hex()))
            .fetch_optional(&mut *tx)
            .await
            .map_err(db)?;
        out.push(match expires {
            Some(t) => LeaseStatus::Held {
                expires_at: Some(from_text(&t)?),
            },
            None => lost_status(&mut *tx, *lease).await?,
        });
    }
    Ok(out)
}

/// Saves `p`, which [`prepare_checkpoint`] has checked.
pub async fn checkpoint(store: &SqliteBackend, p: CheckpointParams) -> StoreResult<LeaseStatus> {
    store
        .write(move |conn| Box::pin(async move { checkpoint_in(conn, p).await }))
        .await
}

async fn checkpoint_in(tx: &mut SqliteConnection, p: CheckpointParams) -> StoreResult<LeaseStatus> {
    let done = sqlx::query(&CHECKPOINT)
        .bind(p.checkpoint.as_ref().map(|v| v.to_string()))
        .bind(p.progress.as_ref().map(|v| v.to_string()))
        .bind(p.lease.task_id)
        .bind(p.lease.token)
        .bind(p.lease.credential.map(|c| c.to_hex()))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    let status = if done.rows_affected() == 1 {
        LeaseStatus::Held { expires_at: None }
    } else {
        lost_status(&mut *tx, p.lease).await?
    };
    Ok(status)
}

pub async fn finish(store: &SqliteBackend, p: FinishParams) -> StoreResult<Vec<bool>> {
    if p.items.is_empty() {
        return Ok(Vec::new());
    }
    let (out, requeued) = store
        .write(move |conn| Box::pin(async move { finish_in(conn, p).await }))
        .await?;
    if !requeued.is_empty() {
        // A task given back without delay is due at once: wake idle workers.
        let queues: Vec<String> = {
            let mut conn = store.pools.reader.acquire().await.map_err(db)?;
            let ids = serde_json::to_string(&requeued)
                .map_err(|e| StoreError::InvalidInput(e.to_string()))?;
            sqlx::query_scalar(QUEUES_TO_WAKE)
                .bind(ids)
                .fetch_all(&mut *conn)
                .await
                .map_err(db)?
        };
        for q in queues {
            store.wake(&q);
        }
    }
    Ok(out)
}

/// Ends the attempts of `p` on the writer connection, in three statements for up to
/// [`FINISH_CHUNK`] items (and the clock's read, unless the call gives the time): the
/// fences read (task_finish_lock.sql), the items that apply chosen as every store chooses
/// them, then their history rows and their ends written for all of them at once. Returns
/// which applied, and the tasks given back without delay.
async fn finish_in(
    tx: &mut SqliteConnection,
    p: FinishParams,
) -> StoreResult<(Vec<bool>, Vec<i64>)> {
    let now = now_or_db(&mut *tx, p.now).await?;
    let now_text = to_text(now);
    let rows: Vec<FinishRow> = p.items.iter().map(FinishItem::row).collect();
    let ids = serde_json::to_string(&rows.iter().map(|r| r.task_id).collect::<Vec<_>>())
        .map_err(|e| StoreError::InvalidInput(e.to_string()))?;
    let mut fences = HashMap::new();
    for r in sqlx::query(FINISH_LOCK)
        .bind(ids)
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?
    {
        let expires: Option<String> = r.try_get("lease_expires_at").map_err(db)?;
        let fence = FinishFence {
            token: r.try_get("lease_token").map_err(db)?,
            credential: r.try_get("lease_credential").map_err(db)?,
            running: r.try_get("running").map_err(db)?,
            lease_expires_at: expires.as_deref().map(from_text).transpose()?,
        };
        fences.insert(r.try_get::<i64, _>("id").map_err(db)?, fence);
    }
    let applied = finish_applies(&rows, |id| fences.get(&id), p.only_if_expired, now);
    let chosen: Vec<&FinishRow> = rows
        .iter()
        .zip(&applied)
        .filter(|(_, a)| **a)
        .map(|(r, _)| r)
        .collect();
    if chosen.is_empty() {
        return Ok((applied, Vec::new()));
    }
    for chunk in chosen.chunks(FINISH_CHUNK) {
        let items = items_json(chunk, now)?;
        let recorded = sqlx::query(&ATTEMPT_INSERT)
            .bind(&items)
            .bind(&now_text)
            .bind(p.only_if_expired)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        let ended = sqlx::query(&FINISH)
            .bind(&items)
            .bind(&now_text)
            .bind(p.only_if_expired)
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        // The write transaction holds the database: the rows the fences were read from
        // are the rows these wrote.
        let n = chunk.len() as u64;
        if recorded.rows_affected() != n || ended.rows_affected() != n {
            return Err(StoreError::Database(
                format!(
                    "finish chose {n} items but recorded {} and ended {}",
                    recorded.rows_affected(),
                    ended.rows_affected()
                )
                .into(),
            ));
        }
    }
    let requeued = chosen
        .iter()
        .filter(|r| r.may_be_due_at_once())
        .map(|r| r.task_id)
        .collect();
    Ok((applied, requeued))
}

/// The chosen items as [`FINISH_ITEMS`] reads them: `[id, new state, run_at if it goes
/// back to pending, 1 to give the attempt back, result (its JSON text, as a string),
/// error, outcome, token, credential]` each.
fn items_json(chosen: &[&FinishRow], now: DateTime<Utc>) -> StoreResult<String> {
    let items: Vec<serde_json::Value> = chosen
        .iter()
        .map(|r| {
            serde_json::json!([
                r.task_id,
                r.new_state.map(|s| s.as_str()),
                to_text(after(now, r.delay)),
                i64::from(r.refund_attempt),
                r.result.as_ref().map(|v| v.to_string()),
                r.error,
                r.outcome.as_str(),
                r.token,
                r.credential,
            ])
        })
        .collect();
    serde_json::to_string(&items).map_err(|e| StoreError::InvalidInput(e.to_string()))
}

pub async fn list_expired(conn: &mut SqliteConnection, p: ExpiredParams) -> StoreResult<Vec<Task>> {
    let now = now_or_db(conn, p.now).await?;
    let rows = sqlx::query(&LIST_EXPIRED)
        .bind(to_text(now))
        .bind(i64::from(p.limit))
        .fetch_all(conn)
        .await
        .map_err(db)?;
    rows.into_iter().map(|r| task_from_row(&Row(r))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SqliteStore;
    use serde_json::json;
    use sqlx::Executor;
    use tasktable_core::NewTask;
    use tasktable_store::{Store, SubmitParams};

    /// The plan of `sql` (with `items` as its JSON parameter, then a time and a flag).
    async fn plan(store: &SqliteBackend, sql: &str, items: &str) -> Vec<String> {
        let mut conn = store.pools.writer.acquire().await.unwrap();
        sqlx::query(&format!("EXPLAIN QUERY PLAN {sql}"))
            .bind(items)
            .bind("2030-01-01T00:00:00.000000Z")
            .bind(false)
            .fetch_all(&mut *conn)
            .await
            .unwrap()
            .iter()
            .map(|r| r.get::<String, _>("detail"))
            .collect()
    }

    /// With statistics taken while every task was pending, a finish's writes still find
    /// their task rows by id, never through the state index (which joined every running
    /// task to every item and cost twice the CPU per drained task: docs/benchmarks.md,
    /// section 24).
    #[tokio::test]
    async fn a_finish_finds_its_rows_by_id_whatever_the_statistics() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("plan.db");
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        store.migrate().await.unwrap();
        let tasks = (0..2000).map(|i| NewTask::new("k", json!(i))).collect();
        store
            .task_submit(SubmitParams { tasks, now: None })
            .await
            .unwrap();
        store
            .pool()
            .writer
            .acquire()
            .await
            .unwrap()
            .execute("ANALYZE")
            .await
            .unwrap();
        let items = "[[1, \"succeeded\", \"2030-01-01T00:00:00.000000Z\", 0, null, null, \"succeeded\", 1, null]]";
        for sql in [ATTEMPT_INSERT.as_str(), FINISH.as_str()] {
            let plan = plan(store.db(), sql, items).await;
            let tasks: Vec<&String> = plan
                .iter()
                .filter(|line| line.contains("tasktable_tasks "))
                .collect();
            assert!(
                !tasks.is_empty()
                    && tasks
                        .iter()
                        .all(|line| line.contains("USING INTEGER PRIMARY KEY (rowid=?)")),
                "the task rows must be found by id: {plan:#?}"
            );
        }
    }
}
