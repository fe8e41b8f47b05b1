//! The SQL half of statistics on MySQL and MariaDB (the rest is `tasktable_store::stats`).
//! Raw rows are found through the `finished_at` and `created_at` indexes, so an aggregate
//! reads only the minutes it covers. Times are DATETIME(6) in UTC.

use crate::clock;
use crate::row::state;
use crate::{db, MySqlStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::mysql::MySqlRow;
use sqlx::Row;
use tasktable_store::stats::{
    bucket_sql, ActiveCount, Histogram, MinuteRow, RawGroup, StatsSource, CLASS_SQL,
};
use tasktable_store::StoreResult;

/// Binds: queue twice, kind twice.
const FILTER: &str = "(? IS NULL OR queue = ?) AND (? IS NULL OR kind = ?)";

fn minute(col: &str) -> String {
    format!("CAST(DATE_FORMAT({col}, '%Y-%m-%d %H:%i:00') AS DATETIME(6))")
}

fn ms(later: &str, earlier: &str) -> String {
    format!("(TIMESTAMPDIFF(MICROSECOND, {earlier}, {later}) / 1000)")
}

fn count(r: &MySqlRow, i: usize) -> StoreResult<u64> {
    Ok(r.try_get::<i64, _>(i).map_err(db)?.max(0) as u64)
}

/// Text columns use a binary collation, which the driver reports as binary.
fn text(r: &MySqlRow, i: usize) -> StoreResult<String> {
    r.try_get_unchecked(i).map_err(db)
}

fn bucket(r: &MySqlRow, i: usize) -> StoreResult<Option<usize>> {
    Ok(r.try_get::<Option<i64>, _>(i)
        .map_err(db)?
        .map(|b| b.max(0) as usize))
}

impl MySqlStore {
    /// Runs a query over a time range filtered by queue and kind.
    /// The filter names each of queue and kind twice (`? IS NULL OR col = ?`).
    async fn fetch_range(
        &self,
        sql: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<MySqlRow>> {
        sqlx::query(sql)
            .bind(clock::at(from))
            .bind(clock::at(to))
            .bind(queue)
            .bind(queue)
            .bind(kind)
            .bind(kind)
            .fetch_all(&self.pool)
            .await
            .map_err(db)
    }
}

#[async_trait]
impl StatsSource for MySqlStore {
    async fn stats_now(&self, now: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
        let mut conn = self.pool.acquire().await.map_err(db)?;
        crate::clock::now(&mut conn, now).await
    }

    async fn stats_rolled_until(&self) -> StoreResult<Option<DateTime<Utc>>> {
        sqlx::query_scalar("SELECT rolled_until FROM tasktable_stats_rolled WHERE id = 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(db)
    }

    async fn stats_earliest(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let (tasks, attempts): (Option<DateTime<Utc>>, Option<DateTime<Utc>>) = sqlx::query_as(
            "SELECT (SELECT MIN(created_at) FROM tasktable_tasks), \
                    (SELECT MIN(finished_at) FROM tasktable_attempts)",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(db)?;
        Ok(match (tasks, attempts) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        })
    }

    async fn stats_aggregate(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<RawGroup>> {
        let submitted = format!(
            "SELECT {m}, queue, kind, COUNT(*) FROM tasktable_tasks \
             WHERE created_at >= ? AND created_at < ? AND {FILTER} GROUP BY 1, 2, 3",
            m = minute("created_at")
        );
        let attempts = format!(
            "SELECT {m}, COALESCE(queue, ''), COALESCE(kind, ''), {CLASS_SQL}, \
                    CASE WHEN started_at IS NULL OR due_at IS NULL THEN NULL ELSE {wait} END, \
                    CASE WHEN started_at IS NULL THEN NULL ELSE {run} END, COUNT(*) \
             FROM tasktable_attempts \
             WHERE finished_at >= ? AND finished_at < ? AND {FILTER} \
             GROUP BY 1, 2, 3, 4, 5, 6",
            m = minute("finished_at"),
            wait = bucket_sql(&ms("started_at", "due_at")),
            run = bucket_sql(&ms("finished_at", "started_at")),
        );
        let mut out = Vec::new();
        for r in self.fetch_range(&submitted, from, to, queue, kind).await? {
            out.push(RawGroup::Submitted {
                minute: r.try_get(0).map_err(db)?,
                queue: text(&r, 1)?,
                kind: text(&r, 2)?,
                count: count(&r, 3)?,
            });
        }
        for r in self.fetch_range(&attempts, from, to, queue, kind).await? {
            out.push(RawGroup::Attempts {
                minute: r.try_get(0).map_err(db)?,
                queue: text(&r, 1)?,
                kind: text(&r, 2)?,
                class: text(&r, 3)?,
                wait_bucket: bucket(&r, 4)?,
                run_bucket: bucket(&r, 5)?,
                count: count(&r, 6)?,
            });
        }
        Ok(out)
    }

    async fn stats_store(&self, rows: &[MinuteRow], until: DateTime<Utc>) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // Many rows per statement, well under the placeholder limit.
        for chunk in rows.chunks(500) {
            let mut qb = sqlx::QueryBuilder::<sqlx::MySql>::new(
                "INSERT INTO tasktable_stats (minute, queue, kind, submitted, succeeded, failed, \
                     retried, cancelled, wait_hist, run_hist) ",
            );
            qb.push_values(chunk, |mut b, r| {
                b.push_bind(clock::at(r.minute))
                    .push_bind(&r.queue)
                    .push_bind(&r.kind)
                    .push_bind(r.submitted as i64)
                    .push_bind(r.succeeded as i64)
                    .push_bind(r.failed as i64)
                    .push_bind(r.retried as i64)
                    .push_bind(r.cancelled as i64)
                    .push_bind(r.wait.to_text())
                    .push_bind(r.run.to_text());
            });
            qb.push(
                " ON DUPLICATE KEY UPDATE submitted = VALUES(submitted), \
                 succeeded = VALUES(succeeded), failed = VALUES(failed), \
                 retried = VALUES(retried), cancelled = VALUES(cancelled), \
                 wait_hist = VALUES(wait_hist), run_hist = VALUES(run_hist)",
            );
            qb.build().execute(&mut *tx).await.map_err(db)?;
        }
        sqlx::query(
            "INSERT INTO tasktable_stats_rolled (id, rolled_until) VALUES (1, ?) \
             ON DUPLICATE KEY UPDATE rolled_until = GREATEST(rolled_until, VALUES(rolled_until))",
        )
        .bind(clock::at(until))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tx.commit().await.map_err(db)
    }

    async fn stats_read(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<MinuteRow>> {
        let sql = format!(
            "SELECT minute, queue, kind, submitted, succeeded, failed, retried, cancelled, \
                    wait_hist, run_hist \
             FROM tasktable_stats WHERE minute >= ? AND minute < ? AND {FILTER}"
        );
        let rows = self.fetch_range(&sql, from, to, queue, kind).await?;
        rows.iter()
            .map(|r| {
                Ok(MinuteRow {
                    minute: r.try_get(0).map_err(db)?,
                    queue: text(r, 1)?,
                    kind: text(r, 2)?,
                    submitted: count(r, 3)?,
                    succeeded: count(r, 4)?,
                    failed: count(r, 5)?,
                    retried: count(r, 6)?,
                    cancelled: count(r, 7)?,
                    wait: Histogram::from_text(&text(r, 8)?)?,
                    run: Histogram::from_text(&text(r, 9)?)?,
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
        let sql = format!(
            "SELECT queue, kind, state, COUNT(*), \
                    MIN(CASE WHEN state = 'pending' AND run_at <= ? THEN run_at END) \
             FROM tasktable_tasks \
             WHERE state IN ('held', 'pending', 'running') AND {FILTER} \
             GROUP BY 1, 2, 3"
        );
        let rows = sqlx::query(&sql)
            .bind(clock::at(now))
            .bind(queue)
            .bind(queue)
            .bind(kind)
            .bind(kind)
            .fetch_all(&self.pool)
            .await
            .map_err(db)?;
        rows.iter()
            .map(|r| {
                Ok(ActiveCount {
                    queue: text(r, 0)?,
                    kind: text(r, 1)?,
                    state: state(&text(r, 2)?)?,
                    count: count(r, 3)?,
                    oldest_due: r.try_get(4).map_err(db)?,
                })
            })
            .collect()
    }
}
