//! Windowed statistics: what [`Store::stats`](crate::Store::stats) returns, and the
//! backend-independent half of computing it.
//!
//! Finished attempts and submitted tasks are summed into one row per minute, queue and
//! kind (the rollup table), with queue wait and run time kept as histograms over fixed
//! bucket boundaries ([`BUCKET_BOUNDS_MS`]). A minute is rolled up once it is
//! [`ROLL_GRACE`] old; the minutes after the last rolled one are summed from the raw rows
//! on every call. So a query reads at most a few minutes of raw rows plus one rollup row
//! per minute, queue and kind in its window, however many tasks the tables hold, and the
//! claim and finish paths write nothing extra.
//!
//! Percentiles come from the merged histograms: the true value lies in the bucket the
//! reported one falls in, and is interpolated linearly inside it.

use crate::StoreResult;
use async_trait::async_trait;
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;
use tasktable_core::TaskState;

/// Upper bounds (exclusive) of the histogram buckets, in milliseconds; one more bucket
/// holds everything at or past the last bound.
pub const BUCKET_BOUNDS_MS: [u64; 19] = [
    1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000, 300_000,
    900_000, 1_800_000, 3_600_000,
];
/// Number of histogram buckets.
pub const BUCKETS: usize = BUCKET_BOUNDS_MS.len() + 1;

/// How old a minute must be before it is rolled up. A transaction that stamped a row with
/// the database's clock commits well within this; rows stamped earlier than the last
/// rolled minute after it was rolled are not counted.
pub const ROLL_GRACE: TimeDelta = TimeDelta::minutes(2);
/// At most this much raw history is rolled up in one statement.
pub const ROLL_CHUNK: TimeDelta = TimeDelta::hours(6);
/// Longest window a query may ask for.
pub const MAX_WINDOW: Duration = Duration::from_secs(31 * 24 * 3600);
/// A chart series has at most this many points; longer windows sum several minutes into
/// one point.
pub const MAX_POINTS: i64 = 120;

/// What to summarise.
#[derive(Debug, Clone)]
pub struct StatsParams {
    /// How far back from now; whole minutes, at least one.
    pub window: Duration,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Where the window ends; `None`: the database's clock.
    pub now: Option<DateTime<Utc>>,
}

impl StatsParams {
    /// The last `window` of every queue and kind, ending at the database's now.
    pub fn window(window: Duration) -> Self {
        StatsParams {
            window,
            queue: None,
            kind: None,
            now: None,
        }
    }

    /// Refuses ([`StoreError::InvalidInput`](crate::StoreError::InvalidInput)) a window
    /// shorter than a minute or longer than [`MAX_WINDOW`], and a queue or kind holding
    /// NUL.
    pub fn validate(&self) -> StoreResult<()> {
        if self.window < Duration::from_secs(60) || self.window > MAX_WINDOW {
            return Err(crate::StoreError::InvalidInput(format!(
                "window must be between 1 minute and {} days",
                MAX_WINDOW.as_secs() / 86_400
            )));
        }
        crate::filter::refuse_nul("queue", self.queue.as_deref())?;
        crate::filter::refuse_nul("kind", self.kind.as_deref())
    }
}

/// Statistics over `[from, to)`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The start of the window's first whole minute.
    pub from: DateTime<Utc>,
    /// The end of the window: now.
    pub to: DateTime<Utc>,
    /// One entry per queue and kind that has tasks now or had activity in the window.
    pub groups: Vec<GroupStats>,
    /// Everything the filter covers, summed per point of `series_step_secs`.
    pub series: Vec<SeriesPoint>,
    /// Seconds each point of `series` covers: 60, or whole minutes more for windows
    /// longer than [`MAX_POINTS`] minutes.
    pub series_step_secs: u64,
}

/// One queue and kind: what it holds now, and what it did in the window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GroupStats {
    /// The queue of the tasks counted.
    pub queue: String,
    /// The kind of the tasks counted.
    pub kind: String,
    /// Tasks now held, pending or running (states with none left out).
    pub active: Vec<(TaskState, u64)>,
    /// The earliest `run_at` of the pending tasks that are due: how long the oldest
    /// waiting task has waited. Work nobody claims shows here first.
    pub oldest_due: Option<DateTime<Utc>>,
    /// What happened in the window.
    #[serde(flatten)]
    pub window: WindowTotals,
}

/// What happened in the window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WindowTotals {
    /// Tasks submitted.
    pub submitted: u64,
    /// Attempts that succeeded.
    pub succeeded: u64,
    /// Attempts that ended their task as failed.
    pub failed: u64,
    /// Attempts that failed and left the task to be retried.
    pub retried: u64,
    /// Attempts that ended their task as cancelled: its handler's cancel, or an
    /// operator's cancel of it while it ran (a cancel of a waiting task ends no attempt).
    pub cancelled: u64,
    /// Tasks submitted per minute, averaged over the window.
    pub submitted_per_min: f64,
    /// `succeeded` per minute, averaged over the window.
    pub succeeded_per_min: f64,
    /// `failed` per minute, averaged over the window.
    pub failed_per_min: f64,
    /// succeeded / (succeeded + failed); `None` when neither happened.
    pub success_rate: Option<f64>,
    /// From when the task was due to when the attempt started, seconds.
    pub wait: Percentiles,
    /// From the attempt's start to its end, seconds.
    pub run: Percentiles,
}

/// Percentiles of a duration, in seconds, read from a histogram: each lies in the same
/// bucket as the true value ([`BUCKET_BOUNDS_MS`]), interpolated linearly inside it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    /// Attempts measured (those whose start, and for a wait its due time, is known).
    pub count: u64,
    /// The median; `None` when `count` is 0, as for every percentile.
    pub p50: Option<f64>,
    /// The 95th percentile.
    pub p95: Option<f64>,
    /// The 99th percentile.
    pub p99: Option<f64>,
}

/// One point of a chart: what every group of [`Stats`] did from `at` for
/// [`Stats::series_step_secs`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesPoint {
    /// The start of the point's span.
    pub at: DateTime<Utc>,
    /// Tasks submitted.
    pub submitted: u64,
    /// Attempts that succeeded.
    pub succeeded: u64,
    /// Attempts that ended their task as failed.
    pub failed: u64,
    /// Attempts that failed and left their task to be retried.
    pub retried: u64,
}

/// Counts over fixed buckets (see [`BUCKET_BOUNDS_MS`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Histogram(pub [u64; BUCKETS]);

impl Default for Histogram {
    fn default() -> Self {
        Histogram([0; BUCKETS])
    }
}

impl Histogram {
    /// Adds `other`'s counts, bucket by bucket.
    pub fn add(&mut self, other: &Histogram) {
        for (a, b) in self.0.iter_mut().zip(other.0.iter()) {
            *a += b;
        }
    }

    /// Observations in all buckets.
    pub fn count(&self) -> u64 {
        self.0.iter().sum()
    }

    /// The text kept in the rollup table: counts separated by commas.
    pub fn to_text(&self) -> String {
        let parts: Vec<String> = self.0.iter().map(u64::to_string).collect();
        parts.join(",")
    }

    /// Reads [`Histogram::to_text`]'s form; any other text (a wrong number of buckets,
    /// a count that is not a number) is a
    /// [`StoreError::Database`](crate::StoreError::Database).
    pub fn from_text(text: &str) -> StoreResult<Histogram> {
        let mut h = Histogram::default();
        let mut n = 0;
        for (slot, part) in h.0.iter_mut().zip(text.split(',')) {
            *slot = part.trim().parse().map_err(|_| bad_histogram(text))?;
            n += 1;
        }
        if n != BUCKETS || text.split(',').count() != BUCKETS {
            return Err(bad_histogram(text));
        }
        Ok(h)
    }

    /// The value below which `q` (0..=1) of the observations lie, in seconds.
    pub fn quantile(&self, q: f64) -> Option<f64> {
        let total = self.count();
        if total == 0 {
            return None;
        }
        let rank = q * total as f64;
        let mut seen = 0u64;
        for (i, &c) in self.0.iter().enumerate() {
            if c == 0 {
                continue;
            }
            if (seen + c) as f64 >= rank {
                let lo = if i == 0 { 0 } else { BUCKET_BOUNDS_MS[i - 1] } as f64;
                let Some(&hi) = BUCKET_BOUNDS_MS.get(i) else {
                    return Some(lo / 1000.0);
                };
                let into = ((rank - seen as f64) / c as f64).clamp(0.0, 1.0);
                return Some((lo + (hi as f64 - lo) * into) / 1000.0);
            }
            seen += c;
        }
        None
    }

    /// The count and the 50th, 95th and 99th percentiles, in seconds.
    pub fn percentiles(&self) -> Percentiles {
        Percentiles {
            count: self.count(),
            p50: self.quantile(0.50),
            p95: self.quantile(0.95),
            p99: self.quantile(0.99),
        }
    }
}

fn bad_histogram(text: &str) -> crate::StoreError {
    crate::StoreError::Database(format!("malformed histogram in the rollup table: {text:?}").into())
}

/// One minute of one queue and kind.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct MinuteRow {
    /// The start of the minute.
    pub minute: DateTime<Utc>,
    /// The queue of the tasks counted.
    pub queue: String,
    /// The kind of the tasks counted.
    pub kind: String,
    /// Tasks submitted in the minute.
    pub submitted: u64,
    /// Attempts that ended in the minute and left their task succeeded.
    pub succeeded: u64,
    /// Attempts that ended in the minute and left their task failed for good.
    pub failed: u64,
    /// Attempts that ended in the minute and left their task pending for a retry.
    pub retried: u64,
    /// Attempts that ended in the minute and left their task cancelled.
    pub cancelled: u64,
    /// Those attempts' queue waits: from their task's due time to their start.
    pub wait: Histogram,
    /// Those attempts' run times: from their start to their end.
    pub run: Histogram,
}

/// One group of an aggregate over raw rows, as the SQL half returns it.
#[derive(Debug, Clone)]
pub enum RawGroup {
    /// Tasks submitted in one minute, of one queue and kind.
    Submitted {
        /// The start of the minute.
        minute: DateTime<Utc>,
        /// The tasks' queue.
        queue: String,
        /// The tasks' kind.
        kind: String,
        /// Tasks submitted.
        count: u64,
    },
    /// Attempts that ended in one minute, of one queue and kind, alike in what their
    /// end meant and in their buckets.
    Attempts {
        /// The start of the minute they ended in.
        minute: DateTime<Utc>,
        /// The queue they ran in, as their history rows record it.
        queue: String,
        /// Their tasks' kind.
        kind: String,
        /// `succeeded`, `failed`, `retried`, `cancelled` or `other`: what the attempt's end
        /// meant for its task.
        class: String,
        /// `None` when the attempt never started or its due time is unknown.
        wait_bucket: Option<usize>,
        /// The run time's bucket; `None` when the attempt never started.
        run_bucket: Option<usize>,
        /// Attempts in the group.
        count: u64,
    },
}

/// Folds raw groups into minute rows.
pub fn fold(groups: Vec<RawGroup>) -> Vec<MinuteRow> {
    let mut rows: BTreeMap<(DateTime<Utc>, String, String), MinuteRow> = BTreeMap::new();
    for g in groups {
        match g {
            RawGroup::Submitted {
                minute,
                queue,
                kind,
                count,
            } => {
                rows.entry((minute, queue.clone(), kind.clone()))
                    .or_insert_with(|| MinuteRow::new(minute, queue, kind))
                    .submitted += count;
            }
            RawGroup::Attempts {
                minute,
                queue,
                kind,
                class,
                wait_bucket,
                run_bucket,
                count,
            } => {
                let row = rows
                    .entry((minute, queue.clone(), kind.clone()))
                    .or_insert_with(|| MinuteRow::new(minute, queue, kind));
                match class.as_str() {
                    "succeeded" => row.succeeded += count,
                    "failed" => row.failed += count,
                    "retried" => row.retried += count,
                    "cancelled" => row.cancelled += count,
                    _ => {}
                }
                if let Some(b) = wait_bucket.filter(|b| *b < BUCKETS) {
                    row.wait.0[b] += count;
                }
                if let Some(b) = run_bucket.filter(|b| *b < BUCKETS) {
                    row.run.0[b] += count;
                }
            }
        }
    }
    rows.into_values().collect()
}

impl MinuteRow {
    fn new(minute: DateTime<Utc>, queue: String, kind: String) -> Self {
        MinuteRow {
            minute,
            queue,
            kind,
            ..MinuteRow::default()
        }
    }
}

/// Active tasks of one queue and kind in one state.
#[derive(Debug, Clone)]
pub struct ActiveCount {
    /// The tasks' queue.
    pub queue: String,
    /// The tasks' kind.
    pub kind: String,
    /// `held`, `pending` or `running`.
    pub state: TaskState,
    /// Tasks in that state.
    pub count: u64,
    /// For `pending`: the earliest `run_at` at or before now.
    pub oldest_due: Option<DateTime<Utc>>,
}

/// The SQL half of statistics (`tasktable_sql::stats::SqlStats` on every backend).
#[async_trait]
pub trait StatsSource: Send + Sync {
    /// The time a statistics call works at: `now`, or the database's clock for `None`.
    async fn stats_now(&self, now: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>>;
    /// The end of the rolled-up history, if anything was ever rolled up.
    async fn stats_rolled_until(&self) -> StoreResult<Option<DateTime<Utc>>>;
    /// The oldest `created_at` or attempt `finished_at`, if there is any.
    async fn stats_earliest(&self) -> StoreResult<Option<DateTime<Utc>>>;
    /// Aggregates raw rows stamped in `[from, to)` (whole minutes).
    async fn stats_aggregate(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<RawGroup>>;
    /// Writes rolled-up minutes (replacing any already there) and moves the watermark to
    /// `until` unless it is already past it, in one transaction.
    async fn stats_store(&self, rows: &[MinuteRow], until: DateTime<Utc>) -> StoreResult<()>;
    /// Rolled-up minutes in `[from, to)`.
    async fn stats_read(
        &self,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<MinuteRow>>;
    /// Tasks now held, pending or running, and the oldest due pending one, as of `now`.
    async fn stats_active(
        &self,
        now: DateTime<Utc>,
        queue: Option<&str>,
        kind: Option<&str>,
    ) -> StoreResult<Vec<ActiveCount>>;
}

/// The start of the minute `t` falls in.
pub fn floor_minute(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(TimeDelta::minutes(1)).unwrap_or(t)
}

/// Rolls up every minute older than [`ROLL_GRACE`] that is not rolled up yet. Safe to run
/// from many processes at once: each minute's row is recomputed whole, not added to.
pub async fn roll_up<S: StatsSource + ?Sized>(
    source: &S,
    now: DateTime<Utc>,
) -> StoreResult<DateTime<Utc>> {
    let closed = floor_minute(now - ROLL_GRACE);
    let watermark = source.stats_rolled_until().await?;
    let mut from = match watermark {
        Some(t) => t,
        None => match source.stats_earliest().await? {
            Some(t) => floor_minute(t),
            None => closed,
        },
    };
    if from >= closed {
        if watermark.is_none() {
            source.stats_store(&[], closed).await?;
        }
        return Ok(from.max(closed));
    }
    while from < closed {
        let to = (from + ROLL_CHUNK).min(closed);
        let rows = fold(source.stats_aggregate(from, to, None, None).await?);
        source.stats_store(&rows, to).await?;
        from = to;
    }
    Ok(closed)
}

/// Statistics for a window: rolls up what is due, then sums the rollups and the raw
/// minutes after them.
pub async fn compute<S: StatsSource + ?Sized>(source: &S, p: &StatsParams) -> StoreResult<Stats> {
    p.validate()?;
    let now = source.stats_now(p.now).await?;
    let rolled = roll_up(source, now).await?;
    let minutes = (p.window.as_secs() / 60).max(1) as i64;
    let from = floor_minute(now) - TimeDelta::minutes(minutes - 1);
    let to = now;
    let (queue, kind) = (p.queue.as_deref(), p.kind.as_deref());
    let mut rows = source.stats_read(from, rolled.min(to), queue, kind).await?;
    let live_from = rolled.max(from);
    // Raw rows up to the end of the current minute (the window's end is `now`).
    let live_to = floor_minute(now) + TimeDelta::minutes(1);
    if live_from < live_to {
        rows.extend(fold(
            source
                .stats_aggregate(live_from, live_to, queue, kind)
                .await?,
        ));
    }
    let active = source.stats_active(now, queue, kind).await?;
    Ok(assemble(from, to, minutes, rows, active))
}

fn assemble(
    from: DateTime<Utc>,
    to: DateTime<Utc>,
    minutes: i64,
    rows: Vec<MinuteRow>,
    active: Vec<ActiveCount>,
) -> Stats {
    #[derive(Default)]
    struct Acc {
        active: Vec<(TaskState, u64)>,
        oldest_due: Option<DateTime<Utc>>,
        t: WindowTotals,
        wait: Histogram,
        run: Histogram,
    }
    let step_minutes = ((minutes + MAX_POINTS - 1) / MAX_POINTS).max(1);
    let points = (minutes + step_minutes - 1) / step_minutes;
    let mut series: Vec<SeriesPoint> = (0..points)
        .map(|i| SeriesPoint {
            at: from + TimeDelta::minutes(i * step_minutes),
            submitted: 0,
            succeeded: 0,
            failed: 0,
            retried: 0,
        })
        .collect();
    let mut groups: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for a in active {
        let g = groups.entry((a.queue, a.kind)).or_default();
        g.active.push((a.state, a.count));
        g.oldest_due = match (g.oldest_due, a.oldest_due) {
            (Some(x), Some(y)) => Some(x.min(y)),
            (x, y) => x.or(y),
        };
    }
    for r in rows {
        if r.minute < from || r.minute >= to {
            continue;
        }
        let index = ((r.minute - from).num_minutes() / step_minutes) as usize;
        if let Some(p) = series.get_mut(index) {
            p.submitted += r.submitted;
            p.succeeded += r.succeeded;
            p.failed += r.failed;
            p.retried += r.retried;
        }
        let g = groups.entry((r.queue, r.kind)).or_default();
        g.t.submitted += r.submitted;
        g.t.succeeded += r.succeeded;
        g.t.failed += r.failed;
        g.t.retried += r.retried;
        g.t.cancelled += r.cancelled;
        g.wait.add(&r.wait);
        g.run.add(&r.run);
    }
    let per_min = |n: u64| n as f64 / minutes as f64;
    let groups = groups
        .into_iter()
        .map(|((queue, kind), mut g)| {
            g.active.sort_by_key(|(s, _)| *s);
            let t = &mut g.t;
            t.submitted_per_min = per_min(t.submitted);
            t.succeeded_per_min = per_min(t.succeeded);
            t.failed_per_min = per_min(t.failed);
            let ended = t.succeeded + t.failed;
            t.success_rate = (ended > 0).then(|| t.succeeded as f64 / ended as f64);
            t.wait = g.wait.percentiles();
            t.run = g.run.percentiles();
            GroupStats {
                queue,
                kind,
                active: g.active,
                oldest_due: g.oldest_due,
                window: g.t,
            }
        })
        .collect();
    Stats {
        from,
        to,
        groups,
        series,
        series_step_secs: (step_minutes * 60) as u64,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_text_round_trips_and_rejects_garbage() {
        let mut h = Histogram::default();
        h.0[3] = 7;
        h.0[BUCKETS - 1] = 2;
        assert_eq!(Histogram::from_text(&h.to_text()).unwrap(), h);
        assert!(Histogram::from_text("1,2,3").is_err());
        assert!(Histogram::from_text(&format!("{},x", "0,".repeat(BUCKETS - 2))).is_err());
    }

    #[test]
    fn quantiles_interpolate_inside_the_bucket() {
        let mut h = Histogram::default();
        // 100 observations in [10, 20) ms.
        h.0[4] = 100;
        assert_eq!(h.quantile(0.5), Some(0.015));
        assert_eq!(h.quantile(1.0), Some(0.020));
        // One slow outlier past the last bound reports that bound.
        h.0[BUCKETS - 1] = 1;
        assert_eq!(h.quantile(1.0), Some(3_600.0));
        assert_eq!(Histogram::default().quantile(0.5), None);
    }
}
