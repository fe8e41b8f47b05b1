//! How many long-poll claims each token has waiting at once. Each waiting claim holds a
//! request, a wake subscription and a timer, so one token (a worker pool gone wrong, or a
//! leaked token) must not pile up unbounded numbers of them; the limit answers `429` with
//! `Retry-After` beyond it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// The count of waiting claims per token name.
#[derive(Debug, Default)]
pub struct WaitingClaims {
    counts: Mutex<HashMap<String, usize>>,
}

/// One waiting claim; dropping it (the claim answered, or its client went away) frees
/// the place.
#[derive(Debug)]
pub struct WaitSlot {
    claims: Arc<WaitingClaims>,
    token: String,
}

impl WaitingClaims {
    /// A place for one more waiting claim of `token`, if it has fewer than `limit`.
    pub fn enter(self: &Arc<Self>, token: &str, limit: usize) -> Option<WaitSlot> {
        let mut counts = self.counts.lock().expect("waiting claims lock");
        let n = counts.entry(token.to_owned()).or_default();
        if *n >= limit {
            return None;
        }
        *n += 1;
        let total = counts.values().sum::<usize>();
        drop(counts);
        metrics::gauge!(crate::metrics::API_WAITING_CLAIMS).set(total as f64);
        Some(WaitSlot {
            claims: self.clone(),
            token: token.to_owned(),
        })
    }

    /// Claims of `token` waiting now.
    pub fn count(&self, token: &str) -> usize {
        let counts = self.counts.lock().expect("waiting claims lock");
        counts.get(token).copied().unwrap_or(0)
    }
}

impl Drop for WaitSlot {
    fn drop(&mut self) {
        let mut counts = self.claims.counts.lock().expect("waiting claims lock");
        if let Some(n) = counts.get_mut(&self.token) {
            *n -= 1;
            if *n == 0 {
                counts.remove(&self.token);
            }
        }
        let total = counts.values().sum::<usize>();
        drop(counts);
        metrics::gauge!(crate::metrics::API_WAITING_CLAIMS).set(total as f64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_token_has_its_own_limit_and_a_dropped_slot_frees_its_place() {
        let claims = Arc::new(WaitingClaims::default());
        let a1 = claims.enter("a", 2).unwrap();
        let _a2 = claims.enter("a", 2).unwrap();
        assert!(claims.enter("a", 2).is_none());
        let _b = claims
            .enter("b", 2)
            .expect("another token is not limited by a's claims");
        drop(a1);
        assert_eq!(claims.count("a"), 1);
        assert!(claims.enter("a", 2).is_some());
    }
}
