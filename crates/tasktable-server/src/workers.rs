//! The worker registry: list the workers (with the live count), show one, drain one or
//! release it (a path names a worker by its id); and the heartbeat and leave calls of
//! workers of the pull protocol, which register them with the address they call from.

use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, NoValues, Path, Query};
use crate::AppState;
use axum::extract::{ConnectInfo, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::net::SocketAddr;
use tasktable_core::worker::{Protocol, Queues, WorkerFacts, WorkerInfo};
use tasktable_store::{WorkerBeatParams, WorkerDrainParams, WorkerListParams};

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
    Caller(actor): Caller,
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
            actor,
        })
        .await?
        .ok_or_else(|| ApiError::not_found(format!("worker {id:?} not found")))?;
    Ok(Json(json!({ "worker": WorkerView::from(changed) })).into_response())
}

/// `POST /api/v1/heartbeat`: a pull-protocol worker says who it is (the first beat of a
/// run with `starting`) every few seconds.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    worker_id: String,
    #[serde(default)]
    host: Option<String>,
    #[serde(default)]
    version: Option<String>,
    #[serde(default)]
    groups: Vec<String>,
    /// `null` or absent: every queue.
    #[serde(default)]
    queues: Option<Vec<String>>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    capacity: Option<u32>,
    #[serde(default)]
    starting: bool,
    /// The pull protocol the worker speaks; absent: 1, what workers spoke before they said.
    #[serde(default, deserialize_with = "crate::whole::optional")]
    protocol_version: Option<u32>,
}

/// Refuses a worker that speaks a pull protocol this server does not.
fn check_protocol(version: Option<u32>) -> ApiResult<()> {
    use tasktable_wire::{OLDEST_PULL_PROTOCOL as OLDEST, PULL_PROTOCOL as NEWEST};
    let version = version.unwrap_or(1);
    let advice = if version > NEWEST {
        "upgrade the server before its workers"
    } else if version < OLDEST {
        "upgrade the worker's package"
    } else {
        return Ok(());
    };
    Err(ApiError::new(
        StatusCode::UNPROCESSABLE_ENTITY,
        "protocol_unsupported",
        format!(
            "the worker speaks pull protocol {version}, this server {OLDEST} to {NEWEST}: {advice} (docs/operations.md, Upgrading)"
        ),
    ))
}

/// The address a caller reached the server from, when the server was started with it.
type PeerAddress = Option<Extension<ConnectInfo<SocketAddr>>>;

/// Registers (or refreshes) a pull-protocol worker, with the address it calls from;
/// answers whether an operator asked it to drain: then it must claim nothing new.
pub async fn heartbeat(
    State(state): State<AppState>,
    caller: PeerAddress,
    crate::extract::Body(raw): crate::extract::Body<serde_json::Value>,
) -> ApiResult<Response> {
    // The version first, from the raw object: a worker of another version may send a
    // heartbeat this server cannot read, and must still learn why it is refused.
    if let Some(version) = raw.get("protocol_version").and_then(|v| v.as_f64()) {
        if version.fract() == 0.0 && (0.0..=f64::from(u32::MAX)).contains(&version) {
            check_protocol(Some(version as u32))?;
        }
    }
    let b: HeartbeatBody = crate::extract::shaped(raw)?;
    check_protocol(b.protocol_version)?;
    let facts = WorkerFacts {
        id: b.worker_id,
        host: b.host.unwrap_or_else(|| "remote".to_owned()),
        pid: None,
        version: b.version.unwrap_or_else(|| "unknown".to_owned()),
        groups: b.groups,
        queues: b.queues.map_or(Queues::All, Queues::Listed),
        capacity: b.capacity.unwrap_or(1),
        protocol: Protocol::Pull,
    };
    let status = state
        .store
        .worker_beat(WorkerBeatParams {
            facts,
            address: caller.map(|Extension(ConnectInfo(addr))| addr.ip().to_string()),
            starting: b.starting,
            now: None,
        })
        .await?;
    Ok(Json(json!({
        "draining": status.draining,
        "protocol_versions": {
            "oldest": tasktable_wire::OLDEST_PULL_PROTOCOL,
            "newest": tasktable_wire::PULL_PROTOCOL,
        },
    }))
    .into_response())
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaveBody {
    worker_id: String,
}

/// A pull-protocol worker that stops: the registry marks it gone at once.
pub async fn leave(
    State(state): State<AppState>,
    crate::extract::Body(b): crate::extract::Body<LeaveBody>,
) -> ApiResult<Response> {
    if !tasktable_core::target::valid_member(&b.worker_id) {
        return Err(ApiError::invalid(format!(
            "worker_id is 1 to {} characters, not all whitespace, without control characters or '|'",
            tasktable_core::worker::MAX_NAME_CHARS
        )));
    }
    state.store.worker_leave(b.worker_id).await?;
    Ok(Json(json!({ "left": true })).into_response())
}
