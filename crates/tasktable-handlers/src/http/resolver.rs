//! Name resolution for the HTTP client that hands the connector only the addresses the
//! [`HttpPolicy`] allows. The connector dials exactly what this returns, so the address
//! checked is the address connected to: a name cannot resolve to one address when checked
//! and another when dialled.

use super::policy::HttpPolicy;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

#[derive(Debug)]
pub(super) struct GuardedResolver {
    pub policy: Arc<HttpPolicy>,
}

impl Resolve for GuardedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<IpAddr> = match policy.pinned(&host) {
                Some(addrs) => addrs.to_vec(),
                // Port 0: the client puts the URL's port in.
                None => tokio::net::lookup_host((host.as_str(), 0))
                    .await?
                    .map(|addr| addr.ip())
                    .collect(),
            };
            let mut refused = None;
            let mut allowed = Vec::new();
            for ip in found {
                match policy.check(Some(&host), ip) {
                    Ok(()) => allowed.push(SocketAddr::new(ip, 0)),
                    Err(why) => refused = refused.or(Some(why)),
                }
            }
            // A name with public and other addresses is dialled on the public ones only.
            match (allowed.is_empty(), refused) {
                (false, _) => Ok(Box::new(allowed.into_iter()) as Addrs),
                (true, Some(why)) => Err(why.into()),
                (true, None) => Err(io::Error::new(
                    io::ErrorKind::NotFound,
                    format!("{host:?} resolves to no address"),
                )
                .into()),
            }
        })
    }
}
