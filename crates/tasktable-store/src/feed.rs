//! Following what happens, live: the feed of submits, attempts' ends and events, read
//! from the rows that record them, and a [`Follower`] that reads it again and again
//! without missing a row that commits late.
//!
//! Three sources feed it, each in the order of its ids: `tasktable_tasks` (a task
//! submitted), `tasktable_attempts` (an attempt ended: succeeded, failed, retried,
//! snoozed, rescued, ...) and `tasktable_events` (operators' changes, schedules firing).
//! Nothing new is written for it: the claim and the finish write what they always wrote.
//! A [`FeedCursor`] holds the last id read of each source; it is what a client sends back
//! to resume (`Last-Event-ID`).
//!
//! Ids are handed out when rows are written, but transactions commit in another order, so
//! a reader that only asked for ids above its cursor could pass over a row that commits
//! late with a lower id. Each read therefore also takes the rows of the last
//! [`FeedParams::window`] of the database's clock, and the follower drops those it has
//! already given out. A row that commits more than a window after it was written could
//! still be passed over; tasktable's own writes are short transactions (a bulk change
//! commits every 500 tasks). Delivery is at least once: a client that reconnects is given
//! the window again, and drops by [`FeedItem::key`] what it has seen.

use crate::{Store, StoreError, StoreResult};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::{Actor, TaskId};

/// The last id read of each source.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct FeedCursor {
    /// The last id read of `tasktable_events`.
    pub events: i64,
    /// The last id read of `tasktable_attempts`.
    pub attempts: i64,
    /// The last id read of `tasktable_tasks`.
    pub tasks: i64,
}

impl fmt::Display for FeedCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "e{}.a{}.t{}", self.events, self.attempts, self.tasks)
    }
}

impl FromStr for FeedCursor {
    type Err = StoreError;

    /// `e<events>.a<attempts>.t<tasks>`, as [`fmt::Display`] writes it.
    fn from_str(s: &str) -> StoreResult<FeedCursor> {
        let bad = || {
            StoreError::InvalidInput(format!(
                "{s:?} is not a feed cursor: it looks like e12.a345.t678"
            ))
        };
        let mut parts = s.split('.');
        let mut next = |prefix: char| -> StoreResult<i64> {
            let part = parts.next().ok_or_else(bad)?;
            let digits = part.strip_prefix(prefix).ok_or_else(bad)?;
            // At most 18 digits: every such number is an id.
            if digits.is_empty() || digits.len() > 18 || !digits.bytes().all(|b| b.is_ascii_digit())
            {
                return Err(bad());
            }
            digits.parse().map_err(|_| bad())
        };
        let cursor = FeedCursor {
            events: next('e')?,
            attempts: next('a')?,
            tasks: next('t')?,
        };
        if parts.next().is_some() {
            return Err(bad());
        }
        Ok(cursor)
    }
}

impl FeedCursor {
    /// The last id of `source`.
    pub fn of(&self, source: FeedSource) -> i64 {
        match source {
            FeedSource::Event => self.events,
            FeedSource::Attempt => self.attempts,
            FeedSource::Task => self.tasks,
        }
    }

    fn set(&mut self, source: FeedSource, id: i64) {
        match source {
            FeedSource::Event => self.events = id,
            FeedSource::Attempt => self.attempts = id,
            FeedSource::Task => self.tasks = id,
        }
    }

    /// Moved past `item`.
    pub fn advance(&mut self, item: &FeedItem) {
        let at = match item.source {
            FeedSource::Event => &mut self.events,
            FeedSource::Attempt => &mut self.attempts,
            FeedSource::Task => &mut self.tasks,
        };
        *at = (*at).max(item.id);
    }
}

/// Which table a feed item was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FeedSource {
    /// `tasktable_events`: an operator's change, a schedule firing.
    Event,
    /// `tasktable_attempts`: an attempt ended.
    Attempt,
    /// `tasktable_tasks`: a task submitted.
    Task,
}

/// One thing that happened.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FeedItem {
    /// The table it was read from.
    pub source: FeedSource,
    /// The row's id in its source.
    pub id: i64,
    /// When it happened: the submit, the attempt's end, the event's writing.
    pub at: DateTime<Utc>,
    /// `submitted`, an attempt's outcome (`succeeded`, `error`, `lease_expired`, ...),
    /// or an event's name.
    pub event: String,
    /// The task it concerns; `None` for an event of a queue, a worker or a schedule.
    pub task_id: Option<TaskId>,
    /// The task's queue, or the queue an event concerns.
    pub queue: Option<String>,
    /// The task's kind.
    pub kind: Option<String>,
    /// Who: the worker of an attempt (the rescuer's when its lease ran out), an event's
    /// actor, a submit's submitter where recorded.
    pub actor: Option<Actor>,
    /// The attempt's number, for an attempt's end.
    pub attempt: Option<u32>,
    /// An event's detail; an attempt's error and the state it left its task in.
    pub detail: Value,
}

impl FeedItem {
    /// What identifies it across reads: a client that saw this key has seen the item.
    pub fn key(&self) -> (FeedSource, i64) {
        (self.source, self.id)
    }
}

/// One read of the feed.
#[derive(Debug, Clone, PartialEq)]
pub struct FeedParams {
    /// Rows above these ids, and the rows of the last `window`.
    pub after: FeedCursor,
    /// How far back, by the database's clock, rows at or below the cursor are read
    /// again: those that committed late ([`DEFAULT_WINDOW`] for a [`Follower`]).
    pub window: Duration,
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this task.
    pub task_id: Option<TaskId>,
    /// Rows per source at the most, above the cursor: 1 to [`MAX_FEED_ROWS`], others
    /// refused.
    pub limit: u32,
}

/// What one read found.
#[derive(Debug, Clone, PartialEq)]
pub struct Feed {
    /// Oldest first (by time, then source, then id).
    pub items: Vec<FeedItem>,
    /// Whether a source had more rows above the cursor than `limit`: read again at once.
    pub more: bool,
    /// The database's clock at the read.
    pub now: DateTime<Utc>,
}

/// Most rows per source one feed read returns above the cursor.
pub const MAX_FEED_ROWS: u32 = 1000;

/// What a follower wants.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FeedFilter {
    /// Only this queue.
    pub queue: Option<String>,
    /// Only this kind.
    pub kind: Option<String>,
    /// Only this task.
    pub task_id: Option<TaskId>,
    /// Only these event names (`submitted`, `succeeded`, `cancelled`, ...); empty: all.
    pub events: Vec<String>,
}

impl FeedFilter {
    fn wants(&self, item: &FeedItem) -> bool {
        self.events.is_empty() || self.events.contains(&item.event)
    }
}

/// Reads the feed again and again from a cursor, giving each item out once (within the
/// window): what a live stream and [`Follower::next`] callers build on.
#[derive(Debug)]
pub struct Follower {
    store: Arc<dyn Store>,
    filter: FeedFilter,
    cursor: FeedCursor,
    window: Duration,
    poll: Duration,
    /// Items given out lately, with their time: the window's rows are read again.
    seen: HashMap<(FeedSource, i64), DateTime<Utc>>,
}

/// The shortest time between two reads of a follower woken by the store.
const MIN_GAP: Duration = Duration::from_millis(100);

/// How long a row may take to commit and still be followed.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(5);

impl Follower {
    /// A follower from `cursor`, or, with `None`, from what the database holds now.
    pub async fn start(
        store: Arc<dyn Store>,
        filter: FeedFilter,
        cursor: Option<FeedCursor>,
    ) -> StoreResult<Follower> {
        let from_now = cursor.is_none();
        let cursor = match cursor {
            Some(c) => c,
            None => store.feed_head().await?,
        };
        let mut follower = Follower {
            store,
            filter,
            cursor,
            window: DEFAULT_WINDOW,
            poll: Duration::from_secs(1),
            seen: HashMap::new(),
        };
        if from_now {
            // What the window holds at or below the head happened before now: seen, not
            // given out. Rows above the head (committed since) stay to be read.
            let feed = follower.store.event_feed(follower.params()).await?;
            for item in feed.items.iter().filter(|i| i.id <= cursor.of(i.source)) {
                follower.seen.insert(item.key(), item.at);
            }
        }
        Ok(follower)
    }

    /// How long it waits between reads that found everything (default 1 s).
    pub fn poll_every(mut self, poll: Duration) -> Self {
        self.poll = poll;
        self
    }

    /// How long a row may take to commit and still be given out (default 5 s).
    pub fn window(mut self, window: Duration) -> Self {
        self.window = window;
        self
    }

    /// Where it has got to: what to resume from.
    pub fn cursor(&self) -> FeedCursor {
        self.cursor
    }

    fn params(&self) -> FeedParams {
        FeedParams {
            after: self.cursor,
            window: self.window,
            queue: self.filter.queue.clone(),
            kind: self.filter.kind.clone(),
            task_id: self.filter.task_id,
            limit: MAX_FEED_ROWS,
        }
    }

    /// One read: the items not given out before that the filter wants, oldest first,
    /// each with the cursor to resume from after it, and whether to read again at once.
    /// Empty when nothing happened.
    ///
    /// Items go out by time, which within a source need not be id order, so an item's
    /// cursor stops, in each source, just below the lowest id of this read still to go
    /// out: a client that resumes from it is given every item after it.
    pub async fn read(&mut self) -> StoreResult<(Vec<(FeedItem, FeedCursor)>, bool)> {
        let feed = self.store.event_feed(self.params()).await?;
        let start = self.cursor;
        // Everything of this read not given out before, late rows of the window too.
        let mut pending: BTreeSet<(FeedSource, i64)> = feed
            .items
            .iter()
            .map(FeedItem::key)
            .filter(|k| !self.seen.contains_key(k))
            .collect();
        let mut given = start;
        let mut out = Vec::new();
        for item in feed.items {
            pending.remove(&item.key());
            given.advance(&item);
            let mut resume = given;
            for source in [FeedSource::Event, FeedSource::Attempt, FeedSource::Task] {
                if let Some((_, id)) = pending
                    .range((source, i64::MIN)..=(source, i64::MAX))
                    .next()
                {
                    // May step below where the read started: a late row of the window
                    // is still to go out, and a client that resumes here gets it (and,
                    // at least once, what it had seen after it).
                    resume.set(source, (id - 1).min(given.of(source)));
                }
            }
            if self.seen.insert(item.key(), item.at).is_some() {
                continue;
            }
            if self.filter.wants(&item) {
                out.push((item, resume));
            }
        }
        self.cursor = given;
        // Forget what the window no longer reads again (twice the window, for clocks
        // that step).
        let horizon = chrono::TimeDelta::from_std(self.window.saturating_mul(2))
            .unwrap_or(chrono::TimeDelta::MAX);
        let oldest = feed
            .now
            .checked_sub_signed(horizon)
            .unwrap_or(DateTime::<Utc>::MIN_UTC);
        self.seen.retain(|_, at| *at >= oldest);
        Ok((out, feed.more))
    }

    /// The next items: reads until something the filter wants happened, waiting
    /// between reads, or a wake-up of the store's comes.
    pub async fn next(&mut self) -> StoreResult<Vec<(FeedItem, FeedCursor)>> {
        let mut wakes = self.store.subscribe().await.ok();
        loop {
            let (items, more) = self.read().await?;
            if !items.is_empty() {
                return Ok(items);
            }
            if more {
                continue;
            }
            match &mut wakes {
                Some(rx) => {
                    let _ = tokio::time::timeout(self.poll, rx.recv()).await;
                    // However many wake-ups came, one read answers them all, and reads
                    // come at most ten a second.
                    tokio::time::sleep(MIN_GAP).await;
                    while rx.try_recv().is_ok() {}
                }
                None => tokio::time::sleep(self.poll).await,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cursor_reads_back_as_itself_and_nothing_else_reads() {
        let c = FeedCursor {
            events: 12,
            attempts: 0,
            tasks: 9_000_000_000,
        };
        assert_eq!(c.to_string(), "e12.a0.t9000000000");
        assert_eq!(c.to_string().parse::<FeedCursor>().unwrap(), c);
        for bad in [
            "",
            "e1.a2",
            "e1.a2.t3.x4",
            "a1.e2.t3",
            "e-1.a2.t3",
            "e.a1.t2",
            "e1.a2.t+3",
            "e99999999999999999999.a1.t1",
            "e1000000000000000000.a1.t1",
        ] {
            assert!(bad.parse::<FeedCursor>().is_err(), "{bad:?}");
        }
    }
}
