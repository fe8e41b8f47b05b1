//! Running a transaction again when InnoDB aborts it under contention.
//!
//! InnoDB detects a deadlock by rolling back one of the transactions in it (error 1213),
//! and gives up on a row lock after `innodb_lock_wait_timeout` (error 1205). Both are
//! normal under load: two submits that insert the same idempotency keys in opposite
//! orders, for one, can each end up holding what the other needs. Each store call (each
//! chunk of a bulk change) is one transaction that starts from scratch, so it is safe to
//! run it again whole after the rollback. PostgreSQL and SQLite need none of this here:
//! their stores take row locks in one order or hold the only write lock.

use rand::Rng;
use sqlx::mysql::MySqlDatabaseError;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tasktable_store::{StoreError, StoreResult};

/// InnoDB rolled back the transaction to break a deadlock.
pub const DEADLOCK: u16 = 1213;
/// A row lock was not granted within `innodb_lock_wait_timeout`.
pub const LOCK_WAIT_TIMEOUT: u16 = 1205;

/// Tries per call, the first included. Bounded, so a call that keeps losing still ends
/// with the error instead of spinning.
const MAX_TRIES: u32 = 10;
/// The pause before the first retry; it doubles with each retry up to `MAX_PAUSE`, and
/// each pause is drawn at random from its upper half, so transactions that collided do
/// not collide again in step.
const FIRST_PAUSE: Duration = Duration::from_millis(5);
const MAX_PAUSE: Duration = Duration::from_millis(250);

/// The MySQL error number behind a store error, if it came from the server.
pub fn error_number(e: &StoreError) -> Option<u16> {
    let StoreError::Database(inner) = e else {
        return None;
    };
    inner
        .downcast_ref::<sqlx::Error>()?
        .as_database_error()?
        .try_downcast_ref::<MySqlDatabaseError>()
        .map(MySqlDatabaseError::number)
}

fn is_transient(e: &StoreError) -> bool {
    matches!(error_number(e), Some(DEADLOCK | LOCK_WAIT_TIMEOUT))
}

fn pause(retry: u32) -> Duration {
    let full = FIRST_PAUSE
        .saturating_mul(1 << retry.min(16))
        .min(MAX_PAUSE);
    let half = full / 2;
    half + rand::rng().random_range(Duration::ZERO..=half)
}

/// Runs `op` until it succeeds, fails with an error that is not transient, or has been
/// tried [`MAX_TRIES`] times. Counts each retry in `retries`.
pub async fn run<T, F, Fut>(retries: &AtomicU64, what: &'static str, mut op: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    let mut tried = 0;
    loop {
        tried += 1;
        match op().await {
            Err(e) if again(retries, what, &e, tried).await => {}
            other => return other,
        }
    }
}

/// After the `tried`th try of `what` failed with `e`: whether to run it again, after a
/// pause it has waited (counted in `retries`), or to return the error.
pub async fn again(retries: &AtomicU64, what: &'static str, e: &StoreError, tried: u32) -> bool {
    if tried >= MAX_TRIES || !is_transient(e) {
        return false;
    }
    retries.fetch_add(1, Ordering::Relaxed);
    let wait = pause(tried - 1);
    tracing::debug!(call = what, error = %e, retry_in = ?wait, "tasktable: retrying after InnoDB aborted the transaction");
    tokio::time::sleep(wait).await;
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pauses_grow_and_stay_bounded() {
        for retry in 0..40 {
            let p = pause(retry);
            assert!(p <= MAX_PAUSE, "{p:?}");
            assert!(p >= FIRST_PAUSE / 2, "{p:?}");
        }
        assert!(pause(0) <= FIRST_PAUSE);
    }

    #[tokio::test]
    async fn other_errors_are_returned_at_once() {
        let retries = AtomicU64::new(0);
        let mut calls = 0;
        let out: StoreResult<()> = run(&retries, "test", || {
            calls += 1;
            async { Err(StoreError::InvalidInput("no".into())) }
        })
        .await;
        assert!(out.is_err());
        assert_eq!((calls, retries.load(Ordering::Relaxed)), (1, 0));
    }
}
