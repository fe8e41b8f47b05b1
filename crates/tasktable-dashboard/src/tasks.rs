//! The task list with its filter, and one task's page with its actions.

use crate::layout::{action_form, flash, json, page, state_badge, time, utc_field, Flash};
use crate::links;
use crate::session::Session;
use crate::DashState;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use tasktable_core::{Operation, Target, TaskId, TaskState};
use tasktable_server::detail::TaskDetail;
use tasktable_store::{ListParams, TaskFilter};

/// Tasks shown on one page of the list.
const PAGE_SIZE: u32 = 50;

/// The task list's filter, as query parameters.
#[derive(Debug, Default, Deserialize)]
pub struct TaskQuery {
    #[serde(default)]
    pub queue: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default)]
    pub state: String,
    #[serde(default)]
    pub key: String,
    #[serde(default)]
    pub error: String,
    /// `YYYY-MM-DDTHH:MM` (what a datetime-local input sends), UTC.
    #[serde(default)]
    pub created_after: String,
    #[serde(default)]
    pub created_before: String,
    pub after: Option<TaskId>,
    pub done: Option<String>,
    #[serde(rename = "flash_error")]
    pub failure: Option<String>,
}

fn nonempty(s: &str) -> Option<String> {
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

impl TaskQuery {
    /// The store's filter. A value that does not parse is an error, never dropped: a
    /// dropped condition would widen a bulk action.
    pub fn filter(&self) -> Result<TaskFilter, String> {
        let states = match self.state.trim() {
            "" => Vec::new(),
            s => vec![s
                .parse::<TaskState>()
                .map_err(|_| format!("unknown state {s:?}"))?],
        };
        Ok(TaskFilter {
            queue: nonempty(&self.queue),
            kind: nonempty(&self.kind),
            states,
            key: nonempty(&self.key),
            error_contains: nonempty(&self.error),
            created_after: utc_field("created after", &self.created_after)?,
            created_before: utc_field("created before", &self.created_before)?,
            ..TaskFilter::default()
        })
    }

    /// The filter as query-string pairs, for links and hidden fields.
    pub fn pairs(&self) -> Vec<(&'static str, &str)> {
        [
            ("queue", &self.queue),
            ("kind", &self.kind),
            ("state", &self.state),
            ("key", &self.key),
            ("error", &self.error),
            ("created_after", &self.created_after),
            ("created_before", &self.created_before),
        ]
        .into_iter()
        .filter(|(_, v)| !v.trim().is_empty())
        .map(|(k, v)| (k, v.as_str()))
        .collect()
    }
}

pub async fn tasks(
    State(state): State<DashState>,
    session: Session,
    Query(q): Query<TaskQuery>,
) -> Response {
    let (tasks_page, bad_filter) = match q.filter() {
        Err(message) => (
            tasktable_store::TaskPage {
                tasks: Vec::new(),
                next: None,
            },
            Some(message),
        ),
        Ok(filter) => {
            let result = state
                .app
                .store
                .task_list(ListParams {
                    filter,
                    after: q.after,
                    limit: PAGE_SIZE,
                    light: false,
                })
                .await;
            match result {
                Ok(p) => (p, None),
                Err(e) => return crate::failure::page_for(e),
            }
        }
    };
    let pairs = q.pairs();
    let body = html! {
        h1 { "Tasks" }
        (flash(q.done.as_deref(), bad_filter.as_deref().or(q.failure.as_deref())))
        form.filters method="get" action="/ui/tasks" {
            input name="queue" placeholder="queue" value=(q.queue);
            input name="kind" placeholder="kind" value=(q.kind);
            select name="state" {
                option value="" { "any state" }
                @for s in TaskState::ALL { option value=(s.as_str()) selected[q.state == s.as_str()] { (s.as_str()) } }
            }
            input name="key" placeholder="key" value=(q.key);
            input name="error" placeholder="error contains" value=(q.error);
            label.muted { "created from " input type="datetime-local" name="created_after" value=(q.created_after); }
            label.muted { "to " input type="datetime-local" name="created_before" value=(q.created_before); " UTC" }
            button type="submit" { "Filter" }
        }
        table id="tasks" {
            thead { tr { th { "ID" } th { "State" } th { "Kind" } th { "Queue" } th { "Key" } th { "Target" } th.num { "Attempt" } th { "Run at" } th { "Last error" } } }
            tbody {
                @for t in &tasks_page.tasks {
                    tr {
                        td { a href={ "/ui/tasks/" (t.id) } { (t.id) } }
                        td { (state_badge(t.state)) }
                        td { (t.kind) } td { (t.queue) }
                        td { (t.key.as_deref().unwrap_or("")) }
                        td { @if !t.target.is_any() { (t.target) } }
                        td.num {
                            // A multi-run task: copies done of those wanted.
                            @match (t.runs, t.run_counts) {
                                (Some(r), Some(c)) => { span.runs { (c.succeeded) "/" (r.copies) " done" } }
                                _ => { (t.attempt) "/" (t.max_attempts) }
                            }
                        }
                        td { (time(Some(t.run_at))) }
                        td.err { (t.current_error().map(|e| e.chars().take(120).collect::<String>()).unwrap_or_default()) }
                    }
                }
                @if tasks_page.tasks.is_empty() { tr { td colspan="9" .muted { "No task matches." } } }
            }
        }
        @if let Some(next) = tasks_page.next {
            @let after = next.to_string();
            p { a href=(links::tasks(&[pairs.as_slice(), &[("after", after.as_str())]].concat())) { "Next page →" } }
        }
        @if session.can_act() && !pairs.is_empty() {
            h2 { "Act on every task this filter matches" }
            form.inline method="get" action="/ui/tasks/bulk" {
                @for (k, v) in &pairs { input type="hidden" name=(k) value=(v); }
                select name="op" {
                    @for op in ["cancel", "retry", "hold", "release"] { option value=(op) { (op) } }
                }
                button type="submit" { "Review…" }
            }
        }
    };
    page("Tasks", "Tasks", Some(&session), false, body).into_response()
}

pub async fn task(
    State(state): State<DashState>,
    session: Session,
    Path(id): Path<TaskId>,
    Query(f): Query<Flash>,
) -> Response {
    let detail = match TaskDetail::read(&state.app, session.principal.role, id).await {
        Ok(Some(d)) => d,
        Ok(None) => {
            let body = html! { h1 { "Task " (id) } p { "No such task." } };
            return (
                axum::http::StatusCode::NOT_FOUND,
                page("Not found", "Tasks", Some(&session), false, body),
            )
                .into_response();
        }
        Err(e) => return crate::failure::page_for(e),
    };
    let TaskDetail {
        task,
        attempts,
        runs,
        timeline,
        waiting,
    } = detail;
    // Only the actions the task's state allows are offered.
    let act = |op: Operation, label: &str, danger: bool, fields: Markup| {
        let name = op.request_name().unwrap_or_default();
        html! {
            @if op.can_apply(task.state) {
                (action_form(&session, &format!("/ui/tasks/{id}/{name}"), label, danger, fields))
            }
        }
    };
    let retry_label = if task.state == TaskState::Pending {
        "Run now"
    } else {
        "Retry now"
    };
    let body = html! {
        h1 { "Task " (task.id) " " (state_badge(task.state)) }
        (flash(f.done.as_deref(), f.error.as_deref()))
        @if session.can_act() {
            div id="actions" {
                (act(Operation::Cancel, "Cancel", true, html! {}))
                (act(Operation::Retry, retry_label, false, html! {}))
                (act(Operation::Hold, "Hold", false, html! {}))
                (act(Operation::Release, "Release", false, html! {}))
                (act(Operation::Reschedule, "Reschedule", false, html! { input type="datetime-local" name="run_at" step="1" required; span.muted { "UTC" } }))
                (act(Operation::SetPriority, "Set priority", false, html! { input type="number" name="priority" value=(task.priority) class="narrow"; }))
                (act(Operation::SetMaxAttempts, "Set max attempts", false, html! { input type="number" name="max_attempts" min="1" value=(task.max_attempts) class="narrow"; }))
                (act(Operation::SetTarget, "Set target", false, html! {
                    select name="runs_on" {
                        option value="any" selected[task.target.is_any()] { "any worker" }
                        option value="workers" selected[matches!(task.target, Target::Workers(_))] { "workers" }
                        option value="groups" selected[matches!(task.target, Target::Groups(_))] { "groups" }
                    }
                    input name="names" placeholder="names, comma-separated" value=(target_names(&task.target));
                }))
                @if !offered(task.state) {
                    p.muted { "No action applies to a " (task.state) " task." }
                }
            }
        }
        @if !waiting.is_empty() {
            div id="waiting" {
                h2 { "Why it waits" }
                ul {
                    @for reason in &waiting {
                        li data-reason=(reason.code()) { (reason.to_string()) }
                    }
                }
            }
        }
        dl {
            dt { "Kind" } dd { (task.kind) }
            dt { "Queue" } dd { a href=(links::tasks(&[("queue", task.queue.as_str())])) { (task.queue) } }
            dt { "Key" } dd { (task.key.as_deref().unwrap_or("—")) }
            dt { "Idempotency key" } dd { (task.idempotency_key.as_deref().unwrap_or("—")) }
            dt { "Priority" } dd { (task.priority) }
            dt { "Target" } dd id="target" { (task.target) }
            dt { "Affinity" } dd id="affinity" {
                @match task.affinity {
                    Some(wait) => { (crate::schedules::interval(u64::try_from(wait.as_millis()).unwrap_or(u64::MAX))) }
                    None => { "—" }
                }
                @if let Some(until) = task.affinity_until {
                    br;
                    span id="affinity-wait" {
                        "waits for " @match task.worker_id.as_deref() {
                            Some(worker) => { "worker " (worker) }
                            None => { "its previous worker" }
                        }
                        " until " (time(Some(until)))
                    }
                }
            }
            @match (task.runs, task.run_counts) {
                (Some(r), Some(c)) => {
                    dt { "Runs" } dd id="runs-summary" {
                        (c.succeeded) " of " (r.copies) " done"
                        @if c.active > 0 { ", " (c.active) " running" }
                        @if c.failed > 0 { ", " (c.failed) " failed (" (r.max_failed.unwrap_or(0)) " allowed)" }
                        " · at most " (r.at_once) " at once"
                        @if r.repeat { " · a worker may run it again" }
                    }
                }
                _ => { dt { "Attempt" } dd { (task.attempt) " of " (task.max_attempts) } }
            }
            dt { "Run at" } dd { (time(Some(task.run_at))) }
            dt { "Worker" } dd { (task.worker_id.as_deref().unwrap_or("—")) " on " (task.worker_host.as_deref().unwrap_or("—")) }
            dt { "Lease expires" } dd { (time(task.lease_expires_at)) }
            dt { "Created" } dd { (time(Some(task.created_at))) }
            dt { "Started" } dd { (time(task.started_at)) }
            dt { "Finished" } dd { (time(task.finished_at)) }
            @if let Some(tp) = &task.traceparent {
                dt { "Trace" } dd id="trace" title=(tp.as_str()) { (tp.trace_id()) }
            }
            @if let Some(error) = task.current_error() {
                dt { "Last error" } dd.err id="last-error" { (error) }
            }
            @if let Some(schedule) = task.schedule_id {
                dt { "Fired by" } dd { a href={ "/ui/schedules/" (schedule) } { "schedule " (schedule) } " for its slot " (time(task.slot_at)) }
            }
        }
        @if task.runs.is_some() {
            h2 { "Runs" }
            table id="runs" {
                thead { tr { th.num { "#" } th { "State" } th { "Worker" } th { "Host" } th { "Started" } th { "Finished" } th { "Lease expires" } th { "Note" } } }
                tbody {
                    @for r in &runs {
                        tr {
                            td.num { (r.run) } td { (r.state.as_str()) }
                            td { (r.worker_id) } td { (r.worker_host.as_deref().unwrap_or("—")) }
                            td { (time(Some(r.started_at))) } td { (time(r.finished_at)) }
                            td { (time(r.lease_expires_at)) }
                            td.err {
                                @if let Some(e) = &r.error { (e) }
                                @else if let Some(from) = r.resumed_from { "took over from run " (from) }
                            }
                        }
                    }
                    @if runs.is_empty() { tr { td colspan="8" .muted { "No run has started yet." } } }
                }
            }
        }
        h2 { "Payload" } div id="payload" { (json(Some(&task.payload))) }
        h2 { "Result" } (json(task.result.as_ref()))
        h2 { "Checkpoint" } (json(task.checkpoint.as_ref()))
        h2 { "Progress" } (json(task.progress.as_ref()))
        h2 { "Attempts" }
        table id="attempts" {
            thead { tr { th.num { "#" } th { "Outcome" } th { "Worker" } th { "Host" } th { "Started" } th { "Finished" } th { "Error" } } }
            tbody {
                @for a in &attempts {
                    tr {
                        td.num { (a.attempt) } td { (a.outcome.as_str()) }
                        td { (a.worker_id.as_deref().unwrap_or("—")) } td { (a.worker_host.as_deref().unwrap_or("—")) }
                        td { (time(a.started_at)) } td { (time(Some(a.finished_at))) }
                        td.err { (a.error.as_deref().unwrap_or("")) }
                    }
                }
                @if attempts.is_empty() { tr { td colspan="7" .muted { "No attempt has ended yet." } } }
            }
        }
        h2 { "History" }
        (crate::audit::history(&timeline))
    };
    page(&format!("Task {id}"), "Tasks", Some(&session), false, body).into_response()
}

/// Whether the page offers any action for a task in `state` (a payload is edited through
/// the API or the CLI, not here).
fn offered(state: TaskState) -> bool {
    Operation::OPERATOR
        .into_iter()
        .any(|op| op != Operation::EditPayload && op.can_apply(state))
}

/// The names of a target, as the set-target form takes them.
fn target_names(target: &Target) -> String {
    match target {
        Target::Any => String::new(),
        Target::Workers(n) | Target::Groups(n) => n.join(", "),
    }
}
