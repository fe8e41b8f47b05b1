//! SQLite has no timestamp type: tasktable stores UTC text in one fixed format with
//! millisecond precision, which sorts as it compares and which SQLite's own `strftime`
//! produces, so times computed in SQL and in Rust mix safely.

use chrono::{DateTime, NaiveDateTime, Utc};
use tasktable_store::{StoreError, StoreResult};

/// The format of every stored timestamp (as `strftime` writes it: `%f` is `SS.SSS`).
pub const SQL_FORMAT: &str = "%Y-%m-%dT%H:%M:%fZ";
const CHRONO_FORMAT: &str = "%Y-%m-%dT%H:%M:%S%.3fZ";

/// `t` as stored: [`SQL_FORMAT`], cut to the millisecond.
pub fn to_text(t: DateTime<Utc>) -> String {
    t.format(CHRONO_FORMAT).to_string()
}

/// A stored time; text in any other format is a database error.
pub fn from_text(s: &str) -> StoreResult<DateTime<Utc>> {
    NaiveDateTime::parse_from_str(s, CHRONO_FORMAT)
        .map(|n| n.and_utc())
        .map_err(|e| StoreError::Database(format!("bad timestamp {s:?} in database: {e}").into()))
}

/// A nullable stored time; `None` (NULL) stays `None`.
pub fn opt_from_text(s: Option<String>) -> StoreResult<Option<DateTime<Utc>>> {
    s.as_deref().map(from_text).transpose()
}

/// Truncates to what the database keeps, so values read back compare equal.
pub fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    from_text(&to_text(t)).unwrap_or(t)
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    #[test]
    fn text_round_trips_at_millisecond_precision() {
        let t = Utc.timestamp_opt(1_700_000_000, 123_456_789).unwrap();
        let s = to_text(t);
        assert_eq!(s, "2023-11-14T22:13:20.123Z");
        assert_eq!(
            from_text(&s).unwrap(),
            Utc.timestamp_opt(1_700_000_000, 123_000_000).unwrap()
        );
    }

    #[test]
    fn text_order_is_time_order() {
        let a = Utc.timestamp_opt(1_700_000_000, 999_000_000).unwrap();
        let b = Utc.timestamp_opt(1_700_000_001, 0).unwrap();
        assert!(to_text(a) < to_text(b));
    }
}
