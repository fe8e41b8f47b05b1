//! `tasktable workers` and `tasktable drain`: the worker registry, and an operator's
//! drain or release of one worker.

use crate::client::{field, Api};
use crate::error::CliError;
use crate::output::{self, Table};
use chrono::{DateTime, Utc};
use clap::{Args, Subcommand};
use serde::Deserialize;

#[derive(Args, Debug)]
pub struct WorkersArgs {
    #[command(subcommand)]
    pub command: Option<WorkersCommand>,
    /// Also list workers that left or fell silent.
    #[arg(long)]
    pub all: bool,
    /// List workers whose id sorts after ID: the next page, as the last one said.
    #[arg(long, value_name = "ID")]
    pub after: Option<String>,
    /// Most workers listed (1 to 1000; default 500).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub limit: Option<u32>,
}

#[derive(Subcommand, Debug)]
pub enum WorkersCommand {
    /// One worker, gone or not.
    Show { id: String },
    /// Let a worker finish what it runs and claim nothing new, from its next heartbeat
    /// on. A worker restarted under the same id stays drained until released.
    Drain { id: String },
    /// Let a drained worker claim again.
    Release { id: String },
}

#[derive(Deserialize)]
struct Worker {
    id: String,
    host: String,
    address: Option<String>,
    owner: Option<String>,
    pid: Option<u32>,
    version: String,
    groups: Vec<String>,
    queues: Option<Vec<String>>,
    capacity: u32,
    protocol: String,
    /// Older servers send none; `None` also for a worker that did not say.
    #[serde(default)]
    kinds: Option<Vec<String>>,
    state: String,
    started_at: DateTime<Utc>,
    last_seen_at: DateTime<Utc>,
    gone_at: Option<DateTime<Utc>>,
    running: u64,
}

/// The kinds a worker handles, or `?` when it did not say.
fn kinds(w: &Worker) -> String {
    match &w.kinds {
        None => "?".into(),
        Some(k) if k.is_empty() => "-".into(),
        Some(k) => k.join(","),
    }
}

fn queues(w: &Worker) -> String {
    match &w.queues {
        None => "*".into(),
        Some(q) => q.join(","),
    }
}

pub async fn run(api: &Api, args: &WorkersArgs, json: bool) -> Result<(), CliError> {
    match &args.command {
        None => list(api, args, json).await,
        Some(WorkersCommand::Show { id }) => show(api, id, json).await,
        Some(WorkersCommand::Drain { id }) => set_draining(api, id, true, json).await,
        Some(WorkersCommand::Release { id }) => set_draining(api, id, false, json).await,
    }
}

async fn list(api: &Api, args: &WorkersArgs, json: bool) -> Result<(), CliError> {
    let all = args.all;
    let mut query = vec![("include_gone", all.to_string())];
    query.extend(args.after.clone().map(|a| ("after", a)));
    query.extend(args.limit.map(|n| ("limit", n.to_string())));
    let answer = api.get(&["api", "v1", "workers"], &query).await?;
    if json {
        return output::json(&answer);
    }
    let workers: Vec<Worker> = field(&answer, "workers")?;
    let live: u64 = field(&answer, "live")?;
    let next: Option<String> = field(&answer, "next")?;
    let mut table = Table::new([
        "ID",
        "HOST",
        "ADDRESS",
        "STATE",
        "RUNNING",
        "QUEUES",
        "KINDS",
        "GROUPS",
        "LAST SEEN",
    ]);
    for w in &workers {
        table.row(vec![
            w.id.clone(),
            w.host.clone(),
            w.address.clone().unwrap_or_else(|| "-".into()),
            w.state.clone(),
            format!("{}/{}", w.running, w.capacity),
            queues(w),
            output::one_line(&kinds(w), 40),
            w.groups.join(","),
            output::time(w.last_seen_at),
        ]);
    }
    if table.is_empty() {
        output::line(if all {
            "no workers in the registry"
        } else {
            "no live workers (--all lists those gone too)"
        })?;
    } else {
        output::emit(&table.render())?;
    }
    output::line(format!("{live} live"))?;
    match next {
        Some(id) => output::line(format!(
            "more may follow: tasktable workers{} --after '{id}'",
            if all { " --all" } else { "" }
        )),
        None => Ok(()),
    }
}

fn describe(w: &Worker) -> String {
    let mut text = String::new();
    let mut add = |k: &str, v: String| text.push_str(&format!("{k:<13}{v}\n"));
    add("id", w.id.clone());
    add("state", w.state.clone());
    add("host", w.host.clone());
    add("address", w.address.clone().unwrap_or_else(|| "-".into()));
    add("owner", w.owner.clone().unwrap_or_else(|| "-".into()));
    add("pid", w.pid.map_or_else(|| "-".into(), |p| p.to_string()));
    add("version", w.version.clone());
    add("protocol", w.protocol.clone());
    add("queues", queues(w));
    add(
        "kinds",
        match &w.kinds {
            None => "unknown (the worker did not say)".into(),
            Some(_) => kinds(w),
        },
    );
    add("groups", w.groups.join(","));
    add("running", format!("{} of {}", w.running, w.capacity));
    add("started", output::time(w.started_at));
    add("last seen", output::time(w.last_seen_at));
    add("gone", output::opt_time(w.gone_at));
    text
}

async fn show(api: &Api, id: &str, json: bool) -> Result<(), CliError> {
    let answer = api.get(&["api", "v1", "workers", id], &[]).await?;
    if json {
        return output::json(&answer);
    }
    let w: Worker = field(&answer, "worker")?;
    output::emit(&describe(&w))
}

pub async fn set_draining(api: &Api, id: &str, drain: bool, json: bool) -> Result<(), CliError> {
    let op = if drain { "drain" } else { "release" };
    let answer = api
        .post(&["api", "v1", "workers", id, op], &serde_json::json!({}))
        .await?;
    if json {
        return output::json(&answer);
    }
    let w: Worker = field(&answer, "worker")?;
    output::line(if drain {
        format!(
            "worker {:?} draining: it finishes the {} task(s) it runs and claims nothing new from its next heartbeat on (state {})",
            w.id, w.running, w.state
        )
    } else {
        format!("worker {:?} released (state {})", w.id, w.state)
    })
}
