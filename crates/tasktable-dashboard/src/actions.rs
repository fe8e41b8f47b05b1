//! What the forms on a task and on a queue do (a schedule's are in
//! [`crate::schedule_actions`]). Every change checks the session's role and its CSRF token
//! first; the outcome goes back to the page as a flash message, a database failure only as
//! a reference to the log ([`crate::failure`]).

use crate::failure;
use crate::links;
use crate::session::{csrf_ok, Session};
use crate::DashState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use chrono::{NaiveDateTime, TimeZone, Utc};
use std::collections::HashMap;
use tasktable_core::{Operation, TaskId};
use tasktable_store::{Change, QueuePauseParams, Target, UpdateParams};

/// Why a form was refused; answered as 403.
pub struct Refused(String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (StatusCode::FORBIDDEN, self.0).into_response()
    }
}

/// Refuses a form without the session's CSRF token, or a change by a read-only role.
pub fn check(
    session: &Session,
    form: &HashMap<String, String>,
    changes: bool,
) -> Result<(), Refused> {
    let token = form.get("csrf").map(String::as_str).unwrap_or_default();
    if !csrf_ok(session, token) {
        return Err(Refused(
            "refused: the form's CSRF token is missing or wrong; reload the page and try again"
                .to_owned(),
        ));
    }
    if changes && !session.can_act() {
        return Err(Refused(format!(
            "refused: role {} may not change tasks, queues, schedules or workers",
            session.principal.role
        )));
    }
    Ok(())
}

pub fn change_from(op: &str, form: &HashMap<String, String>) -> Result<Change, String> {
    let field = |name: &str| {
        form.get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .ok_or(format!("{name} is required"))
    };
    let Some(operation) = Operation::requested(op) else {
        return Err(format!("unknown operation {op:?}"));
    };
    Ok(match operation {
        Operation::Cancel => Change::Cancel,
        Operation::Retry => Change::Retry,
        Operation::Hold => Change::Hold,
        Operation::Release => Change::Release,
        Operation::Reschedule => {
            let raw = field("run_at")?;
            let naive = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S")
                .or_else(|_| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M"))
                .map_err(|_| format!("run_at {raw:?} is not a date and time"))?;
            Change::Reschedule {
                run_at: Utc.from_utc_datetime(&naive),
            }
        }
        Operation::SetPriority => Change::SetPriority {
            priority: field("priority")?
                .parse()
                .map_err(|_| "priority must be a whole number".to_owned())?,
        },
        Operation::SetMaxAttempts => Change::SetMaxAttempts {
            max_attempts: field("max_attempts")?
                .parse()
                .map_err(|_| "max attempts must be a positive whole number".to_owned())?,
        },
        Operation::SetTarget => Change::SetTarget {
            target: target_from(form)?,
        },
        // The payload is edited through the API or the CLI, not a form.
        Operation::EditPayload | Operation::Claim | Operation::Finish => {
            return Err(format!("unknown operation {op:?}"))
        }
    })
}

/// The target form: `runs_on` (`any`, `workers` or `groups`) and `names`, separated by
/// commas. The names are checked by the store, as the API's are.
fn target_from(form: &HashMap<String, String>) -> Result<tasktable_core::Target, String> {
    use tasktable_core::Target;
    let names: Vec<String> = form
        .get("names")
        .map(|n| {
            n.split(',')
                .map(str::trim)
                .filter(|n| !n.is_empty())
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default();
    match form.get("runs_on").map(String::as_str) {
        Some("any") => Ok(Target::Any),
        Some("workers") if !names.is_empty() => Ok(Target::Workers(names)),
        Some("groups") if !names.is_empty() => Ok(Target::Groups(names)),
        Some("workers" | "groups") => Err("name at least one worker or group".to_owned()),
        _ => Err("runs_on must be any, workers or groups".to_owned()),
    }
}

pub async fn task_action(
    State(state): State<DashState>,
    session: Session,
    Path((id, op)): Path<(TaskId, String)>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, true) {
        return refused.into_response();
    }
    let outcome = match change_from(&op, &form) {
        Ok(change) => state
            .app
            .store
            .task_update(UpdateParams {
                actor: session.actor(),
                target: Target::Id(id),
                change,
                now: None,
                action: None,
            })
            .await
            .map_err(|e| failure::message(&e)),
        Err(e) => Err(e),
    };
    let path = format!("/ui/tasks/{id}");
    let to = match outcome {
        Ok(_) => links::with_query(&path, &[("done", &format!("{op}: done"))]),
        Err(e) => links::with_query(&path, &[("error", &e)]),
    };
    Redirect::to(&to).into_response()
}

/// Pauses or resumes the queue named in the form's `queue` field (a name never goes in
/// the path: see [`crate::links`]).
pub async fn queue_action(
    State(state): State<DashState>,
    session: Session,
    Path(op): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, true) {
        return refused.into_response();
    }
    let paused = match op.as_str() {
        "pause" => true,
        "resume" => false,
        _ => return (StatusCode::NOT_FOUND, "unknown queue operation").into_response(),
    };
    let Some(name) = form.get("queue").filter(|q| !q.trim().is_empty()) else {
        return (StatusCode::UNPROCESSABLE_ENTITY, "queue is required").into_response();
    };
    let to = match state
        .app
        .store
        .queue_set_paused(QueuePauseParams {
            actor: session.actor(),
            queue: name.clone(),
            paused,
        })
        .await
    {
        Ok(()) => links::with_query("/ui", &[("done", &format!("queue {name}: {op}d"))]),
        Err(e) => links::with_query("/ui", &[("error", &failure::message(&e))]),
    };
    Redirect::to(&to).into_response()
}
