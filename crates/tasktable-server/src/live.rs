//! `GET /api/v1/events`: what happens, live ([`tasktable_store::feed`]): tasks submitted,
//! attempts ended, operators' changes and schedules firing, filtered by queue, kind, task
//! and event name.
//!
//! Asked with `Accept: text/event-stream` (what every `EventSource` sends), it is a
//! server-sent events stream: one message per item, its SSE id the cursor to resume
//! from, so a client that reconnects with `Last-Event-ID` (or `?after=`) misses nothing
//! (delivery is at least once: drop items by `source` and `id` already seen). Asked
//! otherwise, it answers one read as JSON, `{"events", "cursor"}`, for clients that poll:
//! pass `cursor` back as `after`.

use crate::auth::{Principal, Role};
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::AppState;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::sse::{Event as Sse, KeepAlive};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::json;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::{AttemptOutcome, EventKind, TaskId};
use tasktable_store::feed::{FeedCursor, FeedFilter, FeedItem, Follower};

/// `GET /api/v1/events` parameters; `event` is a comma-separated list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LiveQuery {
    queue: Option<String>,
    kind: Option<String>,
    task: Option<TaskId>,
    event: Option<String>,
    after: Option<String>,
}

/// The names the feed gives its items: `submitted`, every attempt outcome, every event.
pub fn feed_event_names() -> Vec<&'static str> {
    let mut names = vec!["submitted"];
    names.extend(AttemptOutcome::ALL.iter().map(|o| o.as_str()));
    names.extend(EventKind::ALL.iter().map(|k| k.as_str()));
    names
}

fn invalid(message: String) -> ApiError {
    ApiError::bad_request("invalid_query", message)
}

impl LiveQuery {
    fn filter(&self) -> ApiResult<FeedFilter> {
        let names = feed_event_names();
        let events = match &self.event {
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|s| {
                    names
                        .iter()
                        .find(|n| **n == s)
                        .map(|n| (*n).to_owned())
                        .ok_or_else(|| {
                            invalid(format!(
                                "unknown event {s:?}; events are {}",
                                names.join(", ")
                            ))
                        })
                })
                .collect::<ApiResult<Vec<String>>>()?,
            None => Vec::new(),
        };
        for (name, text) in [("queue", &self.queue), ("kind", &self.kind)] {
            if text.as_deref().is_some_and(|t| t.contains('\0')) {
                return Err(ApiError::invalid(format!("{name} holds NUL (\\u0000)")));
            }
        }
        Ok(FeedFilter {
            queue: self.queue.clone(),
            kind: self.kind.clone(),
            task_id: self.task,
            events,
        })
    }
}

/// The cursor to start from: `Last-Event-ID` (a reconnecting `EventSource`), else
/// `?after=`; neither: from now on.
fn start(headers: &HeaderMap, after: Option<&str>) -> ApiResult<Option<FeedCursor>> {
    let last = headers
        .get("last-event-id")
        .map(|v| {
            v.to_str()
                .map_err(|_| invalid("Last-Event-ID is not text".into()))
        })
        .transpose()?;
    match last.or(after) {
        Some(text) => text
            .parse()
            .map(Some)
            .map_err(|e: tasktable_store::StoreError| invalid(e.to_string())),
        None => Ok(None),
    }
}

/// An item as `role` may see it: a reader sees an edited payload redacted.
fn view(state: &AppState, role: Role, mut item: FeedItem) -> FeedItem {
    state.redact_detail(role, item.kind.as_deref(), &mut item.detail);
    item
}

fn wants_stream(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|m| {
            m.split(';')
                .next()
                .is_some_and(|m| m.trim().eq_ignore_ascii_case("text/event-stream"))
        })
}

/// Streams open now, across the server and per caller.
#[derive(Debug)]
pub struct Streams {
    by_caller: Mutex<HashMap<String, usize>>,
    /// The total, published as it changes (the gauge, and whoever waits for it).
    total: tokio::sync::watch::Sender<usize>,
}

impl Default for Streams {
    fn default() -> Self {
        Streams {
            by_caller: Mutex::default(),
            total: tokio::sync::watch::Sender::new(0),
        }
    }
}

/// One open stream, counted until it is dropped.
#[derive(Debug)]
pub struct Open {
    streams: Arc<Streams>,
    caller: String,
}

impl Streams {
    /// How many are open now.
    pub fn count(&self) -> usize {
        *self.total.borrow()
    }

    /// The count as it changes.
    pub fn watch(&self) -> tokio::sync::watch::Receiver<usize> {
        self.total.subscribe()
    }

    fn publish(&self, total: usize) {
        metrics::gauge!(crate::metrics::API_EVENT_STREAMS).set(total as f64);
        self.total.send_replace(total);
    }

    /// Counts a new stream of `caller` (a token's name), or refuses it when `max` are
    /// open, or `per_caller` are the caller's.
    pub fn open(self: &Arc<Self>, caller: &str, max: usize, per_caller: usize) -> ApiResult<Open> {
        let mut open = self.by_caller.lock().expect("streams lock");
        let total: usize = open.values().sum();
        let mine = open.get(caller).copied().unwrap_or(0);
        if total >= max || mine >= per_caller {
            return Err(ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_streams",
                format!(
                    "this server follows at most {max} event streams at once, {per_caller} per \
                     token; close one, or poll without Accept: text/event-stream"
                ),
            ));
        }
        *open.entry(caller.to_owned()).or_default() += 1;
        self.publish(total + 1);
        Ok(Open {
            streams: self.clone(),
            caller: caller.to_owned(),
        })
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        let mut open = self.streams.by_caller.lock().expect("streams lock");
        if let Some(n) = open.get_mut(&self.caller) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.caller);
            }
        }
        let total: usize = open.values().sum();
        self.streams.publish(total);
    }
}

pub async fn follow(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    headers: HeaderMap,
    Query(q): Query<LiveQuery>,
) -> ApiResult<Response> {
    let filter = q.filter()?;
    let from = start(&headers, q.after.as_deref())?;
    let role = caller.role;
    let stream = wants_stream(&headers);
    let guard = if stream {
        Some(state.streams.open(
            &caller.name,
            state.limits.max_event_streams,
            state.streams_per_caller(),
        )?)
    } else {
        None
    };
    let mut follower = Follower::start(state.store.clone(), filter, from).await?;
    let Some(guard) = guard else {
        let (items, _) = follower.read().await?;
        let events: Vec<FeedItem> = items
            .into_iter()
            .map(|(item, _)| view(&state, role, item))
            .collect();
        let body = json!({"events": events, "cursor": follower.cursor().to_string()});
        return Ok(Json(body).into_response());
    };
    let poll = state.limits.event_poll;
    let follower = follower.poll_every(poll);
    let stop = state.stop.clone();
    let batches =
        futures::stream::unfold((follower, guard), move |(mut follower, guard)| async move {
            match follower.next().await {
                Ok(items) => Some((items, (follower, guard))),
                Err(e) => {
                    // The client reconnects from the last id it saw. An unreachable
                    // database is told once, by the store.
                    if !e.is_unreachable() {
                        tracing::warn!(error = %e, "an event stream ended on a store error");
                    }
                    None
                }
            }
        });
    let messages = batches
        .flat_map(move |items| {
            let state = state.clone();
            futures::stream::iter(items.into_iter().map(move |(item, cursor)| {
                let item = view(&state, role, item);
                Sse::default()
                    .id(cursor.to_string())
                    .json_data(&item)
                    .map_err(|e| std::io::Error::other(e.to_string()))
            }))
        })
        .take_until(async move { stop.cancelled().await });
    let keep_alive = KeepAlive::new().interval(Duration::from_secs(15));
    Ok(axum::response::Sse::new(messages)
        .keep_alive(keep_alive)
        .into_response())
}
