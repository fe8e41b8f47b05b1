//! The worker registry: list the workers (with the live count), show one, drain one or
//! release it. A path names a worker by its id.

use crate::error::{ApiError, ApiResult};
use crate::extract::{NoValues, Path, Query};
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Serialize;
use serde_json::json;
use tasktable_core::worker::{Queues, WorkerInfo};
use tasktable_store::{WorkerDrainParams, WorkerListParams};

/// The worker operations, by the name they have in paths.
pub const WORKER_OPERATIONS: &[&str] = &["drain", "release"];

/// A worker as the API shows it (`Worker` in the OpenAPI document).
#[derive(Debug, Serialize)]
pub struct WorkerView {
    pub id: String,
    pub host: String,
    pub address: Option<String>,
    pub pid: Option<u32>,
    pub version: String,
    pub groups: Vec<String>,
    /// `null`: every queue.
    pub queues: Option<Vec<String>>,
    pub capacity: u32,
    pub protocol: &'static str,
    pub state: &'static str,
    pub draining: bool,
    pub started_at: DateTime<Utc>,
    pub last_seen_at: DateTime<Utc>,
    pub gone_at: Option<DateTime<Utc>>,
    pub running: u64,
}

impl From<WorkerInfo> for WorkerView {
    fn from(w: WorkerInfo) -> Self {
        let f = w.facts;
        WorkerView {
            id: f.id,
            host: f.host,
            address: w.address,
            pid: f.pid,
            version: f.version,
            groups: f.groups,
            queues: match f.queues {
                Queues::All => None,
                Queues::Listed(q) => Some(q),
            },
            capacity: f.capacity,
            protocol: f.protocol.as_str(),
            state: w.state.as_str(),
            draining: w.draining,
            started_at: w.started_at,
            last_seen_at: w.last_seen_at,
            gone_at: w.gone_at,
            running: w.running,
        }
    }
}

/// What `GET /api/v1/workers` may be asked.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `true`: workers that left or fell silent too.
    #[serde(default)]
    include_gone: Option<String>,
}

fn flag(name: &str, value: Option<&str>) -> ApiResult<bool> {
    match value {
        None | Some("false") => Ok(false),
        Some("true") => Ok(true),
        Some(other) => Err(ApiError::bad_request(
            "invalid_query",
            format!("{name} is true or false, not {other:?}"),
        )),
    }
}

fn worker_id(text: &str) -> ApiResult<&str> {
    if !tasktable_core::worker::valid_name(text) {
        return Err(ApiError::bad_request(
            "invalid_path",
            format!(
                "a worker id is 1 to {} characters, not all whitespace, without control characters",
                tasktable_core::worker::MAX_NAME_CHARS
            ),
        ));
    }
    Ok(text)
}

pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    let include_gone = flag("include_gone", q.include_gone.as_deref())?;
    let workers: Vec<WorkerView> = state
        .store
        .worker_list(WorkerListParams { include_gone })
        .await?
        .into_iter()
        .map(WorkerView::from)
        .collect();
    let live = state.store.worker_count_live().await?;
    Ok(Json(json!({ "workers": workers, "live": live })).into_response())
}

pub async fn show(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let id = worker_id(&id)?;
    let found = state
        .store
        .worker_list(WorkerListParams { include_gone: true })
        .await?
        .into_iter()
        .find(|w| w.facts.id == id)
        .ok_or_else(|| ApiError::not_found(format!("worker {id:?} not found")))?;
    Ok(Json(json!({ "worker": WorkerView::from(found) })).into_response())
}

pub async fn operate(
    State(state): State<AppState>,
    Path((id, op)): Path<(String, String)>,
    NoValues: NoValues,
) -> ApiResult<Response> {
    let draining = match op.as_str() {
        "drain" => true,
        "release" => false,
        other => {
            return Err(ApiError::not_found(format!(
                "unknown worker operation {other:?}; operations are {}",
                WORKER_OPERATIONS.join(", ")
            )))
        }
    };
    let id = worker_id(&id)?;
    let changed = state
        .store
        .worker_set_draining(WorkerDrainParams {
            id: id.to_owned(),
            draining,
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("worker {id:?} not found")))?;
    Ok(Json(json!({ "worker": WorkerView::from(changed) })).into_response())
}
