//! `tasktable batch`: create a batch, start, pause, stop or resume it, change its budget
//! or data, show it (with a live progress bar: `show --watch`) and list them, through
//! the API (`/api/v1/batches`, docs/batches.md).

use crate::client::{field, Api};
use crate::error::CliError;
use crate::input;
use crate::output::{self, Table};
use clap::{Args, Subcommand};
use indicatif::{ProgressBar, ProgressStyle};

use serde_json::{json, Map, Value};
use std::io::IsTerminal;
use std::time::Duration;
/// A batch and a failed item as the API returns them.
use tasktable_wire::{BatchView as Batch, ItemFailureView as Failure};

#[derive(Subcommand, Debug)]
pub enum BatchCommand {
    /// Submit a batch: items 0..N (or open-ended) run through the kind's batch handler,
    /// each reading the data.
    Create(CreateArgs),
    /// Start a batch that waits for the business (created with --held).
    Start { id: i64 },
    /// Pause a batch, keeping its offset; `resume` goes on.
    Pause { id: i64 },
    /// Stop a batch, keeping its offset (its task is cancelled); `resume` may go on.
    Stop { id: i64 },
    /// Go on from the offset: a paused, stopped or failed batch.
    Resume { id: i64 },
    /// Change the error budget, or the data (while it waits, or runs serially).
    Edit(EditArgs),
    /// One batch, with its failed items; --watch follows it with a progress bar.
    Show {
        id: i64,
        /// Follow it until it ends, with a live progress bar.
        #[arg(long)]
        watch: bool,
    },
    /// Batches, newest first.
    Ls {
        /// How many (1 to 1000).
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
}

#[derive(Args, Debug)]
pub struct CreateArgs {
    kind: String,
    /// The data every item reads (JSON; `-` reads stdin).
    #[arg(long, default_value = "{}")]
    data: String,
    /// Items 0..N; without it, open-ended (until the handler says an index is past the end).
    #[arg(long, value_name = "N")]
    items: Option<u64>,
    /// Most items running at once (default 10).
    #[arg(long, value_name = "P")]
    parallelism: Option<u32>,
    /// Most items started per second (default: no limit).
    #[arg(long, value_name = "R")]
    rate: Option<u32>,
    /// Indices past the saved offset that may start: the most a takeover repeats.
    #[arg(long, value_name = "W")]
    window: Option<u64>,
    /// Items that may fail for good before the batch fails (default 0).
    #[arg(long, value_name = "E")]
    error_budget: Option<u64>,
    /// Retries of one item (default 2).
    #[arg(long, value_name = "N")]
    item_retries: Option<u32>,
    /// The wait before an item's first retry, doubling after each (e.g. 100ms).
    #[arg(long, value_name = "DURATION", value_parser = input::duration)]
    item_backoff: Option<Duration>,
    /// The pre-start hook's own timeout (default 30m).
    #[arg(long, value_name = "DURATION", value_parser = input::duration)]
    prestart_timeout: Option<Duration>,
    #[arg(long)]
    queue: Option<String>,
    /// Wait for a `tasktable batch start` (the business starts it).
    #[arg(long)]
    held: bool,
    /// A repeat of this key returns the batch it made.
    #[arg(long)]
    idempotency_key: Option<String>,
}

#[derive(Args, Debug)]
pub struct EditArgs {
    id: i64,
    #[arg(long, value_name = "E")]
    error_budget: Option<u64>,
    /// New data (JSON; `-` reads stdin).
    #[arg(long)]
    data: Option<String>,
}

fn data(text: &str) -> Result<Value, CliError> {
    input::json_arg("--data", text)
}

pub async fn run(api: &Api, command: &BatchCommand, json: bool) -> Result<(), CliError> {
    match command {
        BatchCommand::Create(args) => create(api, args, json).await,
        BatchCommand::Start { id } => act(api, *id, "start", json).await,
        BatchCommand::Pause { id } => act(api, *id, "pause", json).await,
        BatchCommand::Stop { id } => act(api, *id, "stop", json).await,
        BatchCommand::Resume { id } => act(api, *id, "resume", json).await,
        BatchCommand::Edit(args) => edit(api, args, json).await,
        BatchCommand::Show { id, watch } => show(api, *id, *watch, json).await,
        BatchCommand::Ls { limit } => list(api, *limit, json).await,
    }
}

async fn create(api: &Api, a: &CreateArgs, json: bool) -> Result<(), CliError> {
    let mut spec = Map::new();
    let mut put = |k: &str, v: Option<Value>| {
        if let Some(v) = v {
            spec.insert(k.into(), v);
        }
    };
    put("items", a.items.map(|n| json!(n)));
    put("parallelism", a.parallelism.map(|n| json!(n)));
    put("rate", a.rate.map(|n| json!(n)));
    put("window", a.window.map(|n| json!(n)));
    put("error_budget", a.error_budget.map(|n| json!(n)));
    put("item_retries", a.item_retries.map(|n| json!(n)));
    put(
        "item_backoff_ms",
        a.item_backoff.map(|d| json!(input::millis(d))),
    );
    put(
        "prestart_timeout_ms",
        a.prestart_timeout.map(|d| json!(input::millis(d))),
    );
    let mut body = json!({
        "kind": a.kind,
        "payload": data(&a.data)?,
        "held": a.held,
        "batch": spec,
    });
    if let Some(q) = &a.queue {
        body["queue"] = json!(q);
    }
    if let Some(k) = &a.idempotency_key {
        body["idempotency_key"] = json!(k);
    }
    let answer = api.post(&["api", "v1", "tasks"], &body).await?;
    if json {
        return output::json(&answer);
    }
    let id: i64 = field(&answer, "id")?;
    let created: bool = field(&answer, "created")?;
    output::line(match (created, a.held) {
        (false, _) => format!("batch {id} exists (idempotency key); nothing changed"),
        (true, true) => format!("batch {id} created, waiting for `tasktable batch start {id}`"),
        (true, false) => format!("batch {id} created and queued"),
    })
}

async fn act(api: &Api, id: i64, op: &str, json: bool) -> Result<(), CliError> {
    let answer = api
        .post(&["api", "v1", "batches", &id.to_string(), op], &json!({}))
        .await?;
    if json {
        return output::json(&answer);
    }
    let b: Batch = field(&answer, "batch")?;
    output::line(format!("batch {id}: {} at {}", b.status, progress(&b)))
}

async fn edit(api: &Api, a: &EditArgs, json: bool) -> Result<(), CliError> {
    if a.error_budget.is_none() && a.data.is_none() {
        return Err(CliError::usage("give --error-budget, --data, or both"));
    }
    let mut body = json!({});
    if let Some(e) = a.error_budget {
        body["error_budget"] = json!(e);
    }
    if let Some(d) = &a.data {
        body["data"] = data(d)?;
    }
    let answer = api
        .patch(&["api", "v1", "batches", &a.id.to_string()], &body)
        .await?;
    if json {
        return output::json(&answer);
    }
    let b: Batch = field(&answer, "batch")?;
    output::line(format!(
        "batch {}: error budget {}, {} spent",
        a.id, b.error_budget, b.errors
    ))
}

/// `low_water/end items` (`?` for an end not known yet).
fn done(b: &Batch) -> String {
    let of = b.end.map_or_else(|| "?".to_owned(), |e| e.to_string());
    format!("{}/{of} items", b.low_water)
}

/// [`done`] with the errors.
fn progress(b: &Batch) -> String {
    format!("{}, {} failed", done(b), b.errors)
}

fn describe(b: &Batch, failures: &[Failure]) -> String {
    let mut text = String::new();
    let mut add = |k: &str, v: String| text.push_str(&format!("{k:<13}{v}\n"));
    add("batch", b.task.id.to_string());
    add("status", b.status.clone());
    add("kind", format!("{} (queue {})", b.task.kind, b.task.queue));
    add("progress", progress(b));
    add(
        "items",
        b.items
            .map_or_else(|| "open-ended".into(), |n| n.to_string()),
    );
    add(
        "pace",
        format!(
            "{} at once, {}, window {}",
            b.parallelism,
            b.rate
                .map_or_else(|| "no rate limit".into(), |r| format!("{r}/s")),
            b.window
        ),
    );
    add(
        "errors",
        format!("{} of a budget of {}", b.errors, b.error_budget),
    );
    add(
        "rate",
        b.items_per_second
            .map_or_else(|| "-".into(), |r| format!("{r:.0} items/s")),
    );
    add(
        "eta",
        b.eta_seconds
            .map_or_else(|| "-".into(), |s| format!("{s:.0}s")),
    );
    if let Some(e) = &b.task.last_error {
        add("last error", output::one_line(e, 200));
    }
    for f in failures {
        text.push_str(&format!(
            "  item {:<12} {} tries: {}\n",
            f.item,
            f.tries,
            output::one_line(&f.error, 120)
        ));
    }
    text
}

const ENDED: [&str; 4] = ["succeeded", "failed", "stopped", "paused"];

async fn show(api: &Api, id: i64, watch: bool, json: bool) -> Result<(), CliError> {
    let path = ["api", "v1", "batches", &id.to_string()];
    let answer = api.get(&path, &[]).await?;
    if json && !watch {
        return output::json(&answer);
    }
    let mut b: Batch = field(&answer, "batch")?;
    if watch {
        let bar = if json || !std::io::stderr().is_terminal() {
            ProgressBar::hidden()
        } else {
            ProgressBar::new(b.end.unwrap_or(0)).with_style(
                ProgressStyle::with_template("{bar:40} {pos}/{len} items {msg} eta {eta}")
                    .expect("the template is valid"),
            )
        };
        while !ENDED.contains(&b.status.as_str()) {
            bar.set_length(b.end.unwrap_or(b.low_water));
            bar.set_position(b.low_water);
            bar.set_message(format!(
                "{} ({} failed, {})",
                b.status,
                b.errors,
                b.items_per_second
                    .map_or_else(|| "-".into(), |r| format!("{r:.0}/s"))
            ));
            tokio::time::sleep(Duration::from_secs(1)).await;
            b = field(&api.get(&path, &[]).await?, "batch")?;
        }
        bar.finish_and_clear();
    }
    let answer = api.get(&path, &[]).await?;
    if json {
        return output::json(&answer);
    }
    let b: Batch = field(&answer, "batch")?;
    let failures: Vec<Failure> = field(&answer, "failures")?;
    output::emit(&describe(&b, &failures))
}

async fn list(api: &Api, limit: u32, json: bool) -> Result<(), CliError> {
    let answer = api
        .get(&["api", "v1", "batches"], &[("limit", limit.to_string())])
        .await?;
    if json {
        return output::json(&answer);
    }
    let batches: Vec<Batch> = field(&answer, "batches")?;
    let mut table = Table::new(["ID", "KIND", "STATUS", "DONE", "FAILED", "ITEMS/S", "ETA"]);
    for b in &batches {
        table.row(vec![
            b.task.id.to_string(),
            b.task.kind.clone(),
            b.status.clone(),
            done(b),
            b.errors.to_string(),
            b.items_per_second
                .map_or_else(|| "-".into(), |r| format!("{r:.0}")),
            b.eta_seconds
                .map_or_else(|| "-".into(), |s| format!("{s:.0}s")),
        ]);
    }
    if table.is_empty() {
        return output::line("no batches");
    }
    output::emit(&table.render())
}
