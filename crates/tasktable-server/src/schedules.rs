//! Recurring schedules: list, create, show (with the next fire times and the last tasks
//! fired), edit, delete, enable, disable and fire now. A path names a schedule by id or
//! by name (a name is never a number).

use crate::auth::Principal;
use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, Caller, NoValues, Path};
use crate::schedule_wire::{CreateBody, EditBody, ScheduleView};
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};
use tasktable_core::schedule::ScheduleEdit;
use tasktable_store::{
    CreateScheduleParams, DeleteScheduleParams, EditScheduleParams, FireNowParams, ListParams,
    OnExisting, Schedule, ScheduleRef, TaskFilter,
};

/// How many fire times a schedule's view lists.
pub const UPCOMING: usize = 5;

/// How many of its last tasks `GET /api/v1/schedules/{schedule}` lists.
pub const RECENT_TASKS: u32 = 10;

/// The schedule operations, by the name they have in paths.
pub const SCHEDULE_OPERATIONS: &[&str] = &["enable", "disable", "fire"];

/// A schedule as `caller` may see it: a reader gets the template's secret payload fields
/// replaced, as on tasks.
fn view(state: &AppState, caller: &Principal, mut s: Schedule) -> Value {
    let template = &mut s.spec.template;
    template.payload = state.payload_for(
        caller.role,
        &template.kind,
        std::mem::take(&mut template.payload),
    );
    serde_json::to_value(ScheduleView::new(s, UPCOMING)).expect("a schedule serializes")
}

/// The schedule a path names: an id when it is a number, else a name.
pub(crate) fn schedule_ref(text: &str) -> ApiResult<ScheduleRef> {
    if tasktable_core::schedule::is_numeric(text) {
        return text.parse::<i64>().map(ScheduleRef::Id).map_err(|_| {
            ApiError::bad_request(
                "invalid_path",
                format!("{text:?} is neither a schedule id (a 64-bit integer) nor a name"),
            )
        });
    }
    crate::leases::check_name("schedule name", text)
        .map_err(|e| ApiError::bad_request("invalid_path", e.message))?;
    Ok(ScheduleRef::Name(text.to_owned()))
}

async fn found(state: &AppState, r: ScheduleRef) -> ApiResult<Schedule> {
    state
        .store
        .schedule_get(r.clone())
        .await?
        .ok_or_else(|| ApiError::not_found(format!("schedule {r} not found")))
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
) -> ApiResult<Response> {
    let all: Vec<Value> = state
        .store
        .schedule_list()
        .await?
        .into_iter()
        .map(|s| view(&state, &caller, s))
        .collect();
    Ok(Json(json!({ "schedules": all })).into_response())
}

pub async fn create(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Extension(caller): Extension<Principal>,
    Body(body): Body<CreateBody>,
) -> ApiResult<Response> {
    let saved = state
        .store
        .schedule_create(CreateScheduleParams {
            spec: body.into(),
            on_existing: OnExisting::Refuse,
            actor,
            now: None,
        })
        .await?;
    let body = json!({"schedule": view(&state, &caller, saved)});
    Ok((StatusCode::CREATED, Json(body)).into_response())
}

pub async fn show(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let s = found(&state, schedule_ref(&name)?).await?;
    let page = state
        .store
        .task_list(ListParams {
            filter: TaskFilter::default().schedule(s.id),
            after: None,
            limit: RECENT_TASKS,
            light: true,
        })
        .await?;
    let recent: Vec<Value> = page
        .tasks
        .iter()
        .map(|t| json!({"id": t.id, "state": t.state, "slot_at": t.slot_at, "attempt": t.attempt, "finished_at": t.finished_at}))
        .collect();
    let body = json!({"schedule": view(&state, &caller, s), "recent_tasks": recent});
    Ok(Json(body).into_response())
}

pub async fn edit(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Extension(caller): Extension<Principal>,
    Path(name): Path<String>,
    Body(edit): Body<EditBody>,
) -> ApiResult<Response> {
    let saved = state
        .store
        .schedule_edit(EditScheduleParams {
            schedule: schedule_ref(&name)?,
            edit: edit.into(),
            actor,
            now: None,
        })
        .await?;
    Ok(Json(json!({"schedule": view(&state, &caller, saved)})).into_response())
}

pub async fn delete(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(name): Path<String>,
) -> ApiResult<Response> {
    let schedule = schedule_ref(&name)?;
    state
        .store
        .schedule_delete(DeleteScheduleParams { schedule, actor })
        .await?;
    Ok(Json(json!({ "deleted": true })).into_response())
}

pub async fn operate(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Extension(caller): Extension<Principal>,
    Path((name, op)): Path<(String, String)>,
    NoValues: NoValues,
) -> ApiResult<Response> {
    let enabled = match op.as_str() {
        "enable" => true,
        "disable" => false,
        "fire" => {
            let fired = state
                .store
                .schedule_fire_now(FireNowParams {
                    schedule: schedule_ref(&name)?,
                    actor,
                    now: None,
                })
                .await?;
            let task = fired.tasks[0];
            let body =
                json!({"task_id": task.task_id, "slot_at": task.slot_at, "created": task.created});
            return Ok((StatusCode::CREATED, Json(body)).into_response());
        }
        other => {
            return Err(ApiError::not_found(format!(
                "unknown schedule operation {other:?}; operations are {}",
                SCHEDULE_OPERATIONS.join(", ")
            )))
        }
    };
    let saved = state
        .store
        .schedule_edit(EditScheduleParams {
            schedule: schedule_ref(&name)?,
            edit: ScheduleEdit {
                enabled: Some(enabled),
                ..Default::default()
            },
            actor,
            now: None,
        })
        .await?;
    Ok(Json(json!({"schedule": view(&state, &caller, saved)})).into_response())
}
