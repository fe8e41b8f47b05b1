//! Whether the database answers, as the calls of one [`Shielded`](crate::Shielded) store
//! find it, told in the log once per change rather than once per failed call.
//!
//! When the database goes away (a restart, a failover, a cut network), every part that
//! holds the store keeps calling it: the claim loop, the rescuer, the scheduler, the
//! heartbeat, the HTTP API. Each such call fails, and each part retries on its own
//! schedule. Logging each failure would bury the one fact an operator needs under a line
//! per call. So the first call that fails with an [`Unreachable`](crate::Unreachable)
//! database logs one WARN `database unreachable` naming the cause (and the database's URL,
//! its password hidden, when the store was opened from one), the parts stay quiet about
//! such failures ([`StoreError::is_unreachable`](crate::StoreError::is_unreachable)), and the first call that succeeds
//! afterwards logs one INFO `database reachable again` with how long it was away.
//!
//! A call counts only against the state it started in: one that started before the last
//! change and ends after it (a call stuck in the pool's wait when the database came back,
//! a success that was on its way when another call failed) changes nothing, so slow
//! answers cannot make the state flap. Telling the state costs a call one atomic read.

use crate::StoreResult;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What one call's result changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Change {
    /// The database could not be reached; the text names the cause.
    Away(String),
    /// A call succeeded after the database had been away this long.
    Back(Duration),
}

/// The state of the database as a store's calls find it ([module docs](self)).
#[derive(Debug)]
pub(crate) struct Reachability {
    /// Grows by one at each change: even while the database answers, odd while it is
    /// away. A call reads it when it starts.
    epoch: AtomicU64,
    /// When the database went away; taken with each change, so that the two lines of an
    /// outage are written in order.
    away_since: Mutex<Option<Instant>>,
    backend: &'static str,
    /// The database's URL with its password hidden, when the store was opened from one.
    url: Option<String>,
}

impl Reachability {
    pub(crate) fn new(backend: &'static str, url: Option<&str>) -> Self {
        Reachability {
            epoch: AtomicU64::new(0),
            away_since: Mutex::new(None),
            backend,
            url: url.map(tasktable_core::url::redact_password),
        }
    }

    /// What a call reads when it starts, to hand back with its result.
    pub(crate) fn seen(&self) -> u64 {
        self.epoch.load(Ordering::Acquire)
    }

    /// Takes in the result of a call that started at `seen`, logs the change it makes,
    /// if any, and returns it.
    pub(crate) fn observe<T>(&self, seen: u64, result: &StoreResult<T>) -> Option<Change> {
        let away = seen % 2 == 1;
        let change = match result {
            Ok(_) if away => self.change(seen, |since| {
                Change::Back(since.map_or(Duration::ZERO, |s| s.elapsed()))
            })?,
            Err(e) if !away && e.is_unreachable() => {
                self.change(seen, |_| Change::Away(e.to_string()))?
            }
            _ => return None,
        };
        self.log(&change);
        Some(change)
    }

    /// Makes the change `make` says when nothing changed since `seen`.
    fn change(&self, seen: u64, make: impl FnOnce(Option<Instant>) -> Change) -> Option<Change> {
        let mut since = self.away_since.lock().unwrap_or_else(|e| e.into_inner());
        if self.epoch.load(Ordering::Acquire) != seen {
            return None;
        }
        let change = make(*since);
        *since = match change {
            Change::Away(_) => Some(Instant::now()),
            Change::Back(_) => None,
        };
        self.epoch.store(seen + 1, Ordering::Release);
        Some(change)
    }

    fn log(&self, change: &Change) {
        let (backend, url) = (self.backend, self.url.as_deref());
        match change {
            Change::Away(error) => tracing::warn!(
                backend,
                url,
                error = %error,
                "database unreachable"
            ),
            Change::Back(away) => tracing::info!(
                backend,
                url,
                away_ms = u64::try_from(away.as_millis()).unwrap_or(u64::MAX),
                "database reachable again"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::StoreError;

    fn refused() -> StoreResult<()> {
        Err(StoreError::unreachable(std::io::Error::from(
            std::io::ErrorKind::ConnectionRefused,
        )))
    }

    #[test]
    fn an_outage_is_one_change_away_and_one_back_however_many_calls_fail() {
        let r = Reachability::new("postgres", Some("postgres://app:hunter2@db/tasks"));
        let before = r.seen();
        assert!(matches!(
            r.observe(before, &refused()),
            Some(Change::Away(_))
        ));
        // Calls that started before the change, and calls that started after it, fail
        // again: nothing more is told.
        assert_eq!(r.observe(before, &refused()), None);
        let during = r.seen();
        assert_eq!(r.observe(during, &refused()), None);
        assert_eq!(r.observe(during, &refused()), None);
        assert!(matches!(r.observe(during, &Ok(())), Some(Change::Back(_))));
        assert_eq!(r.observe(during, &Ok(())), None);
        assert_eq!(r.url.as_deref(), Some("postgres://app:[redacted]@db/tasks"));
    }

    #[test]
    fn a_result_from_before_the_last_change_changes_nothing() {
        let r = Reachability::new("mysql", None);
        let old = r.seen();
        assert!(r.observe(old, &refused()).is_some());
        // A success that was on its way when the database went away does not bring it back.
        assert_eq!(r.observe(old, &Ok(())), None);
        let during = r.seen();
        assert!(r.observe(during, &Ok(())).is_some());
        // A failure of a call that started while it was away does not take it away again.
        assert_eq!(r.observe(during, &refused()), None);
    }

    #[test]
    fn other_errors_are_not_an_outage() {
        let r = Reachability::new("sqlite", None);
        let seen = r.seen();
        let failed: StoreResult<()> =
            Err(StoreError::database(std::io::Error::other("no such table")));
        assert_eq!(r.observe(seen, &failed), None);
        assert_eq!(r.observe::<()>(seen, &Err(StoreError::NotFound(1))), None);
        assert_eq!(r.observe(seen, &Ok(())), None);
        assert_eq!(r.seen(), seen);
    }
}
