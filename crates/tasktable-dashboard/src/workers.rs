//! The workers page: the registry (who runs where, in which state, which queues and kinds
//! it takes), with what each worker runs now as seen from the tasks it holds, and for
//! operators a button to drain or release each. Workers that hold leases but are not in the registry (a
//! pull worker that never registered) are listed too. The running tasks read are capped
//! (newest first, ids and kinds only); the total comes from the queue counts, so the page
//! says when it shows only part.

use crate::actions::check;
use crate::layout::Flash;
use crate::layout::{action_form, flash, page, time};
use crate::links;
use crate::scan::{self, Count};
use crate::session::Session;
use crate::DashState;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::{html, Markup};
use std::collections::{BTreeMap, HashMap};
use tasktable_core::worker::{Queues, WorkerInfo, WorkerState};
use tasktable_core::{TaskId, TaskState};
use tasktable_store::{TaskFilter, WorkerDrainParams, WorkerListParams};

/// Tasks listed per worker; the count says how many it runs.
const SHOWN_PER_WORKER: usize = 20;

/// Workers of the registry on one page, by id; a link leads to the next.
const PAGE: u32 = 200;

/// What the workers page may be asked: where its page starts, and messages of a form.
#[derive(Debug, Default, serde::Deserialize)]
pub struct WorkersQuery {
    /// The last id of the previous page.
    after: Option<String>,
    done: Option<String>,
    error: Option<String>,
}

#[derive(Debug, Default)]
struct Running {
    host: String,
    count: usize,
    tasks: Vec<(TaskId, String)>,
}

/// A worker's state in the colours of the task states: active as succeeded, draining as
/// held, gone as cancelled.
fn state_badge(state: WorkerState) -> Markup {
    let look = match state {
        WorkerState::Active => "s-succeeded",
        WorkerState::Draining => "s-held",
        WorkerState::Gone => "s-cancelled",
    };
    html! { span class={ "state " (look) } { (state.as_str()) } }
}

fn queues(q: &Queues) -> String {
    match q {
        Queues::All => "every queue".into(),
        Queues::Listed(names) => names.join(", "),
    }
}

/// The kinds a worker handles, as its heartbeat said them.
fn kinds(kinds: &Option<Vec<String>>) -> Markup {
    html! {
        @match kinds {
            None => span.muted title="the worker does not say which kinds it handles" { "unknown" },
            Some(k) if k.is_empty() => span.muted { "none" },
            Some(k) => (k.join(", ")),
        }
    }
}

fn tasks_cell(r: Option<&Running>) -> Markup {
    html! {
        @if let Some(r) = r {
            @for (id, kind) in &r.tasks { a href={ "/ui/tasks/" (id) } { (id) " " (kind) } " " }
        }
    }
}

pub async fn workers(
    State(state): State<DashState>,
    session: Session,
    Query(q): Query<WorkersQuery>,
) -> Response {
    let f = Flash {
        done: q.done,
        error: q.error,
    };
    let after = q.after.filter(|a| tasktable_core::worker::valid_name(a));
    let store = state.app.store.as_ref();
    let registry = match store
        .worker_list(WorkerListParams {
            include_gone: true,
            after: after.clone(),
            limit: Some(PAGE),
        })
        .await
    {
        Ok(w) => w,
        Err(e) => return crate::failure::page_for(e),
    };
    // A full page may have more after it; the workers running tasks but not registered
    // are those of this page's range of ids that the page does not hold.
    let next = (registry.len() == PAGE as usize)
        .then(|| registry.last().map(|w| w.facts.id.clone()))
        .flatten();
    let live = match store.worker_count_live().await {
        Ok(n) => n,
        Err(e) => return crate::failure::page_for(e),
    };
    let total = match scan::by_queue_counts(store, None, &[TaskState::Running]).await {
        Ok(n) => n,
        Err(e) => return crate::failure::page_for(e),
    };
    let filter = TaskFilter {
        states: vec![TaskState::Running],
        ..TaskFilter::default()
    };
    let mut running: BTreeMap<String, Running> = BTreeMap::new();
    let read = scan::scan(store, filter, state.config.max_scan_rows, |t| {
        let r = running
            .entry(t.worker_id.clone().unwrap_or_default())
            .or_default();
        r.host = t.worker_host.clone().unwrap_or_default();
        r.count += 1;
        if r.tasks.len() < SHOWN_PER_WORKER {
            r.tasks.push((t.id, t.kind.clone()));
        }
    })
    .await;
    let read = match read {
        Ok(c) => c,
        Err(e) => return crate::failure::page_for(e),
    };
    let in_range = |id: &String| {
        after.as_ref().is_none_or(|a| id > a) && next.as_ref().is_none_or(|n| id <= n)
    };
    let unregistered: Vec<(&String, &Running)> = running
        .iter()
        .filter(|(id, _)| in_range(id) && !registry.iter().any(|w| &w.facts.id == *id))
        .collect();
    let button = |w: &WorkerInfo| {
        let (op, label) = if w.draining {
            ("release", "Release")
        } else {
            ("drain", "Drain")
        };
        action_form(
            &session,
            &format!("/ui/workers/{op}"),
            label,
            !w.draining,
            html! { input type="hidden" name="worker" value=(w.facts.id); },
        )
    };
    let body = html! {
        h1 { "Workers" }
        (flash(f.done.as_deref(), f.error.as_deref()))
        p.muted {
            (live) " live. Every worker writes its row with each heartbeat; a drained worker "
            "finishes what it runs and claims nothing new, also after a restart under the same id."
        }
        @if let Count::AtLeast(n) = read {
            p.flash.error id="partial" {
                (total) " tasks are running; this page shows the workers of the newest " (n)
                ", so a worker's count may be short and some tasks may be missing."
            }
        }
        table id="workers" {
            thead { tr {
                th { "Worker" } th { "Host" } th { "Address" } th { "State" } th.num { "Running" }
                th { "Queues" } th { "Kinds" } th { "Groups" } th { "Last seen" } th { "Tasks" }
                @if session.can_act() { th {} }
            } }
            tbody {
                @for w in &registry {
                    @let r = running.get(&w.facts.id);
                    tr data-worker=(w.facts.id) {
                        td { (w.facts.id) } td { (w.facts.host) }
                        td { (w.address.as_deref().unwrap_or("—")) }
                        td { (state_badge(w.state)) }
                        td.num { (r.map_or(0, |r| r.count)) " / " (w.facts.capacity) }
                        td { (queues(&w.facts.queues)) }
                        td.kinds { (kinds(&w.facts.kinds)) }
                        td { (w.facts.groups.join(", ")) }
                        td { (time(Some(w.last_seen_at))) }
                        td { (tasks_cell(r)) }
                        @if session.can_act() { td { (button(w)) } }
                    }
                }
                @for (id, r) in &unregistered {
                    tr data-worker=(id) {
                        td { (id) } td { (r.host) } td { "—" }
                        td { span.muted { "not registered" } }
                        td.num { (r.count) } td {} td {} td {} td {}
                        td { (tasks_cell(Some(r))) }
                        @if session.can_act() { td {} }
                    }
                }
                @if registry.is_empty() && unregistered.is_empty() {
                    tr { td colspan="11" .muted { "No worker has registered, and no task is running." } }
                }
            }
        }
        @if let Some(next) = &next {
            p { a id="next-page" href=(links::with_query("/ui/workers", &[("after", next)])) { "Next page" } }
        }
    };
    page("Workers", "Workers", Some(&session), true, body).into_response()
}

/// The drain and release buttons.
pub async fn worker_action(
    State(state): State<DashState>,
    session: Session,
    Path(op): Path<String>,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = check(&session, &form, true) {
        return refused.into_response();
    }
    let draining = match op.as_str() {
        "drain" => true,
        "release" => false,
        _ => return (StatusCode::NOT_FOUND, "unknown worker operation").into_response(),
    };
    let Some(id) = form
        .get("worker")
        .filter(|id| tasktable_core::worker::valid_name(id))
    else {
        return (StatusCode::BAD_REQUEST, "which worker?").into_response();
    };
    let changed = state
        .app
        .store
        .worker_set_draining(WorkerDrainParams {
            actor: session.actor(),
            id: id.clone(),
            draining,
        })
        .await;
    let to = match changed {
        Ok(Some(_)) => {
            let done = if draining {
                format!("worker {id} draining: it claims nothing new from its next heartbeat on")
            } else {
                format!("worker {id} released")
            };
            links::with_query("/ui/workers", &[("done", &done)])
        }
        Ok(None) => links::with_query("/ui/workers", &[("error", &format!("no worker {id}"))]),
        Err(e) => links::with_query("/ui/workers", &[("error", &crate::failure::message(&e))]),
    };
    Redirect::to(&to).into_response()
}
