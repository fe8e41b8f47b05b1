//! Schedules: kept in `tasktable_schedules`, fired into `tasktable_tasks`.
//!
//! Every change to a schedule, and every firing, runs in one write transaction that first
//! reads the schedule's row with a lock (PostgreSQL, MySQL; SQLite's write transaction
//! holds the whole database). A scheduler that reaches a due schedule after another has
//! fired it finds it no longer due and does nothing; the slot's idempotency key
//! ([`tasktable_core::schedule::slot_key`]) would refuse a second task for the slot anyway. Which slots fire, and
//! where an edit leaves the schedule, is core's ([`tasktable_core::schedule`]).

use crate::backend::change;
use crate::backend::Changed;
use crate::events;
use crate::exec::required;
use crate::row::state;
use crate::{Backend, Cells, Exec, Sql};
use chrono::{DateTime, DurationRound, TimeDelta, Utc};
use serde::de::DeserializeOwned;
use serde_json::json;
use tasktable_core::schedule::{
    next_run, plan, slot_key_prefix, Missed, Overlap, Recurrence, ScheduleEdit, ScheduleSpec,
    TaskTemplate,
};
use tasktable_core::{Actor, EventKind, TaskState};
use tasktable_store::{
    Checked, CreateScheduleParams, DeleteScheduleParams, EditScheduleParams, FireNowParams, Fired,
    FiredTask, NewEvent, OnExisting, RunDueParams, Schedule, ScheduleRef, StoreError, StoreResult,
};

const COLUMNS: &str = "id, name, recurrence, template, missed, overlap, enabled, \
    covered_until, next_run_at, last_task_id, last_slot_at, created_at, updated_at";

fn decode<T: DeserializeOwned>(row: &impl Cells, column: &str) -> StoreResult<T> {
    let value = required(row.json(column), column)?;
    serde_json::from_value(value).map_err(|e| {
        StoreError::Database(format!("tasktable_schedules.{column} cannot be read: {e}").into())
    })
}

fn schedule_from_row(row: &impl Cells) -> StoreResult<Schedule> {
    let overlap = match required(row.text("overlap"), "overlap")?.as_str() {
        "skip" => Overlap::Skip,
        _ => Overlap::Allow,
    };
    Ok(Schedule {
        id: required(row.int("id"), "id")?,
        spec: ScheduleSpec {
            name: required(row.text("name"), "name")?,
            recurrence: decode::<Recurrence>(row, "recurrence")?,
            template: decode::<TaskTemplate>(row, "template")?,
            missed: decode::<Missed>(row, "missed")?,
            overlap,
            enabled: required(row.boolean("enabled"), "enabled")?,
        },
        covered_until: required(row.time("covered_until"), "covered_until")?,
        next_run_at: row.time("next_run_at")?,
        last_task_id: row.int("last_task_id")?,
        last_slot_at: row.time("last_slot_at")?,
        created_at: required(row.time("created_at"), "created_at")?,
        updated_at: required(row.time("updated_at"), "updated_at")?,
    })
}

fn overlap_text(o: Overlap) -> &'static str {
    match o {
        Overlap::Allow => "allow",
        Overlap::Skip => "skip",
    }
}

fn json<T: serde::Serialize>(v: &T) -> crate::Arg {
    crate::Arg::Json(serde_json::to_value(v).expect("schedule parts serialize"))
}

/// Reads one schedule, locking its row when `lock` (inside a write transaction).
async fn find<E: Exec>(e: &mut E, r: &ScheduleRef, lock: bool) -> StoreResult<Option<Schedule>> {
    let d = e.dialect();
    let mut sql = Sql::new(
        d,
        format!("SELECT {COLUMNS} FROM tasktable_schedules WHERE "),
    );
    match r {
        ScheduleRef::Id(id) => sql.push("id = ").bind(*id),
        ScheduleRef::Name(name) => sql.push("name = ").bind(name.as_str()),
    };
    if lock {
        sql.push(d.lock_rows());
    }
    e.fetch(sql)
        .await?
        .first()
        .map(schedule_from_row)
        .transpose()
}

/// The schedule an id or a name refers to, if any; a read that locks nothing.
pub async fn get<E: Exec>(e: &mut E, r: &ScheduleRef) -> StoreResult<Option<Schedule>> {
    find(e, r, false).await
}

/// Every schedule, by name.
pub async fn list<E: Exec>(e: &mut E) -> StoreResult<Vec<Schedule>> {
    let sql = Sql::new(
        e.dialect(),
        format!("SELECT {COLUMNS} FROM tasktable_schedules ORDER BY name"),
    );
    e.fetch(sql).await?.iter().map(schedule_from_row).collect()
}

async fn insert<E: Exec>(
    e: &mut E,
    spec: &Checked<ScheduleSpec>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let slots = spec.validate()?;
    let next = next_run(&slots, spec.enabled, now);
    let mut sql = Sql::new(
        e.dialect(),
        format!(
            "INSERT INTO tasktable_schedules ({}) VALUES (",
            COLUMNS.trim_start_matches("id, ")
        ),
    );
    sql.bind(spec.name.as_str())
        .push(", ")
        .bind(json(&spec.recurrence))
        .push(", ")
        .bind(json(&spec.template))
        .push(", ")
        .bind(json(&spec.missed))
        .push(", ")
        .bind(overlap_text(spec.overlap))
        .push(", ")
        .bind(spec.enabled)
        .push(", ")
        .bind(now)
        .push(", ")
        .bind(crate::Arg::Time(next))
        .push(", NULL, NULL, ")
        .bind(now)
        .push(", ")
        .bind(now)
        .push(")");
    e.execute(sql).await
}

/// Writes `edit` to the locked schedule `old`: its spec, and its place and next run by
/// core's rules.
async fn write_edit<B: Backend>(
    b: &B,
    e: &mut B::Write,
    old: &Schedule,
    edit: &ScheduleEdit,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let spec = b.limits().schedule(edit.apply(&old.spec))?;
    let slots = spec.validate()?;
    if let Some(name) = &edit.name {
        if let Some(other) = find(e, &ScheduleRef::Name(name.clone()), false).await? {
            if other.id != old.id {
                return Err(StoreError::ScheduleExists(name.clone()));
            }
        }
    }
    let covered = edit.covered_from(&old.spec, old.covered_until, now);
    let mut sql = Sql::new(e.dialect(), "UPDATE tasktable_schedules SET name = ");
    sql.bind(spec.name.as_str())
        .push(", recurrence = ")
        .bind(json(&spec.recurrence))
        .push(", template = ")
        .bind(json(&spec.template))
        .push(", missed = ")
        .bind(json(&spec.missed))
        .push(", overlap = ")
        .bind(overlap_text(spec.overlap))
        .push(", enabled = ")
        .bind(spec.enabled)
        .push(", covered_until = ")
        .bind(covered)
        .push(", next_run_at = ")
        .bind(crate::Arg::Time(next_run(&slots, spec.enabled, covered)))
        .push(", updated_at = ")
        .bind(now)
        .push(" WHERE id = ")
        .bind(old.id);
    e.execute(sql).await
}

/// Creates a schedule, or (`OnExisting::Update`) brings the one of that name to the spec.
/// Two creators racing on one name: the loser's insert fails on the unique name, and it
/// runs once more, finding the winner's row.
pub async fn create<B: Backend>(b: &B, p: CreateScheduleParams) -> StoreResult<Schedule> {
    let spec = b.limits().schedule(p.spec)?;
    let name = ScheduleRef::Name(spec.name.clone());
    let (spec, name, actor, on_existing, pinned) = (&spec, &name, &p.actor, &p.on_existing, p.now);
    let mut first_error = None;
    for _ in 0..2 {
        let created = change(b, "schedule_create", |mut tx| async move {
            let now = tx.now(pinned).await?;
            let mut event = (EventKind::ScheduleCreated, json!({}));
            match find(&mut tx, name, true).await? {
                Some(_) if *on_existing == OnExisting::Refuse => {
                    return Err(StoreError::ScheduleExists(spec.name.clone()))
                }
                Some(old) => {
                    let wanted = ScheduleSpec {
                        enabled: old.spec.enabled,
                        ..(**spec).clone()
                    };
                    let edit = ScheduleEdit::between(&old.spec, &wanted);
                    if edit.is_empty() {
                        return Ok((tx, (Some(old), Changed::default())));
                    }
                    event = (EventKind::ScheduleEdited, edited_fields(&edit));
                    write_edit(b, &mut tx, &old, &edit, now).await?
                }
                None => insert(&mut tx, spec, now).await?,
            };
            let saved = find(&mut tx, name, false).await?;
            if let Some(saved) = &saved {
                let ev = schedule_event(event.0, saved, event.1);
                events::record_one(&mut tx, now, actor, ev).await?;
            }
            Ok((tx, (saved, Changed::default())))
        })
        .await;
        match created {
            Ok((saved, _)) => {
                return saved.ok_or_else(|| StoreError::ScheduleNotFound(name.clone()));
            }
            Err(e) if first_error.is_none() && !e.is_client_error() => first_error = Some(e),
            Err(e) => return Err(e),
        }
    }
    Err(first_error.unwrap_or_else(|| StoreError::ScheduleNotFound(name.clone())))
}

/// Applies an edit under the schedule's row lock, moving its place as core's
/// [`ScheduleEdit::covered_from`] says, and records the event when the spec changed; an
/// empty edit changes nothing. [`StoreError::ScheduleNotFound`] for no such schedule,
/// [`StoreError::ScheduleExists`] for a rename to another's name.
pub async fn edit<B: Backend>(b: &B, p: EditScheduleParams) -> StoreResult<Schedule> {
    let p = &p;
    let (saved, _) = change(b, "schedule_edit", |mut tx| async move {
        let now = tx.now(p.now).await?;
        let old = find(&mut tx, &p.schedule, true)
            .await?
            .ok_or_else(|| StoreError::ScheduleNotFound(p.schedule.clone()))?;
        if !p.edit.is_empty() {
            write_edit(b, &mut tx, &old, &p.edit, now).await?;
        }
        let saved = find(&mut tx, &ScheduleRef::Id(old.id), false).await?;
        if let Some(new) = saved.as_ref().filter(|s| s.spec != old.spec) {
            let edit = ScheduleEdit::between(&old.spec, &new.spec);
            let ev = schedule_event(EventKind::ScheduleEdited, &old, edited_fields(&edit));
            events::record_one(&mut tx, now, &p.actor, ev).await?;
        }
        Ok((tx, (saved, Changed::default())))
    })
    .await?;
    saved.ok_or_else(|| StoreError::ScheduleNotFound(p.schedule.clone()))
}

/// Deletes a schedule and records the event; the tasks it fired stay.
/// [`StoreError::ScheduleNotFound`] for no such schedule.
pub async fn delete<B: Backend>(b: &B, p: DeleteScheduleParams) -> StoreResult<()> {
    let p = &p;
    change(b, "schedule_delete", |mut tx| async move {
        let now = tx.now(None).await?;
        let old = find(&mut tx, &p.schedule, true)
            .await?
            .ok_or_else(|| StoreError::ScheduleNotFound(p.schedule.clone()))?;
        let mut sql = Sql::new(tx.dialect(), "DELETE FROM tasktable_schedules WHERE id = ");
        sql.bind(old.id);
        tx.execute(sql).await?;
        let ev = schedule_event(EventKind::ScheduleDeleted, &old, json!({}));
        events::record_one(&mut tx, now, &p.actor, ev).await?;
        Ok((tx, Changed::default()))
    })
    .await?;
    Ok(())
}

/// The ids of the schedules due at `now`, soonest first.
async fn due_ids<E: Exec>(e: &mut E, now: DateTime<Utc>, limit: u32) -> StoreResult<Vec<i64>> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT id FROM tasktable_schedules WHERE next_run_at <= ",
    );
    sql.bind(now)
        .push(" ORDER BY next_run_at LIMIT ")
        .bind(i64::from(limit));
    e.fetch(sql)
        .await?
        .iter()
        .map(|r| required(r.int("id"), "id"))
        .collect()
}

/// Fires up to `limit` schedules due at `now`, soonest first, each in a transaction of
/// its own that locks its row and checks it is still due (one another scheduler fired
/// meanwhile is passed over). A schedule that fails is logged and does not hold up the
/// others; the first failure is returned only when nothing fired.
pub async fn run_due<B: Backend>(b: &B, p: RunDueParams) -> StoreResult<Vec<Fired>> {
    let now = b.read().await?.now(p.now).await?;
    let mut fired = Vec::new();
    let mut first_error = None;
    for id in due_ids(&mut b.read().await?, now, p.limit).await? {
        // One schedule that cannot fire (its database call failed, or a stored time zone
        // is no longer known) does not hold up the others.
        match fire_due(b, id, p.now).await {
            Ok(Some(f)) => fired.push(f),
            Ok(None) => {}
            Err(e) => {
                // An unreachable database is told once, by the store every part holds.
                if !e.is_unreachable() {
                    tracing::warn!(schedule = id, error = %e, "schedule could not fire");
                }
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) if fired.is_empty() => Err(e),
        _ => Ok(fired),
    }
}

/// The state of a task, if it exists.
async fn task_state<E: Exec>(e: &mut E, id: Option<i64>) -> StoreResult<Option<TaskState>> {
    let Some(id) = id else { return Ok(None) };
    let mut sql = Sql::new(e.dialect(), "SELECT state FROM tasktable_tasks WHERE id = ");
    sql.bind(id);
    match e.fetch(sql).await?.first() {
        Some(r) => Ok(Some(state(&required(r.text("state"), "state")?)?)),
        None => Ok(None),
    }
}

/// Inserts the task of `slot` and marks it as the schedule's.
async fn fire_slot<B: Backend>(
    b: &B,
    tx: &mut B::Write,
    s: &Schedule,
    slot: DateTime<Utc>,
    actor: &Actor,
    now: DateTime<Utc>,
) -> StoreResult<FiredTask> {
    let task = s
        .spec
        .template
        .task_for(s.id, slot)
        .created_by(actor.clone());
    let tasks = b.limits().tasks(vec![task])?;
    let submitted = b.insert_tasks(tx, &tasks, now).await?[0];
    if submitted.created {
        let mut sql = Sql::new(tx.dialect(), "UPDATE tasktable_tasks SET schedule_id = ");
        sql.bind(s.id)
            .push(", slot_at = ")
            .bind(slot)
            .push(" WHERE id = ")
            .bind(submitted.id);
        tx.execute(sql).await?;
    }
    Ok(FiredTask {
        slot_at: slot,
        task_id: submitted.id,
        created: submitted.created,
    })
}

/// Records the last task fired (and, for a firing of due slots, the new place).
async fn record<E: Exec>(
    e: &mut E,
    s: &Schedule,
    last: Option<&FiredTask>,
    place: Option<(DateTime<Utc>, Option<DateTime<Utc>>)>,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut sql = Sql::new(e.dialect(), "UPDATE tasktable_schedules SET updated_at = ");
    sql.bind(now);
    if let Some(t) = last {
        sql.push(", last_task_id = ")
            .bind(t.task_id)
            .push(", last_slot_at = ")
            .bind(t.slot_at);
    }
    if let Some((covered, next)) = place {
        sql.push(", covered_until = ")
            .bind(covered)
            .push(", next_run_at = ")
            .bind(crate::Arg::Time(next));
    }
    sql.push(" WHERE id = ").bind(s.id);
    e.execute(sql).await
}

/// The names of the fields an edit changes (not their values: a template's payload may
/// hold what only the schedule's readers should see).
fn edited_fields(edit: &ScheduleEdit) -> serde_json::Value {
    let fields: Vec<String> = match serde_json::to_value(edit) {
        Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    };
    json!({ "fields": fields })
}

/// An event about schedule `s`, named in its detail.
fn schedule_event(event: EventKind, s: &Schedule, detail: serde_json::Value) -> NewEvent {
    let mut detail = detail;
    if let Some(d) = detail.as_object_mut() {
        d.insert("name".into(), json!(s.spec.name));
    }
    NewEvent {
        schedule_id: Some(s.id),
        queue: Some(s.spec.template.queue.clone()),
        kind: Some(s.spec.template.kind.clone()),
        detail,
        ..NewEvent::new(event)
    }
}

/// A firing's events: one per task it created (so the task's own history shows where it
/// came from), or one saying what it skipped when it created none.
async fn record_fired<E: Exec>(
    e: &mut E,
    s: &Schedule,
    tasks: &[FiredTask],
    skipped: &[DateTime<Utc>],
    actor: &Actor,
    now: DateTime<Utc>,
) -> StoreResult<()> {
    let mut evs: Vec<NewEvent> = tasks
        .iter()
        .filter(|t| t.created)
        .map(|t| NewEvent {
            task_id: Some(t.task_id),
            ..schedule_event(EventKind::ScheduleFired, s, json!({"slot_at": t.slot_at}))
        })
        .collect();
    if evs.is_empty() && (!skipped.is_empty() || !tasks.is_empty()) {
        let detail = json!({"skipped": skipped, "existing": tasks.iter().map(|t| t.task_id).collect::<Vec<_>>()});
        evs.push(schedule_event(EventKind::ScheduleFired, s, detail));
    }
    events::record(e, now, actor, &evs).await
}

fn wake(s: &Schedule, tasks: &[FiredTask]) -> Changed {
    let created = tasks.iter().filter(|t| t.created).count() as u64;
    let wake = if created > 0 {
        vec![s.spec.template.queue.clone()]
    } else {
        Vec::new()
    };
    Changed {
        count: created,
        wake,
    }
}

/// Fires the due slots of one schedule, if it is still due once its row is locked.
async fn fire_due<B: Backend>(
    b: &B,
    id: i64,
    pinned: Option<DateTime<Utc>>,
) -> StoreResult<Option<Fired>> {
    let (fired, _) = change(b, "schedule_fire", |mut tx| async move {
        let now = tx.now(pinned).await?;
        let Some(s) = find(&mut tx, &ScheduleRef::Id(id), true).await? else {
            return Ok((tx, (None, Changed::default())));
        };
        if !s.spec.enabled || s.next_run_at.is_none_or(|next| next > now) {
            return Ok((tx, (None, Changed::default())));
        }
        let slots = s.spec.validate()?;
        let plan = plan(&slots, s.covered_until, now, s.spec.missed);
        let mut previous = task_state(&mut tx, s.last_task_id).await?;
        let scheduler = Actor::system("scheduler");
        let (mut tasks, mut skipped, mut caught_up) = (Vec::new(), Vec::new(), 0);
        for (i, slot) in plan.slots.into_iter().enumerate() {
            if !s.spec.overlap.fires(previous) {
                skipped.push(slot);
                continue;
            }
            let fired = fire_slot(b, &mut tx, &s, slot, &scheduler, now).await?;
            previous = task_state(&mut tx, Some(fired.task_id)).await?;
            tasks.push(fired);
            if i < plan.caught_up {
                caught_up += 1;
            }
        }
        let place = Some((plan.covered_until, plan.next_run_at));
        record(&mut tx, &s, tasks.last(), place, now).await?;
        record_fired(&mut tx, &s, &tasks, &skipped, &scheduler, now).await?;
        let changed = wake(&s, &tasks);
        let fired = Fired {
            schedule_id: s.id,
            name: s.spec.name,
            tasks,
            skipped,
            caught_up,
            missed_skipped: plan.missed_skipped,
        };
        Ok((tx, (Some(fired), changed)))
    })
    .await?;
    Ok(fired)
}

/// Fires a schedule at once for the slot of `now` (to the millisecond), whatever its
/// `enabled` flag and overlap policy, and leaves its place among its slots as it was.
pub async fn fire_now<B: Backend>(b: &B, p: FireNowParams) -> StoreResult<Fired> {
    let p = &p;
    let (fired, _) = change(b, "schedule_fire_now", |mut tx| async move {
        let now = tx.now(p.now).await?;
        let s = find(&mut tx, &p.schedule, true)
            .await?
            .ok_or_else(|| StoreError::ScheduleNotFound(p.schedule.clone()))?;
        // The slot is kept to the millisecond, like the slot's key.
        let slot = now
            .duration_trunc(TimeDelta::milliseconds(1))
            .unwrap_or(now);
        let fired = fire_slot(b, &mut tx, &s, slot, &p.actor, now).await?;
        record(&mut tx, &s, Some(&fired), None, now).await?;
        let tasks = vec![fired];
        record_fired(&mut tx, &s, &tasks, &[], &p.actor, now).await?;
        let changed = wake(&s, &tasks);
        let fired = Fired {
            schedule_id: s.id,
            name: s.spec.name,
            tasks,
            skipped: Vec::new(),
            caught_up: 0,
            missed_skipped: Default::default(),
        };
        Ok((tx, (fired, changed)))
    })
    .await?;
    Ok(fired)
}

/// The idempotency keys of a schedule's tasks lie in `[schedule:<id>:, schedule:<id>;)`
/// (`;` follows `:`): the unique index on the key finds them without an index of its own.
pub fn key_range(schedule_id: i64) -> (String, String) {
    let low = slot_key_prefix(schedule_id);
    let high = format!("{};", low.trim_end_matches(':'));
    (low, high)
}
