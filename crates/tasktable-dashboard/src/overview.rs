//! The pages: overview, tasks, one task, workers.

use crate::layout::{action_form, flash, json, page, state_badge, time};
use crate::session::Session;
use crate::DashState;
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::BTreeMap;
use tasktable_core::{TaskId, TaskState};
use tasktable_store::{ListParams, TaskFilter};

/// Messages carried to the page a form redirects to.
#[derive(Debug, Default, Deserialize)]
pub struct Flash {
    done: Option<String>,
    error: Option<String>,
}

/// The overview's parameters: flash messages and the statistics window.
#[derive(Debug, Default, Deserialize)]
pub struct OverviewQuery {
    done: Option<String>,
    error: Option<String>,
    window: Option<String>,
}

/// The windows the overview offers.
const WINDOWS: [&str; 5] = ["15m", "1h", "6h", "24h", "7d"];

fn failure(message: impl std::fmt::Display) -> Response {
    (
        axum::http::StatusCode::SERVICE_UNAVAILABLE,
        format!("the database could not answer: {message}"),
    )
        .into_response()
}

pub async fn overview(
    State(state): State<DashState>,
    session: Session,
    Query(f): Query<OverviewQuery>,
) -> Response {
    let window_name = f
        .window
        .as_deref()
        .filter(|w| WINDOWS.contains(w))
        .unwrap_or("1h");
    let window = tasktable_server::wire::parse_window(window_name)
        .unwrap_or(std::time::Duration::from_secs(3600));
    let queues = match state.app.store.queue_list().await {
        Ok(q) => q,
        Err(e) => return failure(e),
    };
    let stats = match state
        .app
        .store
        .stats(tasktable_store::StatsParams::window(window))
        .await
    {
        Ok(s) => s,
        Err(e) => return failure(e),
    };
    let mut totals: BTreeMap<&str, u64> = TaskState::ALL.iter().map(|s| (s.as_str(), 0)).collect();
    for q in &queues {
        for (s, n) in &q.counts {
            *totals.entry(s.as_str()).or_default() += n;
        }
    }
    let count = |q: &tasktable_store::QueueInfo, s: TaskState| {
        q.counts
            .iter()
            .find(|(t, _)| *t == s)
            .map_or(0, |(_, n)| *n)
    };
    let body = html! {
        h1 { "Overview" }
        (flash(f.done.as_deref(), f.error.as_deref()))
        div.cards {
            @for s in TaskState::ALL {
                a.card href={ "/ui/tasks?state=" (s.as_str()) } style="text-decoration:none;color:inherit" {
                    div.n { (totals[s.as_str()]) }
                    div.l { (s.as_str()) }
                }
            }
        }
        (statistics(&stats, window_name))
        h2 { "Queues" }
        table {
            thead { tr {
                th { "Queue" } th { "State" }
                @for s in TaskState::ALL { th.num { (s.as_str()) } }
                th { "" }
            } }
            tbody {
                @for q in &queues {
                    tr {
                        td { a href={ "/ui/tasks?queue=" (q.name) } { (q.name) } }
                        td { @if q.paused { span.state.s-held { "paused" } } @else { span.state.s-succeeded { "active" } } }
                        @for s in TaskState::ALL { td.num { (count(q, s)) } }
                        td {
                            @if session.can_act() {
                                @let op = if q.paused { "resume" } else { "pause" };
                                (action_form(&session, &format!("/ui/queues/{}/{op}", q.name), if q.paused { "Resume" } else { "Pause" }, false, html! {}))
                            }
                        }
                    }
                }
                @if queues.is_empty() { tr { td colspan="9" .muted { "No tasks yet." } } }
            }
        }
    };
    page("Overview", "Overview", Some(&session), true, body).into_response()
}

/// A duration short enough for three to share a table cell.
fn seconds(v: Option<f64>) -> String {
    match v {
        None => "–".to_owned(),
        Some(s) if s < 1.0 => format!("{:.0}ms", s * 1000.0),
        Some(s) if s < 120.0 => format!("{s:.1}s"),
        Some(s) if s < 7200.0 => format!("{:.1}m", s / 60.0),
        Some(s) => format!("{:.1}h", s / 3600.0),
    }
}

fn percent(v: Option<f64>) -> String {
    v.map_or("–".to_owned(), |r| format!("{:.1} %", r * 100.0))
}

/// The window picker, throughput and failure charts, and a row per queue and kind with
/// the most failures first.
fn statistics(stats: &tasktable_store::Stats, window: &str) -> Markup {
    let at: Vec<_> = stats.series.iter().map(|p| p.at).collect();
    let column = |f: fn(&tasktable_store::SeriesPoint) -> u64| -> Vec<u64> {
        stats.series.iter().map(f).collect()
    };
    let mut groups: Vec<&tasktable_store::GroupStats> = stats.groups.iter().collect();
    groups.sort_by(|a, b| {
        (b.window.failed + b.window.retried)
            .cmp(&(a.window.failed + a.window.retried))
            .then_with(|| (&a.queue, &a.kind).cmp(&(&b.queue, &b.kind)))
    });
    let active = |g: &tasktable_store::GroupStats, s: TaskState| {
        g.active
            .iter()
            .find(|(t, _)| *t == s)
            .map_or(0, |(_, n)| *n)
    };
    let step = stats.series_step_secs;
    html! {
        div.windows {
            span.muted { "Window:" }
            @for w in WINDOWS {
                @if w == window { strong { (w) } } @else { a href={ "/ui?window=" (w) } { (w) } }
            }
            span.muted { "· " (stats.series.len()) " bars of " (step / 60) " min" }
        }
        div.charts {
            (crate::charts::stacked_bars("Finished", &at, step, &[
                crate::charts::Layer { name: "succeeded", colour: "#3aa05a", values: column(|p| p.succeeded) },
                crate::charts::Layer { name: "failed", colour: "#c8362d", values: column(|p| p.failed) },
            ]))
            (crate::charts::stacked_bars("Submitted and retried", &at, step, &[
                crate::charts::Layer { name: "submitted", colour: "#2f5bd3", values: column(|p| p.submitted) },
                crate::charts::Layer { name: "retried", colour: "#e0a100", values: column(|p| p.retried) },
            ]))
        }
        h2 { "By kind, last " (window) }
        table #kinds {
            thead { tr {
                th { "Queue" } th { "Kind" }
                th.num { "Pending" } th.num.nw { "Oldest due" } th.num { "Running" }
                th.num { "Subm./min" } th.num { "Succeeded" } th.num { "Failed" } th.num { "Retried" }
                th.num { "Success" }
                th.num.nw { "Wait p50 · p95 · p99" } th.num.nw { "Run p50 · p95 · p99" }
            } }
            tbody {
                @for g in &groups {
                    @let w = &g.window;
                    tr {
                        td { a href={ "/ui/tasks?queue=" (g.queue) } { (g.queue) } }
                        td { a href={ "/ui/tasks?queue=" (g.queue) "&kind=" (g.kind) } { (g.kind) } }
                        td.num { (active(g, TaskState::Pending)) }
                        td.num.nw { (seconds(g.oldest_due.map(|t| (stats.to - t).num_milliseconds().max(0) as f64 / 1000.0))) }
                        td.num { (active(g, TaskState::Running)) }
                        td.num { (format!("{:.1}", w.submitted_per_min)) }
                        td.num { (w.succeeded) }
                        td.num {
                            @if w.failed > 0 {
                                a.err href={ "/ui/tasks?queue=" (g.queue) "&kind=" (g.kind) "&state=failed" } { (w.failed) }
                            } @else { "0" }
                        }
                        td.num { (w.retried) }
                        td.num { (percent(w.success_rate)) }
                        td.num.nw { (seconds(w.wait.p50)) " · " (seconds(w.wait.p95)) " · " (seconds(w.wait.p99)) }
                        td.num.nw { (seconds(w.run.p50)) " · " (seconds(w.run.p95)) " · " (seconds(w.run.p99)) }
                    }
                }
                @if groups.is_empty() { tr { td colspan="12" .muted { "Nothing active and nothing finished in this window." } } }
            }
        }
    }
}

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

/// A UTC time from a datetime-local field (minutes or seconds) or RFC 3339.
fn utc_field(name: &str, text: &str) -> Result<Option<chrono::DateTime<chrono::Utc>>, String> {
    let text = text.trim();
    if text.is_empty() {
        return Ok(None);
    }
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(text) {
        return Ok(Some(t.with_timezone(&chrono::Utc)));
    }
    ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"]
        .iter()
        .find_map(|f| chrono::NaiveDateTime::parse_from_str(text, f).ok())
        .map(|t| Some(t.and_utc()))
        .ok_or_else(|| format!("{name}: {text:?} is not a time like 2026-11-22T05:40"))
}

fn query_string(pairs: &[(&str, &str)]) -> String {
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={}", urlencode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

pub fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

pub async fn tasks(
    State(state): State<DashState>,
    session: Session,
    Query(q): Query<TaskQuery>,
) -> Response {
    let page_size = 50;
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
                    limit: page_size,
                })
                .await;
            match result {
                Ok(p) => (p, None),
                Err(e) => return failure(e),
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
            thead { tr { th { "ID" } th { "State" } th { "Kind" } th { "Queue" } th { "Key" } th.num { "Attempt" } th { "Run at" } th { "Last error" } } }
            tbody {
                @for t in &tasks_page.tasks {
                    tr {
                        td { a href={ "/ui/tasks/" (t.id) } { (t.id) } }
                        td { (state_badge(t.state)) }
                        td { (t.kind) } td { (t.queue) }
                        td { (t.key.as_deref().unwrap_or("")) }
                        td.num { (t.attempt) "/" (t.max_attempts) }
                        td { (time(Some(t.run_at))) }
                        td.err { (t.last_error.as_deref().map(|e| e.chars().take(120).collect::<String>()).unwrap_or_default()) }
                    }
                }
                @if tasks_page.tasks.is_empty() { tr { td colspan="8" .muted { "No task matches." } } }
            }
        }
        @if let Some(next) = tasks_page.next {
            p { a href={ "/ui/tasks?" (query_string(&pairs)) "&after=" (next) } { "Next page →" } }
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
    let task = match state.app.store.task_get(id).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            let body = html! { h1 { "Task " (id) } p { "No such task." } };
            return (
                axum::http::StatusCode::NOT_FOUND,
                page("Not found", "Tasks", Some(&session), false, body),
            )
                .into_response();
        }
        Err(e) => return failure(e),
    };
    let attempts = match state.app.store.attempt_list(id).await {
        Ok(a) => a,
        Err(e) => return failure(e),
    };
    let act = |op: &str, label: &str, danger: bool, fields: Markup| {
        action_form(
            &session,
            &format!("/ui/tasks/{id}/{op}"),
            label,
            danger,
            fields,
        )
    };
    let body = html! {
        h1 { "Task " (task.id) " " (state_badge(task.state)) }
        (flash(f.done.as_deref(), f.error.as_deref()))
        @if session.can_act() {
            div id="actions" {
                (act("cancel", "Cancel", true, html! {}))
                (act("retry", "Retry now", false, html! {}))
                (act("hold", "Hold", false, html! {}))
                (act("release", "Release", false, html! {}))
                (act("reschedule", "Reschedule", false, html! { input type="datetime-local" name="run_at" step="1" required; span.muted { "UTC" } }))
                (act("set-priority", "Set priority", false, html! { input type="number" name="priority" value=(task.priority) style="width:90px"; }))
                (act("set-max-attempts", "Set max attempts", false, html! { input type="number" name="max_attempts" min="1" value=(task.max_attempts) style="width:90px"; }))
            }
        }
        dl {
            dt { "Kind" } dd { (task.kind) }
            dt { "Queue" } dd { a href={ "/ui/tasks?queue=" (urlencode(&task.queue)) } { (task.queue) } }
            dt { "Key" } dd { (task.key.as_deref().unwrap_or("—")) }
            dt { "Idempotency key" } dd { (task.idempotency_key.as_deref().unwrap_or("—")) }
            dt { "Priority" } dd { (task.priority) }
            dt { "Attempt" } dd { (task.attempt) " of " (task.max_attempts) }
            dt { "Run at" } dd { (time(Some(task.run_at))) }
            dt { "Worker" } dd { (task.worker_id.as_deref().unwrap_or("—")) " on " (task.worker_host.as_deref().unwrap_or("—")) }
            dt { "Lease expires" } dd { (time(task.lease_expires_at)) }
            dt { "Created" } dd { (time(Some(task.created_at))) }
            dt { "Started" } dd { (time(task.started_at)) }
            dt { "Finished" } dd { (time(task.finished_at)) }
            dt { "Last error" } dd.err { (task.last_error.as_deref().unwrap_or("—")) }
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
    };
    page(&format!("Task {id}"), "Tasks", Some(&session), false, body).into_response()
}

/// Live workers, as seen from the tasks they hold right now.
pub async fn workers(State(state): State<DashState>, session: Session) -> Response {
    let filter = TaskFilter {
        states: vec![TaskState::Running],
        ..TaskFilter::default()
    };
    let mut running = Vec::new();
    let mut after = None;
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
                running.extend(page.tasks);
                after = page.next;
                if after.is_none() || running.len() >= 10_000 {
                    break;
                }
            }
            Err(e) => return failure(e),
        }
    }
    let mut by_worker: BTreeMap<(String, String), Vec<&tasktable_core::Task>> = BTreeMap::new();
    for t in &running {
        let key = (
            t.worker_id.clone().unwrap_or_default(),
            t.worker_host.clone().unwrap_or_default(),
        );
        by_worker.entry(key).or_default().push(t);
    }
    let body = html! {
        h1 { "Workers" }
        p.muted { "Workers holding a lease right now, and what each is running." }
        table id="workers" {
            thead { tr { th { "Worker" } th { "Host" } th.num { "Running" } th { "Tasks" } } }
            tbody {
                @for ((worker, host), tasks) in &by_worker {
                    tr {
                        td { (worker) } td { (host) } td.num { (tasks.len()) }
                        td { @for t in tasks.iter().take(20) { a href={ "/ui/tasks/" (t.id) } { (t.id) " " (t.kind) } " " } }
                    }
                }
                @if by_worker.is_empty() { tr { td colspan="4" .muted { "No task is running." } } }
            }
        }
    };
    page("Workers", "Workers", Some(&session), true, body).into_response()
}
