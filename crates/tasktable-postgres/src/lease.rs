//! The worker's side of a task: claim, renew, checkpoint, finish, and the rescuer's scan.
//! Every write after the claim is fenced by `(id, lease_token, state = 'running')`.
//! Each call is one statement (plus, for leases that did not match, one read to tell
//! `Cancelled` from `Lost`), so none needs an explicit transaction.

use crate::sql::Row;
use crate::{db, micros};
use chrono::{DateTime, Utc};
use sqlx::{PgPool, Row as _};
use std::collections::HashMap;
use std::sync::LazyLock;
use tasktable_core::{Lease, Target, Task, TaskId};
use tasktable_sql::hot::expand;
use tasktable_sql::row::{state, task_from_row, TASK_COLUMNS};
use tasktable_sql::rules::{ClaimWrite, Val};
use tasktable_sql::{rules, Dialect};
use tasktable_store::*;

/// The claim, with the sub-selects that choose its tasks (task_claim_select.sql) and test
/// the queue (queue_paused.sql) in their places, and the claim's transition
/// (`rules::claim_write`); `{lane_limit}` is filled in per call.
static CLAIM: LazyLock<String> = LazyLock::new(|| {
    let select = expand(
        include_str!("../queries/task_claim_select.sql"),
        &[("queue_paused", include_str!("../queries/queue_paused.sql"))],
    );
    let write = rules::claim_write(
        Dialect::Postgres,
        "t.",
        &ClaimWrite {
            now: Val::Sql("clock.now"),
            lease_until: Val::Sql("clock.now + $5 * interval '1 microsecond'"),
            worker_id: Val::Sql("$6"),
            worker_host: Val::Sql("$7"),
            credential: Val::Sql("($8::text[])[numbered.n]"),
        },
    );
    expand(
        include_str!("../queries/task_claim.sql"),
        &[("task_claim_select", &select), (rules::CLAIM_WRITE, &write)],
    )
});
/// task_renew.sql, fenced (`rules::fence`).
static RENEW: LazyLock<String> = LazyLock::new(|| {
    let file = include_str!("../queries/task_renew.sql");
    rules::fenced(
        file,
        Dialect::Postgres,
        "t.",
        "input.token",
        "input.credential",
    )
});
/// task_checkpoint.sql, fenced (`rules::fence`).
static CHECKPOINT: LazyLock<String> = LazyLock::new(|| {
    let file = include_str!("../queries/task_checkpoint.sql");
    rules::fenced(file, Dialect::Postgres, "", "$4", "$5")
});
const LEASE_ROWS: &str = include_str!("../queries/lease_rows.sql");
/// The finish, with core's affinity and retry rules and the fence over the row aliased
/// `t` (and, as the statement's snapshot saw it, `b`), the history insert
/// (attempt_insert.sql) and the closing SELECT (queues_to_wake.sql) in their places.
static FINISH: LazyLock<String> = LazyLock::new(|| {
    expand(
        include_str!("../queries/task_finish.sql"),
        &[
            (
                rules::AFFINITY,
                &rules::affinity(
                    Dialect::Postgres,
                    "t.",
                    &format!(
                        "coalesce(input.new_state, {{{}}}) = 'pending'",
                        rules::RETRY_STATE
                    ),
                    "clock.now + input.delay_us * interval '1 microsecond'",
                ),
            ),
            (rules::RETRY_STATE, &rules::retry_state("t.")),
            (
                "fence_as_seen",
                &rules::fence(Dialect::Postgres, "b.", "i.token", "i.credential"),
            ),
            (
                rules::FENCE,
                &rules::fence(Dialect::Postgres, "t.", "input.token", "input.credential"),
            ),
            (
                "attempt_insert",
                include_str!("../queries/attempt_insert.sql"),
            ),
            (
                "queues_to_wake",
                include_str!("../queries/queues_to_wake.sql"),
            ),
        ],
    )
});
static LIST_EXPIRED: LazyLock<String> = LazyLock::new(|| {
    expand(
        include_str!("../queries/task_list_expired.sql"),
        &[("task_columns", TASK_COLUMNS)],
    )
});

/// The claim's statement for claims of `limit` tasks, as it is sent.
pub fn claim_statement(limit: u32) -> String {
    CLAIM.replace("{lane_limit}", &limit.to_string())
}

pub async fn claim(pool: &PgPool, p: &ClaimParams) -> StoreResult<Vec<Task>> {
    if p.limit == 0 || p.kinds.is_empty() {
        return Ok(Vec::new());
    }
    // The lanes' limit is written into the text (task_claim_select.sql says why).
    let sql = claim_statement(p.limit);
    let rows = sqlx::query(&sql)
        .bind(&p.queue)
        .bind(p.now)
        .bind(&p.kinds)
        .bind(i64::from(p.limit))
        .bind(micros(p.lease_for))
        .bind(&p.worker_id)
        .bind(&p.worker_host)
        .bind(
            new_lease_credentials(p.limit as usize)
                .iter()
                .map(|c| c.to_hex())
                .collect::<Vec<_>>(),
        )
        .bind(Target::needles(&p.worker_id, &p.worker_groups))
        .fetch_all(pool)
        .await
        .map_err(db)?;
    let mut tasks = rows
        .into_iter()
        .map(|r| task_from_row(&Row(r)))
        .collect::<StoreResult<Vec<_>>>()?;
    // UPDATE ... RETURNING has no order of its own.
    tasks.sort_by(Task::claim_order);
    Ok(tasks)
}

/// The statuses of leases a fenced write did not match, read in one query.
async fn lost_statuses(pool: &PgPool, leases: &[Lease]) -> StoreResult<Vec<LeaseStatus>> {
    if leases.is_empty() {
        return Ok(Vec::new());
    }
    let ids: Vec<TaskId> = leases.iter().map(|l| l.task_id).collect();
    let rows = sqlx::query(LEASE_ROWS)
        .bind(&ids)
        .fetch_all(pool)
        .await
        .map_err(db)?;
    let mut found = HashMap::with_capacity(rows.len());
    for r in &rows {
        let id: TaskId = r.try_get("id").map_err(db)?;
        found.insert(
            id,
            LeaseRow {
                state: state(r.try_get("state").map_err(db)?)?,
                token: r.try_get("lease_token").map_err(db)?,
                credential: credential_from_db(r.try_get("lease_credential").map_err(db)?)?,
                last_outcome: outcome_from_db(r.try_get("last_outcome").map_err(db)?),
            },
        );
    }
    Ok(leases
        .iter()
        .map(|l| lost_lease_status(*l, found.get(&l.task_id).copied()))
        .collect())
}

fn hex_credentials(leases: &[Lease]) -> Vec<Option<String>> {
    leases
        .iter()
        .map(|l| l.credential.map(|c| c.to_hex()))
        .collect()
}

pub async fn renew(pool: &PgPool, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
    if p.leases.is_empty() {
        return Ok(Vec::new());
    }
    let rows = sqlx::query(&RENEW)
        .bind(p.leases.iter().map(|l| l.task_id).collect::<Vec<_>>())
        .bind(p.leases.iter().map(|l| l.token).collect::<Vec<_>>())
        .bind(p.now)
        .bind(micros(p.lease_for))
        .bind(hex_credentials(&p.leases))
        .fetch_all(pool)
        .await
        .map_err(db)?;
    // Keyed by the lease, not by position: the same lease given twice is renewed once
    // and reported held twice.
    let mut held: HashMap<Lease, DateTime<Utc>> = HashMap::with_capacity(rows.len());
    for r in &rows {
        let lease = Lease {
            task_id: r.try_get("id").map_err(db)?,
            token: r.try_get("lease_token").map_err(db)?,
            credential: credential_from_db(r.try_get("lease_credential").map_err(db)?)?,
            run: None,
        };
        held.insert(lease, r.try_get("lease_expires_at").map_err(db)?);
    }
    let lost: Vec<Lease> = p
        .leases
        .iter()
        .filter(|l| !held.contains_key(l))
        .copied()
        .collect();
    let mut lost = lost_statuses(pool, &lost).await?.into_iter();
    Ok(p.leases
        .iter()
        .map(|l| match held.get(l) {
            Some(t) => LeaseStatus::Held {
                expires_at: Some(*t),
            },
            None => lost.next().unwrap_or(LeaseStatus::Lost),
        })
        .collect())
}

/// Saves `p`, which [`prepare_checkpoint`] has checked.
pub async fn checkpoint(pool: &PgPool, p: CheckpointParams) -> StoreResult<LeaseStatus> {
    let done = sqlx::query(&CHECKPOINT)
        .bind(&p.checkpoint)
        .bind(&p.progress)
        .bind(p.lease.task_id)
        .bind(p.lease.token)
        .bind(p.lease.credential.map(|c| c.to_hex()))
        .execute(pool)
        .await
        .map_err(db)?;
    if done.rows_affected() == 1 {
        return Ok(LeaseStatus::Held { expires_at: None });
    }
    Ok(lost_statuses(pool, &[p.lease]).await?.remove(0))
}

/// Returns one flag per item, and the queues that got a task due at once.
pub async fn finish(pool: &PgPool, p: FinishParams) -> StoreResult<(Vec<bool>, Vec<String>)> {
    if p.items.is_empty() {
        return Ok((Vec::new(), Vec::new()));
    }
    let rows: Vec<FinishRow> = p.items.iter().map(FinishItem::row).collect();
    let done = sqlx::query(&FINISH)
        .bind(rows.iter().map(|r| r.task_id).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.token).collect::<Vec<_>>())
        .bind(
            rows.iter()
                .map(|r| r.new_state.map(|s| s.as_str()))
                .collect::<Vec<_>>(),
        )
        .bind(rows.iter().map(|r| micros(r.delay)).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.refund_attempt).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.result.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.error.clone()).collect::<Vec<_>>())
        .bind(rows.iter().map(|r| r.outcome.as_str()).collect::<Vec<_>>())
        .bind(p.now)
        .bind(p.only_if_expired)
        .bind(
            rows.iter()
                .map(|r| r.credential.clone())
                .collect::<Vec<_>>(),
        )
        .fetch_all(pool)
        .await
        .map_err(db)?;
    let mut applied = vec![false; rows.len()];
    let mut due_queues = Vec::new();
    for r in &done {
        let ord: i64 = r.try_get("ord").map_err(db)?;
        if let Some(flag) = usize::try_from(ord - 1)
            .ok()
            .and_then(|i| applied.get_mut(i))
        {
            *flag = true;
        }
        if r.try_get::<bool, _>("due").map_err(db)? {
            due_queues.push(r.try_get("queue").map_err(db)?);
        }
    }
    Ok((applied, due_queues))
}

pub async fn list_expired(pool: &PgPool, p: ExpiredParams) -> StoreResult<Vec<Task>> {
    let rows = sqlx::query(&LIST_EXPIRED)
        .bind(p.now)
        .bind(i64::from(p.limit))
        .fetch_all(pool)
        .await
        .map_err(db)?;
    rows.into_iter().map(|r| task_from_row(&Row(r))).collect()
}
