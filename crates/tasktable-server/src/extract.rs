//! Extractors that turn every malformed request into an [`ApiError`] that says what is
//! wrong, instead of axum's plain-text rejections.

use crate::error::ApiError;
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;

/// Who a request's changes are recorded as in the event log: its token's name and role,
/// as `cli` when the request comes from the `tasktable` command line (by its user
/// agent, which only sorts the log: the token is what authorises).
#[derive(Debug, Clone)]
pub struct Caller(pub tasktable_core::Actor);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _state: &S) -> Result<Self, Self::Rejection> {
        use tasktable_core::ActorKind;
        let principal = parts
            .extensions
            .get::<crate::auth::Principal>()
            .ok_or_else(|| {
                ApiError::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    "the route has no authorised caller",
                )
            })?;
        let cli = parts
            .headers
            .get(axum::http::header::USER_AGENT)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|ua| ua.starts_with("tasktable-cli/"));
        let kind = if cli {
            ActorKind::Cli
        } else {
            ActorKind::Token
        };
        Ok(Caller(principal.actor(kind)))
    }
}

/// A JSON body: an object, read into `T`. (serde would also read a struct from an
/// array of its fields in order, which the API does not take.)
#[derive(Debug)]
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let value = match axum::Json::<serde_json::Value>::from_request(req, state).await {
            Ok(axum::Json(value)) => value,
            Err(rejection) => return Err(json_rejection(rejection)),
        };
        if !value.is_object() {
            return Err(ApiError::invalid(
                "request body does not match the expected shape: expected a JSON object",
            ));
        }
        shaped(value).map(Body)
    }
}

/// `value` read into `T` (the value being a JSON object), as [`Body`] reads it: an error
/// names the field at fault.
pub fn shaped<T: DeserializeOwned>(value: serde_json::Value) -> Result<T, ApiError> {
    serde_path_to_error::deserialize(value).map_err(|e| {
        ApiError::invalid(format!(
            "request body does not match the expected shape: {e}"
        ))
    })
}

fn json_rejection(rejection: JsonRejection) -> ApiError {
    match rejection {
        JsonRejection::JsonDataError(e) => ApiError::invalid(format!(
            "request body does not match the expected shape: {}",
            source_text(&e)
        )),
        JsonRejection::JsonSyntaxError(e) => ApiError::bad_request(
            "malformed_json",
            format!("request body is not valid JSON: {}", source_text(&e)),
        ),
        JsonRejection::MissingJsonContentType(_) => ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "send the body as JSON with Content-Type: application/json",
        ),
        JsonRejection::BytesRejection(e) => bytes_rejection(e),
        other => ApiError::bad_request("bad_body", other.body_text()),
    }
}

fn body_too_large() -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "body_too_large",
        "request body is larger than the server's limit (--max-body-bytes)",
    )
}

/// Refuses a request whose `Content-Length` is over `max` before any of its body is read:
/// the client learns at once, and the server spends nothing on bytes it would refuse. A
/// body without a length (chunked) is cut off at the limit while it is read instead.
pub async fn refuse_announced_oversize(
    axum::extract::State(max): axum::extract::State<usize>,
    req: Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let announced = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok());
    if announced.is_some_and(|len| len > max as u64) {
        return axum::response::IntoResponse::into_response(body_too_large());
    }
    next.run(req).await
}

fn bytes_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        body_too_large()
    } else {
        ApiError::bad_request("bad_body", rejection.body_text())
    }
}

/// A body read whole, for handlers that parse it themselves. axum's own extractor answers
/// a body over the limit in plain text; this one in the API's JSON error.
#[derive(Debug)]
pub struct RawBody(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawBody {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        Bytes::from_request(req, state)
            .await
            .map(RawBody)
            .map_err(bytes_rejection)
    }
}

/// The body of an operation that takes no values: empty, or `{}`. Anything else is
/// refused rather than ignored, so a client that thinks it is sending an option learns
/// that it is not.
#[derive(Debug)]
pub struct NoValues;

impl<S: Send + Sync> FromRequest<S> for NoValues {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawBody(bytes) = RawBody::from_request(req, state).await?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(NoValues);
        }
        let value: serde_json::Value = serde_json::from_slice(&bytes).map_err(|e| {
            ApiError::bad_request(
                "malformed_json",
                format!("request body is not valid JSON: {e}"),
            )
        })?;
        match value.as_object() {
            Some(fields) if fields.is_empty() => Ok(NoValues),
            Some(fields) => Err(ApiError::invalid(format!(
                "this operation takes no values, so send {{}} or no body; got {}",
                fields
                    .keys()
                    .map(|k| format!("{k:?}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
            None => Err(ApiError::invalid(
                "request body must be a JSON object: {} or no body",
            )),
        }
    }
}

/// The innermost message of an error chain: serde's own words, with line and column.
fn source_text(err: &dyn std::error::Error) -> String {
    let mut inner = err;
    while let Some(next) = inner.source() {
        inner = next;
    }
    inner.to_string()
}

/// Query-string parameters.
#[derive(Debug)]
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e: QueryRejection| {
                ApiError::bad_request(
                    "invalid_query",
                    format!("bad query parameters: {}", source_text(&e)),
                )
            })
    }
}

/// Path parameters.
#[derive(Debug)]
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e: PathRejection| {
                ApiError::bad_request("invalid_path", format!("bad path: {}", e.body_text()))
            })
    }
}
