//! Signing in and out. Signing in exchanges an API token for a session
//! ([`crate::session`]); failed attempts are slowed down ([`crate::throttle`]) and answered
//! 429 with `Retry-After` while a client must wait, whatever token it sends.
//!
//! With no tokens configured, authentication is off: the server listens only on loopback
//! and answers only loopback host names, and opening the sign-in page signs in as an
//! admin. The session still carries a CSRF token, and its cookie is `SameSite=Strict`, so
//! pages of other sites cannot use it.

use crate::layout::page;
use crate::session::{cookie_cleared, cookie_for, Session};
use crate::DashState;
use axum::extract::{ConnectInfo, FromRequestParts, State};
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Form;
use maud::html;
use serde::Deserialize;
use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Instant;
use tasktable_server::{Principal, Role};

/// The address a request came from. Served without connection info (as in tests that
/// drive the router directly), every client shares one unknown address, so the
/// per-client limit acts as a second global one. Behind a proxy it is the proxy's.
pub struct ClientAddr(pub IpAddr);

impl<S: Sync> FromRequestParts<S> for ClientAddr {
    type Rejection = Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Infallible> {
        let addr = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |c| c.0.ip());
        Ok(ClientAddr(addr))
    }
}

#[derive(Deserialize)]
pub struct LoginForm {
    token: String,
}

/// A session's cookie in a response that then goes to the overview.
fn signed_in(state: &DashState, headers: &HeaderMap, session: &Session) -> Response {
    let cookie = cookie_for(session, state.sessions.ttl(), state.cookie_secure(headers));
    ([(header::SET_COOKIE, cookie)], Redirect::to("/ui")).into_response()
}

pub async fn login_page(State(state): State<DashState>, headers: HeaderMap) -> Response {
    if state.app.tokens.is_empty() {
        let session = state.sessions.create(Principal::anonymous());
        return signed_in(&state, &headers, &session);
    }
    login_form(None).into_response()
}

fn login_form(error: Option<&str>) -> maud::Markup {
    let body = html! {
        h1 { "Sign in" }
        @if let Some(e) = error { div.flash.error { (e) } }
        form method="post" action="/ui/login" {
            p { label { "API token " input type="password" name="token" autofocus size="40"; } }
            p { button type="submit" { "Sign in" } }
        }
        p.muted { "Use a token with role reader, operator or admin (" code { "tasktable token new" } ")." }
    };
    page("Sign in", "", None, false, body)
}

pub async fn login(
    State(state): State<DashState>,
    ClientAddr(client): ClientAddr,
    headers: HeaderMap,
    Form(form): Form<LoginForm>,
) -> Response {
    if let Err(wait) = state.throttle.attempt(client, Instant::now()) {
        let secs = (wait.as_secs() + u64::from(wait.subsec_nanos() > 0)).max(1);
        let message = format!("Too many failed sign-ins; try again in {secs} seconds.");
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, secs.to_string())],
            login_form(Some(&message)),
        )
            .into_response();
    }
    match state.app.tokens.authenticate(form.token.trim()) {
        Some(p) if p.role != Role::Worker => {
            state.throttle.succeeded(client);
            let session = state.sessions.create(p);
            signed_in(&state, &headers, &session)
        }
        Some(_) => {
            // A real token, only of the wrong kind: not a guess.
            state.throttle.succeeded(client);
            (
                StatusCode::FORBIDDEN,
                login_form(Some("A worker token cannot sign in to the dashboard.")),
            )
                .into_response()
        }
        None => {
            tracing::info!(%client, "a dashboard sign-in with an unknown token was refused");
            (StatusCode::UNAUTHORIZED, login_form(Some("Unknown token."))).into_response()
        }
    }
}

pub async fn logout(
    State(state): State<DashState>,
    session: Session,
    headers: HeaderMap,
    Form(form): Form<HashMap<String, String>>,
) -> Response {
    if let Err(refused) = crate::actions::check(&session, &form, false) {
        return refused.into_response();
    }
    state.sessions.remove(&session.id);
    (
        [(
            header::SET_COOKIE,
            cookie_cleared(state.cookie_secure(&headers)),
        )],
        Redirect::to("/ui/login"),
    )
        .into_response()
}
