//! Batches ([`tasktable_core::batch`]): the row each batch task has in
//! `tasktable_batches`, written at submit; its runner's fenced save (progress, failed
//! items, a renewal of the lease, and what operators asked since); operators' start,
//! pause, stop and resume, applied to the task through the same change path as every
//! operator change ([`crate::update`]); and edits of the budget and the data.
//!
//! A batch's items never touch the database: its runner saves a low-water mark and a
//! few counters every second or two, so the writes a batch costs do not grow with its
//! items.

use crate::backend::Changed;
use crate::exec::{count, required, Cells, Exec};
use crate::sql::{Arg, Sql};
use chrono::{DateTime, Utc};
use std::time::Duration;
use tasktable_core::batch::{
    data_may_change, BatchControl, BatchRefusal, BatchSpec, BatchStatus, FAILURES_KEPT,
};
use tasktable_core::stored::after;
use tasktable_core::{NewTask, Task, TaskId, TaskState};
use tasktable_store::{
    lost_lease_status, Batch, BatchControlParams, BatchListParams, BatchSaveParams, BatchSaved,
    BatchUpdateParams, ItemFailure, LeaseRow, LeaseStatus, NewEvent, StoreError, StoreResult,
    Submitted,
};

/// Every column of `tasktable_batches`, as the archive keeps them.
pub const BATCH_COLUMNS: &str = "task_id, items, parallelism, rate, window_size, error_budget, \
    item_retries, item_backoff_ms, prestart_timeout_ms, control, low_water, end_at, errors, \
    items_per_second, data_version, saved_at, created_at, released_at";

/// Every column of `tasktable_batch_failures`, as the archive keeps them.
pub const FAILURE_COLUMNS: &str = "task_id, item, error, tries, failed_at";

fn big(n: u64) -> Arg {
    Arg::Int(i64::try_from(n).unwrap_or(i64::MAX))
}

fn maybe(n: Option<u64>) -> Arg {
    Arg::MaybeInt(n.map(|n| i64::try_from(n).unwrap_or(i64::MAX)))
}

fn millis(d: Duration) -> Arg {
    Arg::Int(i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// Writes the batch rows of the tasks `submitted` created, inside the submit's write
/// transaction.
pub async fn mark_submitted<E: Exec>(
    e: &mut E,
    tasks: &[NewTask],
    submitted: &[Submitted],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    for (task, s) in tasks.iter().zip(submitted) {
        let (Some(spec), true) = (&task.batch, s.created) else {
            continue;
        };
        let mut sql = Sql::new(
            e.dialect(),
            format!("INSERT INTO tasktable_batches ({BATCH_COLUMNS}) VALUES ("),
        );
        sql.bind(s.id)
            .push(", ")
            .bind(maybe(spec.items))
            .push(", ")
            .bind(Arg::Int32(spec.parallelism as i32))
            .push(", ")
            .bind(maybe(spec.rate.map(u64::from)))
            .push(", ")
            .bind(big(spec.window_size()))
            .push(", ")
            .bind(big(spec.error_budget))
            .push(", ")
            .bind(Arg::Int32(spec.item_retries as i32))
            .push(", ")
            .bind(millis(spec.item_backoff))
            .push(", ")
            .bind(millis(spec.prestart_timeout))
            .push(", ")
            .bind(BatchControl::Run.as_str())
            .push(", 0, ")
            .bind(maybe(spec.items))
            .push(", 0, NULL, 0, NULL, ")
            .bind(now)
            .push(", ")
            // A batch submitted held waits for the business's start [S2].
            .bind(Arg::Time(if task.held { None } else { Some(now) }))
            .push(")");
        e.execute(sql).await?;
    }
    Ok(())
}

/// A batch row, before its task is joined to it.
struct Row {
    task_id: TaskId,
    spec: BatchSpec,
    control: BatchControl,
    low_water: u64,
    end: Option<u64>,
    errors: u64,
    items_per_second: Option<f64>,
    data_version: u64,
    saved_at: Option<DateTime<Utc>>,
    created_at: DateTime<Utc>,
    /// When the business started it: its submit, unless it was submitted held.
    released_at: Option<DateTime<Utc>>,
}

fn unsigned(r: &impl Cells, column: &str) -> StoreResult<Option<u64>> {
    Ok(r.int(column)?.map(|v| v.max(0) as u64))
}

fn row_from(r: &impl Cells) -> StoreResult<Row> {
    let ms = |c: &str| -> StoreResult<Duration> { Ok(Duration::from_millis(count(r, c)?)) };
    let spec = BatchSpec {
        items: unsigned(r, "items")?,
        parallelism: count(r, "parallelism")? as u32,
        rate: unsigned(r, "rate")?.map(|v| v as u32),
        window: Some(count(r, "window_size")?),
        error_budget: count(r, "error_budget")?,
        item_retries: count(r, "item_retries")? as u32,
        item_backoff: ms("item_backoff_ms")?,
        prestart_timeout: ms("prestart_timeout_ms")?,
    };
    let control = required(r.text("control"), "control")?
        .parse()
        .map_err(|e: String| StoreError::Database(e.into()))?;
    Ok(Row {
        task_id: required(r.int("task_id"), "task_id")?,
        spec,
        control,
        low_water: count(r, "low_water")?,
        end: unsigned(r, "end_at")?,
        errors: count(r, "errors")?,
        items_per_second: r.float("items_per_second")?,
        data_version: count(r, "data_version")?,
        saved_at: r.time("saved_at")?,
        created_at: required(r.time("created_at"), "created_at")?,
        released_at: r.time("released_at")?,
    })
}

/// Whether a runner ever had the batch, as core defines it.
fn started(task: &Task, row: &Row) -> bool {
    tasktable_core::batch::started(task.attempt, row.saved_at.is_some())
}

/// Whether it still waits for the business's start, as core defines it.
fn awaiting(task: &Task, row: &Row) -> bool {
    tasktable_core::batch::awaits_start(row.released_at.is_some(), started(task, row))
}

fn batch(task: Task, row: Row) -> Batch {
    let started = started(&task, &row);
    Batch {
        status: BatchStatus::of(task.state, row.control, awaiting(&task, &row)),
        started,
        awaits_start: awaiting(&task, &row),
        spec: row.spec,
        control: row.control,
        low_water: row.low_water,
        end: row.end,
        errors: row.errors,
        items_per_second: row.items_per_second,
        data_version: row.data_version,
        saved_at: row.saved_at,
        created_at: row.created_at,
        task,
    }
}

async fn read_row<E: Exec>(e: &mut E, id: TaskId, lock: bool) -> StoreResult<Option<Row>> {
    let d = e.dialect();
    let mut sql = Sql::new(
        d,
        format!("SELECT {BATCH_COLUMNS} FROM tasktable_batches WHERE task_id = "),
    );
    sql.bind(id);
    if lock {
        sql.push(d.lock_rows());
    }
    e.fetch(sql).await?.first().map(row_from).transpose()
}

/// A batch, or `None` when `id` is no batch.
pub async fn get<E: Exec>(e: &mut E, id: TaskId) -> StoreResult<Option<Batch>> {
    let Some(row) = read_row(e, id, false).await? else {
        return Ok(None);
    };
    let task = crate::query::get(e, id)
        .await?
        .ok_or(StoreError::NotFound(id))?;
    Ok(Some(batch(task, row)))
}

/// Batches, newest first.
pub async fn list<E: Exec>(e: &mut E, p: &BatchListParams) -> StoreResult<Vec<Batch>> {
    let limit = p.limit.clamp(1, tasktable_store::MAX_BATCH_LIST);
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {BATCH_COLUMNS} FROM tasktable_batches"),
    );
    if let Some(before) = p.before {
        sql.push(" WHERE task_id < ").bind(before);
    }
    sql.push(" ORDER BY task_id DESC LIMIT ")
        .bind(i64::from(limit));
    let rows: Vec<Row> = e
        .fetch(sql)
        .await?
        .iter()
        .map(row_from)
        .collect::<StoreResult<_>>()?;
    let ids: Vec<TaskId> = rows.iter().map(|r| r.task_id).collect();
    let mut tasks = Vec::new();
    for chunk in ids.chunks(Sql::MAX_IN_LIST) {
        tasks.extend(crate::query::get_many(e, chunk).await?);
    }
    Ok(rows
        .into_iter()
        .filter_map(|row| {
            let task = tasks.iter().position(|t| t.id == row.task_id)?;
            Some(batch(tasks.swap_remove(task), row))
        })
        .collect())
}

/// The items of a batch that failed for good, lowest index first.
pub async fn failures<E: Exec>(e: &mut E, id: TaskId) -> StoreResult<Vec<ItemFailure>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {FAILURE_COLUMNS} FROM tasktable_batch_failures WHERE task_id = "),
    );
    sql.bind(id).push(" ORDER BY item");
    e.fetch(sql)
        .await?
        .iter()
        .map(|r| {
            Ok(ItemFailure {
                item: count(r, "item")?,
                error: required(r.text("error"), "error")?,
                tries: count(r, "tries")? as u32,
                failed_at: r.time("failed_at")?,
            })
        })
        .collect()
}

/// A runner's save, inside the caller's write transaction: locks the task, checks the
/// lease, renews it (never past the deadline), writes progress and the failed items
/// (up to [`FAILURES_KEPT`]), and answers what operators asked since.
pub async fn save_in<E: Exec>(e: &mut E, p: &BatchSaveParams) -> StoreResult<BatchSaved> {
    let d = e.dialect();
    let now = e.now(p.now).await?;
    let id = p.lease.task_id;
    let mut sql = Sql::new(
        d,
        "SELECT state, lease_token, lease_credential FROM tasktable_tasks WHERE id = ",
    );
    sql.bind(id).push(d.lock_rows());
    let found = e.fetch(sql).await?;
    let lease_row = found
        .first()
        .map(|r| -> StoreResult<LeaseRow> {
            Ok(LeaseRow {
                state: crate::row::state(&required(r.text("state"), "state")?)?,
                token: required(r.int("lease_token"), "lease_token")?,
                credential: tasktable_store::credential_from_db(
                    r.text("lease_credential")?.as_deref(),
                )?,
                last_outcome: None,
            })
        })
        .transpose()?;
    let Some(row) = read_row(e, id, true).await? else {
        return Ok(BatchSaved {
            lease: LeaseStatus::Lost,
            control: BatchControl::Run,
            error_budget: 0,
            data: None,
        });
    };
    let holds = lease_row.is_some_and(|r| {
        r.state == TaskState::Running
            && r.token == p.lease.token
            && r.credential.is_some()
            && r.credential == p.lease.credential
    });
    if !holds {
        return Ok(BatchSaved {
            lease: lost_lease_status(p.lease, lease_row),
            control: row.control,
            error_budget: row.spec.error_budget,
            data: None,
        });
    }
    let until = after(now, p.lease_for);
    let mut renew = Sql::new(
        d,
        "UPDATE tasktable_tasks SET lease_expires_at = CASE WHEN deadline_at IS NOT NULL \
         AND deadline_at < ",
    );
    renew
        .bind(until)
        .push(" THEN deadline_at ELSE ")
        .bind(until)
        .push(" END, updated_at = ")
        .bind(now)
        .push(" WHERE id = ")
        .bind(id);
    e.execute(renew).await?;
    let mut progress = Sql::new(d, "UPDATE tasktable_batches SET low_water = ");
    progress
        .bind(big(p.low_water))
        .push(", end_at = ")
        .bind(maybe(p.end))
        .push(", errors = ")
        .bind(big(p.errors))
        .push(", items_per_second = ")
        .bind(Arg::Float(p.items_per_second.filter(|r| r.is_finite())))
        .push(", saved_at = ")
        .bind(now)
        .push(" WHERE task_id = ")
        .bind(id);
    e.execute(progress).await?;
    save_failures(e, id, &p.failures, now).await?;
    let data = if row.data_version != p.data_version {
        let task = crate::query::get(e, id)
            .await?
            .ok_or(StoreError::NotFound(id))?;
        Some((row.data_version, task.payload))
    } else {
        None
    };
    Ok(BatchSaved {
        lease: LeaseStatus::Held {
            expires_at: Some(until),
        },
        control: row.control,
        error_budget: row.spec.error_budget,
        data,
    })
}

/// Keeps `failures` while the batch keeps fewer than [`FAILURES_KEPT`]; an item saved
/// again (a takeover repeated it) keeps its latest error.
async fn save_failures<E: Exec>(
    e: &mut E,
    id: TaskId,
    failures: &[ItemFailure],
    now: DateTime<Utc>,
) -> StoreResult<()> {
    if failures.is_empty() {
        return Ok(());
    }
    let d = e.dialect();
    let mut kept = Sql::new(
        d,
        "SELECT COUNT(*) AS n FROM tasktable_batch_failures WHERE task_id = ",
    );
    kept.bind(id);
    let kept = count(&e.fetch(kept).await?[0], "n")?;
    let room = FAILURES_KEPT.saturating_sub(kept) as usize;
    for f in failures.iter().take(room) {
        let mut sql = Sql::new(
            d,
            format!("INSERT INTO tasktable_batch_failures ({FAILURE_COLUMNS}) VALUES ("),
        );
        sql.bind(id)
            .push(", ")
            .bind(big(f.item))
            .push(", ")
            .bind(tasktable_core::stored::stored_error(&f.error))
            .push(", ")
            .bind(Arg::Int32(f.tries.min(i32::MAX as u32) as i32))
            .push(", ")
            .bind(now)
            .push(")")
            .push(&d.upsert(&["task_id", "item"], &["error", "tries", "failed_at"]));
        e.execute(sql).await?;
    }
    Ok(())
}

/// An operator's action, inside the caller's write transaction: what core's
/// [`tasktable_core::batch::BatchAction::apply`] decides, the task's part applied as the
/// operator changes core names ([`tasktable_core::batch::ControlChange::task_changes`]).
/// Answers the batch as it is now and what to wake.
pub async fn control_in<E: Exec>(
    e: &mut E,
    p: &BatchControlParams,
) -> StoreResult<(Batch, Changed)> {
    let (task, row) = locked(e, p.id).await?;
    let change = p
        .action
        .apply(task.state, row.control, awaiting(&task, &row))
        .map_err(|refusal| StoreError::BatchRefused { id: p.id, refusal })?;
    let mut changed = Changed::default();
    let now = e.now(p.now).await?;
    for operator_change in change.task_changes(task.state) {
        let step = crate::update::apply_one(e, p.id, &operator_change, &p.actor, now).await?;
        changed.count = changed.count.max(step.count);
        changed.wake = step.wake;
    }
    let detail = serde_json::json!({"control": {"old": row.control.as_str(), "new": change.control.as_str()}});
    let event = NewEvent {
        task_id: Some(p.id),
        queue: Some(task.queue.clone()),
        kind: Some(task.kind.clone()),
        detail,
        ..NewEvent::new(p.action.event())
    };
    if change.control != row.control || changed.count > 0 {
        crate::events::record_one(e, now, &p.actor, event).await?;
    }
    if change.control != row.control || change.release {
        let mut sql = Sql::new(e.dialect(), "UPDATE tasktable_batches SET control = ");
        sql.bind(change.control.as_str());
        if change.release {
            sql.push(", released_at = ").bind(now);
        }
        sql.push(" WHERE task_id = ").bind(p.id);
        e.execute(sql).await?;
    }
    let batch = get(e, p.id).await?.ok_or(StoreError::NotFound(p.id))?;
    Ok((batch, changed))
}

/// An edit of the budget or the data, inside the caller's write transaction; `data`
/// has passed the store's size limit. Data that may not change now is refused.
pub async fn update_in<E: Exec>(e: &mut E, p: &BatchUpdateParams) -> StoreResult<Batch> {
    let (task, row) = locked(e, p.id).await?;
    let d = e.dialect();
    let now = e.now(p.now).await?;
    let mut fields = Vec::new();
    if let Some(data) = &p.data {
        fields.push("data");
        let status = BatchStatus::of(task.state, row.control, awaiting(&task, &row));
        if !data_may_change(&row.spec, status) {
            return Err(StoreError::BatchRefused {
                id: p.id,
                refusal: BatchRefusal::DataFixed,
            });
        }
        let mut sql = Sql::new(d, "UPDATE tasktable_tasks SET payload = ");
        sql.bind(Arg::Json(data.clone()))
            .push(", updated_at = ")
            .bind(now)
            .push(" WHERE id = ")
            .bind(p.id);
        e.execute(sql).await?;
        let mut sql = Sql::new(
            d,
            "UPDATE tasktable_batches SET data_version = data_version + 1 WHERE task_id = ",
        );
        sql.bind(p.id);
        e.execute(sql).await?;
    }
    let mut detail = serde_json::Map::new();
    if let Some(budget) = p.error_budget {
        let mut sql = Sql::new(d, "UPDATE tasktable_batches SET error_budget = ");
        sql.bind(big(budget)).push(" WHERE task_id = ").bind(p.id);
        e.execute(sql).await?;
        detail.insert(
            "error_budget".into(),
            serde_json::json!({"old": row.spec.error_budget, "new": budget}),
        );
    }
    if !fields.is_empty() || !detail.is_empty() {
        // Data is a payload: its values stay out of the log, which readers see.
        detail.insert("fields".into(), serde_json::json!(fields));
        let event = NewEvent {
            task_id: Some(p.id),
            queue: Some(task.queue.clone()),
            kind: Some(task.kind.clone()),
            detail: detail.into(),
            ..NewEvent::new(tasktable_core::EventKind::BatchEdited)
        };
        crate::events::record_one(e, now, &p.actor, event).await?;
    }
    get(e, p.id).await?.ok_or(StoreError::NotFound(p.id))
}

/// The batch's task, locked, and its row: `NotFound` when `id` is no batch.
async fn locked<E: Exec>(e: &mut E, id: TaskId) -> StoreResult<(Task, Row)> {
    let d = e.dialect();
    let mut sql = Sql::new(
        d,
        format!(
            "SELECT {} FROM tasktable_tasks WHERE id = ",
            crate::row::TASK_COLUMNS
        ),
    );
    sql.bind(id).push(d.lock_rows());
    let task = e
        .fetch(sql)
        .await?
        .first()
        .map(crate::row::task_from_row)
        .transpose()?
        .ok_or(StoreError::NotFound(id))?;
    let row = read_row(e, id, true)
        .await?
        .ok_or(StoreError::NotFound(id))?;
    Ok((task, row))
}

/// Whether any of `tasks` is a batch (its submit writes a batch row).
pub fn any(tasks: &[NewTask]) -> bool {
    tasks.iter().any(|t| t.batch.is_some())
}
