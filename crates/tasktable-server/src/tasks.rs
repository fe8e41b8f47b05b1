//! Submitting, finding and changing tasks.

use crate::auth::Principal;
use crate::detail::TaskDetail;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, Caller, Path, Query, RawBody};
use crate::wire::{
    AttemptView, RunView, SubmitBatch, SubmitTask, SubmittedView, TargetSpec, TaskView, WaitingView,
};
use crate::AppState;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use chrono::{DateTime, Utc};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::{json, Value};
use tasktable_core::trace::TraceParent;
use tasktable_core::{NewTask, Operation, Task, TaskId, TaskState};
use tasktable_runtime::trace;
use tasktable_store::{
    Change, ListParams, SubmitParams, Submitted, Target, TaskFilter, UpdateParams,
};
use tracing::{Instrument, Span};

pub async fn submit(
    State(state): State<AppState>,
    Caller(actor): Caller,
    headers: HeaderMap,
    Body(task): Body<SubmitTask>,
) -> ApiResult<Response> {
    let mut task = task.into_new_task().map_err(ApiError::invalid)?;
    let (span, traceparent) = submit_trace(&headers, Some(&task.kind));
    task.traceparent = traceparent;
    let submitted = submit_in(&state, vec![task.created_by(actor)], span).await?;
    let first = submitted[0];
    let task = state
        .store
        .task_get(first.id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("task {} vanished", first.id)))?;
    let status = if first.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = json!({"id": first.id, "created": first.created, "task": TaskView::from(task)});
    Ok((status, Json(body)).into_response())
}

pub async fn submit_batch(
    State(state): State<AppState>,
    Caller(actor): Caller,
    headers: HeaderMap,
    Body(batch): Body<SubmitBatch>,
) -> ApiResult<Response> {
    if batch.tasks.is_empty() {
        return Err(ApiError::invalid("tasks must hold at least one task"));
    }
    if batch.tasks.len() > state.limits.max_batch {
        return Err(ApiError::invalid(format!(
            "a batch holds at most {} tasks, got {}; split it",
            state.limits.max_batch,
            batch.tasks.len()
        )));
    }
    let mut tasks = batch
        .tasks
        .into_iter()
        .map(|t| Ok(t.into_new_task()?.created_by(actor.clone())))
        .collect::<Result<Vec<_>, String>>()
        .map_err(ApiError::invalid)?;
    let (span, traceparent) = submit_trace(&headers, None);
    for task in &mut tasks {
        task.traceparent.clone_from(&traceparent);
    }
    let submitted = submit_in(&state, tasks, span).await?;
    let status = if submitted.iter().any(|s| s.created) {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let views: Vec<SubmittedView> = submitted
        .into_iter()
        .map(|s| SubmittedView {
            id: s.id,
            created: s.created,
        })
        .collect();
    Ok((status, Json(json!({ "tasks": views }))).into_response())
}

/// The span of a submit and the trace its tasks continue: the submit's span when this
/// process exports traces (a child of the caller's), else the caller's own `traceparent`
/// as it came, so workers in other processes still continue the caller's trace. A
/// request with no `traceparent`, a malformed one or several has none (W3C: the receiver
/// ignores them).
fn submit_trace(headers: &HeaderMap, kind: Option<&str>) -> (Span, Option<TraceParent>) {
    let mut values = headers.get_all("traceparent").iter();
    let caller = match (values.next(), values.next()) {
        (Some(value), None) => value.to_str().ok().and_then(TraceParent::parse),
        _ => None,
    };
    let span = trace::submit_span(kind, caller.as_ref());
    let traceparent = trace::traceparent_of(&span).or(caller);
    (span, traceparent)
}

/// Submits `tasks` in `span`, and records on it what came of the submit.
async fn submit_in(state: &AppState, tasks: Vec<NewTask>, span: Span) -> ApiResult<Vec<Submitted>> {
    let submitted = state
        .store
        .task_submit(SubmitParams { tasks, now: None })
        .instrument(span.clone())
        .await;
    let ids: Vec<i64> = submitted.iter().flatten().map(|s| s.id).collect();
    trace::submit_ended(
        &span,
        submitted.as_ref().map(|_| ids.as_slice()).map_err(|_| ()),
    );
    Ok(submitted?)
}

/// `GET /api/v1/tasks` parameters; `state` is a comma-separated list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    queue: Option<String>,
    kind: Option<String>,
    state: Option<String>,
    key: Option<String>,
    idempotency_key: Option<String>,
    error: Option<String>,
    created_after: Option<DateTime<Utc>>,
    created_before: Option<DateTime<Utc>>,
    updated_after: Option<DateTime<Utc>>,
    updated_before: Option<DateTime<Utc>>,
    schedule: Option<i64>,
    after: Option<TaskId>,
    limit: Option<u32>,
}

/// Default page size.
const DEFAULT_LIMIT: u32 = 50;

pub fn parse_states(list: &str) -> ApiResult<Vec<TaskState>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            s.parse::<TaskState>().map_err(|_| {
                let names: Vec<&str> = TaskState::ALL.iter().map(|s| s.as_str()).collect();
                ApiError::bad_request(
                    "invalid_query",
                    format!("unknown state {s:?}; states are {}", names.join(", ")),
                )
            })
        })
        .collect()
}

/// A task as `caller` may see it.
pub(crate) fn view(state: &AppState, caller: &Principal, mut task: Task) -> TaskView {
    task.payload = state.payload_for(caller.role, &task.kind, task.payload);
    TaskView::from(task)
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    let filter = TaskFilter {
        queue: q.queue,
        kind: q.kind,
        states: q
            .state
            .as_deref()
            .map(parse_states)
            .transpose()?
            .unwrap_or_default(),
        key: q.key,
        idempotency_key: q.idempotency_key,
        created_after: q.created_after,
        created_before: q.created_before,
        updated_after: q.updated_after,
        updated_before: q.updated_before,
        error_contains: q.error,
        schedule_id: q.schedule,
        ..TaskFilter::default()
    };
    let page = state
        .store
        .task_list(ListParams {
            filter,
            after: q.after,
            limit: q.limit.unwrap_or(DEFAULT_LIMIT),
            light: false,
        })
        .await?;
    let tasks: Vec<TaskView> = page
        .tasks
        .into_iter()
        .map(|t| view(&state, &caller, t))
        .collect();
    Ok(Json(json!({"tasks": tasks, "next": page.next})).into_response())
}

pub async fn show(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Path(id): Path<TaskId>,
) -> ApiResult<Response> {
    let detail = TaskDetail::read(&state, caller.role, id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("task {id} not found")))?;
    let runs: Vec<RunView> = detail.runs.into_iter().map(RunView::from).collect();
    let attempts: Vec<AttemptView> = detail.attempts.into_iter().map(AttemptView::from).collect();
    let waiting: Vec<WaitingView> = detail.waiting.iter().map(WaitingView::from).collect();
    let task = TaskView::from(detail.task);
    let body = json!({"task": task, "attempts": attempts, "runs": runs,
        "timeline": detail.timeline, "waiting": waiting});
    Ok(Json(body).into_response())
}

/// The operations, by the name they have in paths (core's `Operation::request_name`).
pub fn operations() -> Vec<&'static str> {
    Operation::OPERATOR
        .iter()
        .filter_map(|op| op.request_name())
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Reschedule {
    run_at: Option<DateTime<Utc>>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    delay_ms: Option<u64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetPriority {
    #[serde(deserialize_with = "crate::whole::number")]
    priority: i32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetMaxAttempts {
    #[serde(deserialize_with = "crate::whole::number")]
    max_attempts: u32,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct EditPayload {
    payload: Value,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SetTarget {
    /// Required, and `null` for any worker.
    target: Option<TargetSpec>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Nothing {}

fn values<T: DeserializeOwned>(op: &str, body: Value) -> ApiResult<T> {
    serde_json::from_value(body).map_err(|e| ApiError::invalid(format!("bad body for {op}: {e}")))
}

/// The change an operation names, with its values from `body` (an object; `{}` when the
/// request had no body).
pub(crate) async fn parse_change(state: &AppState, op: &str, body: Value) -> ApiResult<Change> {
    let Some(operation) = Operation::requested(op) else {
        return Err(ApiError::not_found(format!(
            "unknown operation {op:?}; operations are {}",
            operations().join(", ")
        )));
    };
    Ok(match operation {
        Operation::Cancel | Operation::Retry | Operation::Hold | Operation::Release => {
            let Nothing {} = values(op, body)?;
            match operation {
                Operation::Cancel => Change::Cancel,
                Operation::Retry => Change::Retry,
                Operation::Hold => Change::Hold,
                _ => Change::Release,
            }
        }
        Operation::Reschedule => {
            let r: Reschedule = values(op, body)?;
            let run_at = match (r.run_at, r.delay_ms) {
                (Some(at), None) => at,
                (None, Some(ms)) => {
                    let delay =
                        chrono::Duration::try_milliseconds(i64::try_from(ms).unwrap_or(i64::MAX))
                            .filter(|d| *d <= chrono::Duration::days(3650))
                            .ok_or_else(|| {
                                ApiError::invalid("delay_ms must be at most 10 years")
                            })?;
                    state.store.db_now().await? + delay
                }
                _ => {
                    return Err(ApiError::invalid(
                        "reschedule needs exactly one of run_at and delay_ms",
                    ))
                }
            };
            Change::Reschedule { run_at }
        }
        Operation::SetPriority => Change::SetPriority {
            priority: values::<SetPriority>(op, body)?.priority,
        },
        Operation::SetMaxAttempts => Change::SetMaxAttempts {
            max_attempts: values::<SetMaxAttempts>(op, body)?.max_attempts,
        },
        Operation::EditPayload => Change::EditPayload {
            payload: values::<EditPayload>(op, body)?.payload,
        },
        Operation::SetTarget => {
            if body.get("target").is_none() {
                return Err(ApiError::invalid(
                    "bad body for set-target: missing field `target` (null for any worker)",
                ));
            }
            Change::SetTarget {
                target: TargetSpec::into_target(values::<SetTarget>(op, body)?.target),
            }
        }
        Operation::Claim | Operation::Finish => {
            unreachable!("no request names a worker's operation")
        }
    })
}

/// A body that may be empty (for operations without values); otherwise a JSON object.
pub(crate) fn object_body(bytes: &Bytes) -> ApiResult<Value> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Ok(json!({}));
    }
    let value: Value = serde_json::from_slice(bytes).map_err(|e| {
        ApiError::bad_request(
            "malformed_json",
            format!("request body is not valid JSON: {e}"),
        )
    })?;
    if !value.is_object() {
        return Err(ApiError::invalid("request body must be a JSON object"));
    }
    Ok(value)
}

pub async fn change(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path((id, op)): Path<(TaskId, String)>,
    RawBody(bytes): RawBody,
) -> ApiResult<Response> {
    let change = parse_change(&state, &op, object_body(&bytes)?).await?;
    state
        .store
        .task_update(UpdateParams {
            target: Target::Id(id),
            change,
            actor,
            now: None,
            action: None,
        })
        .await?;
    let task = state
        .store
        .task_get(id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("task {id} not found")))?;
    Ok(Json(json!({"task": TaskView::from(task)})).into_response())
}
