//! The W3C trace context a task carries ([Trace Context], level 1): the `traceparent` of
//! whoever submitted it, kept with the task so that every attempt, in this process or in
//! a worker in another language, continues the submitter's trace.
//!
//! A `traceparent` that does not parse is not an error: the specification has a receiver
//! ignore it and start afresh, so a submit with a malformed header is stored without one.
//! What is stored is always the version-00 form, lowercase, 55 characters.
//!
//! [Trace Context]: https://www.w3.org/TR/trace-context/

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// Characters of a version-00 `traceparent`: `00-` 32 hex `-` 16 hex `-` 2 hex.
pub const TRACEPARENT_LEN: usize = 55;

/// A valid `traceparent`, in its version-00 form.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct TraceParent(String);

impl TraceParent {
    /// The `traceparent` in `header`, if it is one. Follows the specification's rules:
    /// lowercase hex only, version `ff` invalid, a version-00 value exactly 55
    /// characters, a later version at least 55 with a `-` after them (its extra fields
    /// are dropped), trace and parent ids not all zeros. Surrounding spaces and tabs are
    /// allowed, as in an HTTP header.
    pub fn parse(header: &str) -> Option<Self> {
        let value = header.trim_matches([' ', '\t']);
        let bytes = value.as_bytes();
        if !value.is_ascii() || bytes.len() < TRACEPARENT_LEN {
            return None;
        }
        let version = &value[..2];
        if !is_hex(version) || version == "ff" {
            return None;
        }
        if version == "00" && bytes.len() != TRACEPARENT_LEN {
            return None;
        }
        if bytes.len() > TRACEPARENT_LEN && bytes[TRACEPARENT_LEN] != b'-' {
            return None;
        }
        if bytes[2] != b'-' || bytes[35] != b'-' || bytes[52] != b'-' {
            return None;
        }
        let (trace_id, parent_id, flags) = (&value[3..35], &value[36..52], &value[53..55]);
        if !is_hex(trace_id) || !is_hex(parent_id) || !is_hex(flags) {
            return None;
        }
        if all_zeros(trace_id) || all_zeros(parent_id) {
            return None;
        }
        Some(TraceParent(format!("00-{trace_id}-{parent_id}-{flags}")))
    }

    /// The `traceparent` of a span: `trace_id` and `span_id` as lowercase hex (32 and 16
    /// digits), `flags` the trace flags (bit 0: sampled). `None` for ids of the wrong
    /// length or all zeros.
    pub fn from_parts(trace_id: &str, span_id: &str, flags: u8) -> Option<Self> {
        Self::parse(&format!("00-{trace_id}-{span_id}-{flags:02x}"))
    }

    /// The value, as sent in a `traceparent` header.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The trace's id: 32 lowercase hex digits.
    pub fn trace_id(&self) -> &str {
        &self.0[3..35]
    }

    /// The id of the span that submitted the task: 16 lowercase hex digits.
    pub fn parent_id(&self) -> &str {
        &self.0[36..52]
    }

    /// The trace flags (bit 0: the caller sampled the trace).
    pub fn flags(&self) -> u8 {
        u8::from_str_radix(&self.0[53..55], 16).unwrap_or(0)
    }

    /// Whether the caller records the trace (the sampled flag).
    pub fn sampled(&self) -> bool {
        self.flags() & 1 == 1
    }
}

fn is_hex(s: &str) -> bool {
    s.bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn all_zeros(s: &str) -> bool {
    s.bytes().all(|b| b == b'0')
}

impl fmt::Debug for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("TraceParent").field(&self.0).finish()
    }
}

impl fmt::Display for TraceParent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Serialize for TraceParent {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for TraceParent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        TraceParent::parse(&text)
            .ok_or_else(|| serde::de::Error::custom(format!("not a W3C traceparent: {text:?}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn the_specifications_example_parses_and_reads_back() {
        let tp = TraceParent::parse(GOOD).unwrap();
        assert_eq!(tp.as_str(), GOOD);
        assert_eq!(tp.trace_id(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(tp.parent_id(), "00f067aa0ba902b7");
        assert_eq!(tp.flags(), 1);
        assert!(tp.sampled());
        let unsampled = TraceParent::parse(&GOOD.replace("-01", "-00")).unwrap();
        assert!(!unsampled.sampled());
    }

    #[test]
    fn header_whitespace_is_allowed() {
        assert_eq!(
            TraceParent::parse(&format!(" \t{GOOD} ")).unwrap().as_str(),
            GOOD
        );
    }

    #[test]
    fn a_later_version_keeps_its_four_fields_as_version_00() {
        let later = GOOD.replacen("00-", "cc-", 1);
        assert_eq!(TraceParent::parse(&later).unwrap().as_str(), GOOD);
        assert_eq!(
            TraceParent::parse(&format!("{later}-what-comes-next"))
                .unwrap()
                .as_str(),
            GOOD
        );
        assert!(TraceParent::parse(&format!("{later}x")).is_none());
    }

    #[test]
    fn malformed_values_are_ignored() {
        for bad in [
            "",
            "00",
            &GOOD[..54],
            &format!("{GOOD}-"),
            &GOOD.replacen("00-", "ff-", 1),
            &GOOD.to_uppercase(),
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "00-4bf92f3577b34da6a3ce929d0e0e473g-00f067aa0ba902b7-01",
            "00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1x",
            "0é-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert!(TraceParent::parse(bad).is_none(), "{bad:?}");
        }
    }

    #[test]
    fn parts_make_the_same_value() {
        let tp = TraceParent::from_parts("4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", 1);
        assert_eq!(tp.unwrap().as_str(), GOOD);
        assert!(TraceParent::from_parts("4bf9", "00f067aa0ba902b7", 1).is_none());
    }

    #[test]
    fn serde_round_trips_and_refuses_what_does_not_parse() {
        let tp = TraceParent::parse(GOOD).unwrap();
        let text = serde_json::to_string(&tp).unwrap();
        assert_eq!(text, format!("\"{GOOD}\""));
        assert_eq!(serde_json::from_str::<TraceParent>(&text).unwrap(), tp);
        assert!(serde_json::from_str::<TraceParent>("\"00-1\"").is_err());
    }
}
