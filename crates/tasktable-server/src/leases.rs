//! The pull protocol: workers in any language claim tasks over HTTP and then renew,
//! checkpoint and end them under the lease's fencing token and credential, exactly as
//! in-process workers do through the store. A call whose token or credential does not
//! hold the task is refused with 409 `lease_lost` (or `task_cancelled`, only for the
//! claimer's own lease) and changes nothing: a wrong credential cannot be told from a
//! stale one.

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::Body;
use crate::wire::ClaimedTask;
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use std::time::Duration;
use tasktable_core::outcome::HandlerOutcome;
use tasktable_core::target::valid_member;
use tasktable_core::task::{DEFAULT_QUEUE, MAX_DELAY, MAX_NAME_LEN};
use tasktable_core::worker::{MAX_GROUPS, MAX_NAME_CHARS};
use tasktable_core::{Lease, LeaseCredential, TaskId};
use tasktable_store::ClaimParams;
use tokio::sync::broadcast;
use tokio::time::Instant;

/// How long a lease lasts when a request does not say.
pub const DEFAULT_LEASE: Duration = Duration::from_secs(30);
pub(crate) const MIN_LEASE: Duration = Duration::from_secs(1);
/// The longest lease a pull worker may ask for: an hour, far below what a store writes
/// ([`tasktable_core::MAX_LEASE`]), so that a remote worker that vanished without a word
/// holds its task an hour at most; one that needs longer renews.
pub(crate) const MAX_PULL_LEASE: Duration = Duration::from_secs(3600);

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClaimRequest {
    #[serde(default)]
    queue: Option<String>,
    kinds: Vec<String>,
    worker_id: String,
    #[serde(default)]
    worker_host: Option<String>,
    /// The groups the caller belongs to: it may take tasks aimed at any of them.
    #[serde(default)]
    groups: Vec<String>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    limit: Option<u32>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    lease_ms: Option<u64>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    wait_ms: Option<u64>,
}

pub(crate) fn lease_duration(ms: Option<u64>) -> ApiResult<Duration> {
    let lease = ms.map_or(DEFAULT_LEASE, Duration::from_millis);
    if !(MIN_LEASE..=MAX_PULL_LEASE).contains(&lease) {
        return Err(ApiError::invalid(format!(
            "lease_ms must be between {} and {}, got {}",
            MIN_LEASE.as_millis(),
            MAX_PULL_LEASE.as_millis(),
            lease.as_millis()
        )));
    }
    Ok(lease)
}

/// A delay a worker asks for, at most [`MAX_DELAY`] (10 years).
fn bounded_delay(field: &str, ms: Option<u64>) -> ApiResult<Option<Duration>> {
    match ms.map(Duration::from_millis) {
        Some(d) if d > MAX_DELAY => Err(ApiError::invalid(format!(
            "{field} must be at most {} (10 years), got {}",
            MAX_DELAY.as_millis(),
            d.as_millis()
        ))),
        other => Ok(other),
    }
}

/// The rule for every name the API takes (queues, kinds, worker ids), as the store applies
/// it to tasks: not blank, at most [`MAX_NAME_LEN`] characters, no control characters.
pub(crate) fn check_name(field: &str, value: &str) -> ApiResult<()> {
    if value.trim().is_empty()
        || value.chars().count() > MAX_NAME_LEN
        || value.chars().any(char::is_control)
    {
        return Err(ApiError::invalid(format!(
            "{field} must be 1 to {MAX_NAME_LEN} characters, not all whitespace, without control characters"
        )));
    }
    Ok(())
}

pub async fn claim(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    from: crate::workers::PeerAddress,
    Body(req): Body<ClaimRequest>,
) -> ApiResult<Response> {
    let queue = req.queue.unwrap_or_else(|| DEFAULT_QUEUE.to_owned());
    check_name("queue", &queue)?;
    if !caller.may_claim_from(&queue) {
        return Err(ApiError::forbidden(format!(
            "token {:?} may claim only from the queues {}",
            caller.name,
            caller.limits.queues.unwrap_or_default().join(", ")
        )));
    }
    check_name("worker_id", &req.worker_id)?;
    // A worker's id goes into targets (`|w:<id>|`), whose separator it may not hold.
    if !valid_member(&req.worker_id) {
        return Err(ApiError::invalid("worker_id must not contain '|'"));
    }
    if req.kinds.is_empty() {
        return Err(ApiError::invalid(
            "kinds must name at least one task kind the worker runs",
        ));
    }
    for kind in &req.kinds {
        check_name("each of kinds", kind)?;
    }
    let limit = req.limit.unwrap_or(1);
    if limit == 0 || limit > state.limits.max_claim {
        return Err(ApiError::invalid(format!(
            "limit must be between 1 and {}, got {limit}",
            state.limits.max_claim
        )));
    }
    let wait = Duration::from_millis(req.wait_ms.unwrap_or(0));
    if wait > state.limits.max_claim_wait {
        return Err(ApiError::invalid(format!(
            "wait_ms must be at most {}, got {}",
            state.limits.max_claim_wait.as_millis(),
            wait.as_millis()
        )));
    }
    if req.groups.len() > MAX_GROUPS {
        return Err(ApiError::invalid(format!(
            "groups lists at most {MAX_GROUPS} names, not {}",
            req.groups.len()
        )));
    }
    if req.groups.iter().any(|g| !valid_member(g)) {
        return Err(ApiError::invalid(format!(
            "each of groups is 1 to {MAX_NAME_CHARS} characters, not all whitespace, without control characters or '|'"
        )));
    }
    crate::workers::check_token_groups(&caller, &req.groups)?;
    let params = ClaimParams {
        worker_host: req.worker_host.unwrap_or_else(|| "remote".to_owned()),
        worker_groups: req.groups,
        queue,
        kinds: req.kinds,
        limit,
        worker_id: req.worker_id,
        lease_for: lease_duration(req.lease_ms)?,
        now: None,
    };
    check_name("worker_host", &params.worker_host)?;
    let _slot = if wait.is_zero() {
        None
    } else {
        let limit = state.limits.max_waiting_claims_per_token;
        Some(
            state
                .waiting
                .enter(&caller.name, limit)
                .ok_or_else(|| ApiError::too_many_waiting_claims(&caller.name, limit))?,
        )
    };
    // Take a place at the bell and subscribe before the first claim, so that nothing
    // that happens between the two is missed.
    let mut bell = (!wait.is_zero()).then(|| {
        state.doorbells.wait_on(
            &state.store,
            &params.queue,
            &params.kinds,
            state.limits.due_check,
        )
    });
    let mut wakes = state.store.subscribe().await?;
    let deadline = Instant::now() + wait;
    let from = crate::workers::address(from);
    loop {
        // A drain holds whatever the worker does: a draining worker's claim gets nothing
        // (it waits out its wait, as a claim on an empty queue does).
        let tasks = if crate::workers::claimant_draining(&state, &caller, &params, &from).await? {
            Vec::new()
        } else {
            state.store.task_claim(params.clone()).await?
        };
        let waits = tasks.is_empty() && Instant::now() < deadline && !state.stop.is_cancelled();
        let (true, Some(bell)) = (waits, bell.as_mut()) else {
            state.claimed.remember(&tasks);
            let tasks: Vec<ClaimedTask> = tasks.into_iter().map(ClaimedTask::from).collect();
            return Ok(Json(json!({ "tasks": tasks })).into_response());
        };
        tokio::select! {
            () = wake_for(&mut wakes, &params.queue) => {}
            () = bell.rung() => {}
            () = tokio::time::sleep_until(deadline) => {}
            () = state.stop.cancelled() => {}
        }
    }
}

/// Resolves on a wake for `queue` (or when wakes were missed); never when the channel is
/// closed, leaving the poll to the caller's timer.
async fn wake_for(wakes: &mut broadcast::Receiver<tasktable_store::Wake>, queue: &str) {
    loop {
        match wakes.recv().await {
            Ok(wake) if wake.queue == queue => return,
            Ok(_) => {}
            Err(broadcast::error::RecvError::Lagged(_)) => return,
            Err(broadcast::error::RecvError::Closed) => std::future::pending().await,
        }
    }
}

/// Every lease call names its token and credential; the rest depends on the operation.
/// In a batched acknowledgement each call also names its `task` and `op`, which the path
/// names in a single call. It keeps which fields the body named, a `null` one too, so a
/// field of another operation is refused even when it is `null`, as the OpenAPI document
/// says (each operation's fields, nothing else).
#[derive(Debug)]
pub struct LeaseRequest {
    fields: LeaseFields,
    named: Vec<String>,
}

impl<'de> Deserialize<'de> for LeaseRequest {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let map = serde_json::Map::<String, Value>::deserialize(d)?;
        let named = map.keys().cloned().collect();
        // The inner error keeps the path of the field at fault (`lines[0]: ...`).
        let fields = serde_path_to_error::deserialize::<_, LeaseFields>(Value::Object(map))
            .map_err(serde::de::Error::custom)?;
        Ok(LeaseRequest { fields, named })
    }
}

impl std::ops::Deref for LeaseRequest {
    type Target = LeaseFields;
    fn deref(&self) -> &LeaseFields {
        &self.fields
    }
}

/// The fields of a [`LeaseRequest`].
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LeaseFields {
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub(crate) task: Option<TaskId>,
    #[serde(default)]
    pub(crate) op: Option<String>,
    #[serde(deserialize_with = "crate::whole::number")]
    token: i64,
    credential: String,
    /// The run of a multi-run task the lease is for, as the claim said.
    #[serde(default, deserialize_with = "crate::whole::optional")]
    run: Option<u32>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    lease_ms: Option<u64>,
    #[serde(default)]
    checkpoint: Option<Value>,
    #[serde(default)]
    progress: Option<Value>,
    #[serde(default)]
    result: Option<Value>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    retryable: Option<bool>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    retry_after_ms: Option<u64>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    delay_ms: Option<u64>,
    #[serde(default)]
    lines: Option<Vec<String>>,
}

/// The lease operations, by the name they have in paths, with the fields each accepts.
pub const LEASE_OPERATIONS: &[(&str, &[&str])] = &[
    ("renew", &["lease_ms"]),
    ("checkpoint", &["checkpoint", "progress"]),
    ("complete", &["result"]),
    ("fail", &["error", "retryable", "retry_after_ms"]),
    ("snooze", &["delay_ms"]),
    ("release", &[]),
    ("log", &["lines"]),
];

/// What one lease call asks for, checked.
#[derive(Debug, Clone)]
pub(crate) enum Call {
    Renew {
        lease_for: Duration,
    },
    Checkpoint {
        checkpoint: Option<Value>,
        progress: Option<Value>,
    },
    /// Ends the attempt as the handler's outcome says; `None` gives the task back unspent.
    Finish(Option<HandlerOutcome>),
    /// Appends lines to the task's log.
    Log {
        lines: Vec<String>,
    },
}

impl LeaseRequest {
    /// Checks the call as `op` on task `id`, refusing fields that do not belong to `op`
    /// (so a misplaced field is not ignored), into the lease it names and what it asks.
    pub(crate) fn into_call(self, id: TaskId, op: &str) -> ApiResult<(Lease, Call)> {
        let Some(&(_, allowed)) = LEASE_OPERATIONS.iter().find(|(name, _)| *name == op) else {
            let names: Vec<&str> = LEASE_OPERATIONS.iter().map(|(n, _)| *n).collect();
            return Err(ApiError::not_found(format!(
                "unknown lease operation {op:?}; operations are {}",
                names.join(", ")
            )));
        };
        self.only(op, allowed)?;
        let f = self.fields;
        let credential: LeaseCredential = f.credential.parse().map_err(|_| {
            ApiError::invalid(format!(
                "credential must be the {} hex digits the claim returned",
                LeaseCredential::HEX_LEN
            ))
        })?;
        // Runs are numbered from 1, and stored as 32-bit integers.
        if let Some(run) = f.run.filter(|r| *r == 0 || *r > i32::MAX as u32) {
            return Err(ApiError::invalid(format!(
                "run must be between 1 and {}, got {run}",
                i32::MAX
            )));
        }
        let lease = Lease {
            task_id: id,
            token: f.token,
            credential: Some(credential),
            run: f.run,
        };
        let call = match op {
            "renew" => Call::Renew {
                lease_for: lease_duration(f.lease_ms)?,
            },
            "checkpoint" => {
                if f.checkpoint.is_none() && f.progress.is_none() {
                    return Err(ApiError::invalid(
                        "checkpoint needs checkpoint, progress or both",
                    ));
                }
                Call::Checkpoint {
                    checkpoint: f.checkpoint,
                    progress: f.progress,
                }
            }
            "complete" => Call::Finish(Some(HandlerOutcome::Succeeded { result: f.result })),
            "fail" => {
                let message = f
                    .error
                    .filter(|m| !m.trim().is_empty())
                    .ok_or_else(|| ApiError::invalid("fail needs an error message"))?;
                let retry_after = bounded_delay("retry_after_ms", f.retry_after_ms)?;
                Call::Finish(Some(match (f.retryable.unwrap_or(true), retry_after) {
                    (true, retry_after) => HandlerOutcome::Error {
                        message,
                        retry_after,
                    },
                    (false, None) => HandlerOutcome::Failed { message },
                    (false, Some(_)) => {
                        return Err(ApiError::invalid(
                            "retry_after_ms applies only to a retryable failure",
                        ))
                    }
                }))
            }
            "snooze" => Call::Finish(Some(HandlerOutcome::Snooze {
                after: bounded_delay("delay_ms", f.delay_ms)?.unwrap_or_default(),
            })),
            "log" => {
                let lines = f.lines.unwrap_or_default();
                if lines.is_empty() || lines.len() > tasktable_store::MAX_LOG_LINES_PER_CALL {
                    return Err(ApiError::invalid(format!(
                        "log needs lines: 1 to {} strings",
                        tasktable_store::MAX_LOG_LINES_PER_CALL
                    )));
                }
                Call::Log { lines }
            }
            _ => Call::Finish(None),
        };
        Ok((lease, call))
    }

    fn only(&self, op: &str, allowed: &[&str]) -> ApiResult<()> {
        let of_some_operation = |name: &&String| {
            LEASE_OPERATIONS
                .iter()
                .any(|(_, fields)| fields.contains(&name.as_str()))
        };
        match self
            .named
            .iter()
            .filter(of_some_operation)
            .find(|name| !allowed.contains(&name.as_str()))
        {
            Some(name) => Err(ApiError::invalid(format!("{op} does not take {name}"))),
            None => Ok(()),
        }
    }
}
