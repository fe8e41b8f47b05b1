//! What becomes of text and JSON a worker writes (results, checkpoints, progress, error
//! messages) on its way into a row, the same on every backend.
//!
//! PostgreSQL refuses the NUL character (`\u0000`) in `TEXT` and `JSONB`, while SQLite and
//! MySQL keep it. A worker's output must not be lost over that, nor stored differently
//! per backend, so NUL becomes U+FFFD (the replacement character) everywhere. Input that
//! an operator chooses (a payload) is refused instead: see [`NewTask::validate`].
//!
//! [`NewTask::validate`]: crate::NewTask::validate

use chrono::{DateTime, TimeZone, Utc};
use serde_json::Value;

/// Longest error message stored, in bytes; a longer one keeps its start and says how long
/// it was.
pub const MAX_ERROR_LEN: usize = 8 * 1024;

/// What NUL becomes in stored text.
pub const NUL_REPLACEMENT: char = '\u{FFFD}';

/// The longest lease any store writes, whatever a caller asks for, and the longest span
/// a store adds to a time (a retry's delay too): 100 years, far inside every backend's
/// range of times, so that `now + span` cannot overflow. (The HTTP API grants pull
/// workers much shorter leases: the server's `MAX_PULL_LEASE`.)
pub const MAX_LEASE: std::time::Duration = std::time::Duration::from_secs(100 * 366 * 24 * 3600);

/// A span (a lease, a delay) as it is written: at most [`MAX_LEASE`], in whole
/// microseconds (what every backend's times keep; MySQL would round a finer time instead
/// of truncating it).
pub fn stored_span(span: std::time::Duration) -> std::time::Duration {
    std::time::Duration::from_micros(span.min(MAX_LEASE).as_micros() as u64)
}

/// `at` plus [`stored_span`]`(span)`: when a lease taken at `at` ends, when a delay from
/// `at` is over.
pub fn after(at: DateTime<Utc>, span: std::time::Duration) -> DateTime<Utc> {
    let micros = stored_span(span).as_micros() as i64;
    at.checked_add_signed(chrono::Duration::microseconds(micros))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

/// When an attempt claimed at `now`, its lease running to `until`, must end: its
/// deadline (`now` plus its timeout, if it has one) and the end of its lease (`until`, or
/// the deadline if that comes first). Every claim writes this; the hot path's in SQL
/// (`tasktable_sql::rules::push_claim_write`).
pub fn lease_ends(
    now: DateTime<Utc>,
    until: DateTime<Utc>,
    timeout_ms: Option<i64>,
) -> (Option<DateTime<Utc>>, DateTime<Utc>) {
    let deadline = timeout_ms.map(|ms| {
        now.checked_add_signed(chrono::Duration::milliseconds(ms))
            .unwrap_or(DateTime::<Utc>::MAX_UTC)
    });
    (deadline, deadline.map_or(until, |d| d.min(until)))
}

/// `run_at` as it is stored: within 1970-01-01 to the end of 9999, the range every
/// backend's time type holds (MySQL's `DATETIME` keeps no year before 1000). An earlier
/// time and 1970 both mean "due at once", and keep their order ahead of every later one.
pub fn stored_run_at(at: DateTime<Utc>) -> DateTime<Utc> {
    let first = Utc.timestamp_opt(0, 0).unwrap();
    let last = Utc.with_ymd_and_hms(9999, 12, 31, 23, 59, 59).unwrap()
        + chrono::Duration::microseconds(999_999);
    at.clamp(first, last)
}

/// Whether a JSON value holds NUL in a string or an object key.
pub fn contains_nul(value: &Value) -> bool {
    match value {
        Value::String(s) => s.contains('\0'),
        Value::Array(items) => items.iter().any(contains_nul),
        Value::Object(map) => map.iter().any(|(k, v)| k.contains('\0') || contains_nul(v)),
        _ => false,
    }
}

/// `value` as it is stored: every NUL in a string or key replaced.
pub fn stored_value(value: Value) -> Value {
    if !contains_nul(&value) {
        return value;
    }
    match value {
        Value::String(s) => Value::String(s.replace('\0', "\u{FFFD}")),
        Value::Array(items) => Value::Array(items.into_iter().map(stored_value).collect()),
        Value::Object(map) => Value::Object(
            map.into_iter()
                .map(|(k, v)| (k.replace('\0', "\u{FFFD}"), stored_value(v)))
                .collect(),
        ),
        other => other,
    }
}

/// An error message as it is stored: NUL replaced, and at most [`MAX_ERROR_LEN`] bytes.
pub fn stored_error(message: &str) -> String {
    let text = message.replace('\0', "\u{FFFD}");
    if text.len() <= MAX_ERROR_LEN {
        return text;
    }
    let note = format!(" [truncated: {} bytes in all]", text.len());
    let mut end = MAX_ERROR_LEN - note.len();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}{note}", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nul_becomes_the_replacement_character_in_strings_and_keys() {
        let v = json!({"a\u{0}b": ["x\u{0}", 1, {"k": "\u{0}"}], "clean": "yes"});
        assert!(contains_nul(&v));
        let stored = stored_value(v);
        assert_eq!(
            stored,
            json!({"a\u{FFFD}b": ["x\u{FFFD}", 1, {"k": "\u{FFFD}"}], "clean": "yes"})
        );
        assert!(!contains_nul(&stored));
        let clean = json!({"n": [1, 2.5, null, true]});
        assert_eq!(stored_value(clean.clone()), clean);
    }

    #[test]
    fn run_at_is_kept_within_the_years_every_backend_holds() {
        let t = |y, mo, d| Utc.with_ymd_and_hms(y, mo, d, 0, 0, 0).unwrap();
        assert_eq!(stored_run_at(t(1, 1, 1)), t(1970, 1, 1));
        assert_eq!(stored_run_at(t(2030, 5, 6)), t(2030, 5, 6));
        assert_eq!(
            stored_run_at(t(12000, 1, 1)).format("%Y").to_string(),
            "9999"
        );
    }

    #[test]
    fn spans_are_capped_at_the_longest_lease_in_whole_microseconds() {
        use std::time::Duration;
        assert_eq!(
            stored_span(Duration::from_nanos(1_500_999)),
            Duration::from_micros(1_500)
        );
        assert_eq!(stored_span(Duration::MAX), MAX_LEASE);
        let t = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        assert_eq!(
            after(t, Duration::from_secs(30)),
            t + chrono::Duration::seconds(30)
        );
        let far = after(t, Duration::MAX);
        assert_eq!(far, t + chrono::Duration::from_std(MAX_LEASE).unwrap());
        assert!(far.format("%Y").to_string().as_str() < "9999", "{far}");
    }

    #[test]
    fn a_lease_never_outlasts_the_attempts_deadline() {
        let t = Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap();
        let until = t + chrono::Duration::seconds(30);
        assert_eq!(lease_ends(t, until, None), (None, until));
        let soon = t + chrono::Duration::seconds(5);
        assert_eq!(lease_ends(t, until, Some(5_000)), (Some(soon), soon));
        let late = t + chrono::Duration::seconds(60);
        assert_eq!(lease_ends(t, until, Some(60_000)), (Some(late), until));
    }

    #[test]
    fn long_errors_keep_their_start_and_say_how_long_they_were() {
        assert_eq!(stored_error("boom\u{0}!"), "boom\u{FFFD}!");
        let long = "é".repeat(MAX_ERROR_LEN);
        let stored = stored_error(&long);
        assert!(stored.len() <= MAX_ERROR_LEN, "{}", stored.len());
        assert!(stored.starts_with("éé"));
        assert!(stored.ends_with(&format!(" [truncated: {} bytes in all]", long.len())));
        let exact = "x".repeat(MAX_ERROR_LEN);
        assert_eq!(stored_error(&exact), exact);
    }
}
