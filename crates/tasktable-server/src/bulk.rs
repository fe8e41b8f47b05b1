//! `POST /api/v1/tasks/bulk/{op}`: an operator's change to every task a filter matches.
//!
//! In one call, or a step at a time: with `limit`, a call changes at most that many of
//! the tasks the change applies to, newest first, and answers `next`, the `after` of the
//! next step (`null` once none is left), so a client can show progress; with `dry_run`,
//! it changes nothing and answers how many tasks the change applies to now. A change is
//! one operator action, one row of the audit: the answer names its `action`, which the
//! later steps of the same change send back.

use crate::error::{ApiError, ApiResult};
use crate::extract::{Caller, Path, RawBody};
use crate::tasks::{object_body, parse_change};
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use tasktable_core::TaskId;
use tasktable_store::bulk::{changeable, check_action_key, new_action_key};
use tasktable_store::{CountParams, ListParams, Target, TaskFilter, UpdateParams, MAX_PAGE_SIZE};

/// How much of the change one call makes.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
struct Step {
    /// Change nothing; count the tasks the change applies to.
    dry_run: bool,
    /// Change at most this many tasks (1 to [`MAX_PAGE_SIZE`]).
    limit: Option<u32>,
    /// Only tasks with lower ids: the `next` of the step before.
    after: Option<TaskId>,
    /// The operator action a step is part of: the `action` the first step answered, so
    /// that every step of one change is one row of the audit.
    action: Option<String>,
}

impl Step {
    /// Takes the step's fields out of `body`, leaving the filter and the change's values.
    fn take(body: &mut Value) -> ApiResult<Step> {
        let mut fields = serde_json::Map::new();
        if let Some(object) = body.as_object_mut() {
            for name in ["dry_run", "limit", "after", "action"] {
                match object.remove(name) {
                    Some(Value::Null) => {
                        return Err(ApiError::invalid(format!(
                            "{name} is null; leave it out instead"
                        )))
                    }
                    Some(v) => {
                        fields.insert(name.into(), v);
                    }
                    None => {}
                }
            }
        }
        // Read as JSON means them, like every integer of a body (2.0 is 2).
        for name in ["limit", "after"] {
            if let Some(value) = fields.get_mut(name) {
                let whole: Option<i64> = crate::whole::optional(value.take())
                    .map_err(|e| ApiError::invalid(format!("{name}: {e}")))?;
                *value = json!(whole);
            }
        }
        let step: Step = serde_json::from_value(Value::Object(fields))
            .map_err(|e| ApiError::invalid(format!("bad bulk step: {e}")))?;
        if step.limit.is_some_and(|n| n == 0 || n > MAX_PAGE_SIZE) {
            return Err(ApiError::invalid(format!(
                "limit must be between 1 and {MAX_PAGE_SIZE}"
            )));
        }
        if step.after.is_some() && step.limit.is_none() {
            return Err(ApiError::invalid(
                "after names where a step starts; give it with limit",
            ));
        }
        if step.dry_run && (step.limit.is_some() || step.after.is_some() || step.action.is_some()) {
            return Err(ApiError::invalid(
                "dry_run counts every task the change applies to; it takes no limit, after or action",
            ));
        }
        if let Some(key) = &step.action {
            check_action_key(key)?;
        }
        Ok(step)
    }
}

/// The filter of a bulk body, refused when it would match every task.
fn filter_of(body: &mut Value) -> ApiResult<TaskFilter> {
    let mut filter = body
        .as_object_mut()
        .and_then(|o| o.remove("filter"))
        .ok_or_else(|| ApiError::invalid("a bulk change needs a filter: {\"filter\": {...}}"))?;
    if let Some(id) = filter.get_mut("schedule_id") {
        // Read as JSON means it, like every integer of a body (2.0 is 2).
        let whole: Option<i64> = crate::whole::optional(id.take())
            .map_err(|e| ApiError::invalid(format!("bad filter: schedule_id: {e}")))?;
        *id = json!(whole);
    }
    let filter: TaskFilter = serde_json::from_value(filter)
        .map_err(|e| ApiError::invalid(format!("bad filter: {e}")))?;
    if filter == TaskFilter::default() {
        return Err(ApiError::invalid(
            "the filter is empty and would match every task; name at least one field (for example {\"states\": [\"failed\"]})",
        ));
    }
    Ok(filter)
}

pub async fn bulk(
    State(state): State<AppState>,
    Caller(actor): Caller,
    Path(op): Path<String>,
    RawBody(bytes): RawBody,
) -> ApiResult<Response> {
    let mut body = object_body(&bytes)?;
    let filter = filter_of(&mut body)?;
    let step = Step::take(&mut body)?;
    let change = parse_change(&state, &op, body).await?;
    let applies = changeable(&filter, change.operation());
    // The action's key: the one a step names, or a new one the answer gives back.
    let action = step.action.unwrap_or_else(new_action_key);
    // The change to the tasks a filter matches, as part of this action.
    let update = |filter: TaskFilter| {
        state.store.task_update(UpdateParams {
            target: Target::Filter(filter),
            change: change.clone(),
            actor: actor.clone(),
            now: None,
            action: Some(action.clone()),
        })
    };
    if step.dry_run || step.limit.is_some() {
        // A dry run, or a step that reaches no task, still refuses what the change would:
        // the store checks the change (and the key) on a window of no ids.
        let nothing = TaskFilter {
            id_below: Some(TaskId::MIN),
            ..filter.clone()
        };
        update(nothing).await?;
    }
    if step.dry_run {
        let matching = match applies {
            Some(filter) => {
                state
                    .store
                    .task_count(CountParams {
                        filter,
                        cap: u64::MAX,
                    })
                    .await?
            }
            None => 0,
        };
        return Ok(Json(json!({ "changed": 0, "matching": matching })).into_response());
    }
    let Some(limit) = step.limit else {
        let changed = update(filter).await?;
        return Ok(Json(json!({ "changed": changed, "action": action })).into_response());
    };
    // A step: the next `limit` tasks the change applies to, newest first, changed as one
    // window of ids (each task still checked under its lock, as in one call).
    let Some(applies) = applies else {
        return Ok(Json(json!({ "changed": 0, "next": null, "action": action })).into_response());
    };
    let page = state
        .store
        .task_list(ListParams {
            filter: applies,
            after: step.after,
            limit,
            light: true,
        })
        .await?;
    let Some(lowest) = page.tasks.last().map(|t| t.id) else {
        return Ok(Json(json!({ "changed": 0, "next": null, "action": action })).into_response());
    };
    let window = TaskFilter {
        id_at_least: Some(lowest),
        id_below: step.after,
        ..filter
    };
    let changed = update(window).await?;
    let next = page.next.map(|_| lowest);
    Ok(Json(json!({ "changed": changed, "next": next, "action": action })).into_response())
}
