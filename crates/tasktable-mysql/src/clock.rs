//! The one clock of a transaction: the database's (`UTC_TIMESTAMP(6)`), read once inside
//! the transaction, or a time the caller pinned. Times are DATETIME(6) values in UTC.
//!
//! Every time is bound as a `NaiveDateTime` ([`at`]): sqlx sends a `DateTime<Utc>` as a
//! `TIMESTAMP` parameter, which MariaDB converts through the 32-bit Unix time, so any time
//! after 2038-01-19 arrived as NULL. A `NaiveDateTime` is sent as a `DATETIME` and kept
//! as it is.

use crate::db;
use chrono::{DateTime, NaiveDateTime, Timelike, Utc};
use sqlx::MySqlConnection;
use tasktable_store::StoreResult;

/// The database's current time. `UTC_TIMESTAMP`, not `NOW()`: `NOW()` is in the
/// session's time zone, so a session left in another zone would shift every lease.
pub async fn db_now(conn: &mut MySqlConnection) -> StoreResult<DateTime<Utc>> {
    sqlx::query_scalar("SELECT UTC_TIMESTAMP(6)")
        .fetch_one(conn)
        .await
        .map_err(db)
}

/// `pinned`, cut to the microseconds DATETIME(6) keeps, or the database's time.
pub async fn now(
    conn: &mut MySqlConnection,
    pinned: Option<DateTime<Utc>>,
) -> StoreResult<DateTime<Utc>> {
    match pinned {
        Some(t) => Ok(truncate(t)),
        None => db_now(conn).await,
    }
}

/// `t` as a parameter: a `DATETIME` in UTC (see the module's docs).
pub fn at(t: DateTime<Utc>) -> NaiveDateTime {
    t.naive_utc()
}

pub fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    let micros = t.nanosecond() / 1_000;
    t.with_nanosecond(micros * 1_000).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use std::time::Duration;
    use tasktable_core::stored::after as plus;

    #[test]
    fn times_keep_whole_microseconds() {
        let t = Utc.timestamp_opt(1_900_000_000, 123_456_789).unwrap();
        assert_eq!(truncate(t).nanosecond(), 123_456_000);
        let later = plus(truncate(t), Duration::from_nanos(1_500_999));
        assert_eq!(later.nanosecond(), 124_956_000);
        assert!(plus(t, Duration::MAX) < DateTime::<Utc>::MAX_UTC);
    }
}
