//! The feed's SQL ([`tasktable_store::feed`]): for each of its three sources, the rows
//! above the cursor (by primary key, in id order) and the rows of the window at or below
//! it (by the source's time index), merged oldest first. Reads only; nothing is written
//! for the feed.

use crate::exec::required;
use crate::{Cells, Exec, Sql};
use chrono::TimeDelta;
use serde_json::{json, Value};
use tasktable_core::{Actor, ActorKind, AttemptOutcome};
use tasktable_store::feed::{Feed, FeedCursor, FeedItem, FeedParams, FeedSource, MAX_FEED_ROWS};
use tasktable_store::{StoreError, StoreResult};

/// One source: its table, the columns read, its time column.
struct Source {
    kind: FeedSource,
    table: &'static str,
    columns: &'static str,
    time: &'static str,
    /// The column naming the task (`id` for the tasks themselves).
    task: &'static str,
}

const SOURCES: [Source; 3] = [
    Source {
        kind: FeedSource::Task,
        table: "tasktable_tasks",
        columns: "id, queue, kind, created_at, created_by",
        time: "created_at",
        task: "id",
    },
    Source {
        kind: FeedSource::Attempt,
        table: "tasktable_attempts",
        columns: "id, task_id, attempt, worker_id, finished_at, outcome, error, queue, kind, \
                  task_state",
        time: "finished_at",
        task: "task_id",
    },
    Source {
        kind: FeedSource::Event,
        table: "tasktable_events",
        columns: crate::events::EVENT_COLUMNS,
        time: "happened_at",
        task: "task_id",
    },
];

/// One read of the feed ([`Store::event_feed`](tasktable_store::Store::event_feed)): per
/// source, up to `limit` rows above the cursor and the rows of the window at or below it,
/// oldest first, with `more` set when a source had more above the cursor, and the
/// database's time of the read. A `limit` outside 1 to [`MAX_FEED_ROWS`] is refused.
pub async fn read<E: Exec>(e: &mut E, p: &FeedParams) -> StoreResult<Feed> {
    if p.limit == 0 || p.limit > MAX_FEED_ROWS {
        return Err(StoreError::InvalidInput(format!(
            "a feed read takes 1 to {MAX_FEED_ROWS} rows a source, not {}",
            p.limit
        )));
    }
    let now = e.now(None).await?;
    let since = TimeDelta::from_std(p.window)
        .ok()
        .and_then(|w| now.checked_sub_signed(w))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let mut items = Vec::new();
    let mut more = false;
    for source in &SOURCES {
        let after = match source.kind {
            FeedSource::Task => p.after.tasks,
            FeedSource::Attempt => p.after.attempts,
            FeedSource::Event => p.after.events,
        };
        // Above the cursor, in id order.
        let mut above = select(e, source, p);
        above
            .push(" AND id > ")
            .bind(after)
            .push(" ORDER BY id LIMIT ")
            .bind(i64::from(p.limit) + 1);
        let mut rows = e.fetch(above).await?;
        if rows.len() > p.limit as usize {
            rows.truncate(p.limit as usize);
            more = true;
        }
        for row in &rows {
            items.push(item(source.kind, row)?);
        }
        // The window, at or below it: rows that committed after the cursor passed them,
        // which sit just below it: the highest ids first.
        let mut window = select(e, source, p);
        window
            .push(&format!(" AND {} >= ", source.time))
            .bind(since)
            .push(" AND id <= ")
            .bind(after)
            .push(" ORDER BY id DESC LIMIT ")
            .bind(i64::from(MAX_FEED_ROWS));
        for row in &e.fetch(window).await? {
            items.push(item(source.kind, row)?);
        }
    }
    // At one instant: a submit, then an attempt's end, then an operator's event.
    let rank = |s: FeedSource| SOURCES.iter().position(|x| x.kind == s);
    items.sort_by_key(|i| (i.at, rank(i.source), i.id));
    Ok(Feed { items, more, now })
}

fn select<E: Exec>(e: &E, source: &Source, p: &FeedParams) -> Sql {
    let mut sql = Sql::new(
        e.dialect(),
        format!(
            "SELECT {} FROM {} WHERE 1 = 1",
            source.columns, source.table
        ),
    );
    if let Some(q) = &p.queue {
        sql.push(" AND queue = ").bind(q.as_str());
    }
    if let Some(k) = &p.kind {
        sql.push(" AND kind = ").bind(k.as_str());
    }
    if let Some(t) = p.task_id {
        sql.push(&format!(" AND {} = ", source.task)).bind(t);
    }
    sql
}

fn item(source: FeedSource, row: &impl Cells) -> StoreResult<FeedItem> {
    let id = required(row.int("id"), "id")?;
    Ok(match source {
        FeedSource::Task => FeedItem {
            source,
            id,
            at: required(row.time("created_at"), "created_at")?,
            event: "submitted".into(),
            task_id: Some(id),
            queue: row.text("queue")?,
            kind: row.text("kind")?,
            actor: row
                .text("created_by")?
                .as_deref()
                .and_then(Actor::from_column),
            attempt: None,
            detail: Value::Null,
        },
        FeedSource::Attempt => {
            let outcome: AttemptOutcome = required(row.text("outcome"), "outcome")?
                .parse()
                .map_err(|e| StoreError::Database(Box::new(e)))?;
            let worker = row.text("worker_id")?;
            let actor = if matches!(
                outcome,
                AttemptOutcome::LeaseExpired | AttemptOutcome::TimedOut
            ) {
                Some(Actor::system("rescuer"))
            } else {
                worker
                    .as_deref()
                    .map(|w| Actor::new(ActorKind::Worker, w, None))
            };
            FeedItem {
                source,
                id,
                at: required(row.time("finished_at"), "finished_at")?,
                event: outcome.as_str().into(),
                task_id: Some(required(row.int("task_id"), "task_id")?),
                queue: row.text("queue")?,
                kind: row.text("kind")?,
                actor,
                attempt: row
                    .int("attempt")?
                    .map(|n| n.clamp(0, u32::MAX.into()) as u32),
                detail: json!({"error": row.text("error")?, "task_state": row.text("task_state")?}),
            }
        }
        FeedSource::Event => {
            let e = crate::events::from_row(row)?;
            FeedItem {
                source,
                id,
                at: e.at,
                event: e.event.as_str().into(),
                task_id: e.task_id,
                queue: e.queue,
                kind: e.kind,
                actor: Some(e.actor),
                attempt: None,
                detail: e.detail,
            }
        }
    })
}

/// The last id of each source.
pub async fn head<E: Exec>(e: &mut E) -> StoreResult<FeedCursor> {
    let sql = Sql::new(
        e.dialect(),
        "SELECT (SELECT max(id) FROM tasktable_events) AS e, \
         (SELECT max(id) FROM tasktable_attempts) AS a, \
         (SELECT max(id) FROM tasktable_tasks) AS t",
    );
    let rows = e.fetch(sql).await?;
    let row = rows
        .first()
        .ok_or_else(|| StoreError::Database("the feed's head read no row".into()))?;
    Ok(FeedCursor {
        events: row.int("e")?.unwrap_or(0),
        attempts: row.int("a")?.unwrap_or(0),
        tasks: row.int("t")?.unwrap_or(0),
    })
}
