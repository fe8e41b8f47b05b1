//! Slows down repeated failed sign-ins, per client address and for all clients together.
//!
//! Each client address may fail a few times freely; after that every further attempt must
//! wait, and the wait doubles with each failure up to a ceiling. All clients together get
//! a larger allowance under the same rule, so an attacker who rotates addresses is slowed
//! too. The price is that such an attacker slows everyone's sign-in; sessions already open
//! and the API's bearer tokens are not affected. A record is forgotten after a quiet
//! spell, and a success clears its address's record.
//!
//! An attempt counts as a failure when it starts, and is taken back if it succeeds, so a
//! burst of parallel attempts cannot all pass before the first failure is recorded.
//! Time is passed in, so the rule is tested without waiting.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How failed sign-ins are slowed down.
#[derive(Debug, Clone)]
pub struct ThrottleConfig {
    /// Failures one client address may make before its attempts must wait. Default 5.
    pub client_free: u32,
    /// Failures all clients together may make before every attempt must wait. Default 50.
    pub global_free: u32,
    /// The first wait; each further failure doubles it. Default 1 s.
    pub first_wait: Duration,
    /// The longest wait. Default 5 minutes.
    pub max_wait: Duration,
    /// Failures are forgotten after this long without a new one. Default 15 minutes.
    pub forget_after: Duration,
    /// Most client addresses remembered; beyond it the quietest are forgotten. Default
    /// 10,000.
    pub max_clients: usize,
}

impl Default for ThrottleConfig {
    fn default() -> Self {
        ThrottleConfig {
            client_free: 5,
            global_free: 50,
            first_wait: Duration::from_secs(1),
            max_wait: Duration::from_secs(300),
            forget_after: Duration::from_secs(900),
            max_clients: 10_000,
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Strikes {
    failures: u32,
    last: Instant,
}

impl Strikes {
    /// When the next attempt may start, with `free` failures allowed before any wait.
    fn ready_at(&self, free: u32, config: &ThrottleConfig) -> Instant {
        let Some(over) = self.failures.checked_sub(free) else {
            return self.last;
        };
        let doubled = config
            .first_wait
            .checked_mul(1u32.checked_shl(over).unwrap_or(u32::MAX))
            .unwrap_or(config.max_wait);
        self.last + doubled.min(config.max_wait)
    }

    fn stale(&self, now: Instant, config: &ThrottleConfig) -> bool {
        now.saturating_duration_since(self.last) >= config.forget_after
    }
}

/// The failed sign-ins of every client address and of all of them together.
#[derive(Debug)]
pub struct SignInThrottle {
    config: ThrottleConfig,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    clients: HashMap<IpAddr, Strikes>,
    global: Option<Strikes>,
}

/// The client a sign-in is counted against: its address, or for IPv6 its /64 network,
/// which one machine usually holds whole.
fn client_key(addr: IpAddr) -> IpAddr {
    match addr {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let mut seg = v6.segments();
                seg[4..].fill(0);
                IpAddr::V6(seg.into())
            }
        },
        v4 => v4,
    }
}

impl SignInThrottle {
    pub fn new(config: ThrottleConfig) -> Self {
        SignInThrottle {
            config,
            state: Mutex::default(),
        }
    }

    /// Starts a sign-in attempt from `client` at `now`, counted as a failure until
    /// [`SignInThrottle::succeeded`] takes it back. `Err` holds how long to wait first;
    /// a refused attempt counts for nothing.
    pub fn attempt(&self, client: IpAddr, now: Instant) -> Result<(), Duration> {
        let config = &self.config;
        let key = client_key(client);
        let mut state = self.state.lock().expect("throttle lock");
        state.global = state.global.filter(|g| !g.stale(now, config));
        if state
            .clients
            .get(&key)
            .is_some_and(|s| s.stale(now, config))
        {
            state.clients.remove(&key);
        }
        let ready = [
            state
                .clients
                .get(&key)
                .map(|s| s.ready_at(config.client_free, config)),
            state.global.map(|g| g.ready_at(config.global_free, config)),
        ]
        .into_iter()
        .flatten()
        .max();
        if let Some(ready) = ready.filter(|r| *r > now) {
            return Err(ready - now);
        }
        if !state.clients.contains_key(&key) && state.clients.len() >= config.max_clients {
            state.clients.retain(|_, s| !s.stale(now, config));
            if state.clients.len() >= config.max_clients {
                let quietest = state
                    .clients
                    .iter()
                    .min_by_key(|(_, s)| s.last)
                    .map(|(k, _)| *k);
                if let Some(quietest) = quietest {
                    state.clients.remove(&quietest);
                }
            }
        }
        let strike = |s: Option<Strikes>| Strikes {
            failures: s.map_or(0, |s| s.failures).saturating_add(1),
            last: now,
        };
        let client_strikes = strike(state.clients.get(&key).copied());
        state.clients.insert(key, client_strikes);
        state.global = Some(strike(state.global));
        Ok(())
    }

    /// Takes back the failure [`SignInThrottle::attempt`] counted, and forgets the client's
    /// earlier ones.
    pub fn succeeded(&self, client: IpAddr) {
        let mut state = self.state.lock().expect("throttle lock");
        state.clients.remove(&client_key(client));
        if let Some(g) = &mut state.global {
            g.failures = g.failures.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    const A: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1));
    const B: IpAddr = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));

    fn throttle(client_free: u32, global_free: u32) -> SignInThrottle {
        SignInThrottle::new(ThrottleConfig {
            client_free,
            global_free,
            first_wait: Duration::from_secs(1),
            max_wait: Duration::from_secs(8),
            forget_after: Duration::from_secs(60),
            max_clients: 100,
        })
    }

    fn secs(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn a_client_fails_freely_then_waits_twice_as_long_each_time_up_to_the_ceiling() {
        let t = throttle(3, 1000);
        let t0 = Instant::now();
        for _ in 0..3 {
            t.attempt(A, t0).unwrap();
        }
        assert_eq!(t.attempt(A, t0), Err(secs(1)));
        let mut now = t0;
        let mut waits = Vec::new();
        for _ in 0..6 {
            let wait = t.attempt(A, now).unwrap_err();
            waits.push(wait.as_secs());
            now += wait;
            t.attempt(A, now).unwrap();
        }
        assert_eq!(waits, [1, 2, 4, 8, 8, 8]);
        assert!(t.attempt(B, now).is_ok(), "another address is not slowed");
    }

    #[test]
    fn a_success_clears_the_clients_failures() {
        let t = throttle(2, 1000);
        let t0 = Instant::now();
        t.attempt(A, t0).unwrap();
        t.attempt(A, t0).unwrap();
        t.succeeded(A);
        for _ in 0..2 {
            t.attempt(A, t0).unwrap();
        }
        assert!(t.attempt(A, t0).is_err());
    }

    /// Fails a sign-in from `client` as soon as it is allowed from `now`; returns when.
    fn fail_when_allowed(t: &SignInThrottle, client: IpAddr, now: Instant) -> Instant {
        let at = now + t.attempt(client, now).err().unwrap_or_default();
        if at > now {
            t.attempt(client, at).unwrap();
        }
        at
    }

    #[test]
    fn failures_are_forgotten_after_a_quiet_spell() {
        let t = throttle(1, 1000);
        let mut now = Instant::now();
        for _ in 0..6 {
            now = fail_when_allowed(&t, A, now);
        }
        assert_eq!(t.attempt(A, now), Err(secs(8)));
        let later = now + secs(60);
        t.attempt(A, later).unwrap();
        assert_eq!(t.attempt(A, later), Err(secs(1)), "counted from one again");
    }

    #[test]
    fn all_clients_together_are_slowed_once_the_global_allowance_is_spent() {
        let t = throttle(1000, 4);
        let t0 = Instant::now();
        for i in 0..4u8 {
            t.attempt(IpAddr::V4(Ipv4Addr::new(10, 1, 0, i)), t0)
                .unwrap();
        }
        assert_eq!(t.attempt(B, t0), Err(secs(1)), "a new address waits too");
        assert!(t.attempt(B, t0 + secs(1)).is_ok());
    }

    #[test]
    fn a_refused_attempt_counts_for_nothing() {
        let t = throttle(1, 1000);
        let t0 = Instant::now();
        t.attempt(A, t0).unwrap();
        for _ in 0..50 {
            assert_eq!(t.attempt(A, t0), Err(secs(1)));
        }
        assert!(t.attempt(A, t0 + secs(1)).is_ok());
    }

    #[test]
    fn an_ipv6_network_counts_as_one_client() {
        let t = throttle(1, 1000);
        let t0 = Instant::now();
        t.attempt("2001:db8:1:2::1".parse().unwrap(), t0).unwrap();
        assert!(t
            .attempt("2001:db8:1:2:ffff::9".parse().unwrap(), t0)
            .is_err());
        assert!(t.attempt("2001:db8:1:3::1".parse().unwrap(), t0).is_ok());
    }

    #[test]
    fn remembered_clients_are_bounded() {
        let t = throttle(1, u32::MAX);
        let t0 = Instant::now();
        for i in 0..500u32 {
            t.attempt(
                IpAddr::V4(Ipv4Addr::from(i)),
                t0 + Duration::from_millis(i.into()),
            )
            .unwrap();
        }
        assert_eq!(t.state.lock().unwrap().clients.len(), 100);
    }
}
