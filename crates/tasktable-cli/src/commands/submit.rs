//! `tasktable submit`: one task from the command line, or many from a JSON Lines file in
//! batches, with a progress bar.

use crate::client::{field, Api, Task};
use crate::error::CliError;
use crate::input;
use crate::output;
use chrono::{DateTime, Utc};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Map, Value};
use std::io::{IsTerminal, Read};
use std::path::PathBuf;
use std::time::Duration;

/// Tasks per `POST /api/v1/tasks/batch`.
const BATCH: usize = 1000;

#[derive(Args, Debug)]
pub struct SubmitArgs {
    /// The task's kind: which handler runs it (`http`, `exec`, or your own).
    #[arg(required_unless_present = "file")]
    kind: Option<String>,
    /// The payload as JSON, or - to read it from stdin. Default: null.
    #[arg(value_name = "PAYLOAD_JSON", conflicts_with = "file")]
    payload: Option<String>,
    /// Submit one task per line of this JSON Lines file (- for stdin), each an object like
    /// {"kind": "email", "payload": {...}, "priority": 5}. KIND and the options below apply
    /// to lines that do not set them. Sent in batches of 1000; each batch is all or nothing.
    #[arg(long, value_name = "PATH")]
    file: Option<PathBuf>,
    /// Queue; default `default`.
    #[arg(long)]
    queue: Option<String>,
    /// Business key, for finding the task later (`ls --key`).
    #[arg(long)]
    key: Option<String>,
    /// A second submit with the same key creates nothing and returns the first task.
    #[arg(long, value_name = "KEY", conflicts_with = "file")]
    idempotency_key: Option<String>,
    /// Higher runs first; default 0.
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// Run after this long (10s, 5m, 1h30m, or milliseconds).
    #[arg(long, value_parser = input::duration, conflicts_with = "run_at")]
    delay: Option<Duration>,
    /// Run at this time (RFC 3339, such as 2030-01-02T03:04:05Z).
    #[arg(long, value_parser = input::time)]
    run_at: Option<DateTime<Utc>>,
    /// Attempts before the task fails; default 5.
    #[arg(long)]
    max_attempts: Option<u32>,
    /// Time limit of each attempt (10s, 5m, ...).
    #[arg(long, value_parser = input::duration)]
    timeout: Option<Duration>,
    /// Create the task held: it waits for `tasktable release`.
    #[arg(long)]
    held: bool,
    /// Only this worker may run the task (repeat for several: any of them may).
    #[arg(
        long = "target-worker",
        value_name = "ID",
        conflicts_with = "target_group"
    )]
    target_worker: Vec<String>,
    /// Only members of this group may run the task (repeat for several).
    #[arg(long = "target-group", value_name = "GROUP")]
    target_group: Vec<String>,
    /// After a failed attempt, the retry waits up to this long (45s, 5m, ...) for the worker
    /// that ran it, while that worker is live, before any other allowed worker may take it.
    #[arg(long, value_name = "DURATION", value_parser = input::affinity)]
    affinity: Option<Duration>,
    /// Run the task this many times, each run by a worker of its own; it succeeds at the
    /// last success (`show` lists the runs). `all`: once on every active worker that takes
    /// its queue and that its target allows; `all_joining`: also once on each allowed
    /// worker that joins while it is open.
    #[arg(long, value_name = "N|all|all_joining", value_parser = input::copies, conflicts_with = "affinity")]
    copies: Option<Value>,
    /// With --copies: at most this many runs at the same time (default: all of them).
    #[arg(long, value_name = "N", requires = "copies")]
    at_once: Option<u32>,
    /// With --copies: a worker that finished a run may take another.
    #[arg(long, requires = "copies")]
    repeat: bool,
    /// With --copies: failed runs the task survives (default: max attempts - 1).
    #[arg(long, value_name = "N", requires = "copies")]
    max_failed_runs: Option<u32>,
    /// With --copies and --idempotency-key, when the key names an existing multi-run
    /// task: `failed` forgives its failed runs, `all` starts it over.
    #[arg(long, value_parser = ["failed", "all"], requires_all = ["copies", "idempotency_key"])]
    rearm: Option<String>,
}

impl SubmitArgs {
    /// The request fields the options set.
    fn fields(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        let mut put = |name: &str, value: Option<Value>| {
            if let Some(v) = value {
                fields.insert(name.into(), v);
            }
        };
        put("kind", self.kind.as_ref().map(|k| json!(k)));
        put("queue", self.queue.as_ref().map(|q| json!(q)));
        put("key", self.key.as_ref().map(|k| json!(k)));
        put(
            "idempotency_key",
            self.idempotency_key.as_ref().map(|k| json!(k)),
        );
        put("priority", self.priority.map(|p| json!(p)));
        put("delay_ms", self.delay.map(|d| json!(input::millis(d))));
        put("run_at", self.run_at.map(|t| json!(t)));
        put("max_attempts", self.max_attempts.map(|n| json!(n)));
        put("timeout_ms", self.timeout.map(|d| json!(input::millis(d))));
        put("held", self.held.then_some(json!(true)));
        put(
            "target",
            input::target(&self.target_worker, &self.target_group).map(|t| json!(t)),
        );
        put(
            "affinity_ms",
            self.affinity.map(|d| json!(input::millis(d))),
        );
        put("copies", self.copies.clone());
        put("at_once", self.at_once.map(|n| json!(n)));
        put("repeat", self.repeat.then_some(json!(true)));
        put("max_failed_runs", self.max_failed_runs.map(|n| json!(n)));
        put("rearm", self.rearm.as_ref().map(|r| json!(r)));
        fields
    }
}

pub async fn run(api: &Api, args: &SubmitArgs, json: bool) -> Result<(), CliError> {
    if let Some(path) = &args.file {
        return submit_file(api, args, path, json).await;
    }
    let mut body = args.fields();
    if let Some(payload) = &args.payload {
        body.insert("payload".into(), input::json_arg("PAYLOAD_JSON", payload)?);
    }
    let answer = api
        .post(&["api", "v1", "tasks"], &Value::Object(body))
        .await?;
    if json {
        return output::json(&answer);
    }
    let task: Task = field(&answer, "task")?;
    if field::<bool>(&answer, "created")? {
        output::line(format!(
            "created task {}: kind {}, queue {}, {}",
            task.id, task.kind, task.queue, task.state
        ))
    } else {
        output::line(format!(
            "not created: task {} already has idempotency key {:?} ({}; the options given were not applied)",
            task.id,
            task.idempotency_key.unwrap_or_default(),
            task.state.described()
        ))
    }
}

/// One task per non-blank line; `BATCH` lines per request.
async fn submit_file(
    api: &Api,
    args: &SubmitArgs,
    path: &PathBuf,
    json: bool,
) -> Result<(), CliError> {
    let name = path.display().to_string();
    let text = if name == "-" {
        let mut text = String::new();
        std::io::stdin().read_to_string(&mut text)?;
        text
    } else {
        std::fs::read_to_string(path)
            .map_err(|e| CliError::failure(format!("cannot read {name}: {e}")))?
    };
    let defaults = args.fields();
    let mut tasks = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let bad = |why: String| CliError::usage(format!("{name} line {}: {why}", n + 1));
        let Value::Object(mut task) = serde_json::from_str(line).map_err(|e| bad(e.to_string()))?
        else {
            return Err(bad(
                "expected a JSON object such as {\"kind\": \"email\", \"payload\": {}}".into(),
            ));
        };
        for (key, value) in &defaults {
            task.entry(key.clone()).or_insert_with(|| value.clone());
        }
        if !task.contains_key("kind") {
            return Err(bad("no \"kind\": set it in the line or give KIND".into()));
        }
        tasks.push((n + 1, Value::Object(task)));
    }

    let bar = if json || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        ProgressBar::new(tasks.len() as u64).with_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} tasks {per_sec} eta {eta}")
                .expect("the template is valid"),
        )
    };
    let mut submitted: Vec<Value> = Vec::with_capacity(tasks.len());
    for chunk in tasks.chunks(BATCH) {
        let batch: Vec<&Value> = chunk.iter().map(|(_, task)| task).collect();
        let answer = api
            .post(&["api", "v1", "tasks", "batch"], &json!({ "tasks": batch }))
            .await
            .map_err(|e| {
                bar.abandon();
                CliError::new(
                    e.exit,
                    format!(
                        "{name}: the batch from line {} was not submitted: {}; the {} tasks before it were (submitting the file again repeats them unless they have idempotency keys)",
                        chunk[0].0,
                        e.message,
                        submitted.len()
                    ),
                )
            })?;
        let views: Vec<Value> = field(&answer, "tasks")?;
        bar.inc(views.len() as u64);
        submitted.extend(views);
    }
    bar.finish_and_clear();

    if json {
        return output::json(&json!({ "tasks": submitted }));
    }
    let created = submitted
        .iter()
        .filter(|s| s.get("created") == Some(&Value::Bool(true)))
        .count();
    output::line(format!(
        "submitted {} from {name}: {created} created, {} already existed",
        output::tasks(submitted.len() as u64),
        submitted.len() - created
    ))
}
