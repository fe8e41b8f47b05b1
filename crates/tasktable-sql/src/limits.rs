//! Queue policies: setting them, and the claim of a limited queue.
//!
//! A queue with a policy is closed to the hot path: each backend's claim tests the queue's
//! row and claims nothing from a limited queue, as from a paused one. The store then
//! claims through [`claim_in`], in a short write transaction of its own: lock the queue's
//! row (which serialises the claimers of that queue only; on SQLite the writer already
//! is), read what runs, ask core's [`QueuePolicy::allowance`] how many may start, read
//! candidates in claim order (kinds at their limit and keys without a token left out),
//! let [`QueuePolicy::pick`] choose among them, take those, and move the rate buckets
//! on. Every count is read under the queue's lock, so no two claimers of a queue can
//! both see room for the same last slot.
//!
//! A store remembers which queues it found limited ([`LimitedQueues`]) and sends their
//! claims here directly; a claim here that finds the policy gone forgets the queue and
//! goes back to the hot path. A hot-path claim that finds nothing asks whether its queue
//! is limited (at most once per [`RECHECK`] per queue), so a policy set while a worker
//! believed the queue free sends that worker's claims here within a second; until then
//! they find nothing, because the hot path refuses a limited queue.

use crate::exec::{count, required};
use crate::rules::{push_claim_write, ClaimWrite, Val};
use crate::{Arg, Cells, Dialect, Exec, Sql};
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use tasktable_core::policy::{Candidate, Load, QueuePolicy, Rate, Share};
use tasktable_core::stored::after;
use tasktable_core::worker::Queues;
use tasktable_core::{Target, Task, TaskId};
use tasktable_store::{
    new_lease_credentials, ClaimParams, QueuePolicyParams, StoreError, StoreResult,
};

/// Most candidates one limited claim reads per lane.
const MAX_WINDOW: u32 = 1000;

/// How long a store trusts that a queue it found without a policy still has none, when a
/// hot-path claim from it finds nothing: at most this long after a policy is set, that
/// store's claims find nothing (the hot path refuses a limited queue) before they go to
/// [`claim_in`].
pub const RECHECK: Duration = Duration::from_secs(1);

/// The queues a store found limited, so that their claims skip the hot path, and when it
/// last found each of the others free of a policy.
#[derive(Debug, Default)]
pub struct LimitedQueues {
    limited: Mutex<HashSet<String>>,
    free_at: Mutex<HashMap<String, Instant>>,
}

impl LimitedQueues {
    /// Whether `queue` was found limited and not found free since: its claims go to
    /// [`claim_in`] directly.
    pub fn contains(&self, queue: &str) -> bool {
        self.limited.lock().expect("not poisoned").contains(queue)
    }

    /// `queue` was found limited: its claims skip the hot path from now on.
    pub fn remember(&self, queue: &str) {
        self.limited
            .lock()
            .expect("not poisoned")
            .insert(queue.to_owned());
    }

    /// `queue` was found without a policy by [`claim_in`]: its claims go back to the
    /// hot path.
    pub fn forget(&self, queue: &str) {
        self.limited.lock().expect("not poisoned").remove(queue);
    }

    /// After a hot-path claim from `queue` found nothing: whether to ask the database if
    /// the queue has become limited (not when it was found free within [`RECHECK`]).
    /// A drain's empty claims, many a second, then cost one read a second at most.
    pub fn due_for_check(&self, queue: &str) -> bool {
        let free_at = self.free_at.lock().expect("not poisoned");
        free_at.get(queue).is_none_or(|at| at.elapsed() >= RECHECK)
    }

    /// `queue` was found free of a policy just now.
    pub fn found_free(&self, queue: &str) {
        let mut free_at = self.free_at.lock().expect("not poisoned");
        // Entries of queues no longer claimed go, so that the map stays small.
        if free_at.len() >= 1024 {
            free_at.retain(|_, at| at.elapsed() < RECHECK);
        }
        match free_at.get_mut(queue) {
            Some(at) => *at = Instant::now(),
            None => {
                free_at.insert(queue.to_owned(), Instant::now());
            }
        }
    }
}

/// What [`claim_in`] did.
#[derive(Debug)]
pub enum LimitedClaim {
    /// The queue is limited; these were claimed (perhaps none).
    Claimed(Vec<Task>),
    /// The queue has no policy (any more): the hot path claims from it.
    NotLimited,
}

/// Whether `queue` has a policy: asked after a hot-path claim found nothing.
pub async fn is_limited<E: Exec>(e: &mut E, queue: &str) -> StoreResult<bool> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT limited FROM tasktable_queues WHERE name = ",
    );
    sql.bind(queue);
    match e.fetch(sql).await?.first() {
        Some(row) => required(row.boolean("limited"), "limited"),
        None => Ok(false),
    }
}

/// Sets a queue's policy (the default clears it), creating the queue's row if need be.
/// A rate that changes starts with a full bucket: a debt run up at the old rate (a day's
/// worth of a rate of one a day, say) would otherwise hold the new one back.
pub async fn set_policy<E: Exec>(e: &mut E, p: &QueuePolicyParams) -> StoreResult<()> {
    let d = e.dialect();
    let mut old = Sql::new(d, "SELECT policy FROM tasktable_queues WHERE name = ");
    old.bind(p.queue.as_str()).push(d.lock_rows());
    let old = match e.fetch(old).await?.first() {
        Some(row) => policy_from_row(row)?,
        None => QueuePolicy::default(),
    };
    if old.rate != p.policy.rate {
        let mut sql = Sql::new(
            d,
            "UPDATE tasktable_queues SET rate_tat = NULL WHERE name = ",
        );
        sql.bind(p.queue.as_str());
        e.execute(sql).await?;
    }
    if old.key_rate != p.policy.key_rate {
        let mut sql = Sql::new(d, "DELETE FROM tasktable_key_buckets WHERE queue = ");
        sql.bind(p.queue.as_str());
        e.execute(sql).await?;
    }
    let now = e.now(None).await?;
    let policy =
        serde_json::to_value(&p.policy).map_err(|err| StoreError::InvalidInput(err.to_string()))?;
    let mut sql = Sql::new(
        e.dialect(),
        "INSERT INTO tasktable_queues (name, paused, limited, policy, updated_at) VALUES (",
    );
    sql.bind(p.queue.as_str())
        .push(", ")
        .bind(false)
        .push(", ")
        .bind(p.policy.is_limited())
        .push(", ")
        .bind(Arg::Json(policy))
        .push(", ")
        .bind(now)
        .push(")");
    let upsert = e
        .dialect()
        .upsert(&["name"], &["limited", "policy", "updated_at"]);
    sql.push(&upsert);
    e.execute(sql).await?;
    let detail = serde_json::json!({"policy": {"old": old, "new": p.policy}});
    let event = tasktable_store::NewEvent {
        queue: Some(p.queue.clone()),
        detail,
        ..tasktable_store::NewEvent::new(tasktable_core::EventKind::PolicySet)
    };
    crate::events::record_one(e, now, &p.actor, event).await
}

/// Reads a queue row's policy (none: the default).
pub fn policy_from_row(row: &impl Cells) -> StoreResult<QueuePolicy> {
    match row.json("policy")? {
        None | Some(Value::Null) => Ok(QueuePolicy::default()),
        Some(v) => serde_json::from_value(v)
            .map_err(|_| StoreError::Database("tasktable_queues.policy cannot be read".into())),
    }
}

/// A due task a limited claim may take, as its lane read it.
struct Row {
    id: TaskId,
    candidate: Candidate,
    priority: i64,
    /// 0: aimed at the claimer; 1: untargeted (targeted first among equal priority).
    lane: u8,
    run_at: DateTime<Utc>,
}

/// Claims from a limited queue inside the caller's write transaction.
pub async fn claim_in<E: Exec>(e: &mut E, p: &ClaimParams) -> StoreResult<LimitedClaim> {
    let d = e.dialect();
    let mut sql = Sql::new(
        d,
        "SELECT paused, limited, policy, rate_tat FROM tasktable_queues WHERE name = ",
    );
    sql.bind(p.queue.as_str()).push(d.lock_rows());
    let Some(queue) = e.fetch(sql).await?.into_iter().next() else {
        return Ok(LimitedClaim::NotLimited);
    };
    if !required(queue.boolean("limited"), "limited")? {
        return Ok(LimitedClaim::NotLimited);
    }
    if required(queue.boolean("paused"), "paused")? || p.limit == 0 || p.kinds.is_empty() {
        return Ok(LimitedClaim::Claimed(Vec::new()));
    }
    let policy = policy_from_row(&queue)?;
    let tat = queue.time("rate_tat")?;
    let mut load = running(e, p).await?;
    // Read after what runs, so that a task seen finished finished before this claim's
    // time (finishes do not take the queue's lock).
    let now = e.now(p.now).await?;
    if policy.fair_share {
        load.share = Some(share(e, p, &load, now).await?);
    }
    let allowance = policy.allowance(p.limit, &p.kinds, &load, tat, now);
    if allowance.total == 0 {
        return Ok(LimitedClaim::Claimed(Vec::new()));
    }
    let window = allowance
        .total
        .saturating_mul(4)
        .saturating_add(32)
        .min(MAX_WINDOW);
    let mut rows = lane(e, p, &allowance.kinds, &policy, now, false, window).await?;
    rows.extend(lane(e, p, &allowance.kinds, &policy, now, true, window).await?);
    rows.sort_by(|a, b| {
        (b.priority, a.lane, a.run_at, a.id).cmp(&(a.priority, b.lane, b.run_at, b.id))
    });
    let mut keys = match &policy.key_rate {
        Some(_) => key_buckets(e, &p.queue, &rows).await?,
        None => HashMap::new(),
    };
    let candidates: Vec<Candidate> = rows.iter().map(|r| r.candidate.clone()).collect();
    let (picked, spent) = policy.pick(&allowance, &candidates, &mut keys, now);
    if picked.is_empty() {
        return Ok(LimitedClaim::Claimed(Vec::new()));
    }
    let credentials = new_lease_credentials(picked.len());
    let until = after(now, p.lease_for);
    let mut ids = Vec::with_capacity(picked.len());
    for (i, credential) in picked.iter().zip(credentials) {
        let row = &rows[*i];
        let mut sql = Sql::new(d, "UPDATE tasktable_tasks SET ");
        let write = ClaimWrite {
            now: Val::Arg(now.into()),
            lease_until: Val::Arg(until.into()),
            worker_id: Val::Arg(p.worker_id.as_str().into()),
            worker_host: Val::Arg(p.worker_host.as_str().into()),
            credential: Val::Arg(credential.to_hex().into()),
        };
        push_claim_write(&mut sql, "", &write);
        sql.push(" WHERE id = ")
            .bind(row.id)
            .push(" AND state = 'pending'");
        e.execute(sql).await?;
        ids.push(row.id);
    }
    if let Some(rate) = &policy.rate {
        let mut sql = Sql::new(d, "UPDATE tasktable_queues SET rate_tat = ");
        sql.bind(Rate::stored(rate.take(tat, now, picked.len() as u32)))
            .push(" WHERE name = ")
            .bind(p.queue.as_str());
        e.execute(sql).await?;
    }
    for key in spent {
        let Some(Some(tat)) = keys.get(&key) else {
            continue;
        };
        let mut sql = Sql::new(
            d,
            "INSERT INTO tasktable_key_buckets (queue, task_key, tat) VALUES (",
        );
        sql.bind(p.queue.as_str())
            .push(", ")
            .bind(key.as_str())
            .push(", ")
            .bind(Rate::stored(*tat))
            .push(")");
        sql.push(&d.upsert(&["queue", "task_key"], &["tat"]));
        e.execute(sql).await?;
    }
    let mut tasks = crate::row::get_many(e, &ids).await?;
    tasks.sort_by(Task::claim_order);
    Ok(LimitedClaim::Claimed(tasks))
}

/// What runs in the queue now, by kind, and how much of it the claimer runs.
async fn running<E: Exec>(e: &mut E, p: &ClaimParams) -> StoreResult<Load> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT kind, COUNT(*) AS n, COUNT(CASE WHEN worker_id = ",
    );
    sql.bind(p.worker_id.as_str())
        .push(" THEN 1 END) AS here FROM tasktable_tasks WHERE state = 'running' AND queue = ")
        .bind(p.queue.as_str())
        .push(" GROUP BY kind");
    let mut load = Load::default();
    for row in e.fetch(sql).await? {
        let kind = required(row.text("kind"), "kind")?;
        load.running_by_kind.insert(kind, count(&row, "n")?);
        load.running_here += count(&row, "here")?;
    }
    Ok(load)
}

/// For a fair share: the due tasks (counted up to what the share needs) and the workers
/// that share the queue.
async fn share<E: Exec>(
    e: &mut E,
    p: &ClaimParams,
    load: &Load,
    now: DateTime<Utc>,
) -> StoreResult<Share> {
    let workers = sharing_workers(e, &p.queue, &p.worker_id).await?;
    // With more due than this, the share exceeds what the claimer could take anyway.
    let enough = workers.saturating_mul(load.running_here + u64::from(p.limit));
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT COUNT(*) AS n FROM (SELECT id FROM tasktable_tasks \
         WHERE state = 'pending' AND queue = ",
    );
    sql.bind(p.queue.as_str())
        .push(" AND run_at <= ")
        .bind(now)
        .push(" LIMIT ")
        .bind(i64::try_from(enough).unwrap_or(i64::MAX))
        .push(") due");
    let due = match e.fetch(sql).await?.first() {
        Some(row) => count(row, "n")?,
        None => 0,
    };
    Ok(Share { due, workers })
}

/// The live, active workers that take `queue`, the claimer always among them.
async fn sharing_workers<E: Exec>(e: &mut E, queue: &str, claimer: &str) -> StoreResult<u64> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT id, queues FROM tasktable_workers WHERE gone_at IS NULL AND draining = ",
    );
    sql.bind(false);
    let mut n = 0;
    let mut counted_claimer = false;
    for row in e.fetch(sql).await? {
        let takes = match row.json("queues")? {
            None | Some(Value::Null) => Queues::All,
            Some(v) => Queues::Listed(serde_json::from_value(v).map_err(|_| {
                StoreError::Database("tasktable_workers.queues cannot be read".into())
            })?),
        };
        if takes.takes(queue) {
            n += 1;
            counted_claimer |= required(row.text("id"), "id")? == claimer;
        }
    }
    Ok(n + u64::from(!counted_claimer))
}

/// How each backend names the claim lanes' rows: the untargeted lane's index holds
/// `target IS NULL` rows (PostgreSQL, SQLite) or is split by the generated `targeted`
/// column (MySQL, where the index must be forced: see its task_claim_select.sql).
fn lane_source(d: Dialect, targeted: bool) -> (&'static str, &'static str) {
    match (d, targeted) {
        (Dialect::MySql, false) => (
            "tasktable_tasks t FORCE INDEX (tasktable_tasks_claim)",
            "t.targeted = 0",
        ),
        (Dialect::MySql, true) => (
            "tasktable_tasks t FORCE INDEX (tasktable_tasks_claim)",
            "t.targeted = 1",
        ),
        (_, false) => ("tasktable_tasks t", "t.target IS NULL"),
        (_, true) => ("tasktable_tasks t", "t.target IS NOT NULL"),
    }
}

/// Up to `window` due tasks of one lane, in claim order, locked where rows lock (rows
/// another transaction holds are passed over); keys without a token are left out.
async fn lane<E: Exec>(
    e: &mut E,
    p: &ClaimParams,
    kinds: &[String],
    policy: &QueuePolicy,
    now: DateTime<Utc>,
    targeted: bool,
    window: u32,
) -> StoreResult<Vec<Row>> {
    let d = e.dialect();
    let (from, lane) = lane_source(d, targeted);
    let mut sql = Sql::new(
        d,
        format!(
            "SELECT t.id, t.kind, t.task_key, t.priority, t.run_at \
             FROM {from} WHERE t.state = 'pending' AND {lane} AND t.queue = "
        ),
    );
    sql.bind(p.queue.as_str())
        .push(" AND t.run_at <= ")
        .bind(now);
    let kinds: Vec<&str> = kinds.iter().map(String::as_str).collect();
    sql.push(" AND ").push_in_texts("t.kind", &kinds);
    if targeted {
        let position = d.position_fn();
        sql.push(" AND (");
        for (i, needle) in Target::needles(&p.worker_id, &p.worker_groups)
            .into_iter()
            .enumerate()
        {
            if i > 0 {
                sql.push(" OR ");
            }
            sql.push(&format!("{position}(t.target, "))
                .bind(needle)
                .push(") > 0");
        }
        sql.push(")");
    }
    if let Some(rate) = &policy.key_rate {
        sql.push(
            " AND NOT EXISTS (SELECT 1 FROM tasktable_key_buckets b \
             WHERE b.queue = t.queue AND b.task_key = t.task_key AND b.tat > ",
        )
        .bind(rate.empty_after(now))
        .push(")");
    }
    sql.push(" ORDER BY t.priority DESC, t.run_at, t.id LIMIT ")
        .bind(i64::from(window))
        .push(d.skip_locked());
    e.fetch(sql)
        .await?
        .iter()
        .map(|r| {
            Ok(Row {
                id: required(r.int("id"), "id")?,
                candidate: Candidate {
                    kind: required(r.text("kind"), "kind")?,
                    key: r.text("task_key")?,
                },
                priority: required(r.int("priority"), "priority")?,
                lane: u8::from(!targeted),
                run_at: required(r.time("run_at"), "run_at")?,
            })
        })
        .collect()
}

/// The buckets of the candidates' keys (a key without a row has a full bucket).
async fn key_buckets<E: Exec>(
    e: &mut E,
    queue: &str,
    rows: &[Row],
) -> StoreResult<HashMap<String, Option<DateTime<Utc>>>> {
    let mut keys: Vec<&str> = rows
        .iter()
        .filter_map(|r| r.candidate.key.as_deref())
        .collect();
    keys.sort_unstable();
    keys.dedup();
    let mut out = HashMap::new();
    if keys.is_empty() {
        return Ok(out);
    }
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT task_key, tat FROM tasktable_key_buckets WHERE queue = ",
    );
    sql.bind(queue)
        .push(" AND ")
        .push_in_texts("task_key", &keys);
    for row in e.fetch(sql).await? {
        out.insert(
            required(row.text("task_key"), "task_key")?,
            row.time("tat")?,
        );
    }
    Ok(out)
}

/// Deletes the key buckets that are full by `now` (a full bucket and no row are alike).
/// On PostgreSQL it passes over rows a limited claim holds, so that it never waits for
/// one while holding another the claim wants (a deadlock); MySQL runs an aborted claim
/// again, and SQLite has one writer.
pub async fn purge_buckets<E: Exec>(e: &mut E, now: DateTime<Utc>) -> StoreResult<()> {
    let d = e.dialect();
    let mut sql = match d {
        Dialect::Postgres => Sql::new(
            d,
            "DELETE FROM tasktable_key_buckets b USING (SELECT queue, task_key \
             FROM tasktable_key_buckets WHERE tat < ",
        ),
        Dialect::Sqlite | Dialect::MySql => {
            Sql::new(d, "DELETE FROM tasktable_key_buckets WHERE tat < ")
        }
    };
    sql.bind(now);
    if d == Dialect::Postgres {
        sql.push(" FOR UPDATE SKIP LOCKED) s WHERE b.queue = s.queue AND b.task_key = s.task_key");
    }
    e.execute(sql).await
}
