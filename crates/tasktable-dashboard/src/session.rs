//! Sessions held on the server, their cookie, and CSRF protection.
//!
//! Signing in exchanges a token for a session: the cookie carries only a random session id
//! (`HttpOnly`, `SameSite=Strict`, and `Secure` over HTTPS), never the token. Every form
//! carries the session's CSRF token, compared in constant time before any change is made,
//! so a page on another site cannot act in an operator's name even where a browser would
//! send the cookie.
//!
//! The store is bounded: a session ends at its expiry, and when the store is full the
//! oldest one ends to make room. Every session lasts as long, so creation order is expiry
//! order, and both come off the front of one index.

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use subtle::ConstantTimeEq;
use tasktable_server::{Principal, Role};

pub const COOKIE: &str = "tasktable_session";

#[derive(Debug, Clone)]
pub struct Session {
    pub id: String,
    pub principal: Principal,
    pub csrf: String,
    expires: Instant,
    /// Its place in creation order.
    seq: u64,
}

impl Session {
    /// Whether this session may change tasks and queues.
    pub fn can_act(&self) -> bool {
        matches!(self.principal.role, Role::Admin | Role::Operator)
    }

    /// The signed-in user as the event log records their changes.
    pub fn actor(&self) -> tasktable_core::Actor {
        self.principal.actor(tasktable_core::ActorKind::Dashboard)
    }
}

/// Sessions of signed-in users, in memory: a restart signs everyone out.
#[derive(Debug)]
pub struct Sessions {
    max: usize,
    max_per_token: usize,
    ttl: Duration,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    by_id: HashMap<String, Session>,
    /// Session ids by creation, oldest first.
    order: BTreeMap<u64, String>,
    /// Each token's sessions by creation, oldest first.
    by_token: HashMap<String, BTreeSet<u64>>,
    next_seq: u64,
}

impl Inner {
    fn remove_oldest(&mut self) {
        if let Some((&seq, _)) = self.order.first_key_value() {
            self.remove_seq(seq);
        }
    }

    fn remove_seq(&mut self, seq: u64) {
        let Some(id) = self.order.remove(&seq) else {
            return;
        };
        if let Some(session) = self.by_id.remove(&id) {
            let name = &session.principal.name;
            if let Some(seqs) = self.by_token.get_mut(name) {
                seqs.remove(&seq);
                if seqs.is_empty() {
                    self.by_token.remove(name);
                }
            }
        }
    }
}

fn random_hex() -> String {
    hex::encode(rand::random::<[u8; 32]>())
}

impl Sessions {
    /// At most `max` sessions (at least one), each lasting `ttl`, and at most
    /// `max_per_token` of one token's (at least one): a token signing in again and again
    /// ends its own oldest sessions, never another token's, until `max` is reached.
    pub fn new(max: usize, max_per_token: usize, ttl: Duration) -> Self {
        Sessions {
            max: max.max(1),
            max_per_token: max_per_token.max(1),
            ttl,
            inner: Mutex::default(),
        }
    }

    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    pub fn create(&self, principal: Principal) -> Session {
        self.create_at(principal, Instant::now())
    }

    fn create_at(&self, principal: Principal, now: Instant) -> Session {
        let mut inner = self.inner.lock().expect("sessions lock");
        while let Some((_, id)) = inner.order.first_key_value() {
            if inner.by_id.get(id).is_some_and(|s| s.expires > now) {
                break;
            }
            inner.remove_oldest();
        }
        let name = principal.name.clone();
        while let Some(&oldest) = inner
            .by_token
            .get(&name)
            .filter(|seqs| seqs.len() >= self.max_per_token)
            .and_then(|seqs| seqs.first())
        {
            inner.remove_seq(oldest);
        }
        while inner.by_id.len() >= self.max {
            inner.remove_oldest();
        }
        let seq = inner.next_seq;
        inner.next_seq += 1;
        inner.by_token.entry(name).or_default().insert(seq);
        let session = Session {
            id: random_hex(),
            principal,
            csrf: random_hex(),
            expires: now + self.ttl,
            seq,
        };
        inner.order.insert(seq, session.id.clone());
        inner.by_id.insert(session.id.clone(), session.clone());
        session
    }

    pub fn get(&self, id: &str) -> Option<Session> {
        self.get_at(id, Instant::now())
    }

    fn get_at(&self, id: &str, now: Instant) -> Option<Session> {
        let inner = self.inner.lock().expect("sessions lock");
        inner.by_id.get(id).filter(|s| s.expires > now).cloned()
    }

    pub fn remove(&self, id: &str) {
        let mut inner = self.inner.lock().expect("sessions lock");
        if let Some(seq) = inner.by_id.get(id).map(|s| s.seq) {
            inner.remove_seq(seq);
        }
    }

    /// Sessions held, the expired ones not yet swept included.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().expect("sessions lock").by_id.len()
    }
}

/// Whether the browser reached us over HTTPS, as a TLS-terminating proxy in front says
/// (`X-Forwarded-Proto: https` or `Forwarded: proto=https`). The server itself speaks only
/// plain HTTP. The headers are believed from anyone: they can only add `Secure` to a
/// cookie, which never exposes it, only keeps it off plain HTTP.
pub fn over_https(headers: &HeaderMap) -> bool {
    let values = |name| {
        headers
            .get_all(name)
            .into_iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split([',', ';']))
            .map(str::trim)
    };
    values("x-forwarded-proto").any(|p| p.eq_ignore_ascii_case("https"))
        || values("forwarded").any(|pair| {
            pair.split_once('=').is_some_and(|(k, v)| {
                k.trim().eq_ignore_ascii_case("proto")
                    && v.trim().trim_matches('"').eq_ignore_ascii_case("https")
            })
        })
}

fn attributes(secure: bool) -> &'static str {
    if secure {
        "Path=/ui; HttpOnly; SameSite=Strict; Secure"
    } else {
        "Path=/ui; HttpOnly; SameSite=Strict"
    }
}

/// The `Set-Cookie` value that starts `session`.
pub fn cookie_for(session: &Session, ttl: Duration, secure: bool) -> String {
    format!(
        "{COOKIE}={}; {}; Max-Age={}",
        session.id,
        attributes(secure),
        ttl.as_secs()
    )
}

/// The `Set-Cookie` value that ends a session.
pub fn cookie_cleared(secure: bool) -> String {
    format!("{COOKIE}=; {}; Max-Age=0", attributes(secure))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn someone() -> Principal {
        Principal {
            name: "ops".into(),
            role: Role::Operator,
            limits: Default::default(),
            authenticated: true,
        }
    }

    #[test]
    fn a_session_ends_at_its_expiry() {
        let sessions = Sessions::new(10, 10, Duration::from_secs(60));
        let t0 = Instant::now();
        let s = sessions.create_at(someone(), t0);
        assert!(sessions
            .get_at(&s.id, t0 + Duration::from_secs(59))
            .is_some());
        assert!(sessions
            .get_at(&s.id, t0 + Duration::from_secs(60))
            .is_none());
        // The next sign-in sweeps it out of memory.
        sessions.create_at(someone(), t0 + Duration::from_secs(61));
        assert_eq!(sessions.len(), 1);
    }

    #[test]
    fn a_full_store_ends_the_oldest_session_first() {
        let sessions = Sessions::new(3, 3, Duration::from_secs(3600));
        let t0 = Instant::now();
        let made: Vec<Session> = (0..5)
            .map(|i| sessions.create_at(someone(), t0 + Duration::from_secs(i)))
            .collect();
        assert_eq!(sessions.len(), 3);
        let alive: Vec<bool> = made
            .iter()
            .map(|s| {
                sessions
                    .get_at(&s.id, t0 + Duration::from_secs(5))
                    .is_some()
            })
            .collect();
        assert_eq!(alive, [false, false, true, true, true]);
    }

    #[test]
    fn one_token_signing_in_again_and_again_ends_only_its_own_sessions() {
        let sessions = Sessions::new(100, 5, Duration::from_secs(3600));
        let t0 = Instant::now();
        let admin = Principal {
            name: "admin".into(),
            role: Role::Admin,
            limits: Default::default(),
            authenticated: true,
        };
        let kept = sessions.create_at(admin, t0);
        let mine: Vec<Session> = (0..1000)
            .map(|i| sessions.create_at(someone(), t0 + Duration::from_millis(i)))
            .collect();
        let later = t0 + Duration::from_secs(2);
        assert!(
            sessions.get_at(&kept.id, later).is_some(),
            "the admin stays signed in"
        );
        let alive = mine
            .iter()
            .filter(|s| sessions.get_at(&s.id, later).is_some())
            .count();
        assert_eq!(alive, 5, "the token keeps its newest five");
        assert!(sessions.get_at(&mine[999].id, later).is_some());
        let inner = sessions.inner.lock().unwrap();
        assert_eq!((inner.by_id.len(), inner.order.len()), (6, 6));
        assert_eq!(inner.by_token["ops"].len(), 5);
    }

    #[test]
    fn signing_out_frees_the_place_and_its_index_entry() {
        let sessions = Sessions::new(2, 2, Duration::from_secs(3600));
        let t0 = Instant::now();
        let a = sessions.create_at(someone(), t0);
        let b = sessions.create_at(someone(), t0);
        sessions.remove(&a.id);
        let c = sessions.create_at(someone(), t0);
        assert!(sessions.get_at(&b.id, t0).is_some(), "nobody evicted");
        assert!(sessions.get_at(&c.id, t0).is_some());
        assert_eq!(sessions.inner.lock().unwrap().order.len(), 2);
        assert_eq!(sessions.inner.lock().unwrap().by_token["ops"].len(), 2);
    }

    #[test]
    fn https_is_recognised_from_either_proxy_header() {
        let with = |name: &'static str, value: &'static str| {
            let mut h = HeaderMap::new();
            h.insert(name, value.parse().unwrap());
            over_https(&h)
        };
        assert!(with("x-forwarded-proto", "https"));
        assert!(with("x-forwarded-proto", "HTTPS, http"));
        assert!(with(
            "forwarded",
            "for=10.0.0.1;proto=https;host=tasks.example"
        ));
        assert!(with("forwarded", "proto=\"https\""));
        assert!(!with("x-forwarded-proto", "http"));
        assert!(!with("forwarded", "for=10.0.0.1;proto=http"));
        assert!(!over_https(&HeaderMap::new()));
    }

    #[test]
    fn the_cookie_is_secure_only_when_asked() {
        let sessions = Sessions::new(1, 1, Duration::from_secs(60));
        let s = sessions.create(someone());
        let plain = cookie_for(&s, sessions.ttl(), false);
        assert!(plain.contains("HttpOnly; SameSite=Strict") && !plain.contains("Secure"));
        assert!(cookie_for(&s, sessions.ttl(), true).ends_with("; Secure; Max-Age=60"));
        assert!(cookie_cleared(true).contains("Secure"));
    }
}
