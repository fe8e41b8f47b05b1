//! Batches (docs/batches.md): create one, list them, show one with its failed items, edit
//! its budget or data, and start, pause, stop or resume it. A batch is a task with a
//! `batch` object (created here or by `POST /api/v1/tasks`); these calls find it by its
//! task's id.

use crate::auth::Principal;
use crate::batch_wire::{BatchEdit, BatchView, ItemFailureView};
use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, Caller, NoValues, Path, Query};
use crate::wire::SubmitTask;
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde::Deserialize;
use serde_json::json;
use tasktable_core::batch::BatchAction;
use tasktable_core::TaskId;
use tasktable_store::{
    Batch, BatchControlParams, BatchListParams, BatchUpdateParams, SubmitParams, MAX_BATCH_LIST,
};

/// The batch operations, by the name they have in paths.
pub const BATCH_OPERATIONS: &[&str] = &["start", "pause", "stop", "resume"];

fn view(state: &AppState, caller: &Principal, b: Batch) -> BatchView {
    let task = crate::tasks::view(state, caller, b.task.clone());
    BatchView::new(b, task)
}

fn not_found(id: TaskId) -> ApiError {
    ApiError::not_found(format!("batch {id} not found"))
}

/// `POST /api/v1/batches`: a task with a `batch` object (the same body as a task's
/// submit), answered with the batch.
pub async fn create(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Caller(actor): Caller,
    Body(mut task): Body<SubmitTask>,
) -> ApiResult<Response> {
    // The route says it is a batch: `batch` left out or null is a batch of defaults.
    task.batch.get_or_insert_with(Default::default);
    let submitted = state
        .store
        .task_submit(SubmitParams {
            tasks: vec![task
                .into_new_task()
                .map_err(ApiError::invalid)?
                .created_by(actor)],
            now: None,
        })
        .await?[0];
    let batch = state.store.batch_get(submitted.id).await?.ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "batch_refused",
            format!(
                "the idempotency key names task {}, which is no batch",
                submitted.id
            ),
        )
    })?;
    let status = if submitted.created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let body = json!({
        "id": submitted.id,
        "created": submitted.created,
        "batch": view(&state, &caller, batch),
    });
    Ok((status, Json(body)).into_response())
}

/// What `GET /api/v1/batches` may be asked.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    #[serde(default)]
    limit: Option<u32>,
    /// Batches older than this task id (the `next` of the previous page).
    #[serde(default)]
    before: Option<TaskId>,
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Query(q): Query<ListQuery>,
) -> ApiResult<Response> {
    let limit = q.limit.unwrap_or(100);
    if limit == 0 || limit > MAX_BATCH_LIST {
        return Err(ApiError::bad_request(
            "invalid_query",
            format!("limit is 1 to {MAX_BATCH_LIST}, not {limit}"),
        ));
    }
    let batches = state
        .store
        .batch_list(BatchListParams {
            limit,
            before: q.before,
        })
        .await?;
    let next = (batches.len() == limit as usize)
        .then(|| batches.last().map(|b| b.task.id))
        .flatten();
    let batches: Vec<BatchView> = batches
        .into_iter()
        .map(|b| view(&state, &caller, b))
        .collect();
    Ok(Json(json!({ "batches": batches, "next": next })).into_response())
}

pub async fn show(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Path(id): Path<TaskId>,
) -> ApiResult<Response> {
    let batch = state
        .store
        .batch_get(id)
        .await?
        .ok_or_else(|| not_found(id))?;
    let failures: Vec<ItemFailureView> = state
        .store
        .batch_failures(id)
        .await?
        .into_iter()
        .map(ItemFailureView::from)
        .collect();
    let batch = view(&state, &caller, batch);
    Ok(Json(json!({ "batch": batch, "failures": failures })).into_response())
}

pub async fn edit(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Extension(caller): Extension<Principal>,
    Path(id): Path<TaskId>,
    Body(edit): Body<BatchEdit>,
) -> ApiResult<Response> {
    if edit.error_budget.is_none() && edit.data.is_none() {
        return Err(ApiError::invalid(
            "give error_budget, data, or both".to_owned(),
        ));
    }
    if edit.data.as_ref().is_some_and(|d| d.is_null()) {
        return Err(ApiError::invalid("data is any JSON but null".to_owned()));
    }
    let batch = state
        .store
        .batch_update(BatchUpdateParams {
            id,
            error_budget: edit.error_budget,
            data: edit.data,
            actor,
            now: None,
        })
        .await
        .map_err(|e| match e {
            tasktable_store::StoreError::NotFound(_) => not_found(id),
            e => e.into(),
        })?;
    Ok(Json(json!({ "batch": view(&state, &caller, batch) })).into_response())
}

pub async fn operate(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Extension(caller): Extension<Principal>,
    Path((id, op)): Path<(TaskId, String)>,
    NoValues: NoValues,
) -> ApiResult<Response> {
    let action: BatchAction = op.parse().map_err(|_| {
        ApiError::not_found(format!(
            "unknown batch operation {op:?}; operations are {}",
            BATCH_OPERATIONS.join(", ")
        ))
    })?;
    let batch = state
        .store
        .batch_control(BatchControlParams {
            id,
            action,
            actor,
            now: None,
        })
        .await
        .map_err(|e| match e {
            tasktable_store::StoreError::NotFound(_) => not_found(id),
            e => e.into(),
        })?;
    Ok(Json(json!({ "batch": view(&state, &caller, batch) })).into_response())
}
