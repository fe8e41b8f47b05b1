//! Acting on every task a filter matches: a review page that says how many tasks the
//! action would change, then the change itself in one store call.
//!
//! The review counts without loading any task: a filter of queue and state is answered
//! from the queue counts, any other filter by the store's capped count, and past the cap
//! the page says "at least".

use crate::actions::{change_from, check};
use crate::failure;
use crate::layout::page;
use crate::links;
use crate::scan::{self, Count};
use crate::session::Session;
use crate::tasks::TaskQuery;
use crate::DashState;
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;
use std::collections::HashMap;
use tasktable_store::{Target, UpdateParams};

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
    let store = state.app.store.as_ref();
    let count =
        match scan::count_changeable(store, filter, change.operation(), state.config.max_count)
            .await
        {
            Ok(c) => c,
            Err(e) => return failure::page_for(e),
        };
    let n = count.value();
    let body = html! {
        h1 { "Confirm: " (q.op) }
        p id="bulk-count" {
            "This will " strong { (q.op) } " "
            strong { @if let Count::AtLeast(_) = count { "at least " } (n) } " task" @if n != 1 { "s" }
            " matching " code { @for (k, v) in q.filter.pairs() { (k) "=" (v) " " } }
            " (tasks in a state where " (q.op) " does not apply are left alone)."
        }
        @if let Count::AtLeast(_) = count {
            p.muted { "Counting stopped after " (n) " tasks; the action changes every matching task, however many." }
        }
        @if session.can_act() && n > 0 {
            form method="post" action="/ui/tasks/bulk" {
                input type="hidden" name="csrf" value=(session.csrf);
                input type="hidden" name="op" value=(q.op);
                @for (k, v) in q.filter.pairs() { input type="hidden" name=(k) value=(v); }
                button.danger type="submit" { "Yes, " (q.op) " them" }
                " " a href=(links::tasks(&q.filter.pairs())) { "Back" }
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
                actor: session.actor(),
                target: Target::Filter(filter),
                change,
                now: None,
                action: None,
            })
            .await
            .map_err(|e| failure::message(&e)),
        Err(e) => Err(e),
    };
    let (flash, text) = match outcome {
        Ok(n) => ("done", format!("{op}: {n} tasks changed")),
        Err(e) => ("flash_error", e),
    };
    let to = links::tasks(&[query.pairs().as_slice(), &[(flash, text.as_str())]].concat());
    Redirect::to(&to).into_response()
}
