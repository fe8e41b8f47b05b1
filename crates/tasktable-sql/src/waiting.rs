//! Why a pending task waits: the facts around it, read in one snapshot, and core's rule
//! ([`tasktable_core::waiting::reasons`]) to say what they mean.
//!
//! Plain reads of the task, its queue's row, the live workers (with what each runs, as
//! the registry counts it) and, where the queue's policy or a multi-run task asks for
//! them, what runs in the queue, the bucket of the task's key and who succeeded at a run.
//! Nothing is locked: the answer is what a claim would have met at the read.

use crate::exec::{count, required};
use crate::limits::policy_from_row;
use crate::{Cells, Exec, Sql};
use std::collections::HashMap;
use tasktable_core::waiting::{reasons, LiveWorker, Surroundings, WaitReason};
use tasktable_core::{Task, TaskState};
use tasktable_store::{StoreResult, TaskWaitingParams, WorkerListParams};

/// Why the task waits; empty when it is not pending, or there is no such task.
pub async fn task_waiting<E: Exec>(
    e: &mut E,
    p: &TaskWaitingParams,
) -> StoreResult<Vec<WaitReason>> {
    let Some(task) = crate::row::get(e, p.id).await? else {
        return Ok(Vec::new());
    };
    if task.state != TaskState::Pending {
        return Ok(Vec::new());
    }
    let around = surroundings(e, &task, p).await?;
    Ok(reasons(&task, &around))
}

async fn surroundings<E: Exec>(
    e: &mut E,
    task: &Task,
    p: &TaskWaitingParams,
) -> StoreResult<Surroundings> {
    let d = e.dialect();
    let now = e.now(p.now).await?;
    let mut around = Surroundings {
        now,
        ..Surroundings::default()
    };
    let mut sql = Sql::new(
        d,
        "SELECT paused, policy, rate_tat FROM tasktable_queues WHERE name = ",
    );
    sql.bind(task.queue.as_str());
    if let Some(row) = e.fetch(sql).await?.first() {
        around.paused = required(row.boolean("paused"), "paused")?;
        around.policy = policy_from_row(row)?;
        around.rate_tat = row.time("rate_tat")?;
    }
    let live = crate::workers::list(
        e,
        &WorkerListParams {
            include_gone: false,
            after: None,
            limit: None,
        },
    )
    .await?;
    let in_queue = if around.policy.one_per_worker {
        running_in_queue(e, &task.queue).await?
    } else {
        HashMap::new()
    };
    around.live = live
        .into_iter()
        .map(|w| LiveWorker {
            running_in_queue: in_queue.get(&w.facts.id).copied().unwrap_or(0),
            draining: w.draining,
            running: w.running,
            facts: w.facts,
        })
        .collect();
    if around.policy.is_limited() {
        around.running_by_kind = running_by_kind(e, &task.queue).await?;
    }
    if let (Some(_), Some(key)) = (&around.policy.key_rate, &task.key) {
        let mut sql = Sql::new(d, "SELECT tat FROM tasktable_key_buckets WHERE queue = ");
        sql.bind(task.queue.as_str())
            .push(" AND task_key = ")
            .bind(key.as_str());
        if let Some(row) = e.fetch(sql).await?.first() {
            around.key_tat = row.time("tat")?;
        }
    }
    if task.runs.as_ref().is_some_and(|r| !r.repeat) {
        let mut sql = Sql::new(
            d,
            "SELECT DISTINCT worker_id FROM tasktable_runs WHERE state = 'succeeded' AND task_id = ",
        );
        sql.bind(task.id);
        around.succeeded_runs = e
            .fetch(sql)
            .await?
            .iter()
            .map(|r| required(r.text("worker_id"), "worker_id"))
            .collect::<StoreResult<_>>()?;
    }
    Ok(around)
}

/// The queue's running tasks by kind, counted as its limited claim counts them.
async fn running_by_kind<E: Exec>(
    e: &mut E,
    queue: &str,
) -> StoreResult<std::collections::BTreeMap<String, u64>> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT kind, COUNT(*) AS n FROM tasktable_tasks WHERE state = 'running' AND queue = ",
    );
    sql.bind(queue).push(" GROUP BY kind");
    let mut out = std::collections::BTreeMap::new();
    for row in e.fetch(sql).await? {
        out.insert(required(row.text("kind"), "kind")?, count(&row, "n")?);
    }
    Ok(out)
}

/// The queue's running tasks by worker, as `one_per_worker` counts them.
async fn running_in_queue<E: Exec>(e: &mut E, queue: &str) -> StoreResult<HashMap<String, u64>> {
    let mut sql = Sql::new(
        e.dialect(),
        "SELECT worker_id, COUNT(*) AS n FROM tasktable_tasks \
         WHERE state = 'running' AND worker_id IS NOT NULL AND queue = ",
    );
    sql.bind(queue).push(" GROUP BY worker_id");
    let mut out = HashMap::new();
    for row in e.fetch(sql).await? {
        out.insert(
            required(row.text("worker_id"), "worker_id")?,
            count(&row, "n")?,
        );
    }
    Ok(out)
}
