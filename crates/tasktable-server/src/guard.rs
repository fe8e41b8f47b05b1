//! Authorization in front of every route, and JSON answers for unknown routes and methods.

use crate::auth::{Access, Principal, TokenSet};
use crate::error::ApiError;
use crate::AppState;
use axum::extract::{Request, State};
use axum::http::{header, Method, Uri};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::MethodRouter;
use std::sync::Arc;

#[derive(Clone)]
struct Guard {
    tokens: Arc<TokenSet>,
    access: Access,
}

/// `handler`, answered only for callers whose role allows `access`.
pub fn require(
    access: Access,
    state: &AppState,
    handler: MethodRouter<AppState>,
) -> MethodRouter<AppState> {
    let guard = Guard {
        tokens: state.tokens.clone(),
        access,
    };
    handler.route_layer(middleware::from_fn_with_state(guard, check))
}

async fn check(State(guard): State<Guard>, mut req: Request, next: Next) -> Response {
    let checked = authorize(&guard.tokens, guard.access, &req)
        .and_then(|principal| require_json(&req).map(|()| principal));
    match checked {
        Ok(principal) => {
            req.extensions_mut().insert(principal);
            next.run(req).await
        }
        Err(err) => err.into_response(),
    }
}

/// Every state-changing request must say its body is JSON, even when it has none. A web
/// page can send a cross-origin POST without asking first only with a form's content
/// types (or none); `application/json` makes the browser ask (a CORS preflight), which
/// this server never grants. So no page the operator visits can change anything here,
/// with or without tokens. A `DELETE` (which takes no body) needs no content type: a
/// browser asks before sending any `DELETE` across origins, whatever its headers.
pub fn require_json(req: &Request) -> Result<(), ApiError> {
    if [Method::GET, Method::HEAD, Method::DELETE].contains(req.method()) {
        return Ok(());
    }
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|mime| mime.trim().eq_ignore_ascii_case("application/json"));
    if is_json {
        Ok(())
    } else {
        Err(ApiError::new(
            axum::http::StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            format!(
                "{} requests must send Content-Type: application/json, even with an empty body",
                req.method()
            ),
        ))
    }
}

/// The caller of `req`, if its token allows `access`. With no tokens configured every
/// caller is an anonymous admin: the binary allows that only on loopback.
pub fn authorize(tokens: &TokenSet, access: Access, req: &Request) -> Result<Principal, ApiError> {
    if tokens.is_empty() {
        return Ok(Principal::anonymous());
    }
    let Some(value) = req.headers().get(header::AUTHORIZATION) else {
        return Err(ApiError::unauthorized(
            "missing bearer token: send `Authorization: Bearer <token>`",
        ));
    };
    let token = value
        .to_str()
        .ok()
        .and_then(|v| {
            let (scheme, token) = v.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        })
        .filter(|t| !t.is_empty())
        .ok_or_else(|| {
            ApiError::unauthorized(
                "malformed Authorization header: expected `Authorization: Bearer <token>`",
            )
        })?;
    let principal = tokens
        .authenticate(token)
        .ok_or_else(|| ApiError::unauthorized("unknown or revoked token"))?;
    if !principal.role.allows(access) {
        return Err(ApiError::forbidden(format!(
            "token {:?} has role {}, which may not {}",
            principal.name,
            principal.role,
            match access {
                Access::Read => "read tasks",
                Access::Operate => "submit or change tasks",
                Access::Work => "use the worker protocol",
                Access::Admin => "run maintenance",
            }
        )));
    }
    Ok(principal)
}

pub async fn not_found(uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "no such endpoint: {}; see /api/v1/openapi.json",
        uri.path()
    ))
}

pub async fn method_not_allowed(method: Method, uri: Uri) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{method} is not allowed on {}", uri.path()),
    )
}
