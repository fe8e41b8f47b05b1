//! The Host rule of a server without tokens: answer only requests that name this machine.
//!
//! Without tokens every caller is an admin, and the binary then listens only on loopback.
//! Loopback alone does not keep out a web page the operator happens to visit: by DNS
//! rebinding, a page at `evil.example` can have the browser send its requests to
//! 127.0.0.1 while they stay same-origin for the page, so it can read every answer and
//! post anything. Such requests still say `Host: evil.example`, a header no script can
//! set, so refusing every `Host` that is not a loopback name or address closes that door.
//!
//! With tokens the rule does not apply and is not needed: a rebinding page holds no bearer
//! token (browsers never attach one by themselves), and the dashboard's session cookie
//! belongs to the host name it was set for, never to the attacker's name, so such a page
//! reaches the server as an unauthenticated stranger. A server with tokens may also be
//! reached under any name its operator gives it, which a fixed list would get wrong.

use crate::auth::TokenSet;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::http::{header, StatusCode};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::Router;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

/// The host names and addresses a server without tokens answers to: the loopback ones
/// always (`localhost`, 127.0.0.0/8, `::1`), with any port, and those the operator adds.
///
/// `*.localhost` is not a loopback name here. RFC 6761 reserves it for loopback and
/// Chromium and Firefox resolve it so themselves, but other resolvers (Safari's, the
/// system's on some machines) ask DNS, where a hostile network can answer with anything,
/// which is the attack this rule stops. Such names can be allowed one by one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AllowedHosts {
    names: Vec<String>,
    addresses: Vec<IpAddr>,
}

/// A host the operator asked to allow that is not a host name or an IP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidHost(pub String);

/// The longest host name DNS allows.
const MAX_NAME_LEN: usize = 253;

impl AllowedHosts {
    /// Also answers requests naming `host`: a host name or an IP address, without a port.
    pub fn allow(&mut self, host: &str) -> Result<(), InvalidHost> {
        let trimmed = host.trim();
        let bare = trimmed
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .unwrap_or(trimmed);
        if let Ok(ip) = bare.parse::<IpAddr>() {
            self.addresses.push(ip);
            return Ok(());
        }
        let name = normalise(trimmed);
        let valid = !name.is_empty()
            && name.len() <= MAX_NAME_LEN
            && name.split('.').all(|label| {
                !label.is_empty()
                    && label
                        .bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
            });
        if !valid {
            return Err(InvalidHost(format!(
                "{host:?} is not a host name or an IP address; give one without a scheme, port or \
                 wildcard, such as tasks.internal or 10.0.0.5 (every port is accepted)"
            )));
        }
        self.names.push(name);
        Ok(())
    }

    /// Whether a request whose `Host` header (or URI authority) is `authority` may be
    /// answered.
    pub fn allows(&self, authority: &str) -> bool {
        let Some(host) = host_part(authority) else {
            return false;
        };
        if let Some(inside) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
            return inside
                .parse::<Ipv6Addr>()
                .is_ok_and(|ip| self.allows_ip(IpAddr::V6(ip)));
        }
        if let Ok(ip) = host.parse::<IpAddr>() {
            return self.allows_ip(ip);
        }
        let name = normalise(host);
        name == "localhost" || self.names.contains(&name)
    }

    fn allows_ip(&self, ip: IpAddr) -> bool {
        let loopback = match ip {
            IpAddr::V4(v4) => v4.is_loopback(),
            IpAddr::V6(v6) => {
                v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
            }
        };
        loopback || self.addresses.contains(&ip)
    }
}

/// Host names compare without case and without the root's trailing dot.
fn normalise(name: &str) -> String {
    name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase()
}

/// The host of `host[:port]` or `[v6][:port]` (brackets kept); `None` when the port is
/// not a number.
fn host_part(authority: &str) -> Option<&str> {
    let (host, port) = if authority.starts_with('[') {
        let end = authority.find(']')? + 1;
        let rest = &authority[end..];
        (
            &authority[..end],
            rest.strip_prefix(':').or(rest.is_empty().then_some(""))?,
        )
    } else {
        authority.rsplit_once(':').unwrap_or((authority, ""))
    };
    (!host.is_empty() && port.bytes().all(|b| b.is_ascii_digit())).then_some(host)
}

/// `app`, refusing requests that name a host `allowed` does not allow, when `tokens` is
/// empty; `app` unchanged otherwise. Apply it to the whole application (API, dashboard,
/// `/metrics`, `/healthz`) after every route is added: routes added later are not covered.
pub fn enforce(app: Router, tokens: &TokenSet, allowed: AllowedHosts) -> Router {
    if !tokens.is_empty() {
        return app;
    }
    app.layer(middleware::from_fn_with_state(Arc::new(allowed), check))
}

async fn check(State(allowed): State<Arc<AllowedHosts>>, req: Request, next: Next) -> Response {
    let headers: Vec<&str> = req
        .headers()
        .get_all(header::HOST)
        .iter()
        .map(|v| v.to_str().unwrap_or("\u{fffd}"))
        .collect();
    // HTTP/2 names the host in the URI's authority instead; when both are present each
    // must pass, so neither can smuggle another name past the check.
    let named: Vec<&str> = headers
        .iter()
        .copied()
        .chain(req.uri().authority().map(|a| a.as_str()))
        .collect();
    if !named.is_empty() && named.iter().all(|h| allowed.allows(h)) {
        return next.run(req).await;
    }
    let shown: String = named
        .first()
        .copied()
        .unwrap_or("")
        .chars()
        .take(100)
        .collect();
    tracing::info!(host = ?shown, path = %req.uri().path(), "refused a request for a host name this server does not answer to");
    ApiError::new(
        StatusCode::MISDIRECTED_REQUEST,
        "host_not_allowed",
        format!(
            "this server has no tokens, so it answers only requests addressed to this machine \
             (localhost, 127.0.0.1, [::1]), and this one named {shown:?}; use such an address, \
             start the server with --allow-host for a name of your own, or configure tokens"
        ),
    )
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_names_and_addresses_pass_with_any_port() {
        let hosts = AllowedHosts::default();
        for ok in [
            "localhost",
            "localhost:8080",
            "LocalHost.:80",
            "127.0.0.1",
            "127.0.0.1:8080",
            "127.8.9.10:1",
            "[::1]",
            "[::1]:8080",
            "[::ffff:7f00:1]:8080",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
    }

    #[test]
    fn other_names_addresses_and_malformed_hosts_are_refused() {
        let hosts = AllowedHosts::default();
        for bad in [
            "evil.example",
            "evil.example:8080",
            "localhost.evil.example",
            "evil.localhost",
            "0.0.0.0:8080",
            "10.0.0.5",
            "[::]:80",
            "[::2]",
            "127.0.0.1:http",
            "[::1]x",
            "[::1",
            ":8080",
            "",
            "user@localhost",
            "localhost:8080:1",
            "2130706433",
        ] {
            assert!(!hosts.allows(bad), "{bad}");
        }
    }

    #[test]
    fn the_operator_adds_names_and_addresses_but_not_patterns_or_ports() {
        let mut hosts = AllowedHosts::default();
        hosts.allow("Tasks.Internal").unwrap();
        hosts.allow("10.0.0.5").unwrap();
        hosts.allow("[fd00::5]").unwrap();
        for ok in [
            "tasks.internal:8080",
            "TASKS.internal.",
            "10.0.0.5:1",
            "[fd00::5]:80",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        assert!(!hosts.allows("other.internal"));
        for bad in [
            "*.internal",
            "tasks.internal:8080",
            "http://tasks",
            "",
            "a..b",
            "a b",
        ] {
            let err = hosts.allow(bad).unwrap_err();
            assert!(err.0.contains("not a host name"), "{bad}: {err}");
        }
    }
}
