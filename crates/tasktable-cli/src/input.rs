//! Values people type on the command line: durations, times and JSON documents. Each
//! parser says what it expected, and its errors are usage errors (exit code 2).

use crate::error::CliError;
use chrono::{DateTime, Utc};
use serde_json::Value;
use std::io::Read;
use std::time::Duration;
use tasktable::target::Target;
use tasktable_server::wire::TargetSpec;

/// `250ms`, `10s`, `5m`, `2h`, `1d`, combinations such as `1h30m`, or a plain number of
/// milliseconds.
pub fn duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let bad = || {
        format!("{text:?} is not a duration: write it like 250ms, 10s, 5m, 2h, 1d, 1h30m, or a number of milliseconds")
    };
    if let Ok(ms) = text.parse::<u64>() {
        return Ok(Duration::from_millis(ms));
    }
    let mut rest = text;
    let mut total_ms: u64 = 0;
    if rest.is_empty() {
        return Err(bad());
    }
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let number: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let letters = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit_ms = match &rest[..letters] {
            "ms" => 1,
            "s" => 1000,
            "m" => 60_000,
            "h" => 3_600_000,
            "d" => 86_400_000,
            _ => return Err(bad()),
        };
        rest = &rest[letters..];
        total_ms = number
            .checked_mul(unit_ms)
            .and_then(|ms| total_ms.checked_add(ms))
            .ok_or_else(bad)?;
    }
    Ok(Duration::from_millis(total_ms))
}

/// How long a retry waits for the worker of its previous attempt (`submit --affinity`): a
/// [`duration`] that core's validation of tasks accepts, at least 1ms and at most 10 years.
pub fn affinity(text: &str) -> Result<Duration, String> {
    let wait = duration(text)?;
    let task = tasktable::NewTask::new("affinity", Value::Null).affinity(wait);
    if task.validate().is_ok() {
        return Ok(wait);
    }
    let text = text.trim();
    Err(if wait.is_zero() {
        format!("{text:?} is no wait: an affinity is at least 1ms (leave --affinity out for none)")
    } else {
        format!("{text:?} is too long: an affinity is at most 10 years (3650d)")
    })
}

/// An RFC 3339 time such as `2030-01-02T03:04:05Z` or `2030-01-02T04:04:05+01:00`.
pub fn time(text: &str) -> Result<DateTime<Utc>, String> {
    DateTime::parse_from_rfc3339(text.trim())
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| {
            format!("{text:?} is not an RFC 3339 time ({e}): write it like 2030-01-02T03:04:05Z")
        })
}

/// Whole milliseconds, as the API takes durations.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// All of stdin, for the value `what` names.
pub fn stdin(what: &str) -> Result<String, CliError> {
    let mut text = String::new();
    std::io::stdin()
        .read_to_string(&mut text)
        .map_err(|e| CliError::failure(format!("cannot read {what} from stdin: {e}")))?;
    Ok(text)
}

/// A JSON document given as an argument, or read from stdin when the argument is `-`.
/// `what` names the argument in the error message.
pub fn json_arg(what: &str, arg: &str) -> Result<Value, CliError> {
    let text = if arg == "-" {
        stdin(what)?
    } else {
        arg.to_owned()
    };
    serde_json::from_str(&text).map_err(|e| {
        CliError::usage(format!(
            "{what} is not valid JSON ({e}); give a JSON value such as '{{\"to\": \"ada\"}}' or '\"text\"' (quotes included), or - to read it from stdin"
        ))
    })
}

/// The target `--target-worker` and `--target-group` flags name: `None` when neither was
/// given (clap keeps the two apart). Its names are checked by the server.
pub fn target(workers: &[String], groups: &[String]) -> Option<TargetSpec> {
    if !workers.is_empty() {
        Some(TargetSpec(Target::Workers(workers.to_vec())))
    } else if !groups.is_empty() {
        Some(TargetSpec(Target::Groups(groups.to_vec())))
    } else {
        None
    }
}

/// `--copies`: a whole number from 1, `all` (a broadcast) or `all_joining` (one that
/// workers joining while it is open get too).
pub fn copies(text: &str) -> Result<serde_json::Value, String> {
    if text == "all" || text == "all_joining" {
        return Ok(serde_json::json!(text));
    }
    match text.parse::<u32>() {
        Ok(n) if n >= 1 => Ok(serde_json::json!(n)),
        _ => Err(format!(
            "{text:?} is not a number of copies from 1, \"all\" or \"all_joining\""
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_combinations_and_plain_milliseconds() {
        let ms = |t| duration(t).map(|d| d.as_millis());
        assert_eq!(ms("250ms"), Ok(250));
        assert_eq!(ms("10s"), Ok(10_000));
        assert_eq!(ms("5m"), Ok(300_000));
        assert_eq!(ms("1h30m"), Ok(5_400_000));
        assert_eq!(ms("1d"), Ok(86_400_000));
        assert_eq!(ms("1500"), Ok(1500));
        for bad in ["", "s", "10x", "1.5s", "-3s", "10 s"] {
            assert!(
                duration(bad).unwrap_err().contains("not a duration"),
                "{bad}"
            );
        }
    }

    #[test]
    fn an_affinity_is_a_duration_from_1ms_to_10_years() {
        let ms = |t| affinity(t).map(|d| d.as_millis());
        assert_eq!(ms("45s"), Ok(45_000));
        assert_eq!(ms("1"), Ok(1));
        assert_eq!(ms("3650d"), Ok(315_360_000_000));
        assert!(affinity("0s").unwrap_err().contains("at least 1ms"));
        assert!(affinity("0").unwrap_err().contains("at least 1ms"));
        assert!(affinity("3651d").unwrap_err().contains("at most 10 years"));
        assert!(affinity("nonsense")
            .unwrap_err()
            .contains("\"nonsense\" is not a duration"));
    }

    #[test]
    fn times_are_rfc3339_in_any_offset() {
        let t = time("2030-01-02T04:04:05+01:00").unwrap();
        assert_eq!(t.to_rfc3339(), "2030-01-02T03:04:05+00:00");
        assert!(time("tomorrow").unwrap_err().contains("RFC 3339"));
    }

    #[test]
    fn a_json_argument_that_does_not_parse_is_a_usage_error() {
        let err = json_arg("PAYLOAD", "{to: ada}").unwrap_err();
        assert_eq!(err.exit, crate::error::Exit::Usage);
        assert!(err.message.contains("PAYLOAD is not valid JSON"), "{err}");
        assert_eq!(json_arg("PAYLOAD", "\"x\"").unwrap(), Value::from("x"));
    }
}
