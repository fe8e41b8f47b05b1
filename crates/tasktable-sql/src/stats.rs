//! The SQL half of statistics (the rest is `tasktable_store::stats`), for any backend.
//! Raw rows are found through the `finished_at` and `created_at` indexes, so an aggregate
//! reads only the minutes it covers.

use crate::exec::{count, required};
use crate::row::state;
use crate::{Backend, Cells, Exec, Sql};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tasktable_store::stats::{
    ActiveCount, Histogram, MinuteRow, RawGroup, StatsSource, BUCKETS, BUCKET_BOUNDS_MS,
};
use tasktable_store::StoreResult;

/// Rows of `tasktable_stats` a statement writes at once: ten arguments each, far below
/// every database's limit on arguments.
const ROWS_PER_INSERT: usize = 500;

/// The bucket a duration in milliseconds falls in, as SQL over `ms_expr`: the
/// histogram's bounds ([`BUCKET_BOUNDS_MS`]) as one `CASE`.
pub fn bucket_sql(ms_expr: &str) -> String {
    let mut sql = String::from("CASE");
    for (i, bound) in BUCKET_BOUNDS_MS.iter().enumerate() {
        sql.push_str(&format!(" WHEN {ms_expr} < {bound} THEN {i}"));
    }
    sql.push_str(&format!(" ELSE {} END", BUCKETS - 1));
    sql
}

/// What an attempt's end meant for its task, as SQL over the attempt's `outcome` and
/// `task_state` columns: `succeeded`, `failed`, `retried`, `cancelled` or `other`.
pub const CLASS_SQL: &str = "CASE \
    WHEN outcome = 'succeeded' THEN 'succeeded' \
    WHEN outcome = 'cancelled' THEN 'cancelled' \
    WHEN outcome IN ('snoozed', 'interrupted') THEN 'other' \
    WHEN task_state = 'failed' OR (task_state IS NULL AND outcome = 'failed') THEN 'failed' \
    ELSE 'retried' END";

/// A backend's statistics source: its connections, and this crate's SQL.
#[derive(Debug)]
pub struct SqlStats<'a, C>(pub &'a C);

/// `AND queue = ? AND kind = ?` for the filters that are set.
fn push_group_filter(sql: &mut Sql, queue: Option<&str>, kind: Option<&str>) {
    if let Some(q) = queue {
        sql.push(" AND queue = ").bind(q);
    }
    if let Some(k) = kind {
        sql.push(" AND kind = ").bind(k);
    }
}

/// `SELECT ... WHERE column >= from AND column < to` and the group filter.
fn range(
    mut sql: Sql,
    column: &str,
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    queue: Option<&str>,
    kind: Option<&str>,
) -> Sql {
    sql.push(&format!(" WHERE {column} >= "))
        .bind(from)
        .push(&format!(" AND {column} < "))
        .bind(to);
    push_group_filter(&mut sql, queue, kind);
    sql
}

fn bucket(r: &impl Cells, column: &str) -> StoreResult<Option<usize>> {
    Ok(r.int(column)?.map(|b| b.max(0) as usize))
}

fn text(r: &impl Cells, column: &str) -> StoreResult<String> {
    required(r.text(column), column)
}

#[async_trait]
impl<B: Backend> StatsSource for SqlStats<'_, B> {
    async fn stats_now(&self, now: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
        self.0.read().await?.now(now).await
    }

    async fn stats_rolled_until(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let mut e = self.0.read().await?;
        let sql = Sql::new(
            e.dialect(),
            "SELECT rolled_until FROM tasktable_stats_rolled WHERE id = 1",
        );
        let rows = e.fetch(sql).await?;
        Ok(rows
            .first()
            .map(|r| r.time("rolled_until"))
            .transpose()?
            .flatten())
    }

    async fn stats_earliest(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let mut e = self.0.read().await?;
        let sql = Sql::new(
            e.dialect(),
            "SELECT min(t) AS t FROM (SELECT min(created_at) AS t FROM tasktable_tasks \
             UNION ALL SELECT min(finished_at) FROM tasktable_attempts) AS earliest",
        );
        let rows = e.fetch(sql).await?;
        Ok(rows.first().map(|r| r.time("t")).transpose()?.flatten())
    }

    async fn stats_aggregate(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<RawGroup>> {
        let mut e = self.0.read().await?;
        let d = e.dialect();
        let submitted = Sql::new(
            d,
            format!(
                "SELECT {} AS minute, queue, kind, count(*) AS n FROM tasktable_tasks",
                d.minute("created_at")
            ),
        );
        let mut submitted = range(submitted, "created_at", from, to, queue, kind);
        submitted.push(" GROUP BY 1, 2, 3");
        let attempts = Sql::new(
            d,
            format!(
                "SELECT {minute} AS minute, coalesce(queue, '') AS queue, coalesce(kind, '') AS kind, \
                        {CLASS_SQL} AS class, \
                        CASE WHEN started_at IS NULL OR due_at IS NULL THEN NULL ELSE {wait} END AS wait, \
                        CASE WHEN started_at IS NULL THEN NULL ELSE {run} END AS run, count(*) AS n \
                 FROM tasktable_attempts",
                minute = d.minute("finished_at"),
                wait = bucket_sql(&d.millis_between("started_at", "due_at")),
                run = bucket_sql(&d.millis_between("finished_at", "started_at")),
            ),
        );
        let mut attempts = range(attempts, "finished_at", from, to, queue, kind);
        attempts.push(" GROUP BY 1, 2, 3, 4, 5, 6");
        let mut out = Vec::new();
        for r in e.fetch(submitted).await? {
            out.push(RawGroup::Submitted {
                minute: required(r.time("minute"), "minute")?,
                queue: text(&r, "queue")?,
                kind: text(&r, "kind")?,
                count: count(&r, "n")?,
            });
        }
        for r in e.fetch(attempts).await? {
            out.push(RawGroup::Attempts {
                minute: required(r.time("minute"), "minute")?,
                queue: text(&r, "queue")?,
                kind: text(&r, "kind")?,
                class: text(&r, "class")?,
                wait_bucket: bucket(&r, "wait")?,
                run_bucket: bucket(&r, "run")?,
                count: count(&r, "n")?,
            });
        }
        Ok(out)
    }

    async fn stats_store(&self, rows: &[MinuteRow], until: DateTime<Utc>) -> StoreResult<()> {
        self.0
            .transact("stats_store", |mut tx| async move {
                store_in(&mut tx, rows, until).await?;
                Ok((tx, ()))
            })
            .await
    }

    async fn stats_read(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<MinuteRow>> {
        let mut e = self.0.read().await?;
        let sql = Sql::new(
            e.dialect(),
            "SELECT minute, queue, kind, submitted, succeeded, failed, retried, cancelled, \
                    wait_hist, run_hist FROM tasktable_stats",
        );
        let sql = range(sql, "minute", from, to, queue, kind);
        e.fetch(sql)
            .await?
            .iter()
            .map(|r| {
                Ok(MinuteRow {
                    minute: required(r.time("minute"), "minute")?,
                    queue: text(r, "queue")?,
                    kind: text(r, "kind")?,
                    submitted: count(r, "submitted")?,
                    succeeded: count(r, "succeeded")?,
                    failed: count(r, "failed")?,
                    retried: count(r, "retried")?,
                    cancelled: count(r, "cancelled")?,
                    wait: Histogram::from_text(&text(r, "wait_hist")?)?,
                    run: Histogram::from_text(&text(r, "run_hist")?)?,
                })
            })
            .collect()
    }

    async fn stats_active(
        &self,
        now: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<ActiveCount>> {
        let mut e = self.0.read().await?;
        let mut sql = Sql::new(
            e.dialect(),
            "SELECT queue, kind, state, count(*) AS n, \
                    min(CASE WHEN state = 'pending' AND run_at <= ",
        );
        sql.bind(now)
            .push(" THEN run_at END) AS oldest_due FROM tasktable_tasks WHERE ")
            .push_in_texts("state", &["held", "pending", "running"]);
        push_group_filter(&mut sql, queue, kind);
        sql.push(" GROUP BY queue, kind, state");
        e.fetch(sql)
            .await?
            .iter()
            .map(|r| {
                Ok(ActiveCount {
                    queue: text(r, "queue")?,
                    kind: text(r, "kind")?,
                    state: state(&text(r, "state")?)?,
                    count: count(r, "n")?,
                    oldest_due: r.time("oldest_due")?,
                })
            })
            .collect()
    }
}

/// Writes minutes of statistics and moves the watermark, inside the caller's write
/// transaction.
async fn store_in<E: Exec>(
    tx: &mut E,
    rows: &[MinuteRow],
    until: DateTime<Utc>,
) -> StoreResult<()> {
    let d = tx.dialect();
    let columns = [
        "submitted",
        "succeeded",
        "failed",
        "retried",
        "cancelled",
        "wait_hist",
        "run_hist",
    ];
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut sql = Sql::new(
            d,
            format!(
                "INSERT INTO tasktable_stats (minute, queue, kind, {}) VALUES ",
                columns.join(", ")
            ),
        );
        for (i, r) in chunk.iter().enumerate() {
            sql.push(if i == 0 { "(" } else { ", (" });
            sql.bind(r.minute).push(", ").bind(r.queue.as_str());
            sql.push(", ").bind(r.kind.as_str());
            for n in [r.submitted, r.succeeded, r.failed, r.retried, r.cancelled] {
                sql.push(", ").bind(i64::try_from(n).unwrap_or(i64::MAX));
            }
            sql.push(", ").bind(r.wait.to_text());
            sql.push(", ").bind(r.run.to_text()).push(")");
        }
        sql.push(&d.upsert(&["minute", "queue", "kind"], &columns));
        tx.execute(sql).await?;
    }
    // The watermark only moves forward, whoever rolled up last.
    let mut watermark = Sql::new(
        d,
        "INSERT INTO tasktable_stats_rolled (id, rolled_until) VALUES (1, ",
    );
    watermark.bind(until).push(")");
    watermark.push(&format!(
        "{}rolled_until = {}(tasktable_stats_rolled.rolled_until, {})",
        d.on_conflict(&["id"]),
        d.greatest(),
        d.inserted("rolled_until"),
    ));
    tx.execute(watermark).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_sql_names_every_bucket_once() {
        let sql = bucket_sql("x");
        assert_eq!(sql.matches(" WHEN ").count(), BUCKETS - 1);
        assert!(sql.ends_with(&format!("ELSE {} END", BUCKETS - 1)));
    }
}
