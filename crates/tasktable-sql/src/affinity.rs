//! The end of a retry's wait for its previous worker ([`tasktable_core::Task::affinity_until`]).
//!
//! A finish starts the wait (core's rule rendered in [`crate::rules::affinity`]); this
//! ends it: for tasks whose wait has passed, or whose worker is gone from the registry
//! (or was never in it) or draining, the task's own target goes back to `target` and the queues they
//! wait in are woken. Rescuers run it every round, on every node; two at once each change
//! a row at most once, because the update tests the wait again.

use crate::backend::change;
use crate::backend::Changed;
use crate::exec::required;
use crate::{Backend, Cells, Exec, Sql};
use tasktable_store::{AffinityReleaseParams, Checked, StoreResult};

/// Appends the test of a task (its columns qualified by `p`) whose wait for its previous
/// worker is over at `now`: the wait passed, or that worker is not live and claiming
/// (gone, draining, or never registered).
fn push_wait_over(sql: &mut Sql, p: &str, now: chrono::DateTime<chrono::Utc>) {
    sql.push(&format!(
        "{p}affinity_until IS NOT NULL AND {p}state <> 'running' AND ({p}affinity_until <= "
    ))
    .bind(now)
    .push(&format!(
        " OR {p}worker_id IS NULL OR NOT EXISTS (SELECT 1 FROM tasktable_workers w \
         WHERE w.id = {p}worker_id AND w.gone_at IS NULL AND w.draining = "
    ))
    .bind(false)
    .push("))");
}

/// Ends the waits that are over; how many tasks it freed (at most: a task whose wait
/// began again meanwhile is left waiting).
pub async fn release<B: Backend>(b: &B, p: &Checked<AffinityReleaseParams>) -> StoreResult<u64> {
    let mut read = b.read().await?;
    let now = read.now(p.now).await?;
    let d = read.dialect();
    // A plain read, through tasktable_tasks_affinity: nothing is locked while the cluster
    // has no wait to end.
    let mut pick = Sql::new(d, "SELECT t.id, t.queue FROM tasktable_tasks t WHERE ");
    push_wait_over(&mut pick, "t.", now);
    pick.push(" ORDER BY t.id LIMIT ").bind(i64::from(p.limit));
    let rows = read.fetch(pick).await?;
    drop(read);
    if rows.is_empty() {
        return Ok(0);
    }
    let mut ids = Vec::with_capacity(rows.len());
    let mut wake: Vec<String> = Vec::new();
    for row in &rows {
        ids.push(required(row.int("id"), "id")?);
        let queue = required(row.text("queue"), "queue")?;
        if !wake.contains(&queue) {
            wake.push(queue);
        }
    }
    let n = ids.len() as u64;
    let (ids, wake) = (&ids, &wake);
    change(b, "release_affinity", |mut tx| async move {
        let mut sql = Sql::new(
            d,
            "UPDATE tasktable_tasks SET target = affinity_target, affinity_until = NULL, \
             updated_at = ",
        );
        sql.bind(now).push(" WHERE ");
        sql.push_in_ids("tasktable_tasks.id", ids).push(" AND ");
        // Tested again: the task may have been claimed, failed and begun a new wait since.
        push_wait_over(&mut sql, "tasktable_tasks.", now);
        tx.execute(sql).await?;
        let wake = wake.clone();
        Ok((tx, Changed { count: n, wake }))
    })
    .await?;
    Ok(n)
}
