//! The worker registry: `tasktable_workers`, one row per worker id, and the discovery of
//! queues with work for workers that take every queue.
//!
//! Every time here is the database's: a heartbeat stamps `last_seen_at` with it, and the
//! reaper compares against it, so workers on machines whose clocks disagree are judged
//! alike. The reaper first looks with a plain read and opens a write transaction only
//! when a worker is to be marked gone or forgotten, so its round in every process costs
//! the writer nothing while the cluster is healthy.

use crate::exec::{count, required};
use crate::{Arg, Backend, Cells, Dialect, Exec, Sql};
use chrono::{DateTime, TimeDelta, Utc};
use serde_json::Value;
use std::collections::HashMap;
use tasktable_core::ownership::{
    gone_kept, may_act_as, may_register, owner_after_beat, Held, OwnerAfterBeat, WorkerRefusal,
};
use tasktable_core::worker::{Protocol, Queues, WorkerFacts, WorkerInfo, WorkerState};
use tasktable_store::{
    Checked, Reaped, StoreError, StoreResult, WorkerBeatParams, WorkerDrainParams,
    WorkerLeaveParams, WorkerListParams, WorkerReapParams, WorkerStanding, WorkerStatus,
};

const COLUMNS: &str = "id, host, address, pid, version, worker_groups, queues, capacity, \
    protocol, draining, started_at, last_seen_at, gone_at, owner, kinds";

/// Most queues [`discover`] returns: MySQL stops a recursive query at 1,000 rounds.
pub const MAX_DISCOVERED_QUEUES: i64 = 500;

/// The address the database sees the connection come from (none on SQLite).
fn client_address(d: Dialect) -> &'static str {
    match d {
        Dialect::Sqlite => "NULL",
        Dialect::Postgres => "host(inet_client_addr())",
        Dialect::MySql => "SUBSTRING_INDEX(USER(), '@', -1)",
    }
}

fn bad_row(what: &str) -> StoreError {
    StoreError::Database(format!("tasktable_workers.{what} cannot be read").into())
}

fn names(value: Value, what: &str) -> StoreResult<Vec<String>> {
    serde_json::from_value(value).map_err(|_| bad_row(what))
}

/// The groups of the registered workers among `ids` (gone ones too: a worker's groups
/// are what it said at its last heartbeat).
pub async fn groups_of<E: Exec>(
    e: &mut E,
    ids: &[&str],
) -> StoreResult<HashMap<String, Vec<String>>> {
    let mut out = HashMap::new();
    for chunk in ids.chunks(Sql::MAX_IN_LIST) {
        let mut sql = Sql::new(
            e.dialect(),
            "SELECT id, worker_groups FROM tasktable_workers WHERE ",
        );
        sql.push_in_texts("id", chunk);
        for row in e.fetch(sql).await? {
            let groups = names(
                required(row.json("worker_groups"), "worker_groups")?,
                "worker_groups",
            )?;
            out.insert(required(row.text("id"), "id")?, groups);
        }
    }
    Ok(out)
}

/// The kinds a worker said it handles: NULL (a row from before version 18, or a worker
/// that did not say) is `None`.
fn kinds_from_row(row: &impl Cells) -> StoreResult<Option<Vec<String>>> {
    match row.json("kinds")? {
        None | Some(Value::Null) => Ok(None),
        Some(v) => names(v, "kinds").map(Some),
    }
}

pub(crate) fn info_from_row(row: &impl Cells, running: u64) -> StoreResult<WorkerInfo> {
    let queues = match row.json("queues")? {
        None | Some(Value::Null) => Queues::All,
        Some(v) => Queues::Listed(names(v, "queues")?),
    };
    let protocol = required(row.text("protocol"), "protocol")?;
    let draining = required(row.boolean("draining"), "draining")?;
    let gone_at = row.time("gone_at")?;
    Ok(WorkerInfo {
        facts: WorkerFacts {
            id: required(row.text("id"), "id")?,
            host: required(row.text("host"), "host")?,
            pid: row.int("pid")?.and_then(|p| u32::try_from(p).ok()),
            version: required(row.text("version"), "version")?,
            groups: names(
                required(row.json("worker_groups"), "worker_groups")?,
                "worker_groups",
            )?,
            queues,
            capacity: u32::try_from(required(row.int("capacity"), "capacity")?)
                .map_err(|_| bad_row("capacity"))?,
            protocol: Protocol::parse(&protocol).ok_or_else(|| bad_row("protocol"))?,
            kinds: kinds_from_row(row)?,
        },
        address: row.text("address")?,
        owner: row.text("owner")?,
        state: WorkerState::of(draining, gone_at.is_some()),
        draining,
        started_at: required(row.time("started_at"), "started_at")?,
        last_seen_at: required(row.time("last_seen_at"), "last_seen_at")?,
        gone_at,
        running,
    })
}

fn age(d: std::time::Duration) -> TimeDelta {
    TimeDelta::from_std(d).unwrap_or(TimeDelta::MAX)
}

/// Saves a heartbeat and reads back whether the worker is to drain.
pub async fn beat<B: Backend>(b: &B, p: &Checked<WorkerBeatParams>) -> StoreResult<WorkerStatus> {
    b.transact("worker_beat", |mut tx| async move {
        let status = beat_in(&mut tx, p).await?;
        Ok((tx, status))
    })
    .await
}

async fn beat_in<E: Exec>(tx: &mut E, p: &WorkerBeatParams) -> StoreResult<WorkerStatus> {
    let now = tx.now(p.now).await?;
    let d = tx.dialect();
    let f = &p.facts;
    if let Some(owner) = &p.owner {
        let standing = standing_in(tx, &f.id, true).await?;
        may_act_as(&f.id, standing.as_ref().map(held), Some(owner))?;
        if let (true, Some(limit)) = (
            standing.as_ref().is_none_or(|s| s.gone),
            p.max_live_per_owner,
        ) {
            may_register(owner, live_owned(tx, owner, &f.id).await?, limit)?;
            if standing.is_none() {
                forget_gone_beyond(tx, owner, gone_kept(limit)).await?;
            }
        }
    }
    let queues = match &f.queues {
        Queues::All => Value::Null,
        Queues::Listed(q) => Value::from(q.clone()),
    };
    let mut sql = Sql::new(
        d,
        format!("INSERT INTO tasktable_workers ({COLUMNS}) VALUES ("),
    );
    sql.bind(f.id.as_str())
        .push(", ")
        .bind(f.host.as_str())
        .push(", ");
    match &p.address {
        Some(a) => sql.bind(a.as_str()),
        None => sql.push(client_address(d)),
    };
    // NULL cannot be bound as an integer on every backend: -1 stands for no pid.
    sql.push(", NULLIF(")
        .bind(Arg::Int(f.pid.map_or(-1, i64::from)))
        .push(", -1), ")
        .bind(f.version.as_str())
        .push(", ")
        .bind(Arg::Json(Value::from(f.groups.clone())))
        .push(", ")
        .bind(Arg::Json(queues))
        .push(", ")
        .bind(i32::try_from(f.capacity).unwrap_or(i32::MAX))
        .push(", ")
        .bind(f.protocol.as_str())
        .push(", ")
        .bind(false)
        .push(", ")
        .bind(now)
        .push(", ")
        .bind(now)
        .push(", NULL, ")
        .bind(Arg::Text(p.owner.clone()))
        .push(", ");
    // A worker that does not say its kinds leaves the column NULL, as an old row has it.
    match &f.kinds {
        Some(kinds) => sql.bind(Arg::Json(Value::from(kinds.clone()))),
        None => sql.push("NULL"),
    };
    sql.push(")");
    // The drain flag is the operator's; a beat never changes it. A gone worker that beats
    // is back.
    let mut set = vec![
        "host",
        "address",
        "pid",
        "version",
        "worker_groups",
        "queues",
        "capacity",
        "protocol",
        "last_seen_at",
        "kinds",
    ];
    if p.starting {
        set.push("started_at");
    }
    // An in-process worker's beat takes its id back from any token (one may have used the
    // id before the worker first started); otherwise an owner stays, and a beat bound to
    // a token gives an id without one to that token.
    sql.push(&d.upsert(&["id"], &set))
        .push(", gone_at = NULL, owner = ");
    match owner_after_beat(p.owner.as_deref(), f.protocol) {
        OwnerAfterBeat::NoOne => sql.push("NULL"),
        OwnerAfterBeat::KeptOrGiven => sql
            .push("COALESCE(tasktable_workers.owner, ")
            .push(&d.inserted("owner"))
            .push(")"),
    };
    tx.execute(sql).await?;
    let standing = required(Ok(standing_in(tx, &f.id, false).await?), "worker")?;
    if let Some(owner) = &p.owner {
        // Another token's beat of a new id may have committed between the look above and
        // the insert: the row is then that token's, and this beat is rolled back.
        if standing.owner.as_ref() != Some(owner) {
            return Err(WorkerRefusal::NotOwned { id: f.id.clone() }.into());
        }
    }
    Ok(WorkerStatus {
        draining: standing.draining,
    })
}

fn held(s: &WorkerStanding) -> Held<'_> {
    Held {
        owner: s.owner.as_deref(),
        protocol: s.protocol,
    }
}

/// How the registry holds `id` (`None`: not at all); `lock`: the row is locked until the
/// transaction ends.
pub async fn standing_in<E: Exec>(
    e: &mut E,
    id: &str,
    lock: bool,
) -> StoreResult<Option<WorkerStanding>> {
    let d = e.dialect();
    let mut read = Sql::new(
        d,
        "SELECT owner, protocol, worker_groups, draining, gone_at FROM tasktable_workers \
         WHERE id = ",
    );
    read.bind(id);
    if lock {
        read.push(d.lock_rows());
    }
    let Some(row) = e.fetch(read).await?.into_iter().next() else {
        return Ok(None);
    };
    let protocol = required(row.text("protocol"), "protocol")?;
    Ok(Some(WorkerStanding {
        owner: row.text("owner")?,
        protocol: Protocol::parse(&protocol).ok_or_else(|| bad_row("protocol"))?,
        groups: names(
            required(row.json("worker_groups"), "worker_groups")?,
            "worker_groups",
        )?,
        draining: required(row.boolean("draining"), "draining")?,
        gone: row.time("gone_at")?.is_some(),
    }))
}

/// Live workers `owner` holds, other than `except`.
async fn live_owned<E: Exec>(e: &mut E, owner: &str, except: &str) -> StoreResult<u64> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT COUNT(*) AS n FROM tasktable_workers WHERE gone_at IS NULL AND owner = ",
    );
    sql.bind(owner).push(" AND id <> ").bind(except);
    let row = required(Ok(e.fetch(sql).await?.into_iter().next()), "count")?;
    count(&row, "n")
}

/// Before `owner` registers a new id: forgets its oldest gone workers (no drain held for
/// them) beyond its newest `kept` ([`gone_kept`]), however often its workers come and go
/// under new ids.
async fn forget_gone_beyond<E: Exec>(e: &mut E, owner: &str, kept: u32) -> StoreResult<()> {
    let d = e.dialect();
    let mut oldest = Sql::new(
        d,
        "SELECT id FROM tasktable_workers WHERE gone_at IS NOT NULL AND draining = ",
    );
    oldest
        .bind(false)
        .push(" AND owner = ")
        .bind(owner)
        .push(" ORDER BY gone_at DESC, id LIMIT 1000000 OFFSET ")
        .bind(i64::from(kept));
    let ids: Vec<String> = e
        .fetch(oldest)
        .await?
        .iter()
        .map(|r| required(r.text("id"), "id"))
        .collect::<StoreResult<_>>()?;
    let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
    for chunk in ids.chunks(Sql::MAX_IN_LIST) {
        let mut forget = Sql::new(d, "DELETE FROM tasktable_workers WHERE ");
        forget.push_in_texts("id", chunk);
        e.execute(forget).await?;
    }
    Ok(())
}

/// Marks a worker gone now (it is shutting down), if the caller may act as it.
pub async fn leave<B: Backend>(b: &B, p: &WorkerLeaveParams) -> StoreResult<()> {
    b.transact("worker_leave", |mut tx| async move {
        if let Some(owner) = &p.owner {
            let standing = standing_in(&mut tx, &p.id, true).await?;
            may_act_as(&p.id, standing.as_ref().map(held), Some(owner))?;
        }
        let now = tx.now(None).await?;
        let mut sql = Sql::new(tx.dialect(), "UPDATE tasktable_workers SET gone_at = ");
        sql.bind(now)
            .push(" WHERE gone_at IS NULL AND id = ")
            .bind(p.id.as_str());
        tx.execute(sql).await?;
        Ok((tx, ()))
    })
    .await
}

/// Tasks each of the workers `ids` holds a lease on now.
async fn running<E: Exec>(e: &mut E, ids: &[&str]) -> StoreResult<HashMap<String, u64>> {
    let mut by_worker = HashMap::new();
    for chunk in ids.chunks(Sql::MAX_IN_LIST) {
        // A multi-run task's runs are counted on their workers, not the task.
        let mut tasks = Sql::new(
            e.dialect(),
            "SELECT worker_id, COUNT(*) AS n FROM tasktable_tasks \
             WHERE state = 'running' AND copies IS NULL AND ",
        );
        tasks
            .push_in_texts("worker_id", chunk)
            .push(" GROUP BY worker_id");
        let mut runs = Sql::new(
            e.dialect(),
            "SELECT worker_id, COUNT(*) AS n FROM tasktable_runs WHERE state = 'running' AND ",
        );
        runs.push_in_texts("worker_id", chunk)
            .push(" GROUP BY worker_id");
        for sql in [tasks, runs] {
            for row in e.fetch(sql).await? {
                *by_worker
                    .entry(required(row.text("worker_id"), "worker_id")?)
                    .or_insert(0) += count(&row, "n")?;
            }
        }
    }
    Ok(by_worker)
}

/// Workers of `rows`, each with the tasks and runs it holds a lease on now (counted at
/// the read, not stored).
async fn with_running<E: Exec>(e: &mut E, rows: Vec<E::Row>) -> StoreResult<Vec<WorkerInfo>> {
    let ids: Vec<String> = rows
        .iter()
        .map(|r| required(r.text("id"), "id"))
        .collect::<StoreResult<_>>()?;
    let id_refs: Vec<&str> = ids.iter().map(String::as_str).collect();
    let running = running(e, &id_refs).await?;
    rows.iter()
        .zip(&ids)
        .map(|(r, id)| info_from_row(r, running.get(id).copied().unwrap_or(0)))
        .collect()
}

/// The registry by id, gone workers only when asked, a page of it when asked.
pub async fn list<E: Exec>(e: &mut E, p: &WorkerListParams) -> StoreResult<Vec<WorkerInfo>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {COLUMNS} FROM tasktable_workers WHERE 1 = 1"),
    );
    if !p.include_gone {
        sql.push(" AND gone_at IS NULL");
    }
    if let Some(after) = &p.after {
        sql.push(" AND id > ").bind(after.as_str());
    }
    sql.push(" ORDER BY id");
    if let Some(limit) = p.limit {
        sql.push(" LIMIT ").bind(i64::from(limit));
    }
    let rows = e.fetch(sql).await?;
    with_running(e, rows).await
}

/// One worker by id, gone or not.
pub async fn get<E: Exec>(e: &mut E, id: &str) -> StoreResult<Option<WorkerInfo>> {
    let mut sql = Sql::new(
        e.dialect(),
        format!("SELECT {COLUMNS} FROM tasktable_workers WHERE id = "),
    );
    sql.bind(id);
    let rows = e.fetch(sql).await?;
    Ok(with_running(e, rows).await?.into_iter().next())
}

/// Drains or releases a worker by id and answers its row as it now stands (`None`: no
/// such worker, and nothing written); the event is recorded only when the flag changed.
pub async fn set_draining<B: Backend>(
    b: &B,
    p: &WorkerDrainParams,
) -> StoreResult<Option<WorkerInfo>> {
    b.transact("worker_set_draining", |mut tx| async move {
        let info = set_draining_in(&mut tx, p).await?;
        Ok((tx, info))
    })
    .await
}

async fn set_draining_in<E: Exec>(
    tx: &mut E,
    p: &WorkerDrainParams,
) -> StoreResult<Option<WorkerInfo>> {
    let was = get(tx, &p.id).await?.map(|w| w.draining);
    let mut sql = Sql::new(tx.dialect(), "UPDATE tasktable_workers SET draining = ");
    sql.bind(p.draining)
        .push(" WHERE id = ")
        .bind(p.id.as_str());
    tx.execute(sql).await?;
    let info = get(tx, &p.id).await?;
    if info.is_some() && was != Some(p.draining) {
        let now = tx.now(None).await?;
        let event = tasktable_store::NewEvent {
            worker_id: Some(p.id.clone()),
            ..tasktable_store::NewEvent::new(if p.draining {
                tasktable_core::EventKind::WorkerDrained
            } else {
                tasktable_core::EventKind::WorkerReleased
            })
        };
        crate::events::record_one(tx, now, &p.actor, event).await?;
    }
    Ok(info)
}

/// `WHERE` clauses of the two things a reaping does, on a cutoff for silence and one
/// for forgetting.
fn push_silent(sql: &mut Sql, silent_since: DateTime<Utc>) {
    sql.push("gone_at IS NULL AND last_seen_at < ")
        .bind(silent_since);
}

fn push_forgettable(sql: &mut Sql, gone_before: DateTime<Utc>) {
    sql.push("gone_at < ")
        .bind(gone_before)
        .push(" AND draining = ")
        .bind(false);
}

/// Marks gone the workers silent for `silence` at `now`, and deletes those gone for
/// longer than `forget_after` that no drain holds. A plain read first: the write
/// transaction opens only when there is something to do.
pub async fn reap<B: Backend>(b: &B, p: &Checked<WorkerReapParams>) -> StoreResult<Reaped> {
    let mut read = b.read().await?;
    let now = read.now(p.now).await?;
    let silent_since = now - age(p.silence);
    let gone_before = now.checked_sub_signed(age(p.forget_after)).unwrap_or(now);
    let d = read.dialect();
    let counts = |e: &mut Sql| {
        e.push("SELECT (SELECT COUNT(*) FROM tasktable_workers WHERE ");
        push_silent(e, silent_since);
        e.push(") AS gone, (SELECT COUNT(*) FROM tasktable_workers WHERE ");
        push_forgettable(e, gone_before);
        e.push(") AS forgotten");
    };
    let mut look = Sql::new(d, "");
    counts(&mut look);
    let row = required(Ok(read.fetch(look).await?.into_iter().next()), "counts")?;
    if count(&row, "gone")? == 0 && count(&row, "forgotten")? == 0 {
        return Ok(Reaped::default());
    }
    drop(read);
    let counts = &counts;
    b.transact("worker_reap", |mut tx| async move {
        let mut look = Sql::new(d, "");
        counts(&mut look);
        let row = required(Ok(tx.fetch(look).await?.into_iter().next()), "counts")?;
        let reaped = Reaped {
            gone: count(&row, "gone")?,
            forgotten: count(&row, "forgotten")?,
        };
        let mut mark = Sql::new(d, "UPDATE tasktable_workers SET gone_at = ");
        mark.bind(now).push(" WHERE ");
        push_silent(&mut mark, silent_since);
        tx.execute(mark).await?;
        let mut forget = Sql::new(d, "DELETE FROM tasktable_workers WHERE ");
        push_forgettable(&mut forget, gone_before);
        tx.execute(forget).await?;
        Ok((tx, reaped))
    })
    .await
}

/// The workers not gone (draining ones included): the cluster's live nodes.
pub async fn count_live<E: Exec>(e: &mut E) -> StoreResult<u64> {
    let sql = Sql::new(
        e.dialect(),
        "SELECT COUNT(*) AS n FROM tasktable_workers WHERE gone_at IS NULL",
    );
    let row = required(Ok(e.fetch(sql).await?.into_iter().next()), "count")?;
    count(&row, "n")
}

/// The queues with pending tasks, by name, at most [`MAX_DISCOVERED_QUEUES`]: a skip
/// scan of an index that leads with state and queue, one probe per queue, however many
/// tasks each holds.
pub async fn discover<E: Exec>(e: &mut E) -> StoreResult<Vec<String>> {
    let mut sql = Sql::new(
        e.dialect(),
        "WITH RECURSIVE q (queue, n) AS (\
           SELECT MIN(queue), 1 FROM tasktable_tasks WHERE state = 'pending' \
           UNION ALL \
           SELECT (SELECT MIN(t.queue) FROM tasktable_tasks t \
                   WHERE t.state = 'pending' AND t.queue > q.queue), q.n + 1 \
           FROM q WHERE q.queue IS NOT NULL AND q.n < ",
    );
    sql.bind(MAX_DISCOVERED_QUEUES)
        .push(") SELECT queue FROM q WHERE queue IS NOT NULL");
    e.fetch(sql)
        .await?
        .iter()
        .map(|r| required(r.text("queue"), "queue"))
        .collect()
}
