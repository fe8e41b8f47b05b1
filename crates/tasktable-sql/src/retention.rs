//! Retention: finished tasks older than an age, deleted or moved to the archive tables,
//! one short transaction per batch; and the key rate buckets that have filled up again
//! (a full bucket and no row are the same), once a round.
//!
//! A batch picks its ids with a plain read (no locks), then, in its write transaction,
//! locks those of them that still qualify by primary key, in id order (a task an operator
//! retried meanwhile no longer does and is left alone), copies them and their attempts to
//! the archive if asked (a multi-run task's runs, and a batch task's row and failed
//! items, too), and deletes them; their attempts, runs and batch rows go with them
//! (`ON DELETE CASCADE`). Only finished rows are ever locked, which no claim, renewal or finish
//! touches, so retention never stalls workers. The cutoff never passes the statistics'
//! roll-up watermark: minutes not yet summed into `tasktable_stats` are still read from
//! the raw rows, so their tasks wait for a later batch.

use crate::exec::{count, required};
use crate::row::{ATTEMPT_COLUMNS, TASK_COLUMNS};
use crate::stats::SqlStats;
use crate::{Backend, Cells, Exec, Sql};
use chrono::{DateTime, TimeDelta, Utc};
use tasktable_core::TaskState;
use tasktable_store::stats::roll_up;
use tasktable_store::{Checked, PurgeParams, Purged, StoreResult};

/// Every column of `tasktable_attempts`, as the archive keeps them.
const ALL_ATTEMPT_COLUMNS: &str = "id, task_id, attempt, worker_id, worker_host, started_at, \
    finished_at, outcome, error, queue, kind, due_at, task_state";

/// Every column of `tasktable_runs`, as the archive keeps them.
const ALL_RUN_COLUMNS: &str = "task_id, run, worker_id, worker_host, state, lease_token, \
    lease_credential, lease_expires_at, deadline_at, checkpoint, progress, result, error, \
    resumed_from, started_at, finished_at";

/// `AND state = ? AND finished_at < ?`.
fn push_eligible(sql: &mut Sql, state: TaskState, cutoff: DateTime<Utc>) {
    sql.push(" AND state = ")
        .bind(state.as_str())
        .push(" AND finished_at < ")
        .bind(cutoff);
}

/// One batch of [`Store::task_purge`](tasktable_store::Store::task_purge): first rolls
/// statistics up (the cutoff never passes the roll-up's watermark), picks up to `limit`
/// tasks of the state finished before the cutoff, and takes them in a write transaction
/// of their own; a short batch, the round's last, also deletes the key rate buckets that
/// have filled up. A dry run only counts, and counts every eligible task. Answers the
/// count and the cutoff used.
pub async fn purge<B: Backend>(b: &B, p: &Checked<PurgeParams>) -> StoreResult<Purged> {
    debug_assert!(ATTEMPT_COLUMNS
        .split(", ")
        .all(|c| ALL_ATTEMPT_COLUMNS.contains(c)));
    let mut read = b.read().await?;
    let now = read.now(p.now).await?;
    let rolled = roll_up(&SqlStats(b), now).await?;
    let age = TimeDelta::from_std(p.older_than).unwrap_or(TimeDelta::MAX);
    let cutoff = now
        .checked_sub_signed(age)
        .unwrap_or(DateTime::<Utc>::MIN_UTC)
        .min(rolled);
    let d = read.dialect();
    if p.dry_run {
        let mut sql = Sql::new(d, "SELECT count(*) AS n FROM tasktable_tasks WHERE 1 = 1");
        push_eligible(&mut sql, p.state, cutoff);
        let rows = read.fetch(sql).await?;
        let n = rows.first().map_or(Ok(0), |r| count(r, "n"))?;
        return Ok(Purged { count: n, cutoff });
    }
    let mut pick = Sql::new(d, "SELECT id FROM tasktable_tasks WHERE 1 = 1");
    push_eligible(&mut pick, p.state, cutoff);
    pick.push(" ORDER BY id LIMIT ").bind(i64::from(p.limit));
    let ids = read
        .fetch(pick)
        .await?
        .iter()
        .map(|r| required(r.int("id"), "id"))
        .collect::<StoreResult<Vec<i64>>>()?;
    drop(read);
    if (ids.len() as u64) < u64::from(p.limit) {
        // The round's last batch: the rate buckets that have filled up go too.
        b.transact("purge_buckets", |mut tx| async move {
            crate::limits::purge_buckets(&mut tx, now).await?;
            Ok((tx, ()))
        })
        .await?;
    }
    if ids.is_empty() {
        return Ok(Purged { count: 0, cutoff });
    }
    let ids = &ids;
    let n = b
        .transact("purge", |mut tx| async move {
            let n = delete_in(&mut tx, ids, p, cutoff).await?;
            Ok((tx, n))
        })
        .await?;
    Ok(Purged { count: n, cutoff })
}

/// Locks the tasks of `ids` still eligible, archives them (when asked) and deletes them,
/// inside the caller's write transaction; how many it deleted.
async fn delete_in<E: Exec>(
    tx: &mut E,
    ids: &[i64],
    p: &PurgeParams,
    cutoff: DateTime<Utc>,
) -> StoreResult<u64> {
    let d = tx.dialect();
    let mut lock = Sql::new(
        d,
        format!("SELECT id FROM {} WHERE ", d.tasks_by_primary_key()),
    );
    lock.push_in_ids("id", ids);
    push_eligible(&mut lock, p.state, cutoff);
    lock.push(" ORDER BY id").push(d.lock_rows());
    let locked = tx
        .fetch(lock)
        .await?
        .iter()
        .map(|r| required(r.int("id"), "id"))
        .collect::<StoreResult<Vec<i64>>>()?;
    if !locked.is_empty() {
        if p.archive {
            let mut tasks = Sql::new(
                d,
                format!(
                    "INSERT INTO tasktable_tasks_archive ({TASK_COLUMNS}) \
                     SELECT {TASK_COLUMNS} FROM tasktable_tasks WHERE "
                ),
            );
            tasks.push_in_ids("id", &locked);
            tx.execute(tasks).await?;
            let mut attempts = Sql::new(
                d,
                format!(
                    "INSERT INTO tasktable_attempts_archive ({ALL_ATTEMPT_COLUMNS}) \
                     SELECT {ALL_ATTEMPT_COLUMNS} FROM tasktable_attempts WHERE "
                ),
            );
            attempts.push_in_ids("task_id", &locked);
            tx.execute(attempts).await?;
            let mut runs = Sql::new(
                d,
                format!(
                    "INSERT INTO tasktable_runs_archive ({ALL_RUN_COLUMNS}) \
                     SELECT {ALL_RUN_COLUMNS} FROM tasktable_runs WHERE "
                ),
            );
            runs.push_in_ids("task_id", &locked);
            tx.execute(runs).await?;
            for (table, columns) in [
                ("tasktable_events", crate::events::EVENT_COLUMNS),
                ("tasktable_task_logs", crate::logs::LOG_COLUMNS),
                ("tasktable_batches", crate::batches::BATCH_COLUMNS),
                ("tasktable_batch_failures", crate::batches::FAILURE_COLUMNS),
            ] {
                let mut rows = Sql::new(
                    d,
                    format!(
                        "INSERT INTO {table}_archive ({columns}) SELECT {columns} FROM {table} \
                         WHERE "
                    ),
                );
                rows.push_in_ids("task_id", &locked);
                tx.execute(rows).await?;
            }
        }
        let mut delete = Sql::new(d, "DELETE FROM tasktable_tasks WHERE ");
        delete.push_in_ids("id", &locked);
        tx.execute(delete).await?;
    }
    Ok(locked.len() as u64)
}

/// A task moved to the archive, and its attempts, oldest first.
pub async fn archived<E: Exec>(
    e: &mut E,
    id: tasktable_core::TaskId,
) -> StoreResult<Option<(tasktable_core::Task, Vec<tasktable_core::Attempt>)>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {TASK_COLUMNS} FROM tasktable_tasks_archive WHERE id = "),
    );
    sql.bind(id);
    let Some(task) = e
        .fetch(sql)
        .await?
        .first()
        .map(crate::row::task_from_row)
        .transpose()?
    else {
        return Ok(None);
    };
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {ATTEMPT_COLUMNS} FROM tasktable_attempts_archive WHERE task_id = "),
    );
    sql.bind(id).push(" ORDER BY id");
    let attempts = e
        .fetch(sql)
        .await?
        .iter()
        .map(crate::row::attempt_from_row)
        .collect::<StoreResult<Vec<_>>>()?;
    Ok(Some((task, attempts)))
}
