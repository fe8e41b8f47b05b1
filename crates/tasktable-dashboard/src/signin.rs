//! What the forms do: sign in and out, act on a task, on every task a filter matches, and
//! on a queue. Every change checks the session's role and its CSRF token first.

use crate::layout::page;
use crate::pages::{urlencode, TaskQuery};
use crate::session::{cookie_cleared, cookie_for, csrf_ok, Session};
use crate::DashState;
use axum::extract::{Path, Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use chrono::{NaiveDateTime, TimeZone, Utc};
use maud::html;
use serde::Deserialize;
use std::collections::HashMap;
use tasktable_core::TaskId;
use tasktable_server::{Principal, Role};
use tasktable_store::{Change, ListParams, QueuePauseParams, Target, UpdateParams};

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

pub async fn login_page(State(state): State<DashState>) -> Response {
    if state.app.tokens.is_empty() {
        // Authentication is off (loopback only): everyone is an admin.
        let session = state.sessions.create(Principal {
            name: "anonymous".into(),
            role: Role::Admin,
        });
        return (
            [(header::SET_COOKIE, cookie_for(&session))],
            Redirect::to("/ui"),
        )
            .into_response();
    }
    login_form(None).into_response()
}

fn login_form(error: Option<&str>) -> maud::Markup {
    let body = html! {
        h1 { "Sign in" }
        @if let Some(e) = error { div.flash.error { (e) } }
        form method="post" action="/ui/login" {
            p { label { "API token " input type="password" name="token" autofocus size="40"; } }
            p { button type="submit" { "Sign in" } }
        }
        p.muted { "Use a token with role reader, operator or admin (" code { "tasktable token new" } ")." }
    };
    page("Sign in", "", None, false, body)
}

pub async fn login(State(state): State<DashState>, Form(form): Form<LoginForm>) -> Response {
    match state.app.tokens.authenticate(form.token.trim()) {
        Some(p) if p.role != Role::Worker => {
            let session = state.sessions.create(p);
            (
                [(header::SET_COOKIE, cookie_for(&session))],
                Redirect::to("/ui"),
            )
                .into_response()
        }
        Some(_) => (
            StatusCode::FORBIDDEN,
            login_form(Some("A worker token cannot sign in to the dashboard.")),
        )
            .into_response(),
        None => (StatusCode::UNAUTHORIZED, login_form(Some("Unknown token."))).into_response(),
    }
}

pub async fn logout(
    State(state): State<DashState>,
    session: Session,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, false) {
        return refused.into_response();
    }
    state.sessions.remove(&session.id);
    (
        [(header::SET_COOKIE, cookie_cleared())],
        Redirect::to("/ui/login"),
    )
        .into_response()
}

/// Why a form was refused; answered as 403.
struct Refused(String);

impl IntoResponse for Refused {
    fn into_response(self) -> Response {
        (StatusCode::FORBIDDEN, self.0).into_response()
    }
}

/// Refuses a form without the session's CSRF token, or a change by a read-only role.
fn check(session: &Session, form: &HashMap<String, String>, changes: bool) -> Result<(), Refused> {
    let token = form.get("csrf").map(String::as_str).unwrap_or_default();
    if !csrf_ok(session, token) {
        return Err(Refused(
            "refused: the form's CSRF token is missing or wrong; reload the page and try again"
                .to_owned(),
        ));
    }
    if changes && !session.can_act() {
        return Err(Refused(format!(
            "refused: role {} may not change tasks",
            session.principal.role
        )));
    }
    Ok(())
}

fn change_from(op: &str, form: &HashMap<String, String>) -> Result<Change, String> {
    let field = |name: &str| {
        form.get(name)
            .map(|v| v.trim())
            .filter(|v| !v.is_empty())
            .ok_or(format!("{name} is required"))
    };
    Ok(match op {
        "cancel" => Change::Cancel,
        "retry" => Change::Retry,
        "hold" => Change::Hold,
        "release" => Change::Release,
        "reschedule" => {
            let raw = field("run_at")?;
            let naive = NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M:%S")
                .or_else(|_| NaiveDateTime::parse_from_str(raw, "%Y-%m-%dT%H:%M"))
                .map_err(|_| format!("run_at {raw:?} is not a date and time"))?;
            Change::Reschedule {
                run_at: Utc.from_utc_datetime(&naive),
            }
        }
        "set-priority" => Change::SetPriority {
            priority: field("priority")?
                .parse()
                .map_err(|_| "priority must be a whole number".to_owned())?,
        },
        "set-max-attempts" => Change::SetMaxAttempts {
            max_attempts: field("max_attempts")?
                .parse()
                .map_err(|_| "max attempts must be a positive whole number".to_owned())?,
        },
        other => return Err(format!("unknown operation {other:?}")),
    })
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
                target: Target::Id(id),
                change,
                now: None,
            })
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    let to = match outcome {
        Ok(_) => format!("/ui/tasks/{id}?done={}", urlencode(&format!("{op}: done"))),
        Err(e) => format!("/ui/tasks/{id}?error={}", urlencode(&e)),
    };
    Redirect::to(&to).into_response()
}

pub async fn queue_action(
    State(state): State<DashState>,
    session: Session,
    Path((name, op)): Path<(String, String)>,
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
    let to = match state
        .app
        .store
        .queue_set_paused(QueuePauseParams {
            queue: name.clone(),
            paused,
        })
        .await
    {
        Ok(()) => format!("/ui?done={}", urlencode(&format!("queue {name}: {op}d"))),
        Err(e) => format!("/ui?error={}", urlencode(&e.to_string())),
    };
    Redirect::to(&to).into_response()
}

/// Most tasks a bulk review counts before it says "at least".
const BULK_COUNT_CAP: usize = 100_000;

#[derive(Deserialize)]
pub struct BulkQuery {
    op: String,
    #[serde(flatten)]
    filter: TaskQuery,
}

/// Shows how many tasks a bulk action will touch, and asks to confirm.
pub async fn bulk_review(
    State(state): State<DashState>,
    session: Session,
    Query(q): Query<BulkQuery>,
) -> Response {
    let Ok(change) = change_from(&q.op, &HashMap::new()) else {
        return (StatusCode::NOT_FOUND, "unknown bulk operation").into_response();
    };
    let filter = match q.filter.filter() {
        Ok(f) => f,
        Err(message) => return (StatusCode::UNPROCESSABLE_ENTITY, message).into_response(),
    };
    if q.filter.pairs().is_empty() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            "a bulk action needs a filter",
        )
            .into_response();
    }
    let op = change.operation();
    let (mut count, mut after) = (0usize, None);
    loop {
        match state
            .app
            .store
            .task_list(ListParams {
                filter: filter.clone(),
                after,
                limit: 1000,
            })
            .await
        {
            Ok(page) => {
                count += page.tasks.iter().filter(|t| op.can_apply(t.state)).count();
                after = page.next;
                if after.is_none() || count >= BULK_COUNT_CAP {
                    break;
                }
            }
            Err(e) => return (StatusCode::SERVICE_UNAVAILABLE, e.to_string()).into_response(),
        }
    }
    let capped = count >= BULK_COUNT_CAP;
    let body = html! {
        h1 { "Confirm: " (q.op) }
        p id="bulk-count" {
            "This will " strong { (q.op) } " "
            strong { @if capped { "at least " } (count) } " task" @if count != 1 { "s" }
            " matching " code { @for (k, v) in q.filter.pairs() { (k) "=" (v) " " } }
            " (tasks in a state where " (q.op) " does not apply are left alone)."
        }
        @if session.can_act() && count > 0 {
            form method="post" action="/ui/tasks/bulk" {
                input type="hidden" name="csrf" value=(session.csrf);
                input type="hidden" name="op" value=(q.op);
                @for (k, v) in q.filter.pairs() { input type="hidden" name=(k) value=(v); }
                button.danger type="submit" { "Yes, " (q.op) " them" }
                " " a href={ "/ui/tasks" } { "Back" }
            }
        }
    };
    page("Confirm", "Tasks", Some(&session), false, body).into_response()
}

pub async fn bulk_apply(
    State(state): State<DashState>,
    session: Session,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, true) {
        return refused.into_response();
    }
    let op = form.get("op").cloned().unwrap_or_default();
    let get = |k: &str| form.get(k).cloned().unwrap_or_default();
    let query = TaskQuery {
        queue: get("queue"),
        kind: get("kind"),
        state: get("state"),
        key: get("key"),
        error: get("error"),
        created_after: get("created_after"),
        created_before: get("created_before"),
        ..TaskQuery::default()
    };
    let filter = match query.filter() {
        Ok(f) => f,
        Err(message) => return (StatusCode::UNPROCESSABLE_ENTITY, message).into_response(),
    };
    if query.pairs().is_empty() {
        return (
            StatusCode::UNPROCESSABLE_ENTITY,
            "a bulk action needs a filter",
        )
            .into_response();
    }
    let outcome = match change_from(&op, &form) {
        Ok(change) => state
            .app
            .store
            .task_update(UpdateParams {
                target: Target::Filter(filter),
                change,
                now: None,
            })
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(e),
    };
    let back: Vec<String> = query
        .pairs()
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencode(v)))
        .collect();
    let to = match outcome {
        Ok(n) => format!(
            "/ui/tasks?{}&done={}",
            back.join("&"),
            urlencode(&format!("{op}: {n} tasks changed"))
        ),
        Err(e) => format!("/ui/tasks?{}&flash_error={}", back.join("&"), urlencode(&e)),
    };
    Redirect::to(&to).into_response()
}
