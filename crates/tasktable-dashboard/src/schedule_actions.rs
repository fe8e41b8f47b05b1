//! What the forms on a schedule's page do: enable, disable, fire now. As with a task's
//! forms ([`crate::actions`]), the session's CSRF token and role are checked first, and
//! the outcome goes back as a flash message.

use crate::actions::check;
use crate::failure;
use crate::links;
use crate::session::Session;
use crate::DashState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use std::collections::HashMap;
use tasktable_core::schedule::ScheduleEdit;
use tasktable_store::{EditScheduleParams, FireNowParams, ScheduleRef, StoreError};

/// Where a failed form goes: the schedule's page, or the list when the schedule is gone
/// (its page would be a 404 without the message).
fn back_with_error(id: i64, err: &StoreError) -> String {
    let path = match err {
        StoreError::ScheduleNotFound(_) => "/ui/schedules".to_owned(),
        _ => format!("/ui/schedules/{id}"),
    };
    links::with_query(&path, &[("error", &failure::message(err))])
}

pub async fn schedule_action(
    State(state): State<DashState>,
    session: Session,
    Path((id, op)): Path<(i64, String)>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, true) {
        return refused.into_response();
    }
    let schedule = ScheduleRef::Id(id);
    let enabled = match op.as_str() {
        "enable" => true,
        "disable" => false,
        "fire" => {
            let fired = state
                .app
                .store
                .schedule_fire_now(FireNowParams {
                    actor: session.actor(),
                    schedule,
                    now: None,
                })
                .await;
            let to = match fired.map(|f| f.tasks.first().copied()) {
                Ok(Some(task)) => {
                    let done = if task.created {
                        "fired now by its schedule"
                    } else {
                        "fire: this slot's task existed already"
                    };
                    links::with_query(&format!("/ui/tasks/{}", task.task_id), &[("done", done)])
                }
                Ok(None) => links::with_query(
                    &format!("/ui/schedules/{id}"),
                    &[("error", "fire: no task was fired")],
                ),
                Err(e) => back_with_error(id, &e),
            };
            return Redirect::to(&to).into_response();
        }
        _ => return (StatusCode::NOT_FOUND, "unknown schedule operation").into_response(),
    };
    let edited = state
        .app
        .store
        .schedule_edit(EditScheduleParams {
            actor: session.actor(),
            schedule,
            edit: ScheduleEdit {
                enabled: Some(enabled),
                ..ScheduleEdit::default()
            },
            now: None,
        })
        .await;
    let to = match edited {
        Ok(_) => links::with_query(
            &format!("/ui/schedules/{id}"),
            &[("done", &format!("{op}d"))],
        ),
        Err(e) => back_with_error(id, &e),
    };
    Redirect::to(&to).into_response()
}
