//! Ending a batch of attempts in a few statements: a locking read of the batch's rows
//! (`task_finish_lock.sql`), then, 100 items at a time, one `UPDATE` of those whose lease
//! is still held (`task_finish.sql`) and one `INSERT ... SELECT` of their history rows
//! (`attempt_insert.sql`); and, when some task went back to `pending` without delay, a
//! read of the queues to wake (`queues_to_wake.sql`).
//!
//! MySQL has no arrays to bind, so the per-task values (new state, run_at, result,
//! error, outcome, due time) travel as `CASE id WHEN ? THEN ? ... END` lists. The
//! locking read (`FOR UPDATE`, in id order like every write of this store) decides which
//! items apply: the token and credential match, the task is `running`, and, for the
//! rescuer, the lease has passed. The rows stay locked until the caller's transaction
//! ends, so nothing can change that answer before the `UPDATE`, which states the fence
//! again (`running`, token and credential, as every backend's finish does) and must match
//! every chosen row.

use crate::clock;
use crate::db;
use crate::sql::{marks, text, MAX_IN_LIST};
use chrono::{DateTime, Utc};
use sqlx::mysql::MySqlArguments;
use sqlx::query::Query;
use sqlx::{MySql, MySqlConnection, Row};
use std::collections::HashMap;
use std::sync::LazyLock;
use tasktable_core::stored::after;
use tasktable_core::TaskState;
use tasktable_sql::hot::expand;
use tasktable_sql::{rules, Dialect};
use tasktable_store::{
    finish_applies, FinishFence, FinishParams, FinishRow, StoreError, StoreResult,
};

const LOCK: &str = include_str!("../queries/task_finish_lock.sql");
/// The update, with core's affinity and retry rules and the fence (each item's token and
/// credential by id, `{case}`) over the unaliased task row.
static UPDATE: LazyLock<String> = LazyLock::new(|| {
    expand(
        include_str!("../queries/task_finish.sql"),
        &[
            (
                rules::AFFINITY,
                &rules::affinity(Dialect::MySql, "", "state = 'pending'", "run_at"),
            ),
            (rules::RETRY_STATE, &rules::retry_state("")),
            (
                rules::FENCE,
                &rules::fence(Dialect::MySql, "", "{case}", "{case}"),
            ),
        ],
    )
});
const RECORD: &str = include_str!("../queries/attempt_insert.sql");
const QUEUES_TO_WAKE: &str = include_str!("../queries/queues_to_wake.sql");

/// Most items per statement. MariaDB searches a `CASE id` list from its start for every
/// row, so a statement's cost grows with the square of its items: at 500 the lists took
/// about a tenth of the server's CPU in a drain, at 100 they are cheaper than the extra
/// statements (docs/benchmarks.md, section 25).
const CHUNK: usize = 100;

/// A task row as the locking read found it: its fence, and when it was due.
struct Current {
    fence: FinishFence,
    run_at: DateTime<Utc>,
}

/// Ends attempts inside the caller's transaction. Returns one flag per item, and the
/// queues that got a task due at once.
pub async fn finish(
    conn: &mut MySqlConnection,
    rows: &[FinishRow],
    p: &FinishParams,
) -> StoreResult<(Vec<bool>, Vec<String>)> {
    let now = clock::now(conn, p.now).await?;
    let current = lock(conn, rows).await?;

    let fence = |id| current.get(&id).map(|c: &Current| &c.fence);
    let applied = finish_applies(rows, fence, p.only_if_expired, now);
    // Written in task id order, the order of every write of this store.
    let mut chosen: Vec<usize> = (0..rows.len()).filter(|&i| applied[i]).collect();
    chosen.sort_by_key(|&i| rows[i].task_id);

    let mut requeued = Vec::new();
    for chunk in chosen.chunks(CHUNK) {
        let items: Vec<&FinishRow> = chunk.iter().map(|&i| &rows[i]).collect();
        update(conn, &items, now).await?;
        record(conn, &items, &current, now).await?;
        requeued.extend(
            items
                .iter()
                .filter(|r| r.may_be_due_at_once())
                .map(|r| r.task_id),
        );
    }
    // A task given back without delay is due at once: its queue's idle workers are woken
    // once this commits.
    let mut due_queues = Vec::new();
    for chunk in requeued.chunks(MAX_IN_LIST) {
        let sql = for_items(QUEUES_TO_WAKE, chunk.len());
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.bind(id);
        }
        for r in q.fetch_all(&mut *conn).await.map_err(db)? {
            due_queues.push(text(&r, "queue")?);
        }
    }
    Ok((applied, due_queues))
}

/// Locks the batch's task rows (id order) and reads what decides whether an item applies,
/// and when each task was due (the update may move run_at).
async fn lock(
    conn: &mut MySqlConnection,
    rows: &[FinishRow],
) -> StoreResult<HashMap<i64, Current>> {
    let mut ids: Vec<i64> = rows.iter().map(|r| r.task_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let mut current = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(MAX_IN_LIST) {
        let sql = for_items(LOCK, chunk.len());
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.bind(id);
        }
        for r in q.fetch_all(&mut *conn).await.map_err(db)? {
            let state: String = text(&r, "state")?;
            current.insert(
                r.try_get("id").map_err(db)?,
                Current {
                    fence: FinishFence {
                        token: r.try_get("lease_token").map_err(db)?,
                        credential: text(&r, "lease_credential")?,
                        running: state == TaskState::Running.as_str(),
                        lease_expires_at: r.try_get("lease_expires_at").map_err(db)?,
                    },
                    run_at: r.try_get("run_at").map_err(db)?,
                },
            );
        }
    }
    Ok(current)
}

/// `sql` for `n` items: one placeholder per id for `{ids}`, and a `CASE id` list
/// ([`by_id`]) for each `{case}`.
fn for_items(sql: &str, n: usize) -> String {
    sql.replace("{case}", &by_id(n)).replace("{ids}", &marks(n))
}

/// `CASE id WHEN ? THEN ? ... END` for `n` items.
pub(crate) fn by_id(n: usize) -> String {
    let mut s = String::with_capacity(16 + n * 16);
    s.push_str("CASE id");
    for _ in 0..n {
        s.push_str(" WHEN ? THEN ?");
    }
    s.push_str(" END");
    s
}

/// Binds one `CASE id` list: each item's id and its value.
fn bind_by_id<'q, T>(
    mut q: Query<'q, MySql, MySqlArguments>,
    items: &[&FinishRow],
    value: impl Fn(&FinishRow) -> T,
) -> Query<'q, MySql, MySqlArguments>
where
    T: 'q + Send + sqlx::Encode<'q, MySql> + sqlx::Type<MySql>,
{
    for r in items {
        q = q.bind(r.task_id).bind(value(r));
    }
    q
}

/// Moves the chosen tasks out of `running` (task_finish.sql).
async fn update(
    conn: &mut MySqlConnection,
    items: &[&FinishRow],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let sql = for_items(&UPDATE, items.len());
    let mut q = sqlx::query(&sql);
    q = bind_by_id(q, items, |r| r.new_state.map(|s| s.as_str()));
    q = bind_by_id(q, items, |r| clock::at(after(now, r.delay)));
    q = q.bind(clock::at(now));
    q = bind_by_id(q, items, |r| i32::from(r.refund_attempt));
    q = bind_by_id(q, items, |r| r.result.clone());
    q = bind_by_id(q, items, |r| r.error.clone());
    q = q.bind(clock::at(now));
    for r in items {
        q = q.bind(r.task_id);
    }
    q = bind_by_id(q, items, |r| r.token);
    q = bind_by_id(q, items, |r| r.credential.clone());
    let done = q.execute(&mut *conn).await.map_err(db)?;
    if done.rows_affected() != items.len() as u64 {
        // The rows are locked since the read that chose them: this would be a bug.
        return Err(StoreError::Database(
            format!(
                "finish changed {} rows of the {} it had locked",
                done.rows_affected(),
                items.len()
            )
            .into(),
        ));
    }
    Ok(())
}

/// Records the attempts just ended, from the rows they left behind (attempt_insert.sql).
async fn record(
    conn: &mut MySqlConnection,
    items: &[&FinishRow],
    current: &HashMap<i64, Current>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let sql = for_items(RECORD, items.len());
    let mut q = sqlx::query(&sql);
    q = bind_by_id(q, items, |r| i32::from(r.refund_attempt));
    q = q.bind(clock::at(now));
    q = bind_by_id(q, items, |r| r.outcome.as_str());
    q = bind_by_id(q, items, |r| r.error.clone());
    q = bind_by_id(q, items, |r| {
        current.get(&r.task_id).map(|c| clock::at(c.run_at))
    });
    for r in items {
        q = q.bind(r.task_id);
    }
    q.execute(&mut *conn).await.map_err(db)?;
    Ok(())
}
