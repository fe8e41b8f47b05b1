//! The audit page: the event log, newest first, filtered by actor, task, queue and event;
//! and a task's history on its own page (submitted, claimed, how each attempt ended,
//! who changed it). Both read what the store recorded; readers see edited secrets
//! redacted, as they see payloads.

use crate::layout::{page, time};
use crate::session::Session;
use crate::DashState;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maud::{html, Markup};
use serde::Deserialize;
use serde_json::Value;
use tasktable_core::{Actor, EventKind};
use tasktable_store::{EventFilter, EventListParams, TimelineEntry};

/// Events per page.
const SHOWN: u32 = 100;

/// The audit's filter, as query parameters (each may be empty).
#[derive(Debug, Default, Deserialize)]
pub struct AuditQuery {
    #[serde(default)]
    actor: String,
    #[serde(default)]
    task: String,
    #[serde(default)]
    queue: String,
    #[serde(default)]
    event: String,
    /// `YYYY-MM-DDTHH:MM` (what a datetime-local input sends), UTC.
    #[serde(default)]
    from: String,
    #[serde(default)]
    to: String,
    /// One bulk action's events: its own and each task's.
    #[serde(default)]
    action: String,
    before: Option<i64>,
}

impl AuditQuery {
    fn filter(&self) -> Result<EventFilter, String> {
        let text = |s: &str| Some(s.trim().to_owned()).filter(|s| !s.is_empty());
        let task_id = match text(&self.task) {
            Some(t) => Some(
                t.parse()
                    .map_err(|_| format!("task {t:?} is not a task id"))?,
            ),
            None => None,
        };
        let events = match text(&self.event) {
            Some(e) => {
                vec![EventKind::parse(&e).ok_or_else(|| format!("no event is named {e:?}"))?]
            }
            None => Vec::new(),
        };
        let filter = EventFilter {
            actor: text(&self.actor),
            task_id,
            queue: text(&self.queue),
            events,
            from: crate::layout::utc_field("from", &self.from)?,
            to: crate::layout::utc_field("to", &self.to)?,
            action: match text(&self.action) {
                Some(key) => Some(
                    tasktable_store::bulk::check_action_key(&key)
                        .map(|()| key)
                        .map_err(|e| e.to_string())?,
                ),
                None => None,
            },
            ..Default::default()
        };
        if [&filter.actor, &filter.queue]
            .iter()
            .any(|t| t.as_deref().is_some_and(|t| t.contains('\0')))
        {
            return Err("a filter cannot hold NUL".into());
        }
        Ok(filter)
    }

    /// The query string of the next page.
    fn next(&self, before: i64) -> String {
        let pairs = [
            ("actor", self.actor.as_str()),
            ("task", self.task.as_str()),
            ("queue", self.queue.as_str()),
            ("event", self.event.as_str()),
            ("from", self.from.as_str()),
            ("to", self.to.as_str()),
            ("action", self.action.as_str()),
        ];
        let mut q = form_urlencoded::Serializer::new(String::new());
        for (name, value) in pairs.iter().filter(|(_, v)| !v.is_empty()) {
            q.append_pair(name, value);
        }
        q.append_pair("before", &before.to_string());
        q.finish()
    }
}

/// An event's detail on one line.
/// An event's detail as people read it: one line per field, a change as `old → new`, an
/// error or a log line as its text (kept on its lines, a traceback included), the rest as
/// compact JSON.
fn detail(value: &Value) -> Markup {
    match value {
        Value::Null => html! {},
        Value::Object(fields) => html! {
            @for (name, v) in fields {
                div.detail {
                    @match (v.get("old"), v.get("new")) {
                        (Some(old), Some(new)) => {
                            span.muted { (name) " " } (plain(old)) " → " (plain(new))
                        }
                        _ => @match v {
                            Value::String(text) if name == "error" || name == "line" => {
                                pre.detail { (text) }
                            }
                            _ => { span.muted { (name) " " } (plain(v)) }
                        }
                    }
                }
            }
        },
        v => html! { code.detail { (v.to_string()) } },
    }
}

/// A value of a detail: text as it is, anything else as compact JSON.
fn plain(value: &Value) -> Markup {
    match value {
        Value::String(text) => html! { (text) },
        v => html! { code { (v.to_string()) } },
    }
}

pub async fn audit(
    State(state): State<DashState>,
    session: Session,
    Query(q): Query<AuditQuery>,
) -> Response {
    let filter = q.filter();
    let events = match &filter {
        Ok(filter) => {
            let read = state
                .app
                .store
                .event_list(EventListParams {
                    filter: filter.clone(),
                    before: q.before,
                    limit: SHOWN,
                })
                .await;
            match read {
                Ok(events) => events,
                Err(e) => return crate::failure::page_for(e),
            }
        }
        Err(_) => Vec::new(),
    };
    let role = session.principal.role;
    let events: Vec<_> = events
        .into_iter()
        .map(|e| state.app.event_for(role, e))
        .collect();
    let body = html! {
        h1 { "Audit" }
        p.muted {
            "Every operator change and every schedule firing, newest first, with who made it. "
            "A change to every task a filter matches is one row; its tasks' rows are in their "
            "histories (follow its count). What workers do is on each task's page."
        }
        form.filters method="get" action="/ui/audit" {
            input name="actor" placeholder="actor" value=(q.actor);
            input name="task" placeholder="task id" value=(q.task) class="narrow";
            input name="queue" placeholder="queue" value=(q.queue);
            @if !q.action.is_empty() {
                input type="hidden" name="action" value=(q.action);
                span.muted { "of bulk action " (q.action) " " }
            }
            select name="event" {
                option value="" { "any event" }
                @for k in EventKind::ALL {
                    option value=(k.as_str()) selected[q.event == k.as_str()] { (k.as_str()) }
                }
            }
            label.muted { "from " input type="datetime-local" name="from" value=(q.from); }
            label.muted { " to " input type="datetime-local" name="to" value=(q.to); }
            " (UTC) "
            button type="submit" { "Filter" }
        }
        @if let Err(e) = &filter { div.flash.error { (e) } }
        table id="audit" {
            thead { tr { th { "At" } th { "Event" } th { "Of" } th { "By" } th { "What" } } }
            tbody {
                @for e in &events {
                    tr data-event=(e.id) {
                        td { (time(Some(e.at))) }
                        td { (e.event.as_str()) }
                        td {
                            @if let Some(t) = e.task_id { a href={ "/ui/tasks/" (t) } { "task " (t) } }
                            @else if let (Some(n), Some(key)) = (e.tasks, &e.action) {
                                a.action href={ "/ui/audit?action=" (key) } { (n) " task" @if n != 1 { "s" } }
                            }
                            @else if let Some(s) = e.schedule_id { a href={ "/ui/schedules/" (s) } { "schedule " (s) } }
                            @else if let Some(w) = &e.worker_id { "worker " (w) }
                            @else if let Some(queue) = &e.queue { "queue " (queue) }
                        }
                        td { (e.actor.label()) }
                        td { (detail(&e.detail)) }
                    }
                }
                @if events.is_empty() { tr { td colspan="5" .muted { "No events match." } } }
            }
        }
        @if events.len() == SHOWN as usize {
            @if let Some(last) = events.last() {
                p { a id="older" href={ "/ui/audit?" (q.next(last.id)) } { "Older events" } }
            }
        }
    };
    page("Audit", "Audit", Some(&session), false, body).into_response()
}

/// A task's history, oldest first.
pub fn history(timeline: &[TimelineEntry]) -> Markup {
    html! {
        table id="history" {
            thead { tr { th { "At" } th { "Event" } th { "By" } th { "What" } } }
            tbody {
                @for e in timeline {
                    tr {
                        td { (time(Some(e.at))) }
                        td {
                            (e.event)
                            @if let Some(n) = e.attempt { span.muted { " (attempt " (n) ")" } }
                        }
                        td { (e.actor.as_ref().map(Actor::label).unwrap_or_default()) }
                        td { (detail(&e.detail)) }
                    }
                }
            }
        }
    }
}
