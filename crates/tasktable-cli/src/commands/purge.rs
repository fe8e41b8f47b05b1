//! `tasktable purge`: delete (or archive) finished tasks past an age now, batch after
//! batch through the admin API, with a progress bar; `--dry-run` only counts.

use crate::client::{field, Api};
use crate::error::CliError;
use crate::input;
use crate::output;
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::json;
use std::io::IsTerminal;
use std::time::Duration;

/// Which finished tasks go.
#[derive(Args, Debug)]
pub struct PurgeArgs {
    /// Succeeded tasks that finished longer ago than this (7d, 12h, ...).
    #[arg(long, value_name = "AGE", value_parser = input::duration)]
    succeeded: Option<Duration>,
    /// Failed tasks that finished longer ago than this.
    #[arg(long, value_name = "AGE", value_parser = input::duration)]
    failed: Option<Duration>,
    /// Cancelled tasks that finished longer ago than this.
    #[arg(long, value_name = "AGE", value_parser = input::duration)]
    cancelled: Option<Duration>,
    /// Move them, with their attempts, to the archive tables instead of deleting them.
    #[arg(long)]
    archive: bool,
    /// Count what would go, and change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Tasks per transaction (1 to 1000).
    #[arg(long, default_value_t = 500)]
    batch: u32,
}

pub async fn run(api: &Api, args: &PurgeArgs, json: bool) -> Result<(), CliError> {
    let states = [
        ("succeeded", args.succeeded),
        ("failed", args.failed),
        ("cancelled", args.cancelled),
    ];
    let states: Vec<(&str, Duration)> = states
        .into_iter()
        .filter_map(|(s, age)| Some((s, age?)))
        .collect();
    if states.is_empty() {
        return Err(CliError::usage(
            "name at least one of --succeeded, --failed and --cancelled with an age",
        ));
    }
    let call = |state: &str, age: Duration, dry_run: bool| {
        json!({
            "state": state,
            "older_than_ms": input::millis(age),
            "archive": args.archive,
            "limit": args.batch,
            "dry_run": dry_run,
        })
    };
    let path = ["api", "v1", "admin", "purge"];
    let mut counts = serde_json::Map::new();
    for (state, age) in states {
        let planned: u64 = field(&api.post(&path, &call(state, age, true)).await?, "count")?;
        if args.dry_run {
            counts.insert(state.into(), json!(planned));
            continue;
        }
        let bar = if json || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(planned).with_style(
                ProgressStyle::with_template(&format!(
                    "{state:>9} {{bar:40}} {{pos}}/{{len}} tasks {{per_sec}} eta {{eta}}"
                ))
                .expect("the template is valid"),
            )
        };
        let mut taken = 0;
        loop {
            let answer = api
                .post(&path, &call(state, age, false))
                .await
                .inspect_err(|_| {
                    bar.abandon();
                })?;
            let n: u64 = field(&answer, "count")?;
            taken += n;
            bar.inc(n);
            if n < u64::from(args.batch) {
                break;
            }
        }
        bar.finish_and_clear();
        counts.insert(state.into(), json!(taken));
    }
    if json {
        return output::json(&json!({
            "dry_run": args.dry_run,
            "archive": args.archive,
            "tasks": counts,
        }));
    }
    let verb = match (args.dry_run, args.archive) {
        (true, true) => "would archive",
        (true, false) => "would delete",
        (false, true) => "archived",
        (false, false) => "deleted",
    };
    let parts: Vec<String> = counts
        .iter()
        .map(|(state, n)| format!("{} {state}", output::tasks(n.as_u64().unwrap_or(0))))
        .collect();
    output::line(format!("{verb} {}", parts.join(", ")))
}
