//! The SQL half of statistics on PostgreSQL (the rest is `tasktable_store::stats`).
//! Raw rows are found through the `finished_at` and `created_at` indexes, so an aggregate
//! reads only the minutes it covers.

use crate::{db, PgStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::postgres::PgRow;
use sqlx::Row;
use tasktable_core::TaskState;
use tasktable_store::stats::{
    bucket_sql, ActiveCount, Histogram, MinuteRow, RawGroup, StatsSource, CLASS_SQL,
};
use tasktable_store::{StoreError, StoreResult};

const FILTER: &str = "($3::text IS NULL OR queue = $3) AND ($4::text IS NULL OR kind = $4)";

fn ms(later: &str, earlier: &str) -> String {
    format!("(extract(epoch FROM ({later} - {earlier})) * 1000)")
}

fn count(r: &PgRow, i: usize) -> StoreResult<u64> {
    Ok(r.try_get::<i64, _>(i).map_err(db)?.max(0) as u64)
}

fn bucket(r: &PgRow, i: usize) -> StoreResult<Option<usize>> {
    Ok(r.try_get::<Option<i32>, _>(i)
        .map_err(db)?
        .map(|b| b.max(0) as usize))
}

impl PgStore {
    /// Runs a query over a time range filtered by queue and kind.
    async fn fetch_range(
        &self,
        sql: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<PgRow>> {
        sqlx::query(sql)
            .bind(from)
            .bind(to)
            .bind(queue)
            .bind(kind)
            .fetch_all(&self.pool)
            .await
            .map_err(db)
    }
}

#[async_trait]
impl StatsSource for PgStore {
    async fn stats_now(&self, now: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
        match now {
            Some(t) => Ok(t),
            None => tasktable_store::Store::db_now(self).await,
        }
    }

    async fn stats_rolled_until(&self) -> StoreResult<Option<DateTime<Utc>>> {
        sqlx::query_scalar("SELECT rolled_until FROM tasktable_stats_rolled WHERE id = 1")
            .fetch_optional(&self.pool)
            .await
            .map_err(db)
    }

    async fn stats_earliest(&self) -> StoreResult<Option<DateTime<Utc>>> {
        sqlx::query_scalar(
            "SELECT least((SELECT min(created_at) FROM tasktable_tasks), \
                          (SELECT min(finished_at) FROM tasktable_attempts))",
        )
        .fetch_one(&self.pool)
        .await
        .map_err(db)
    }

    async fn stats_aggregate(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<RawGroup>> {
        let submitted = format!(
            "SELECT date_trunc('minute', created_at), queue, kind, count(*) FROM tasktable_tasks \
             WHERE created_at >= $1 AND created_at < $2 AND {FILTER} GROUP BY 1, 2, 3"
        );
        let attempts = format!(
            "SELECT date_trunc('minute', finished_at), coalesce(queue, ''), coalesce(kind, ''), \
                    {CLASS_SQL}, \
                    CASE WHEN started_at IS NULL OR due_at IS NULL THEN NULL ELSE {wait} END, \
                    CASE WHEN started_at IS NULL THEN NULL ELSE {run} END, count(*) \
             FROM tasktable_attempts \
             WHERE finished_at >= $1 AND finished_at < $2 AND {FILTER} \
             GROUP BY 1, 2, 3, 4, 5, 6",
            wait = bucket_sql(&ms("started_at", "due_at")),
            run = bucket_sql(&ms("finished_at", "started_at")),
        );
        let mut out = Vec::new();
        for r in self.fetch_range(&submitted, from, to, queue, kind).await? {
            out.push(RawGroup::Submitted {
                minute: r.try_get(0).map_err(db)?,
                queue: r.try_get(1).map_err(db)?,
                kind: r.try_get(2).map_err(db)?,
                count: count(&r, 3)?,
            });
        }
        for r in self.fetch_range(&attempts, from, to, queue, kind).await? {
            out.push(RawGroup::Attempts {
                minute: r.try_get(0).map_err(db)?,
                queue: r.try_get(1).map_err(db)?,
                kind: r.try_get(2).map_err(db)?,
                class: r.try_get(3).map_err(db)?,
                wait_bucket: bucket(&r, 4)?,
                run_bucket: bucket(&r, 5)?,
                count: count(&r, 6)?,
            });
        }
        Ok(out)
    }

    async fn stats_store(&self, rows: &[MinuteRow], until: DateTime<Utc>) -> StoreResult<()> {
        let mut tx = self.pool.begin().await.map_err(db)?;
        // One statement for all rows: arrays in, one upsert out.
        let column = |f: fn(&MinuteRow) -> i64| rows.iter().map(f).collect::<Vec<i64>>();
        sqlx::query(
            "INSERT INTO tasktable_stats (minute, queue, kind, submitted, succeeded, failed, \
                 retried, cancelled, wait_hist, run_hist) \
             SELECT * FROM unnest($1::timestamptz[], $2::text[], $3::text[], $4::bigint[], \
                 $5::bigint[], $6::bigint[], $7::bigint[], $8::bigint[], $9::text[], $10::text[]) \
             ON CONFLICT (minute, queue, kind) DO UPDATE SET \
                 submitted = excluded.submitted, succeeded = excluded.succeeded, \
                 failed = excluded.failed, retried = excluded.retried, \
                 cancelled = excluded.cancelled, wait_hist = excluded.wait_hist, \
                 run_hist = excluded.run_hist",
        )
        .bind(rows.iter().map(|r| r.minute).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.queue.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.kind.clone()).collect::<Vec<_>>())
        .bind(column(|r| r.submitted as i64))
        .bind(column(|r| r.succeeded as i64))
        .bind(column(|r| r.failed as i64))
        .bind(column(|r| r.retried as i64))
        .bind(column(|r| r.cancelled as i64))
        .bind(rows.iter().map(|r| r.wait.to_text()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.run.to_text()).collect::<Vec<_>>())
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        sqlx::query(
            "INSERT INTO tasktable_stats_rolled (id, rolled_until) VALUES (1, $1) \
             ON CONFLICT (id) DO UPDATE SET \
                 rolled_until = greatest(tasktable_stats_rolled.rolled_until, excluded.rolled_until)",
        )
        .bind(until)
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
             FROM tasktable_stats WHERE minute >= $1 AND minute < $2 AND {FILTER}"
        );
        let rows = self.fetch_range(&sql, from, to, queue, kind).await?;
        rows.iter()
            .map(|r| {
                Ok(MinuteRow {
                    minute: r.try_get(0).map_err(db)?,
                    queue: r.try_get(1).map_err(db)?,
                    kind: r.try_get(2).map_err(db)?,
                    submitted: count(r, 3)?,
                    succeeded: count(r, 4)?,
                    failed: count(r, 5)?,
                    retried: count(r, 6)?,
                    cancelled: count(r, 7)?,
                    wait: Histogram::from_text(&r.try_get::<String, _>(8).map_err(db)?)?,
                    run: Histogram::from_text(&r.try_get::<String, _>(9).map_err(db)?)?,
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
        let rows = sqlx::query(
            "SELECT queue, kind, state, count(*), \
                    min(run_at) FILTER (WHERE state = 'pending' AND run_at <= $3) \
             FROM tasktable_tasks \
             WHERE state IN ('held', 'pending', 'running') \
               AND ($1::text IS NULL OR queue = $1) AND ($2::text IS NULL OR kind = $2) \
             GROUP BY 1, 2, 3",
        )
        .bind(queue)
        .bind(kind)
        .bind(now)
        .fetch_all(&self.pool)
        .await
        .map_err(db)?;
        rows.iter()
            .map(|r| {
                let state: String = r.try_get(2).map_err(db)?;
                Ok(ActiveCount {
                    queue: r.try_get(0).map_err(db)?,
                    kind: r.try_get(1).map_err(db)?,
                    state: state.parse::<TaskState>().map_err(|_| {
                        StoreError::Database(format!("unknown state {state:?}").into())
                    })?,
                    count: count(r, 3)?,
                    oldest_due: r.try_get(4).map_err(db)?,
                })
            })
            .collect()
    }
}
