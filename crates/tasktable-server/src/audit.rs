//! The operator audit: `GET /api/v1/audit` reads the event log, newest first in keyset
//! pages, filtered by actor, task, queue, event and time. Readers see a payload edit's
//! old and new payloads redacted as they see payloads.

use crate::auth::{Principal, Role};
use crate::error::{ApiError, ApiResult};
use crate::extract::Query;
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};
use tasktable_core::{ActorKind, EventKind, TaskId};
use tasktable_store::{Event, EventFilter, EventListParams, MAX_EVENT_LIST};

/// Events a page holds unless asked otherwise.
const DEFAULT_LIMIT: u32 = 50;

/// `GET /api/v1/audit` parameters; `event` is a comma-separated list.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuditQuery {
    actor: Option<String>,
    actor_kind: Option<String>,
    task: Option<TaskId>,
    queue: Option<String>,
    event: Option<String>,
    from: Option<DateTime<Utc>>,
    to: Option<DateTime<Utc>>,
    before: Option<i64>,
    limit: Option<u32>,
    action: Option<String>,
}

fn invalid(message: String) -> ApiError {
    ApiError::bad_request("invalid_query", message)
}

/// The event names of a comma-separated list.
pub fn parse_events(list: &str) -> ApiResult<Vec<EventKind>> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| {
            EventKind::parse(s).ok_or_else(|| {
                let names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
                invalid(format!(
                    "unknown event {s:?}; events are {}",
                    names.join(", ")
                ))
            })
        })
        .collect()
}

impl AuditQuery {
    fn into_params(self) -> ApiResult<EventListParams> {
        let actor_kind = self
            .actor_kind
            .as_deref()
            .map(|k| {
                ActorKind::parse(k).ok_or_else(|| {
                    let names: Vec<&str> = ActorKind::ALL.iter().map(|k| k.as_str()).collect();
                    invalid(format!(
                        "unknown actor_kind {k:?}; kinds are {}",
                        names.join(", ")
                    ))
                })
            })
            .transpose()?;
        for (name, text) in [("actor", &self.actor), ("queue", &self.queue)] {
            if text.as_deref().is_some_and(|t| t.contains('\0')) {
                return Err(ApiError::invalid(format!("{name} holds NUL (\\u0000)")));
            }
        }
        let limit = self.limit.unwrap_or(DEFAULT_LIMIT);
        if limit == 0 || limit > MAX_EVENT_LIST {
            return Err(ApiError::invalid(format!(
                "limit is 1 to {MAX_EVENT_LIST}, not {limit}"
            )));
        }
        Ok(EventListParams {
            filter: EventFilter {
                actor: self.actor,
                actor_kind,
                task_id: self.task,
                queue: self.queue,
                events: self
                    .event
                    .as_deref()
                    .map(parse_events)
                    .transpose()?
                    .unwrap_or_default(),
                from: self.from,
                to: self.to,
                action: self
                    .action
                    .map(|key| tasktable_store::bulk::check_action_key(&key).map(|()| key))
                    .transpose()?,
            },
            before: self.before,
            limit,
        })
    }
}

impl AppState {
    /// An event as a caller of `role` may see it: a reader sees an edited payload's
    /// secret fields redacted, as in the payload itself.
    pub fn event_for(&self, role: Role, mut event: Event) -> Event {
        self.redact_detail(role, event.kind.as_deref(), &mut event.detail);
        event
    }

    /// An event's detail as a caller of `role` may see it: the old and new payloads of
    /// an edit redacted for readers, as the task's own payload is (the audit, the
    /// timeline and the live feed all show details through this).
    pub(crate) fn redact_detail(&self, role: Role, kind: Option<&str>, detail: &mut Value) {
        if let (Some(kind), Some(edit)) = (kind, detail.get_mut("payload")) {
            for side in ["old", "new"] {
                if let Some(payload) = edit.get_mut(side) {
                    *payload = self.payload_for(role, kind, payload.take());
                }
            }
        }
    }
}

pub async fn list(
    State(state): State<AppState>,
    Extension(caller): Extension<Principal>,
    Query(q): Query<AuditQuery>,
) -> ApiResult<Response> {
    let params = q.into_params()?;
    let limit = params.limit as usize;
    let events: Vec<Event> = state
        .store
        .event_list(params)
        .await?
        .into_iter()
        .map(|e| state.event_for(caller.role, e))
        .collect();
    let next = (events.len() == limit)
        .then(|| events.last().map(|e| e.id))
        .flatten();
    Ok(Json(json!({ "events": events, "next": next })).into_response())
}
