//! The workers page: the workers that hold a lease right now, as seen from the tasks they
//! run. It reads at most the configured number of running tasks (newest first) and keeps
//! only their ids and kinds; the total comes from the queue counts, so the page says when
//! it shows only part.

use crate::layout::page;
use crate::scan::{self, Count};
use crate::session::Session;
use crate::DashState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use maud::html;
use std::collections::BTreeMap;
use tasktable_core::{TaskId, TaskState};
use tasktable_store::TaskFilter;

/// Tasks listed per worker; the count says how many it runs.
const SHOWN_PER_WORKER: usize = 20;

#[derive(Debug, Default)]
struct WorkerRow {
    running: usize,
    tasks: Vec<(TaskId, String)>,
}

pub async fn workers(State(state): State<DashState>, session: Session) -> Response {
    let store = state.app.store.as_ref();
    let total = match scan::by_queue_counts(store, None, &[TaskState::Running]).await {
        Ok(n) => n,
        Err(e) => return crate::failure::page_for(e),
    };
    let filter = TaskFilter {
        states: vec![TaskState::Running],
        ..TaskFilter::default()
    };
    let mut by_worker: BTreeMap<(String, String), WorkerRow> = BTreeMap::new();
    let read = scan::scan(store, filter, state.config.max_scan_rows, |t| {
        let key = (
            t.worker_id.clone().unwrap_or_default(),
            t.worker_host.clone().unwrap_or_default(),
        );
        let row = by_worker.entry(key).or_default();
        row.running += 1;
        if row.tasks.len() < SHOWN_PER_WORKER {
            row.tasks.push((t.id, t.kind.clone()));
        }
    })
    .await;
    let read = match read {
        Ok(c) => c,
        Err(e) => return crate::failure::page_for(e),
    };
    let body = html! {
        h1 { "Workers" }
        p.muted { "Workers holding a lease right now, and what each is running." }
        @if let Count::AtLeast(n) = read {
            p.flash.error id="partial" {
                (total) " tasks are running; this page shows the workers of the newest " (n)
                ", so a worker's count may be short and some workers may be missing."
            }
        }
        table id="workers" {
            thead { tr { th { "Worker" } th { "Host" } th.num { "Running" } th { "Tasks" } } }
            tbody {
                @for ((worker, host), row) in &by_worker {
                    tr {
                        td { (worker) } td { (host) } td.num { (row.running) }
                        td { @for (id, kind) in &row.tasks { a href={ "/ui/tasks/" (id) } { (id) " " (kind) } " " } }
                    }
                }
                @if by_worker.is_empty() { tr { td colspan="4" .muted { "No task is running." } } }
            }
        }
    };
    page("Workers", "Workers", Some(&session), true, body).into_response()
}
