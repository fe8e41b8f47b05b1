//! The options of `schedule create` and `schedule edit`, and the request bodies they make.
//! What the command line alone shows to be wrong is refused here, before any request (two
//! recurrences, --zone with --every, a bad --missed); whether a cron expression parses or
//! a zone exists is the server's to say, so the CLI cannot drift from it.

use crate::error::CliError;
use crate::input;
use chrono::{DateTime, NaiveTime, SubsecRound, Utc};
use clap::{ArgGroup, Args};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Most missed slots `--missed all:N` may fire at once (core's limit; the server checks it
/// too).
const MAX_MISSED_RUNS: u32 = 1000;

#[derive(Args, Debug)]
#[command(group(ArgGroup::new("recurrence").required(true)))]
#[command(mut_arg("kind", |a| a.required_unless_present("file")))]
#[command(mut_arg("start", |a| a.requires("every")))]
pub struct CreateArgs {
    /// A name for the schedule, unique and not a number; commands take it or the id.
    #[arg(required_unless_present = "file", conflicts_with = "file")]
    name: Option<String>,
    /// Create it disabled: it fires nothing until `tasktable schedule enable`.
    #[arg(long)]
    disabled: bool,
    /// Create the schedule this JSON file describes (- for stdin), an object as
    /// `POST /api/v1/schedules` takes it: {"name": "nightly", "recurrence": {"type":
    /// "cron", "expr": "0 2 * * *", "zone": "UTC"}, "template": {"kind": "report"}}. No
    /// other option goes with it.
    #[arg(
        long,
        value_name = "PATH",
        group = "recurrence",
        conflicts_with_all = [
            "cron", "every", "daily", "zone", "start", "kind", "queue", "payload",
            "payload_file", "key", "priority", "max_attempts", "timeout", "missed", "overlap",
            "disabled",
        ]
    )]
    file: Option<PathBuf>,
    // The groups come last: each sets the help heading of the options after it.
    #[command(flatten)]
    when: WhenArgs,
    #[command(flatten)]
    template: TemplateArgs,
    #[command(flatten)]
    policies: PolicyArgs,
}

/// Only the options given change; the others keep their values.
#[derive(Args, Debug)]
pub struct EditArgs {
    /// The schedule's name or id.
    #[arg(value_name = "NAME|ID")]
    pub schedule: String,
    /// A new name.
    #[arg(long, value_name = "NEW")]
    rename: Option<String>,
    /// Enable it: it fires from its next slot on (as `schedule enable`).
    #[arg(long, conflicts_with = "disable")]
    enable: bool,
    /// Disable it: it fires nothing until enabled (as `schedule disable`).
    #[arg(long)]
    disable: bool,
    // The groups come last: each sets the help heading of the options after it.
    #[command(flatten)]
    when: WhenArgs,
    #[command(flatten)]
    template: TemplateArgs,
    #[command(flatten)]
    policies: PolicyArgs,
}

/// When a schedule fires: one of --cron, --every and --daily.
#[derive(Args, Debug)]
#[command(next_help_heading = "When it fires")]
struct WhenArgs {
    /// A cron expression in --zone: 5 fields (minute hour day-of-month month day-of-week),
    /// or 6 with seconds first. "0 2 * * *" is 02:00 every day, "*/15 * * * *" every 15
    /// minutes.
    #[arg(long, value_name = "EXPR", group = "recurrence")]
    cron: Option<String>,
    /// At this interval (30s, 5m, 1h, 1d, at least 1s), counted from --start.
    #[arg(long, value_name = "DURATION", value_parser = input::duration, group = "recurrence")]
    every: Option<Duration>,
    /// Every day at this wall-clock time in --zone (02:30 or 02:30:15).
    #[arg(long, value_name = "HH:MM[:SS]", value_parser = time_of_day, group = "recurrence")]
    daily: Option<String>,
    /// The IANA time zone --cron and --daily are read in (Europe/Berlin, UTC); default UTC
    /// (on edit: the schedule's zone). Daylight saving is handled: a skipped time fires
    /// when the gap ends, a repeated one once.
    #[arg(long, conflicts_with = "every")]
    zone: Option<String>,
    /// When --every counts from (RFC 3339); default now (on edit: the schedule's start).
    #[arg(long, value_name = "TIME", value_parser = input::time, conflicts_with_all = ["cron", "daily"])]
    start: Option<DateTime<Utc>>,
}

/// The task a schedule submits at each slot.
#[derive(Args, Debug)]
#[command(next_help_heading = "The task it submits")]
struct TemplateArgs {
    /// The task's kind: which handler runs it. Required to create.
    #[arg(long)]
    kind: Option<String>,
    /// Queue; default `default`.
    #[arg(long)]
    queue: Option<String>,
    /// The payload as JSON, or - to read it from stdin. Default: null.
    #[arg(long, value_name = "JSON", conflicts_with = "payload_file")]
    payload: Option<String>,
    /// Read the payload from this JSON file.
    #[arg(long, value_name = "PATH")]
    payload_file: Option<PathBuf>,
    /// Business key of each task, for finding them later (`ls --key`).
    #[arg(long)]
    key: Option<String>,
    /// Higher runs first; default 0.
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Attempts before a task fails; default 5.
    #[arg(long)]
    max_attempts: Option<u32>,
    /// Time limit of each attempt (10s, 5m, ...); default none.
    #[arg(long, value_name = "DURATION", value_parser = input::duration)]
    timeout: Option<Duration>,
}

#[derive(Args, Debug)]
#[command(next_help_heading = "Policies")]
struct PolicyArgs {
    /// Slots that passed while nothing ran (every server and worker down): `skip` fires
    /// none of them, `latest` the last one, `all:N` each of them, the last N at most
    /// (N from 1 to 1000). Default latest.
    #[arg(long, value_name = "skip|latest|all:N", value_parser = missed)]
    missed: Option<Value>,
    /// Whether a slot fires while the task of the previous slot is still held, pending or
    /// running: `allow` (default) or `skip`.
    #[arg(long, value_parser = ["allow", "skip"])]
    overlap: Option<String>,
}

/// `02:30` or `02:30:15`, as the API's `HH:MM:SS`.
fn time_of_day(text: &str) -> Result<String, String> {
    let text = text.trim();
    ["%H:%M:%S", "%H:%M"]
        .iter()
        .find_map(|format| NaiveTime::parse_from_str(text, format).ok())
        .map(|t| t.format("%H:%M:%S").to_string())
        .ok_or_else(|| {
            format!(
                "{text:?} is not a time of day: write it like 02:30 or 02:30:15 (24-hour clock)"
            )
        })
}

/// `skip`, `latest` or `all:N`, as the API's `missed` object.
fn missed(text: &str) -> Result<Value, String> {
    let bad = || {
        format!("{text:?} is not a missed-slot policy: give skip, latest, or all:N with N from 1 to {MAX_MISSED_RUNS}")
    };
    match text.trim() {
        "skip" => Ok(json!({"policy": "skip"})),
        "latest" => Ok(json!({"policy": "run_latest"})),
        other => {
            let max: u32 = other
                .strip_prefix("all:")
                .and_then(|n| n.parse().ok())
                .filter(|n| (1..=MAX_MISSED_RUNS).contains(n))
                .ok_or_else(bad)?;
            Ok(json!({"policy": "run_all", "max": max}))
        }
    }
}

impl WhenArgs {
    fn is_empty(&self) -> bool {
        self.cron.is_none()
            && self.every.is_none()
            && self.daily.is_none()
            && self.zone.is_none()
            && self.start.is_none()
    }

    /// The recurrence the options give, completed from `current` (the schedule's, when
    /// editing): an edit that gives only --zone or --start keeps the rest. `None` when no
    /// option is given.
    fn recurrence(&self, current: Option<&Value>) -> Result<Option<Value>, CliError> {
        let current_type = current.and_then(|c| c["type"].as_str());
        let zone = || {
            self.zone
                .clone()
                .or_else(|| current.and_then(|c| c["zone"].as_str()).map(str::to_owned))
                .unwrap_or_else(|| "UTC".into())
        };
        let start = || match (self.start, current_type) {
            (Some(start), _) => json!(start),
            (None, Some("every")) => current.expect("a type has a recurrence")["start"].clone(),
            (None, _) => json!(Utc::now().trunc_subsecs(0)),
        };
        let recurrence = if let Some(expr) = &self.cron {
            json!({"type": "cron", "expr": expr, "zone": zone()})
        } else if let Some(at) = &self.daily {
            json!({"type": "daily", "at": at, "zone": zone()})
        } else if let Some(every) = self.every {
            json!({"type": "every", "every_ms": input::millis(every), "start": start()})
        } else if self.zone.is_some() {
            match (current, current_type) {
                (Some(c), Some("cron" | "daily")) => {
                    let mut changed = c.clone();
                    changed["zone"] = json!(zone());
                    changed
                }
                _ => {
                    return Err(CliError::usage(
                        "--zone applies to --cron and --daily schedules, and this one fires at an interval; give --cron or --daily with it",
                    ))
                }
            }
        } else if self.start.is_some() {
            match (current, current_type) {
                (Some(c), Some("every")) => {
                    let mut changed = c.clone();
                    changed["start"] = start();
                    changed
                }
                _ => {
                    return Err(CliError::usage(
                        "--start applies to --every schedules, and this one fires on a clock; give --every with it",
                    ))
                }
            }
        } else {
            return Ok(None);
        };
        Ok(Some(recurrence))
    }
}

impl TemplateArgs {
    fn is_empty(&self) -> bool {
        self.kind.is_none()
            && self.queue.is_none()
            && self.payload.is_none()
            && self.payload_file.is_none()
            && self.key.is_none()
            && self.priority.is_none()
            && self.max_attempts.is_none()
            && self.timeout.is_none()
    }

    /// The template fields the options set, the payload read and parsed.
    fn fields(&self) -> Result<Map<String, Value>, CliError> {
        let mut fields = Map::new();
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(v) = value {
                fields.insert(name.into(), v);
            }
        };
        put("kind", self.kind.as_ref().map(|k| json!(k)));
        put("queue", self.queue.as_ref().map(|q| json!(q)));
        put("key", self.key.as_ref().map(|k| json!(k)));
        put("priority", self.priority.map(|p| json!(p)));
        put("max_attempts", self.max_attempts.map(|n| json!(n)));
        put("timeout_ms", self.timeout.map(|d| json!(input::millis(d))));
        if let Some(payload) = &self.payload {
            fields.insert("payload".into(), input::json_arg("--payload", payload)?);
        }
        if let Some(path) = &self.payload_file {
            fields.insert("payload".into(), json_file("--payload-file", path)?);
        }
        Ok(fields)
    }
}

impl PolicyArgs {
    fn is_empty(&self) -> bool {
        self.missed.is_none() && self.overlap.is_none()
    }

    fn put(&self, body: &mut Map<String, Value>) {
        if let Some(missed) = &self.missed {
            body.insert("missed".into(), missed.clone());
        }
        if let Some(overlap) = &self.overlap {
            body.insert("overlap".into(), json!(overlap));
        }
    }
}

/// The JSON document in a file, or on stdin for `-`.
fn json_file(what: &str, path: &Path) -> Result<Value, CliError> {
    let name = path.display().to_string();
    let text = if name == "-" {
        input::stdin(what)?
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| CliError::failure(format!("cannot read {what} {name}: {e}")))?
    };
    serde_json::from_str(&text)
        .map_err(|e| CliError::usage(format!("{what} {name} is not valid JSON: {e}")))
}

impl CreateArgs {
    /// The body of `POST /api/v1/schedules`.
    pub fn body(&self) -> Result<Value, CliError> {
        if let Some(path) = &self.file {
            let spec = json_file("--file", path)?;
            if !spec.is_object() {
                return Err(CliError::usage(format!(
                    "--file {} holds no JSON object; give one such as {{\"name\": \"nightly\", \"recurrence\": {{...}}, \"template\": {{\"kind\": \"report\"}}}}",
                    path.display()
                )));
            }
            return Ok(spec);
        }
        let missing = |what: &str| CliError::usage(format!("give {what}, or --file"));
        let name = self.name.as_ref().ok_or_else(|| missing("NAME"))?;
        let recurrence = self
            .when
            .recurrence(None)?
            .ok_or_else(|| missing("one of --cron, --every and --daily"))?;
        let mut body = Map::new();
        body.insert("name".into(), json!(name));
        body.insert("recurrence".into(), recurrence);
        body.insert("template".into(), Value::Object(self.template.fields()?));
        self.policies.put(&mut body);
        if self.disabled {
            body.insert("enabled".into(), json!(false));
        }
        Ok(Value::Object(body))
    }
}

impl EditArgs {
    /// Whether the edit needs the schedule as it is now: a template is replaced whole, and
    /// a recurrence given in part is completed from the current one.
    pub fn needs_current(&self) -> bool {
        !self.when.is_empty() || !self.template.is_empty()
    }

    /// The body of `PATCH /api/v1/schedules/{schedule}`: only the fields the options
    /// change. `current` is the schedule as the server has it, when
    /// [`needs_current`](Self::needs_current).
    pub fn body(&self, current: Option<&Value>) -> Result<Value, CliError> {
        let mut body = Map::new();
        if let Some(name) = &self.rename {
            body.insert("name".into(), json!(name));
        }
        if let Some(r) = self.when.recurrence(current.map(|c| &c["recurrence"]))? {
            body.insert("recurrence".into(), r);
        }
        if !self.template.is_empty() {
            let mut template = current
                .and_then(|c| c["template"].as_object())
                .cloned()
                .unwrap_or_default();
            template.extend(self.template.fields()?);
            body.insert("template".into(), Value::Object(template));
        }
        self.policies.put(&mut body);
        if self.enable || self.disable {
            body.insert("enabled".into(), json!(self.enable));
        }
        Ok(Value::Object(body))
    }

    /// Refuses an edit that changes nothing, before any request.
    pub fn check(&self) -> Result<(), CliError> {
        let nothing = self.rename.is_none()
            && !self.needs_current()
            && self.policies.is_empty()
            && !self.enable
            && !self.disable;
        if nothing {
            return Err(CliError::usage(
                "nothing to change: give at least one option, such as --cron, --kind, --payload, --missed or --disable (see --help)",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_option_of_create_is_refused_beside_file() {
        use clap::{error::ErrorKind, Args as _, Command};
        let create = CreateArgs::augment_args(Command::new("create"));
        let mut checked = 0;
        for arg in create.get_arguments() {
            let Some(long) = arg.get_long().filter(|l| !["file", "help"].contains(l)) else {
                continue;
            };
            let mut line = vec!["create".to_owned(), "--file=spec.json".into()];
            let value = match long {
                "daily" => "02:30",
                "start" => "2030-01-02T03:04:05Z",
                "missed" | "overlap" => "skip",
                _ => "1",
            };
            line.push(if arg.get_action().takes_values() {
                format!("--{long}={value}")
            } else {
                format!("--{long}")
            });
            let err = create.clone().try_get_matches_from(&line).unwrap_err();
            assert_eq!(err.kind(), ErrorKind::ArgumentConflict, "{line:?}: {err}");
            checked += 1;
        }
        assert_eq!(checked, 16);
    }

    #[test]
    fn times_of_day_take_minutes_or_seconds() {
        assert_eq!(time_of_day("02:30").as_deref(), Ok("02:30:00"));
        assert_eq!(time_of_day("2:30:15").as_deref(), Ok("02:30:15"));
        for bad in ["24:00", "02:60", "2pm", ""] {
            assert!(
                time_of_day(bad).unwrap_err().contains("not a time of day"),
                "{bad}"
            );
        }
    }

    #[test]
    fn missed_policies_are_skip_latest_or_all_with_a_bound() {
        assert_eq!(missed("skip"), Ok(json!({"policy": "skip"})));
        assert_eq!(missed("latest"), Ok(json!({"policy": "run_latest"})));
        assert_eq!(missed("all:3"), Ok(json!({"policy": "run_all", "max": 3})));
        for bad in ["all", "all:0", "all:1001", "all:x", "run_latest", "Skip"] {
            assert!(
                missed(bad)
                    .unwrap_err()
                    .contains("not a missed-slot policy"),
                "{bad}"
            );
        }
    }
}
