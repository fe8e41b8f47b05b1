//! The worker registry: list the workers (with the live count), show one, drain one or
//! release it (a path names a worker by its id); and the heartbeat and leave calls of
//! workers of the pull protocol, which register them with the address they call from,
//! as the calling token's (core's `ownership` says who may act as an id), within the
//! token's limits on queues, groups and live workers.

use crate::auth::Principal;
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
use tasktable_store::{WorkerBeatParams, WorkerDrainParams, WorkerLeaveParams, WorkerListParams};

/// The worker operations, by the name they have in paths.
pub const WORKER_OPERATIONS: &[&str] = &["drain", "release"];

/// A worker as the API shows it (`Worker` in the OpenAPI document).
#[derive(Debug, Serialize)]
pub struct WorkerView {
    pub id: String,
    pub host: String,
    pub address: Option<String>,
    /// The token that owns its id, by name; `null`: none.
    pub owner: Option<String>,
    pub pid: Option<u32>,
    pub version: String,
    pub groups: Vec<String>,
    /// `null`: every queue.
    pub queues: Option<Vec<String>>,
    pub capacity: u32,
    pub protocol: &'static str,
    /// The kinds it has handlers for; `null`: it did not say.
    pub kinds: Option<Vec<String>>,
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
            owner: w.owner,
            pid: f.pid,
            version: f.version,
            groups: f.groups,
            queues: match f.queues {
                Queues::All => None,
                Queues::Listed(q) => Some(q),
            },
            capacity: f.capacity,
            protocol: f.protocol.as_str(),
            kinds: f.kinds,
            state: w.state.as_str(),
            draining: w.draining,
            started_at: w.started_at,
            last_seen_at: w.last_seen_at,
            gone_at: w.gone_at,
            running: w.running,
        }
    }
}

/// Workers a page holds when the request does not say.
pub const DEFAULT_WORKER_PAGE: u32 = 500;

/// What `GET /api/v1/workers` may be asked.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// `true`: workers that left or fell silent too.
    #[serde(default)]
    include_gone: Option<String>,
    /// The id the previous page ended with (its `next`).
    #[serde(default)]
    after: Option<String>,
    /// Most workers in the page.
    #[serde(default)]
    limit: Option<String>,
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

fn page_size(value: Option<&str>) -> ApiResult<u32> {
    let max = tasktable_store::MAX_WORKER_PAGE;
    match value {
        None => Ok(DEFAULT_WORKER_PAGE),
        Some(text) => text
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=max).contains(n))
            .ok_or_else(|| {
                ApiError::bad_request(
                    "invalid_query",
                    format!("limit is a whole number from 1 to {max}, not {text:?}"),
                )
            }),
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

/// A page of the registry by id, with the live count and the cursor of the next page
/// (`null` when the page is not full).
pub async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    let include_gone = flag("include_gone", q.include_gone.as_deref())?;
    let limit = page_size(q.limit.as_deref())?;
    if let Some(after) = &q.after {
        worker_id(after).map_err(|_| {
            ApiError::bad_request(
                "invalid_query",
                "after is a worker id: 1 to 255 characters without control characters",
            )
        })?;
    }
    let found = state
        .store
        .worker_list(WorkerListParams {
            include_gone,
            after: q.after,
            limit: Some(limit),
        })
        .await?;
    // A full page may have more after it (the page after it may be empty).
    let next = (found.len() == limit as usize)
        .then(|| found.last().map(|w| w.facts.id.clone()))
        .flatten();
    let workers: Vec<WorkerView> = found.into_iter().map(WorkerView::from).collect();
    let live = state.store.worker_count_live().await?;
    Ok(Json(json!({ "workers": workers, "live": live, "next": next })).into_response())
}

pub async fn show(State(state): State<AppState>, Path(id): Path<String>) -> ApiResult<Response> {
    let id = worker_id(&id)?;
    let found = state
        .store
        .worker_get(id.to_owned())
        .await?
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
    /// The kinds the worker has handlers for; absent or `null`: it does not say.
    #[serde(default)]
    kinds: Option<Vec<String>>,
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
pub(crate) type PeerAddress = Option<Extension<ConnectInfo<SocketAddr>>>;

/// The caller's address as the registry keeps it.
pub(crate) fn address(from: PeerAddress) -> Option<String> {
    from.map(|Extension(ConnectInfo(addr))| addr.ip().to_string())
}

/// Refuses groups a token's workers may not join.
pub(crate) fn check_token_groups(caller: &Principal, groups: &[String]) -> ApiResult<()> {
    let limits = &caller.limits;
    let outside = limits.groups_outside(groups);
    refuse_outside(caller, "join only the groups", &limits.groups, &outside, "")
}

/// Refuses queues a token's workers may not take: a limited token's workers list theirs.
fn check_token_queues(caller: &Principal, queues: &Queues) -> ApiResult<()> {
    let limits = &caller.limits;
    let outside = limits.queues_outside(queues);
    let hint = ": list them in queues";
    refuse_outside(
        caller,
        "take only the queues",
        &limits.queues,
        &outside,
        hint,
    )
}

/// 403 naming what `caller`'s token may do (`may` over `allowed`), when `outside` is not
/// empty.
fn refuse_outside(
    caller: &Principal,
    may: &str,
    allowed: &Option<Vec<String>>,
    outside: &[&str],
    hint: &str,
) -> ApiResult<()> {
    if outside.is_empty() {
        return Ok(());
    }
    Err(ApiError::forbidden(format!(
        "token {:?} may {may} {}, not {}{hint}",
        caller.name,
        allowed.as_deref().unwrap_or_default().join(", "),
        outside.join(", ")
    )))
}

/// Whether the worker a claim names is draining, once the caller is known to act as it:
/// the id is the caller's token's, or free (then the claim registers it to the token,
/// with what the claim says of it), and the claim's groups are ones it registered; a gone
/// worker is brought back within its token's cap. One read by key when the worker is
/// known and live, as the drain check alone would be.
pub(crate) async fn claimant_draining(
    state: &AppState,
    caller: &Principal,
    claim: &tasktable_store::ClaimParams,
    from: &Option<String>,
) -> ApiResult<bool> {
    use tasktable_core::ownership::{may_act_as, unregistered_groups, Held, WorkerRefusal};
    let owner = caller.worker_owner();
    let id = &claim.worker_id;
    let Some(standing) = state.store.worker_standing(id.clone()).await? else {
        return register(state, claim, from, owner).await;
    };
    let held = Held {
        owner: standing.owner.as_deref(),
        protocol: standing.protocol,
    };
    may_act_as(id, Some(held), owner.as_deref()).map_err(ApiError::worker_refused)?;
    let groups = unregistered_groups(&standing.groups, &claim.worker_groups);
    if !groups.is_empty() {
        let refusal = WorkerRefusal::GroupsNotRegistered {
            id: id.clone(),
            groups,
        };
        return Err(ApiError::worker_refused(refusal));
    }
    if standing.gone && owner.is_some() {
        // A claim under a gone id brings it back, as a heartbeat would, within its token's
        // cap: a token's workers that claim are its live ones.
        return register(state, claim, from, owner).await;
    }
    Ok(standing.draining)
}

/// Registers (or brings back) the worker a claim names, with what the claim says of it,
/// as `owner`'s; whether it is draining.
async fn register(
    state: &AppState,
    claim: &tasktable_store::ClaimParams,
    from: &Option<String>,
    owner: Option<String>,
) -> ApiResult<bool> {
    let facts = WorkerFacts {
        id: claim.worker_id.clone(),
        host: claim.worker_host.clone(),
        pid: None,
        version: "unknown".to_owned(),
        groups: claim.worker_groups.clone(),
        queues: Queues::Listed(vec![claim.queue.clone()]),
        capacity: claim.limit,
        protocol: Protocol::Pull,
        // A claim names the kinds of one call, not all its worker handles: its heartbeat
        // says those.
        kinds: None,
    };
    let status = state
        .store
        .worker_beat(WorkerBeatParams {
            address: from.clone(),
            starting: true,
            owner,
            max_live_per_owner: Some(state.limits.max_workers_per_token),
            ..WorkerBeatParams::new(facts)
        })
        .await?;
    Ok(status.draining)
}

/// Registers (or refreshes) a pull-protocol worker, with the address it calls from;
/// answers whether an operator asked it to drain: then it must claim nothing new.
pub async fn heartbeat(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    from: PeerAddress,
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
        kinds: b.kinds,
    };
    check_token_groups(&caller, &facts.groups)?;
    check_token_queues(&caller, &facts.queues)?;
    let status = state
        .store
        .worker_beat(WorkerBeatParams {
            address: address(from),
            starting: b.starting,
            owner: caller.worker_owner(),
            max_live_per_owner: Some(state.limits.max_workers_per_token),
            ..WorkerBeatParams::new(facts)
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
    Extension(caller): Extension<Principal>,
    crate::extract::Body(b): crate::extract::Body<LeaveBody>,
) -> ApiResult<Response> {
    if !tasktable_core::target::valid_member(&b.worker_id) {
        return Err(ApiError::invalid(format!(
            "worker_id is 1 to {} characters, not all whitespace, without control characters or '|'",
            tasktable_core::worker::MAX_NAME_CHARS
        )));
    }
    state
        .store
        .worker_leave(WorkerLeaveParams {
            id: b.worker_id,
            owner: caller.worker_owner(),
        })
        .await?;
    Ok(Json(json!({ "left": true })).into_response())
}
