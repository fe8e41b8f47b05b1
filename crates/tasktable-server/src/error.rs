//! Every error the API returns: `{"error": {"code": ..., "message": ...}}` with a status
//! that says whose fault it was. Client mistakes are 4xx with a message that names what is
//! wrong; database failures are 5xx whose details go to the log, not to the client.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tasktable_store::StoreError;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, machine-readable; documented in docs/api.md.
    pub code: &'static str,
    pub message: String,
}

pub type ApiResult<T> = Result<T, ApiError>;

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }

    /// The request's values are wrong (the JSON itself parsed).
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", message)
    }

    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    pub fn unauthorized(message: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", message)
    }

    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", message)
    }

    /// The lease this call names is no longer held.
    pub fn lease_lost(id: i64) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "lease_lost",
            format!("task {id} is no longer held under this token: its lease expired and it was taken back, or it was claimed again; stop working on it"),
        )
    }

    /// A token has as many long-poll claims waiting as it may.
    pub fn too_many_waiting_claims(token: &str, limit: usize) -> Self {
        Self::new(
            StatusCode::TOO_MANY_REQUESTS,
            "too_many_waiting_claims",
            format!("token {token:?} already has {limit} claims waiting for work, the most it may; wait for one to return, or claim more tasks per call with limit"),
        )
    }

    /// An operator cancelled the task this lease is for.
    pub fn task_cancelled(id: i64) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "task_cancelled",
            format!("task {id} was cancelled by an operator; stop working on it"),
        )
    }

    /// An operator changed the task's target to leave out the worker holding this lease.
    pub fn task_retargeted(id: i64) -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "task_retargeted",
            format!(
                "task {id} was given a target that leaves this worker out; stop working on it \
                 (the attempt is not spent)"
            ),
        )
    }
}

impl ApiError {
    /// A worker call whose token may not act as the worker id, or may not register one
    /// more (docs/security.md).
    pub fn worker_refused(refusal: tasktable_core::ownership::WorkerRefusal) -> Self {
        use tasktable_core::ownership::WorkerRefusal::*;
        let code = match refusal {
            NotOwned { .. } | InProcess { .. } => "worker_not_owned",
            TooMany { .. } => "too_many_workers",
            GroupsNotRegistered { .. } => "worker_groups_unregistered",
        };
        Self::new(StatusCode::FORBIDDEN, code, refusal.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = json!({"error": {"code": self.code, "message": self.message}});
        let mut response = (self.status, axum::Json(body)).into_response();
        if self.status == StatusCode::TOO_MANY_REQUESTS {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"tasktable\""),
            );
        }
        response
    }
}

impl From<StoreError> for ApiError {
    fn from(err: StoreError) -> Self {
        let message = err.to_string();
        let unreachable = err.is_unreachable();
        match err {
            StoreError::NotFound(_) | StoreError::ScheduleNotFound(_) => {
                ApiError::not_found(message)
            }
            StoreError::ScheduleExists(_) => {
                ApiError::new(StatusCode::CONFLICT, "schedule_exists", message)
            }
            StoreError::IllegalTransition { .. } => {
                ApiError::new(StatusCode::CONFLICT, "illegal_transition", message)
            }
            StoreError::BatchRefused { .. } => {
                ApiError::new(StatusCode::CONFLICT, "batch_refused", message)
            }
            StoreError::InvalidTask { .. }
            | StoreError::InvalidInput(_)
            | StoreError::InvalidSchedule(_) => ApiError::invalid(message),
            StoreError::WorkerRefused(refusal) => ApiError::worker_refused(refusal),
            StoreError::PayloadTooLarge { .. } => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", message)
            }
            StoreError::Migration(_) | StoreError::Database(_) => {
                // An unreachable database is told once, by the store, not once a request.
                if !unreachable {
                    tracing::error!(error = %message, "store call failed");
                }
                ApiError::new(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "database_unavailable",
                    "the database could not complete the request; retry it (a submit with an idempotency key is safe to repeat)",
                )
            }
        }
    }
}
