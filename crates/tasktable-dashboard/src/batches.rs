//! The batches page: each batch's progress bar, items per second, errors and ETA, and
//! for operators the start, pause, stop and resume buttons its status allows; and one
//! batch's page with the items that failed for good. The rules (which action applies,
//! the ETA) are core's; the page only shows them.

use crate::actions::check;
use crate::layout::Flash;
use crate::layout::{action_form, flash, page, time};
use crate::links;
use crate::session::Session;
use crate::DashState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use std::collections::HashMap;
use tasktable_core::batch::{eta, BatchAction, BatchStatus};
use tasktable_core::TaskId;
use tasktable_store::{Batch, BatchControlParams, BatchListParams};

/// Batches listed on the page, newest first.
const SHOWN: u32 = 200;

/// A status in the colours of the task states.
fn badge(status: BatchStatus) -> Markup {
    let look = match status {
        BatchStatus::Waiting | BatchStatus::Paused | BatchStatus::Pausing => "s-held",
        BatchStatus::Queued => "s-pending",
        BatchStatus::Running => "s-running",
        BatchStatus::Stopping | BatchStatus::Stopped => "s-cancelled",
        BatchStatus::Succeeded => "s-succeeded",
        BatchStatus::Failed => "s-failed",
    };
    html! { span class={ "state " (look) } { (status.as_str()) } }
}

/// The bar and `done/end`; an open-ended batch has no bar.
fn progress(b: &Batch) -> Markup {
    html! {
        @if let Some(end) = b.end {
            progress max=(end.max(1)) value=(b.low_water.min(end)) {}
            " " (b.low_water) " / " (end)
        } @else {
            (b.low_water) " done, open-ended"
        }
    }
}

fn rate(b: &Batch) -> String {
    b.items_per_second
        .map_or_else(|| "—".into(), |r| format!("{r:.0}/s"))
}

fn eta_text(b: &Batch) -> String {
    match eta(b.low_water, b.end, b.items_per_second) {
        Some(d) if b.status == BatchStatus::Running => format!("{}s", d.as_secs()),
        _ => "—".into(),
    }
}

/// The actions the batch's status allows, in the order of its lifecycle.
fn actions(b: &Batch) -> Vec<BatchAction> {
    [
        BatchAction::Start,
        BatchAction::Pause,
        BatchAction::Stop,
        BatchAction::Resume,
    ]
    .into_iter()
    .filter(|a| a.apply(b.task.state, b.control, b.awaits_start).is_ok())
    .collect()
}

fn buttons(session: &Session, b: &Batch) -> Markup {
    html! {
        @for a in actions(b) {
            (action_form(
                session,
                &format!("/ui/batches/{}", a.as_str()),
                &format!("{}{}", a.as_str()[..1].to_uppercase(), &a.as_str()[1..]),
                a == BatchAction::Stop,
                html! { input type="hidden" name="batch" value=(b.task.id); },
            ))
        }
    }
}

pub async fn batches(
    State(state): State<DashState>,
    session: Session,
    Query(f): Query<Flash>,
) -> Response {
    let list = state
        .app
        .store
        .batch_list(BatchListParams {
            limit: SHOWN,
            before: None,
        })
        .await;
    let list = match list {
        Ok(l) => l,
        Err(e) => return crate::failure::page_for(e),
    };
    let body = html! {
        h1 { "Batches" }
        (flash(f.done.as_deref(), f.error.as_deref()))
        p.muted {
            "Each batch runs items through its kind's batch handler and keeps only its offset: "
            "every item below it is done. A pause or stop reaches a running batch's runner "
            "within two seconds. The newest " (SHOWN) " are shown."
        }
        table id="batches" {
            thead { tr {
                th { "Batch" } th { "Kind" } th { "Status" } th { "Progress" } th.num { "Failed" }
                th.num { "Items/s" } th.num { "ETA" } th { "Saved" }
                @if session.can_act() { th {} }
            } }
            tbody {
                @for b in &list {
                    tr data-batch=(b.task.id) {
                        td { a href={ "/ui/batches/" (b.task.id) } { (b.task.id) } }
                        td { (b.task.kind) }
                        td { (badge(b.status)) }
                        td { (progress(b)) }
                        td.num { (b.errors) " / " (b.spec.error_budget) }
                        td.num { (rate(b)) }
                        td.num { (eta_text(b)) }
                        td { (time(b.saved_at)) }
                        @if session.can_act() { td { (buttons(&session, b)) } }
                    }
                }
                @if list.is_empty() {
                    tr { td colspan="9" .muted { "No batches. Submit a task with a batch (tasktable batch create)." } }
                }
            }
        }
    };
    page("Batches", "Batches", Some(&session), true, body).into_response()
}

pub async fn batch(
    State(state): State<DashState>,
    session: Session,
    Path(id): Path<TaskId>,
    Query(f): Query<Flash>,
) -> Response {
    let store = state.app.store.as_ref();
    let b = match store.batch_get(id).await {
        Ok(Some(b)) => b,
        Ok(None) => return (StatusCode::NOT_FOUND, format!("no batch {id}")).into_response(),
        Err(e) => return crate::failure::page_for(e),
    };
    let failures = match store.batch_failures(id).await {
        Ok(f) => f,
        Err(e) => return crate::failure::page_for(e),
    };
    let body = html! {
        h1 { "Batch " (id) " " (badge(b.status)) }
        (flash(f.done.as_deref(), f.error.as_deref()))
        p { a href={ "/ui/tasks/" (id) } { "Its task, with attempts and data" } }
        table id="batch" {
            tr { th { "Kind" } td { (b.task.kind) " (queue " (b.task.queue) ")" } }
            tr { th { "Progress" } td { (progress(&b)) } }
            tr { th { "Failed" } td { (b.errors) " of a budget of " (b.spec.error_budget) } }
            tr { th { "Items/s" } td { (rate(&b)) } }
            tr { th { "ETA" } td { (eta_text(&b)) } }
            tr { th { "Pace" } td {
                (b.spec.parallelism) " at once, "
                (b.spec.rate.map_or_else(|| "no rate limit".to_owned(), |r| format!("{r} a second")))
                ", window " (b.spec.window_size())
            } }
            tr { th { "Saved" } td { (time(b.saved_at)) } }
            @if let Some(e) = b.task.current_error() { tr { th { "Last error" } td { (e) } } }
        }
        @if session.can_act() { p { (buttons(&session, &b)) } }
        h2 { "Failed items" }
        table id="failures" {
            thead { tr { th.num { "Item" } th.num { "Tries" } th { "Error" } th { "At" } } }
            tbody {
                @for f in &failures {
                    tr { td.num { (f.item) } td.num { (f.tries) } td { (f.error) } td { (time(f.failed_at)) } }
                }
                @if failures.is_empty() { tr { td colspan="4" .muted { "None." } } }
            }
        }
    };
    page(
        &format!("Batch {id}"),
        "Batches",
        Some(&session),
        true,
        body,
    )
    .into_response()
}

/// The start, pause, stop and resume buttons.
pub async fn batch_action(
    State(state): State<DashState>,
    session: Session,
    Path(op): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, true) {
        return refused.into_response();
    }
    let Ok(action) = op.parse::<BatchAction>() else {
        return (StatusCode::NOT_FOUND, "unknown batch operation").into_response();
    };
    let Some(id) = form.get("batch").and_then(|v| v.parse::<TaskId>().ok()) else {
        return (StatusCode::BAD_REQUEST, "which batch?").into_response();
    };
    let done = state
        .app
        .store
        .batch_control(BatchControlParams {
            actor: session.actor(),
            id,
            action,
            now: None,
        })
        .await;
    let back = format!("/ui/batches/{id}");
    let to = match done {
        Ok(b) => links::with_query(&back, &[("done", &format!("batch {id}: {}", b.status))]),
        Err(e) => links::with_query(&back, &[("error", &crate::failure::message(&e))]),
    };
    Redirect::to(&to).into_response()
}
