//! The overview: counts by state, windowed statistics with charts, and the queues with
//! their policies in brief and their pause and resume forms.

use crate::layout::{action_form, flash, page};
use crate::links;
use crate::policy;
use crate::session::Session;
use crate::DashState;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use std::collections::BTreeMap;
use tasktable_core::TaskState;

/// The overview's parameters: flash messages and the statistics window.
#[derive(Debug, Default, Deserialize)]
pub struct OverviewQuery {
    done: Option<String>,
    error: Option<String>,
    window: Option<String>,
}

/// Kind limits a queue's row names; its policy page names every one.
const KINDS_SHOWN: usize = 3;

/// The windows the overview offers.
const WINDOWS: [&str; 5] = ["15m", "1h", "6h", "24h", "7d"];

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
        Err(e) => return crate::failure::page_for(e),
    };
    let stats = match state
        .app
        .store
        .stats(tasktable_store::StatsParams::window(window))
        .await
    {
        Ok(s) => s,
        Err(e) => return crate::failure::page_for(e),
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
                a.card href=(links::tasks(&[("state", s.as_str())])) {
                    div.n { (totals[s.as_str()]) }
                    div.l { (s.as_str()) }
                }
            }
        }
        (statistics(&stats, window_name))
        h2 { "Queues" }
        table {
            thead { tr {
                th { "Queue" } th { "State" } th { "Policy" }
                @for s in TaskState::ALL { th.num { (s.as_str()) } }
                th { "" }
            } }
            tbody {
                @for q in &queues {
                    tr {
                        td { a href=(links::tasks(&[("queue", q.name.as_str())])) { (q.name) } }
                        td { @if q.paused { span.state.s-held { "paused" } } @else { span.state.s-succeeded { "active" } } }
                        td.policy {
                            @if q.policy.is_limited() { (policy::summary(&q.policy, KINDS_SHOWN)) } @else { span.muted { "—" } }
                            @if session.can_act() {
                                " " a href=(policy::link(&q.name)) { "edit" }
                            } @else if q.policy.is_limited() {
                                " " a href=(policy::link(&q.name)) { "details" }
                            }
                        }
                        @for s in TaskState::ALL { td.num { (count(q, s)) } }
                        td {
                            @if session.can_act() {
                                @let (op, label) = if q.paused { ("resume", "Resume") } else { ("pause", "Pause") };
                                (action_form(&session, &format!("/ui/queues/{op}"), label, false, html! {
                                    input type="hidden" name="queue" value=(q.name);
                                }))
                            }
                        }
                    }
                }
                @if queues.is_empty() { tr { td colspan="10" .muted { "No tasks yet." } } }
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
                @if w == window { strong { (w) } } @else { a href=(links::with_query("/ui", &[("window", w)])) { (w) } }
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
                        td { a href=(links::tasks(&[("queue", g.queue.as_str())])) { (g.queue) } }
                        td { a href=(links::tasks(&[("queue", g.queue.as_str()), ("kind", &g.kind)])) { (g.kind) } }
                        td.num { (active(g, TaskState::Pending)) }
                        td.num.nw { (seconds(g.oldest_due.map(|t| (stats.to - t).num_milliseconds().max(0) as f64 / 1000.0))) }
                        td.num { (active(g, TaskState::Running)) }
                        td.num { (format!("{:.1}", w.submitted_per_min)) }
                        td.num { (w.succeeded) }
                        td.num {
                            @if w.failed > 0 {
                                a.err href=(links::tasks(&[("queue", g.queue.as_str()), ("kind", &g.kind), ("state", "failed")])) { (w.failed) }
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
