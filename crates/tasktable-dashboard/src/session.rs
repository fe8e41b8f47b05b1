//! Sign-in with an API token, sessions held on the server, and CSRF protection.
//!
//! Signing in exchanges a token for a session: the cookie carries only a random session id
//! (`HttpOnly`, `SameSite=Strict`), never the token. Every form carries the session's CSRF
//! token, compared in constant time before any change is made, so a page on another site
//! cannot act in an operator's name even where a browser would send the cookie.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use tasktable_server::{Principal, Role};

pub const COOKIE: &str = "tasktable_session";
/// How long a session lasts after sign-in.
pub const SESSION_TTL: Duration = Duration::from_secs(12 * 3600);

#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub principal: Principal,
    pub csrf: String,
    expires: Instant,
}

impl Session {
    /// Whether this session may change tasks and queues.
    pub fn can_act(&self) -> bool {
        matches!(self.principal.role, Role::Admin | Role::Operator)
    }
}

/// Sessions of signed-in users, in memory: a restart signs everyone out.
#[derive(Debug, Default)]
pub struct Sessions {
    map: Mutex<HashMap<String, Session>>,
}

fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

impl Sessions {
    pub fn create(&self, principal: Principal) -> Session {
        let session = Session {
            id: random_hex(),
            principal,
            csrf: random_hex(),
            expires: Instant::now() + SESSION_TTL,
        };
        let mut map = self.map.lock().expect("sessions lock");
        let now = Instant::now();
        map.retain(|_, s| s.expires > now);
        map.insert(session.id.clone(), session.clone());
        session
    }

    pub fn get(&self, id: &str) -> Option<Session> {
        let map = self.map.lock().expect("sessions lock");
        map.get(id).filter(|s| s.expires > Instant::now()).cloned()
    }

    pub fn remove(&self, id: &str) {
        self.map.lock().expect("sessions lock").remove(id);
    }
}

/// The `Set-Cookie` value that starts `session`.
pub fn cookie_for(session: &Session) -> String {
    format!(
        "{COOKIE}={}; Path=/ui; HttpOnly; SameSite=Strict; Max-Age={}",
        session.id,
        SESSION_TTL.as_secs()
    )
}

/// The `Set-Cookie` value that ends a session.
pub fn cookie_cleared() -> String {
    format!("{COOKIE}=; Path=/ui; HttpOnly; SameSite=Strict; Max-Age=0")
}

fn session_id(parts: &Parts) -> Option<String> {
    parts
        .headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == COOKIE)
        .map(|(_, value)| value.to_owned())
}

/// Checks a submitted CSRF token against the session's.
pub fn csrf_ok(session: &Session, submitted: &str) -> bool {
    bool::from(session.csrf.as_bytes().ct_eq(submitted.as_bytes()))
}

/// A signed-in user; pages that need one send everyone else to the sign-in page.
impl FromRequestParts<crate::DashState> for Session {
    type Rejection = Response;

    async fn from_request_parts(
        parts: &mut Parts,
        state: &crate::DashState,
    ) -> Result<Self, Self::Rejection> {
        if let Some(session) = session_id(parts).and_then(|id| state.sessions.get(&id)) {
            return Ok(session);
        }
        if parts.method == axum::http::Method::GET {
            Err(Redirect::to("/ui/login").into_response())
        } else {
            Err((StatusCode::FORBIDDEN, "sign in first: /ui/login").into_response())
        }
    }
}
