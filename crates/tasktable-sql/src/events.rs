//! The event log's SQL: writing events inside the caller's transaction (so an event
//! commits with its change or not at all), and the audit's read, newest first by id.

use crate::exec::required;
use crate::{Arg, Backend, Cells, Exec, Sql};
use chrono::{DateTime, TimeDelta, Utc};
use tasktable_core::retention::MAX_AGE;
use tasktable_core::{Actor, ActorKind, EventKind};
use tasktable_store::event::{Event, EventListParams, EventPruneParams, NewEvent, MAX_EVENT_LIST};
use tasktable_store::{StoreError, StoreResult, MAX_PURGE_BATCH};

/// Every column of `tasktable_events`, as the archive keeps them.
pub const EVENT_COLUMNS: &str = "id, happened_at, event, task_id, queue, kind, schedule_id, \
    worker_id, actor_kind, actor, actor_role, detail, action_key, action_tasks";

/// Rows one `INSERT` writes at the most (13 arguments a row stays far below every
/// database's limit on placeholders).
const ROWS_PER_INSERT: usize = 200;

/// Writes `events`, all by `actor`, at `now`, inside the caller's transaction.
pub async fn record<E: Exec>(
    e: &mut E,
    now: DateTime<Utc>,
    actor: &Actor,
    events: &[NewEvent],
) -> StoreResult<()> {
    for rows in events.chunks(ROWS_PER_INSERT) {
        let mut sql = Sql::new(
            e.dialect(),
            "INSERT INTO tasktable_events (happened_at, event, task_id, queue, kind, \
             schedule_id, worker_id, actor_kind, actor, actor_role, detail, action_key, \
             action_tasks) VALUES ",
        );
        for (i, ev) in rows.iter().enumerate() {
            if i > 0 {
                sql.push(", ");
            }
            sql.push("(")
                .bind(now)
                .push(", ")
                .bind(ev.event.as_str())
                .push(", ")
                .bind(Arg::MaybeInt(ev.task_id))
                .push(", ")
                .bind(Arg::Text(ev.queue.clone()))
                .push(", ")
                .bind(Arg::Text(ev.kind.clone()))
                .push(", ")
                .bind(Arg::MaybeInt(ev.schedule_id))
                .push(", ")
                .bind(Arg::Text(ev.worker_id.clone()))
                .push(", ")
                .bind(actor.kind.as_str())
                .push(", ")
                .bind(actor.name.as_str())
                .push(", ")
                .bind(Arg::Text(actor.role.clone()))
                .push(", ")
                .bind(Arg::Json(ev.detail.clone()))
                .push(", ")
                .bind(Arg::Text(ev.action.clone()))
                .push(", ")
                .bind(Arg::MaybeInt(
                    ev.tasks.map(|n| i64::try_from(n).unwrap_or(i64::MAX)),
                ))
                .push(")");
        }
        e.execute(sql).await?;
    }
    Ok(())
}

/// [`record`] of one event.
pub async fn record_one<E: Exec>(
    e: &mut E,
    now: DateTime<Utc>,
    actor: &Actor,
    event: NewEvent,
) -> StoreResult<()> {
    record(e, now, actor, std::slice::from_ref(&event)).await
}

/// A page of the log, newest first (the live table only: events of archived tasks are
/// read with their task).
pub async fn list<E: Exec>(e: &mut E, p: &EventListParams) -> StoreResult<Vec<Event>> {
    if p.limit == 0 || p.limit > MAX_EVENT_LIST {
        return Err(StoreError::InvalidInput(format!(
            "an audit page holds 1 to {MAX_EVENT_LIST} events, not {}",
            p.limit
        )));
    }
    let f = &p.filter;
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {EVENT_COLUMNS} FROM tasktable_events WHERE 1 = 1"),
    );
    if let Some(before) = p.before {
        sql.push(" AND id < ").bind(before);
    }
    if let Some(actor) = &f.actor {
        sql.push(" AND actor = ").bind(actor.as_str());
    }
    if let Some(kind) = f.actor_kind {
        sql.push(" AND actor_kind = ").bind(kind.as_str());
    }
    if let Some(task) = f.task_id {
        sql.push(" AND task_id = ").bind(task);
    }
    if let Some(queue) = &f.queue {
        sql.push(" AND queue = ").bind(queue.as_str());
    }
    if !f.events.is_empty() {
        let names: Vec<&str> = f.events.iter().map(|k| k.as_str()).collect();
        sql.push(" AND ").push_in_texts("event", &names);
    }
    if let Some(from) = f.from {
        sql.push(" AND happened_at >= ").bind(from);
    }
    if let Some(to) = f.to {
        sql.push(" AND happened_at < ").bind(to);
    }
    if let Some(action) = &f.action {
        sql.push(" AND action_key = ").bind(action.as_str());
    }
    if !f.lists_action_tasks() {
        // An action is its own row; its tasks' rows are in their histories.
        sql.push(" AND (action_key IS NULL OR task_id IS NULL)");
    }
    sql.push(" ORDER BY id DESC LIMIT ")
        .bind(i64::from(p.limit));
    e.fetch(sql).await?.iter().map(from_row).collect()
}

/// One batch of pruning: picks the oldest task-less events past the age with a plain
/// read, then deletes them by id in a short write transaction.
pub async fn prune<B: Backend>(b: &B, p: &EventPruneParams) -> StoreResult<u64> {
    if p.limit == 0 || p.limit > MAX_PURGE_BATCH || p.older_than > MAX_AGE {
        return Err(StoreError::InvalidInput(format!(
            "an event prune takes 1 to {MAX_PURGE_BATCH} events and an age of at most 100 years"
        )));
    }
    let mut read = b.read().await?;
    let now = read.now(p.now).await?;
    let age = TimeDelta::from_std(p.older_than).unwrap_or(TimeDelta::MAX);
    let cutoff = now
        .checked_sub_signed(age)
        .unwrap_or(DateTime::<Utc>::MIN_UTC);
    // A bulk action's own event stays while any of its tasks' events do: the audit shows
    // the action by it alone.
    let mut pick = Sql::new(
        read.dialect(),
        "SELECT ev.id AS id FROM tasktable_events ev WHERE ev.task_id IS NULL \
         AND (ev.action_key IS NULL OR NOT EXISTS (SELECT 1 FROM tasktable_events t \
         WHERE t.action_key = ev.action_key AND t.task_id IS NOT NULL)) AND ev.happened_at < ",
    );
    pick.bind(cutoff)
        .push(" ORDER BY ev.id LIMIT ")
        .bind(i64::from(p.limit));
    let ids = read
        .fetch(pick)
        .await?
        .iter()
        .map(|r| required(r.int("id"), "id"))
        .collect::<StoreResult<Vec<i64>>>()?;
    drop(read);
    if ids.is_empty() {
        return Ok(0);
    }
    let ids = &ids;
    b.transact("event_prune", |mut tx| async move {
        let mut delete = Sql::new(tx.dialect(), "DELETE FROM tasktable_events WHERE ");
        delete.push_in_ids("id", ids);
        tx.execute(delete).await?;
        Ok((tx, ()))
    })
    .await?;
    Ok(ids.len() as u64)
}

/// The events of one task, oldest first, from the live table or the archive.
pub async fn of_task<E: Exec>(
    e: &mut E,
    task_id: tasktable_core::TaskId,
    archived: bool,
) -> StoreResult<Vec<Event>> {
    let table = if archived {
        "tasktable_events_archive"
    } else {
        "tasktable_events"
    };
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {EVENT_COLUMNS} FROM {table} WHERE task_id = "),
    );
    sql.bind(task_id).push(" ORDER BY id");
    e.fetch(sql).await?.iter().map(from_row).collect()
}

pub(crate) fn from_row(row: &impl Cells) -> StoreResult<Event> {
    let bad = |what: &str, v: String| {
        StoreError::Database(format!("tasktable_events holds an unknown {what} {v:?}").into())
    };
    let event = required(row.text("event"), "event")?;
    let actor_kind = required(row.text("actor_kind"), "actor_kind")?;
    Ok(Event {
        id: required(row.int("id"), "id")?,
        at: required(row.time("happened_at"), "happened_at")?,
        event: EventKind::parse(&event).ok_or_else(|| bad("event", event))?,
        task_id: row.int("task_id")?,
        queue: row.text("queue")?,
        kind: row.text("kind")?,
        schedule_id: row.int("schedule_id")?,
        worker_id: row.text("worker_id")?,
        actor: Actor {
            kind: ActorKind::parse(&actor_kind).ok_or_else(|| bad("actor kind", actor_kind))?,
            name: required(row.text("actor"), "actor")?,
            role: row.text("actor_role")?,
        },
        detail: row.json("detail")?.unwrap_or_default(),
        action: row.text("action_key")?,
        tasks: row
            .int("action_tasks")?
            .map(|n| u64::try_from(n).unwrap_or_default()),
    })
}
