//! The SQL half of statistics on SQLite (the rest is `tasktable_store::stats`).
//! Timestamps are fixed-format text, so a minute is the first 16 characters and durations
//! come from `julianday`.

use crate::time::{from_text, to_text};
use crate::{db, now_or_db, SqliteStore};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use sqlx::sqlite::SqliteRow;
use sqlx::Row;
use tasktable_core::TaskState;
use tasktable_store::stats::{
    bucket_sql, ActiveCount, Histogram, MinuteRow, RawGroup, StatsSource, CLASS_SQL,
};
use tasktable_store::{StoreError, StoreResult};

const MINUTE: &str = "substr({col}, 1, 16) || ':00.000Z'";
const FILTER: &str = "(?3 IS NULL OR queue = ?3) AND (?4 IS NULL OR kind = ?4)";

fn minute(col: &str) -> String {
    MINUTE.replace("{col}", col)
}

fn ms(later: &str, earlier: &str) -> String {
    // Rounded: the stored times have millisecond precision, julianday does not quite.
    format!("round((julianday({later}) - julianday({earlier})) * 86400000.0)")
}

fn count(r: &SqliteRow, i: usize) -> StoreResult<u64> {
    Ok(r.try_get::<i64, _>(i).map_err(db)?.max(0) as u64)
}

fn bucket(r: &SqliteRow, i: usize) -> StoreResult<Option<usize>> {
    Ok(r.try_get::<Option<i64>, _>(i)
        .map_err(db)?
        .map(|b| b.max(0) as usize))
}

impl SqliteStore {
    /// Runs a query over `[?1, ?2)` filtered by `?3` queue and `?4` kind.
    async fn fetch_range(
        &self,
        conn: &mut sqlx::SqliteConnection,
        sql: &str,
        from: &str,
        to: &str,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<SqliteRow>> {
        sqlx::query(sql)
            .bind(from)
            .bind(to)
            .bind(queue)
            .bind(kind)
            .fetch_all(conn)
            .await
            .map_err(db)
    }
}

#[async_trait]
impl StatsSource for SqliteStore {
    async fn stats_now(&self, now: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        now_or_db(&mut conn, now).await
    }

    async fn stats_rolled_until(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        let t: Option<String> =
            sqlx::query_scalar("SELECT rolled_until FROM tasktable_stats_rolled WHERE id = 1")
                .fetch_optional(&mut *conn)
                .await
                .map_err(db)?;
        t.as_deref().map(from_text).transpose()
    }

    async fn stats_earliest(&self) -> StoreResult<Option<DateTime<Utc>>> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        let t: Option<String> = sqlx::query_scalar(
            "SELECT min(t) FROM (SELECT min(created_at) AS t FROM tasktable_tasks \
             UNION ALL SELECT min(finished_at) FROM tasktable_attempts)",
        )
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
        t.as_deref().map(from_text).transpose()
    }

    async fn stats_aggregate(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<RawGroup>> {
        let mut conn = self.reader.acquire().await.map_err(db)?;
        let (from, to) = (to_text(from), to_text(to));
        let submitted = format!(
            "SELECT {m}, queue, kind, count(*) FROM tasktable_tasks \
             WHERE created_at >= ?1 AND created_at < ?2 AND {FILTER} GROUP BY 1, 2, 3",
            m = minute("created_at")
        );
        let attempts = format!(
            "SELECT {m}, coalesce(queue, ''), coalesce(kind, ''), {CLASS_SQL}, \
                    CASE WHEN started_at IS NULL OR due_at IS NULL THEN NULL ELSE {wait} END, \
                    CASE WHEN started_at IS NULL THEN NULL ELSE {run} END, count(*) \
             FROM tasktable_attempts \
             WHERE finished_at >= ?1 AND finished_at < ?2 AND {FILTER} \
             GROUP BY 1, 2, 3, 4, 5, 6",
            m = minute("finished_at"),
            wait = bucket_sql(&ms("started_at", "due_at")),
            run = bucket_sql(&ms("finished_at", "started_at")),
        );
        let mut out = Vec::new();
        for r in self
            .fetch_range(&mut conn, &submitted, &from, &to, queue, kind)
            .await?
        {
            out.push(RawGroup::Submitted {
                minute: from_text(&r.try_get::<String, _>(0).map_err(db)?)?,
                queue: r.try_get(1).map_err(db)?,
                kind: r.try_get(2).map_err(db)?,
                count: count(&r, 3)?,
            });
        }
        for r in self
            .fetch_range(&mut conn, &attempts, &from, &to, queue, kind)
            .await?
        {
            out.push(RawGroup::Attempts {
                minute: from_text(&r.try_get::<String, _>(0).map_err(db)?)?,
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
        let mut tx = self.begin_write().await?;
        for r in rows {
            sqlx::query(
                "INSERT INTO tasktable_stats (minute, queue, kind, submitted, succeeded, failed, \
                     retried, cancelled, wait_hist, run_hist) \
                 VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) \
                 ON CONFLICT (minute, queue, kind) DO UPDATE SET \
                     submitted = excluded.submitted, succeeded = excluded.succeeded, \
                     failed = excluded.failed, retried = excluded.retried, \
                     cancelled = excluded.cancelled, wait_hist = excluded.wait_hist, \
                     run_hist = excluded.run_hist",
            )
            .bind(to_text(r.minute))
            .bind(&r.queue)
            .bind(&r.kind)
            .bind(r.submitted as i64)
            .bind(r.succeeded as i64)
            .bind(r.failed as i64)
            .bind(r.retried as i64)
            .bind(r.cancelled as i64)
            .bind(r.wait.to_text())
            .bind(r.run.to_text())
            .execute(&mut *tx)
            .await
            .map_err(db)?;
        }
        sqlx::query(
            "INSERT INTO tasktable_stats_rolled (id, rolled_until) VALUES (1, ?) \
             ON CONFLICT (id) DO UPDATE SET rolled_until = max(rolled_until, excluded.rolled_until)",
        )
        .bind(to_text(until))
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
        let mut conn = self.reader.acquire().await.map_err(db)?;
        let sql = format!(
            "SELECT minute, queue, kind, submitted, succeeded, failed, retried, cancelled, \
                    wait_hist, run_hist \
             FROM tasktable_stats WHERE minute >= ?1 AND minute < ?2 AND {FILTER}"
        );
        let rows = self
            .fetch_range(&mut conn, &sql, &to_text(from), &to_text(to), queue, kind)
            .await?;
        rows.iter()
            .map(|r| {
                Ok(MinuteRow {
                    minute: from_text(&r.try_get::<String, _>(0).map_err(db)?)?,
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
        let mut conn = self.reader.acquire().await.map_err(db)?;
        let rows = sqlx::query(
            "SELECT queue, kind, state, count(*), \
                    min(CASE WHEN state = 'pending' AND run_at <= ?3 THEN run_at END) \
             FROM tasktable_tasks \
             WHERE state IN ('held', 'pending', 'running') \
               AND (?1 IS NULL OR queue = ?1) AND (?2 IS NULL OR kind = ?2) \
             GROUP BY 1, 2, 3",
        )
        .bind(queue)
        .bind(kind)
        .bind(to_text(now))
        .fetch_all(&mut *conn)
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
                    oldest_due: r
                        .try_get::<Option<String>, _>(4)
                        .map_err(db)?
                        .as_deref()
                        .map(from_text)
                        .transpose()?,
                })
            })
            .collect()
    }
}
