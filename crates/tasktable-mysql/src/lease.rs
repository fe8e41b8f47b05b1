//! The worker's side of a task: claim, renew, checkpoint, finish, and the rescuer's scan.
//! Every write after the claim is fenced by `(id, lease_token, lease_credential, state =
//! 'running')`.
//!
//! MySQL has no `UPDATE ... RETURNING` and no arrays to bind, so where PostgreSQL sends a
//! batch as one statement this store runs one statement per row inside one transaction,
//! and reads back what it needs while it still holds the row locks (finish, the hot one,
//! batches differently: see `finish`). Rows are always written in id order, so two
//! batches over the same rows cannot deadlock each other.

use crate::clock;
use crate::db;
use crate::finish::by_id;
use crate::sql::{get_many, marks, text, Row, MAX_IN_LIST};
use sqlx::{MySqlConnection, MySqlPool, Row as _};
use std::collections::HashMap;
use std::sync::LazyLock;
use tasktable_core::stored::after;
use tasktable_core::{Lease, Target, Task, TaskId};
use tasktable_sql::hot::expand;
use tasktable_sql::row::{state, task_from_row, TASK_COLUMNS};
use tasktable_sql::rules::{self, ClaimWrite, Val};
use tasktable_sql::Dialect;
use tasktable_store::*;

const QUEUE_PAUSED: &str = include_str!("../queries/queue_paused.sql");
const CLAIM_SELECT: &str = include_str!("../queries/task_claim_select.sql");
/// The untargeted lane of task_claim_select.sql on its own, for a claim from a queue with
/// no targeted task waiting: the same text, so the two cannot drift apart. Binds queue,
/// now, each kind, limit.
static UNTARGETED_SELECT: LazyLock<String> = LazyLock::new(|| {
    let start = CLAIM_SELECT.find("(SELECT").expect("the first lane") + 1;
    let end = start
        + CLAIM_SELECT[start..]
            .find(")\n    UNION ALL")
            .expect("the second lane after it");
    CLAIM_SELECT[start..end].to_owned()
});
/// The claim's update, with the claim's transition (`rules::claim_write`) in its place;
/// `{credentials}` and `{ids}` are filled in per call.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    let write = rules::claim_write(
        Dialect::MySql,
        "",
        &ClaimWrite {
            now: Val::Sql("?"),
            lease_until: Val::Sql("?"),
            worker_id: Val::Sql("?"),
            worker_host: Val::Sql("?"),
            credential: Val::Sql("{credentials}"),
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
    rules::fenced(file, Dialect::MySql, "", "?", "?")
});
/// task_checkpoint.sql, fenced (`rules::fence`).
static CHECKPOINT: LazyLock<String> = LazyLock::new(|| {
    let file = include_str!("../queries/task_checkpoint.sql");
    rules::fenced(file, Dialect::MySql, "", "?", "?")
});
const LEASE_ROWS: &str = include_str!("../queries/lease_rows.sql");
static LIST_EXPIRED: LazyLock<String> = LazyLock::new(|| {
    expand(
        include_str!("../queries/task_list_expired.sql"),
        &[("task_columns", TASK_COLUMNS)],
    )
});

/// Claims inside the caller's transaction: choose and lock, then update, then read back.
pub async fn claim(
    conn: &mut MySqlConnection,
    p: &ClaimParams,
    untargeted: &UntargetedQueues,
) -> StoreResult<Vec<Task>> {
    let closed: Option<i64> = sqlx::query_scalar(QUEUE_PAUSED)
        .bind(&p.queue)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    if closed.is_some() {
        return Ok(Vec::new());
    }
    let now = clock::now(conn, p.now).await?;
    let limit = i64::from(p.limit);
    let mut ids: Vec<TaskId> = if needs_targeted_lane(conn, &p.queue, untargeted).await? {
        let needles = Target::needles(&p.worker_id, &p.worker_groups);
        let select = CLAIM_SELECT
            .replace("{kinds}", &marks(p.kinds.len()))
            .replace("{needles}", &needle_tests(needles.len()));
        let mut q = sqlx::query_scalar(&select)
            .bind(&p.queue)
            .bind(clock::at(now));
        for kind in &p.kinds {
            q = q.bind(kind);
        }
        q = q.bind(limit).bind(&p.queue).bind(clock::at(now));
        for kind in &p.kinds {
            q = q.bind(kind);
        }
        for needle in &needles {
            q = q.bind(needle);
        }
        q.bind(limit).bind(limit).fetch_all(&mut *conn).await
    } else {
        let select = UNTARGETED_SELECT.replace("{kinds}", &marks(p.kinds.len()));
        let mut q = sqlx::query_scalar(&select)
            .bind(&p.queue)
            .bind(clock::at(now));
        for kind in &p.kinds {
            q = q.bind(kind);
        }
        q.bind(limit).fetch_all(&mut *conn).await
    }
    .map_err(db)?;
    if ids.is_empty() {
        return Ok(Vec::new());
    }
    ids.sort_unstable();
    let until = after(now, p.lease_for);
    for chunk in ids.chunks(MAX_IN_LIST) {
        let sql = CLAIM
            .replace("{credentials}", &by_id(chunk.len()))
            .replace("{ids}", &marks(chunk.len()));
        let mut q = sqlx::query(&sql)
            .bind(clock::at(now))
            .bind(clock::at(until))
            .bind(clock::at(until))
            .bind(clock::at(now))
            .bind(&p.worker_id)
            .bind(&p.worker_host);
        for (id, credential) in chunk.iter().zip(new_lease_credentials(chunk.len())) {
            q = q.bind(id).bind(credential.to_hex());
        }
        q = q.bind(clock::at(now)).bind(clock::at(now));
        for id in chunk {
            q = q.bind(id);
        }
        q.execute(&mut *conn).await.map_err(db)?;
    }
    let mut tasks = get_many(conn, &ids).await?;
    tasks.sort_by(Task::claim_order);
    Ok(tasks)
}

/// `INSTR(target, ?) > 0` once per needle, joined by OR.
fn needle_tests(n: usize) -> String {
    vec!["INSTR(target, ?) > 0"; n].join(" OR ")
}

/// Whether queue ? has a targeted task waiting: one probe of the claim index's targeted
/// range (`targeted = 1`), which holds only waiting targeted tasks at its head.
const TARGETED_WAITING: &str = "SELECT 1 FROM tasktable_tasks FORCE INDEX (tasktable_tasks_claim) \
    WHERE state = 'pending' AND queue = ? AND targeted = 1 LIMIT 1";

/// The queues a store found with no targeted task waiting, and when. MySQL optimizes a
/// statement anew at every call, and the claim's two lanes cost more to optimize than
/// one: a claim from a queue found without targeted tasks within [`UNTARGETED_FOR`]
/// reads the untargeted lane alone ([`UNTARGETED_SELECT`]). A targeted task another process
/// submits then waits at most that long more for its first claim, as it waits for the
/// poll anyway (MySQL wakes only the workers of the process that submitted); this
/// store's own targeted submits and operator changes forget the queue at once.
#[derive(Debug, Default)]
pub struct UntargetedQueues {
    seen: std::sync::Mutex<HashMap<String, std::time::Instant>>,
    /// Grows at every forget: a probe that began before one records nothing, since a
    /// targeted task may have been committed after it looked.
    forgets: std::sync::atomic::AtomicU64,
}

/// How long a claim trusts that a queue has no targeted task waiting.
pub const UNTARGETED_FOR: std::time::Duration = std::time::Duration::from_secs(1);

impl UntargetedQueues {
    fn fresh(&self, queue: &str) -> bool {
        let seen = self.seen.lock().expect("not poisoned");
        seen.get(queue)
            .is_some_and(|at| at.elapsed() < UNTARGETED_FOR)
    }

    fn forgets(&self) -> u64 {
        self.forgets.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records a probe that began when [`Self::forgets`] read `forgets`.
    fn found_untargeted(&self, queue: &str, forgets: u64) {
        let mut seen = self.seen.lock().expect("not poisoned");
        if self.forgets() != forgets {
            return;
        }
        // Entries of queues no longer claimed go, so that the map stays small.
        if seen.len() >= 1024 {
            seen.retain(|_, at| at.elapsed() < UNTARGETED_FOR);
        }
        seen.insert(queue.to_owned(), std::time::Instant::now());
    }

    /// A targeted task may now wait in `queue` (called once it is committed).
    pub fn forget(&self, queue: &str) {
        let mut seen = self.seen.lock().expect("not poisoned");
        self.forgets
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        seen.remove(queue);
    }

    /// Targeted tasks may now wait anywhere.
    pub fn forget_all(&self) {
        let mut seen = self.seen.lock().expect("not poisoned");
        self.forgets
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        seen.clear();
    }
}

/// Whether this claim needs its targeted lane.
async fn needs_targeted_lane(
    conn: &mut MySqlConnection,
    queue: &str,
    untargeted: &UntargetedQueues,
) -> StoreResult<bool> {
    if untargeted.fresh(queue) {
        return Ok(false);
    }
    let forgets = untargeted.forgets();
    let waiting: Option<i64> = sqlx::query_scalar(TARGETED_WAITING)
        .bind(queue)
        .fetch_optional(&mut *conn)
        .await
        .map_err(db)?;
    if waiting.is_none() {
        untargeted.found_untargeted(queue, forgets);
    }
    Ok(waiting.is_some())
}

/// The lease columns and expiry of the given tasks, read on `conn`.
async fn lease_rows(
    conn: &mut MySqlConnection,
    ids: &[TaskId],
) -> StoreResult<HashMap<TaskId, (LeaseRow, Option<chrono::DateTime<chrono::Utc>>)>> {
    let mut found = HashMap::with_capacity(ids.len());
    for chunk in ids.chunks(MAX_IN_LIST) {
        let sql = LEASE_ROWS.replace("{ids}", &marks(chunk.len()));
        let mut q = sqlx::query(&sql);
        for id in chunk {
            q = q.bind(id);
        }
        for r in q.fetch_all(&mut *conn).await.map_err(db)? {
            found.insert(
                r.try_get("id").map_err(db)?,
                (
                    LeaseRow {
                        state: state(text(&r, "state")?)?,
                        token: r.try_get("lease_token").map_err(db)?,
                        credential: credential_from_db(text(&r, "lease_credential")?)?,
                        last_outcome: outcome_from_db(text(&r, "last_outcome")?),
                    },
                    r.try_get("lease_expires_at").map_err(db)?,
                ),
            );
        }
    }
    Ok(found)
}

/// Renews inside the caller's transaction, then reads every row back once: the new
/// expiry of the leases held, and why the others are not.
pub async fn renew(conn: &mut MySqlConnection, p: &RenewParams) -> StoreResult<Vec<LeaseStatus>> {
    let now = clock::now(conn, p.now).await?;
    let until = after(now, p.lease_for);
    let mut order: Vec<&Lease> = p.leases.iter().collect();
    order.sort_by_key(|l| (l.task_id, l.token));
    let mut held: HashMap<Lease, bool> = HashMap::with_capacity(order.len());
    for lease in order {
        // rows_affected counts matched rows (sqlx asks for CLIENT_FOUND_ROWS), so a
        // renewal to the same expiry still counts as held.
        let done = sqlx::query(&RENEW)
            .bind(clock::at(until))
            .bind(clock::at(until))
            .bind(lease.task_id)
            .bind(lease.token)
            .bind(lease.credential.map(|c| c.to_hex()))
            .execute(&mut *conn)
            .await
            .map_err(db)?;
        held.insert(*lease, done.rows_affected() == 1);
    }
    let mut ids: Vec<TaskId> = p.leases.iter().map(|l| l.task_id).collect();
    ids.sort_unstable();
    ids.dedup();
    let rows = lease_rows(conn, &ids).await?;
    Ok(p.leases
        .iter()
        .map(|l| {
            let row = rows.get(&l.task_id).copied();
            match (held.get(l), row) {
                (Some(true), Some((_, expires_at))) => LeaseStatus::Held { expires_at },
                _ => lost_lease_status(*l, row.map(|(lease_row, _)| lease_row)),
            }
        })
        .collect())
}

/// One statement, so no transaction; for a lease that did not match, one more read.
pub async fn checkpoint(
    conn: &mut MySqlConnection,
    p: &CheckpointParams,
) -> StoreResult<LeaseStatus> {
    let done = sqlx::query(&CHECKPOINT)
        .bind(&p.checkpoint)
        .bind(&p.progress)
        .bind(p.lease.task_id)
        .bind(p.lease.token)
        .bind(p.lease.credential.map(|c| c.to_hex()))
        .execute(&mut *conn)
        .await
        .map_err(db)?;
    if done.rows_affected() == 1 {
        return Ok(LeaseStatus::Held { expires_at: None });
    }
    let row = lease_rows(conn, &[p.lease.task_id])
        .await?
        .remove(&p.lease.task_id)
        .map(|(lease_row, _)| lease_row);
    Ok(lost_lease_status(p.lease, row))
}

/// The rows to write for a finish, checked before any is sent: a value the server would
/// refuse as larger than `max_allowed_packet` would cost the connection, not just the
/// statement, so it fails here with a message that says so.
pub fn finish_rows(p: &FinishParams, max_value_bytes: usize) -> StoreResult<Vec<FinishRow>> {
    let rows: Vec<FinishRow> = p.items.iter().map(FinishItem::row).collect();
    for r in &rows {
        let size = r.result.as_ref().map_or(0, |v| v.to_string().len())
            + r.error.as_ref().map_or(0, String::len);
        if size > max_value_bytes {
            return Err(StoreError::InvalidInput(format!(
                "the result and error of task {} take {size} bytes, more than the server's \
                 max_allowed_packet leaves room for ({max_value_bytes}); raise max_allowed_packet",
                r.task_id
            )));
        }
    }
    Ok(rows)
}

/// Running tasks whose lease has run out, oldest expiry first, for the rescuer.
pub async fn list_expired(pool: &MySqlPool, p: ExpiredParams) -> StoreResult<Vec<Task>> {
    let rows = sqlx::query(&LIST_EXPIRED)
        .bind(p.now.map(|t| clock::at(clock::truncate(t))))
        .bind(i64::from(p.limit))
        .fetch_all(pool)
        .await
        .map_err(db)?;
    rows.into_iter().map(|r| task_from_row(&Row(r))).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_untargeted_lane_alone_is_a_whole_locking_read_of_its_lane() {
        let lane = UNTARGETED_SELECT.trim();
        assert!(lane.starts_with("SELECT id"), "{lane}");
        assert!(lane.ends_with("FOR UPDATE SKIP LOCKED"), "{lane}");
        assert!(lane.contains("targeted = 0") && !lane.contains("targeted = 1"));
        assert!(!lane.contains("UNION") && !lane.contains("{needles}"));
        assert_eq!(
            lane.matches('?').count(),
            3,
            "queue, now, limit (and {{kinds}})"
        );
    }
}
