//! Queues (pause and resume, policies), counts, and maintenance (migrations, retention).

use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, NoValues, Path, Query};
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use tasktable_core::policy::{QueuePolicy, Rate};
use tasktable_core::TaskState;
use tasktable_store::{QueueInfo, QueuePauseParams, QueuePolicyParams, StatsParams};

fn counts(pairs: &[(TaskState, u64)]) -> Value {
    let mut map = Map::new();
    for state in TaskState::ALL {
        let n = pairs
            .iter()
            .find(|(s, _)| *s == state)
            .map_or(0, |(_, n)| *n);
        map.insert(state.as_str().to_owned(), json!(n));
    }
    Value::Object(map)
}

fn queue_view(q: &QueueInfo) -> Value {
    json!({
        "name": q.name,
        "paused": q.paused,
        "policy": q.policy,
        "counts": counts(&q.counts),
    })
}

/// A whole number for a map's values (`kind_max_running`).
#[derive(Debug, Deserialize)]
struct Whole(#[serde(deserialize_with = "crate::whole::number")] u32);

/// A rate as a request gives it.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RateBody {
    per_second: f64,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    burst: Option<u32>,
}

impl From<RateBody> for Rate {
    fn from(r: RateBody) -> Rate {
        Rate {
            per_second: r.per_second,
            burst: r.burst,
        }
    }
}

/// `PUT /api/v1/queues/{name}/policy`: the whole policy (a field left out or null is
/// not limited; `{}` clears every limit).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyBody {
    #[serde(default, deserialize_with = "crate::whole::optional")]
    max_running: Option<u32>,
    #[serde(default)]
    kind_max_running: BTreeMap<String, Whole>,
    #[serde(default)]
    rate: Option<RateBody>,
    #[serde(default)]
    key_rate: Option<RateBody>,
    #[serde(default)]
    one_per_worker: Option<bool>,
    #[serde(default)]
    fair_share: Option<bool>,
}

impl From<PolicyBody> for QueuePolicy {
    fn from(b: PolicyBody) -> QueuePolicy {
        QueuePolicy {
            max_running: b.max_running,
            kind_max_running: b
                .kind_max_running
                .into_iter()
                .map(|(k, Whole(n))| (k, n))
                .collect(),
            rate: b.rate.map(Rate::from),
            key_rate: b.key_rate.map(Rate::from),
            one_per_worker: b.one_per_worker.unwrap_or(false),
            fair_share: b.fair_share.unwrap_or(false),
        }
    }
}

/// Replaces a queue's policy; answers the policy now in force.
pub async fn set_policy(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(name): Path<String>,
    crate::extract::Body(body): crate::extract::Body<PolicyBody>,
) -> ApiResult<Response> {
    crate::leases::check_name("queue name", &name)?;
    let policy = QueuePolicy::from(body);
    for kind in policy.kind_max_running.keys() {
        crate::leases::check_name("kind_max_running: a kind", kind)?;
    }
    policy
        .validate()
        .map_err(|e| ApiError::invalid(e.to_string()))?;
    state
        .store
        .queue_set_policy(QueuePolicyParams {
            queue: name.clone(),
            policy: policy.clone(),
            actor,
        })
        .await?;
    Ok(Json(json!({"name": name, "policy": policy})).into_response())
}

pub async fn list(State(state): State<AppState>) -> ApiResult<Response> {
    let queues: Vec<Value> = state
        .store
        .queue_list()
        .await?
        .iter()
        .map(queue_view)
        .collect();
    Ok(Json(json!({ "queues": queues })).into_response())
}

/// The queue operations, by the name they have in paths.
pub const QUEUE_OPERATIONS: &[&str] = &["pause", "resume"];

pub async fn set_paused(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path((name, op)): Path<(String, String)>,
    NoValues: NoValues,
) -> ApiResult<Response> {
    let paused = match op.as_str() {
        "pause" => true,
        "resume" => false,
        other => {
            return Err(ApiError::not_found(format!(
                "unknown queue operation {other:?}; operations are {}",
                QUEUE_OPERATIONS.join(", ")
            )))
        }
    };
    crate::leases::check_name("queue name", &name)?;
    state
        .store
        .queue_set_paused(QueuePauseParams {
            queue: name.clone(),
            paused,
            actor,
        })
        .await?;
    Ok(Json(json!({"name": name, "paused": paused})).into_response())
}

/// What `/api/v1/stats` may be asked.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StatsQuery {
    /// `15m`, `1h`, `24h`, `7d`...; one hour when left out.
    window: Option<String>,
    queue: Option<String>,
    kind: Option<String>,
}

/// Task counts by state in total and per queue, and per queue and kind over a window:
/// throughput, success rate, queue wait and run time percentiles, and a series to chart.
pub async fn stats(
    State(state): State<AppState>,
    Query(q): Query<StatsQuery>,
) -> ApiResult<Response> {
    let window = match q.window.as_deref() {
        None => std::time::Duration::from_secs(3600),
        Some(text) => crate::wire::parse_window(text).map_err(ApiError::invalid)?,
    };
    let params = StatsParams {
        window,
        queue: q.queue,
        kind: q.kind,
        now: None,
    };
    params.validate()?;
    let windowed = state.store.stats(params).await?;
    let queues = state.store.queue_list().await?;
    let mut totals: Vec<(TaskState, u64)> = Vec::new();
    for q in &queues {
        for &(s, n) in &q.counts {
            match totals.iter_mut().find(|(t, _)| *t == s) {
                Some((_, total)) => *total += n,
                None => totals.push((s, n)),
            }
        }
    }
    let mut body = crate::wire::stats_view(&windowed, window);
    body["totals"] = counts(&totals);
    body["queues"] = Value::Array(queues.iter().map(queue_view).collect());
    Ok(Json(body).into_response())
}

pub async fn migrate(State(state): State<AppState>, NoValues: NoValues) -> ApiResult<Response> {
    state.store.migrate().await?;
    Ok(Json(json!({ "migrated": true })).into_response())
}

/// `POST /api/v1/admin/purge`: one batch of retention.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurgeBody {
    state: TaskState,
    #[serde(deserialize_with = "crate::whole::number")]
    older_than_ms: u64,
    #[serde(default)]
    archive: Option<bool>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    limit: Option<u32>,
    #[serde(default)]
    dry_run: Option<bool>,
}

/// One batch of retention: finished tasks of one state older than an age, deleted or
/// archived in one short transaction (or, with `dry_run`, counted). Callers repeat it
/// until `count` comes back below `limit`; `tasktable purge` does, with a progress bar.
pub async fn purge(
    State(state): State<AppState>,
    crate::extract::Body(body): crate::extract::Body<PurgeBody>,
) -> ApiResult<Response> {
    let purged = state
        .store
        .task_purge(tasktable_store::PurgeParams {
            state: body.state,
            older_than: std::time::Duration::from_millis(body.older_than_ms),
            archive: body.archive.unwrap_or(false),
            limit: body.limit.unwrap_or(DEFAULT_PURGE_BATCH),
            dry_run: body.dry_run.unwrap_or(false),
            now: None,
        })
        .await?;
    Ok(Json(json!({"count": purged.count, "cutoff": purged.cutoff})).into_response())
}

/// Tasks per purge call when the body names no `limit`.
pub const DEFAULT_PURGE_BATCH: u32 = 500;
