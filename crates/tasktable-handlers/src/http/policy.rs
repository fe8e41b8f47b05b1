//! Which addresses an `http` task may connect to: public ones, and those the operator allows.

use super::address::{embedded_v4, non_public};
use ipnet::IpNet;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;
use url::{Host, Url};

/// Which addresses [`HttpHandler`](super::HttpHandler) may connect to.
///
/// By default ([`HttpPolicy::default`]) only public addresses: loopback, private,
/// link-local (cloud metadata), carrier-grade NAT, multicast, reserved and unspecified
/// addresses are refused, in IPv4 and IPv6, including IPv6 forms that carry such an IPv4
/// address. The check is made on each address the handler is about to dial, after name
/// resolution and on every redirect, so a name that resolves to a refused address (DNS
/// rebinding) or a redirect to one cannot get through.
#[derive(Debug, Clone, Default)]
pub struct HttpPolicy {
    nets: Vec<Network>,
    /// Lower case, without a trailing dot.
    hosts: BTreeSet<String>,
    pinned: BTreeMap<String, Vec<IpAddr>>,
}

impl HttpPolicy {
    /// Also allows every address in `net`, whatever name leads to it.
    pub fn allow_net(mut self, net: Network) -> Self {
        self.nets.push(net);
        self
    }

    /// Also allows whatever addresses `host` resolves to, when a URL names it exactly
    /// (`hooks.internal` allows neither `a.hooks.internal` nor `hooks.internal.example`).
    /// Whoever controls that name's DNS then decides where requests go.
    pub fn allow_host(mut self, host: HostName) -> Self {
        self.hosts.insert(host.0);
        self
    }

    /// Answers lookups of `host` with `addrs` instead of asking the system's resolver,
    /// like an `/etc/hosts` entry of this handler's own. It opens nothing: the addresses
    /// are checked like any other answer, so a host pinned to 127.0.0.1 is refused unless
    /// loopback is allowed. Tests use it to point a name at a local server.
    pub fn resolve_to(mut self, host: HostName, addrs: impl IntoIterator<Item = IpAddr>) -> Self {
        self.pinned.insert(host.0, addrs.into_iter().collect());
        self
    }

    /// The addresses `host` is pinned to with [`HttpPolicy::resolve_to`].
    pub(super) fn pinned(&self, host: &str) -> Option<&[IpAddr]> {
        self.pinned.get(&normalise(host)).map(Vec::as_slice)
    }

    /// Whether the handler may dial `ip`; `host` is the name that resolved to it, `None`
    /// when the URL gave the address itself.
    pub(super) fn check(&self, host: Option<&str>, ip: IpAddr) -> Result<(), Refused> {
        if host.is_some_and(|h| self.hosts.contains(&normalise(h))) || self.allows_net(ip) {
            return Ok(());
        }
        match non_public(ip) {
            None => Ok(()),
            Some(what) => Err(Refused::new(host, ip, &what)),
        }
    }

    /// Whether the handler may dial the address a URL gives as its host. A URL that names
    /// a host is checked when the name resolves, by the client's resolver.
    pub(super) fn check_url(&self, url: &Url) -> Result<(), Refused> {
        match url.host() {
            Some(Host::Ipv4(ip)) => self.check(None, ip.into()),
            Some(Host::Ipv6(ip)) => self.check(None, ip.into()),
            // The URL parser reads every spelling of an address as one; this is in case
            // a connector reads some name as an address that the parser did not.
            Some(Host::Domain(name)) => match name.parse::<IpAddr>() {
                Ok(ip) => self.check(None, ip),
                Err(_) => Ok(()),
            },
            None => Ok(()),
        }
    }

    fn allows_net(&self, ip: IpAddr) -> bool {
        let inner = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map(|(v4, _)| IpAddr::V4(v4)),
            IpAddr::V4(_) => None,
        };
        self.nets
            .iter()
            .any(|net| net.0.contains(&ip) || inner.is_some_and(|v4| net.0.contains(&v4)))
    }
}

fn normalise(host: &str) -> String {
    host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase()
}

/// Why the handler would not connect: which address, what it is, and how to allow it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Refused(String);

impl Refused {
    fn new(host: Option<&str>, ip: IpAddr, what: &str) -> Self {
        let single = IpNet::from(ip);
        let (whose, how) = match host {
            Some(host) => (
                format!(", which {host:?} resolves to"),
                format!(
                    "--http-allow-net {single} or --http-allow-host {host} \
                     (HttpPolicy::allow_net, HttpPolicy::allow_host)"
                ),
            ),
            None => (
                String::new(),
                format!("--http-allow-net {single} (HttpPolicy::allow_net)"),
            ),
        };
        Refused(format!(
            "refused to connect to {ip}{whose}: the address is {what}, and this worker's \
             http handler connects only to public addresses unless allowed; to allow it, \
             start the worker with {how}"
        ))
    }
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Refused {}

/// An IP network the operator allows, written `10.0.0.0/8`, `fd00::/8`, or as a single
/// address (`127.0.0.1` is `127.0.0.1/32`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Network(IpNet);

impl FromStr for Network {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        if let Ok(ip) = text.parse::<IpAddr>() {
            return Ok(Network(IpNet::from(ip)));
        }
        let net: IpNet = text.parse().map_err(|_| {
            format!("{text:?} is not a network: write it like 10.0.0.0/8, fd00::/8 or 127.0.0.1")
        })?;
        if net.trunc() != net {
            return Err(format!(
                "{text:?} has address bits set past its /{} prefix: did you mean {}?",
                net.prefix_len(),
                net.trunc()
            ));
        }
        Ok(Network(net))
    }
}

impl fmt::Display for Network {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

/// A host name the operator allows, matched exactly and without regard to case
/// (`Hooks.Internal.` is `hooks.internal`). Not an address, and no wildcards.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostName(String);

impl FromStr for HostName {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let text = text.trim();
        let bare = text.trim_start_matches('[').trim_end_matches(']');
        if bare.parse::<IpAddr>().is_ok() {
            return Err(format!(
                "{text:?} is an address, not a host name: allow addresses as networks \
                 (--http-allow-net, HttpPolicy::allow_net)"
            ));
        }
        if text.contains('*') {
            return Err(format!(
                "{text:?}: wildcards are not supported; allow each host name"
            ));
        }
        match Host::parse(text) {
            Ok(Host::Domain(name)) if !name.is_empty() && name != "." => {
                Ok(HostName(normalise(&name)))
            }
            Ok(_) => Err(format!("{text:?} is an address, not a host name")),
            Err(e) => Err(format!("{text:?} is not a host name: {e}")),
        }
    }
}

impl fmt::Display for HostName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    #[test]
    fn public_addresses_pass_and_others_are_refused_with_how_to_allow_them() {
        let policy = HttpPolicy::default();
        assert_eq!(
            policy.check(Some("example.com"), ip("93.184.215.14")),
            Ok(())
        );

        let err = policy.check(None, ip("169.254.169.254")).unwrap_err().0;
        assert!(
            err.starts_with("refused to connect to 169.254.169.254: "),
            "{err}"
        );
        assert!(err.contains("--http-allow-net 169.254.169.254/32"), "{err}");

        let err = policy.check(Some("db.local"), ip("::1")).unwrap_err().0;
        assert!(err.contains("::1, which \"db.local\" resolves to"), "{err}");
        for how in ["--http-allow-net ::1/128", "--http-allow-host db.local"] {
            assert!(err.contains(how), "{how:?} in {err}");
        }
    }

    #[test]
    fn an_allowed_network_also_allows_its_addresses_in_ipv6_form() {
        let policy = HttpPolicy::default().allow_net("10.0.0.0/8".parse().unwrap());
        assert_eq!(policy.check(None, ip("10.9.8.7")), Ok(()));
        assert_eq!(policy.check(None, ip("::ffff:10.9.8.7")), Ok(()));
        assert!(policy.check(None, ip("192.168.0.1")).is_err());
        assert!(policy.check(None, ip("127.0.0.1")).is_err());
    }

    #[test]
    fn an_allowed_host_is_matched_exactly_without_regard_to_case_or_a_final_dot() {
        let policy = HttpPolicy::default().allow_host("Hooks.Internal.".parse().unwrap());
        for name in ["hooks.internal", "HOOKS.internal", "hooks.internal."] {
            assert_eq!(policy.check(Some(name), ip("10.0.0.5")), Ok(()), "{name}");
        }
        for name in ["a.hooks.internal", "hooks.internal.example.com"] {
            assert!(policy.check(Some(name), ip("10.0.0.5")).is_err(), "{name}");
        }
        assert!(
            policy.check(None, ip("10.0.0.5")).is_err(),
            "an address is not a name"
        );
    }

    #[test]
    fn networks_parse_from_cidr_or_a_single_address_and_refuse_mistakes() {
        for (text, want) in [
            ("10.0.0.0/8", "10.0.0.0/8"),
            (" fd00::/8 ", "fd00::/8"),
            ("127.0.0.1", "127.0.0.1/32"),
            ("::1", "::1/128"),
        ] {
            assert_eq!(text.parse::<Network>().unwrap().to_string(), want);
        }
        let err = "10.0.0.1/8".parse::<Network>().unwrap_err();
        assert!(err.contains("did you mean 10.0.0.0/8"), "{err}");
        for bad in ["", "10.0.0.0/33", "ten/8", "hooks.internal"] {
            let err = bad.parse::<Network>().unwrap_err();
            assert!(err.contains("is not a network"), "{bad:?}: {err}");
        }
    }

    #[test]
    fn host_names_refuse_addresses_wildcards_and_nonsense() {
        assert_eq!(
            "API.Example.com".parse::<HostName>().unwrap().0,
            "api.example.com"
        );
        for (bad, why) in [
            ("127.0.0.1", "is an address"),
            ("[::1]", "is an address"),
            ("::1", "is an address"),
            ("*.internal", "wildcards"),
            ("", "not a host name"),
            ("a b", "not a host name"),
            ("host/path", "not a host name"),
        ] {
            let err = bad.parse::<HostName>().unwrap_err();
            assert!(err.contains(why), "{bad:?}: {err}");
        }
    }
}
