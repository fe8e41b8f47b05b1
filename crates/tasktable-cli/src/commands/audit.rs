//! `tasktable audit`: the event log, newest first: who changed what, and when.

use crate::client::{field, Api};
use crate::error::CliError;
use crate::input;
use crate::output::{self, Table};
use chrono::{DateTime, Utc};
use clap::builder::PossibleValuesParser;
use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};
use tasktable::{ActorKind, EventKind};

/// The largest page the server gives; `--all` asks for pages of this size.
const MAX_PAGE: u32 = 1000;

#[derive(Args, Debug)]
pub struct AuditArgs {
    /// Only changes by this actor: a token's name, a worker's id, `scheduler`.
    #[arg(long)]
    actor: Option<String>,
    /// Only actors of this kind.
    #[arg(long, value_parser = PossibleValuesParser::new(ActorKind::ALL.map(ActorKind::as_str)))]
    actor_kind: Option<String>,
    /// Only events of this task.
    #[arg(long, value_name = "ID")]
    task: Option<i64>,
    /// Only events of this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only these events (repeat, or separate with commas).
    #[arg(long, value_delimiter = ',', value_parser = PossibleValuesParser::new(EventKind::ALL.map(EventKind::as_str)))]
    event: Vec<String>,
    /// At or after this time (RFC 3339).
    #[arg(long, value_parser = input::time)]
    from: Option<DateTime<Utc>>,
    /// Before this time (RFC 3339).
    #[arg(long, value_parser = input::time)]
    to: Option<DateTime<Utc>>,
    /// Events per page (at most 1000); default 50, or 1000 with --all.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PAGE)))]
    limit: Option<u32>,
    /// Start below this event id (the `next` of the previous page).
    #[arg(long, value_name = "ID")]
    before: Option<i64>,
    /// Follow every page to the end.
    #[arg(long)]
    all: bool,
    /// The events of one bulk action (the ACTION column): its own and each task's.
    #[arg(long, value_name = "KEY")]
    action: Option<String>,
}

/// One event as the server sends it.
#[derive(Debug, Clone, Deserialize)]
pub struct Event {
    pub id: i64,
    pub at: DateTime<Utc>,
    pub event: String,
    pub task_id: Option<i64>,
    pub queue: Option<String>,
    pub schedule_id: Option<i64>,
    pub worker_id: Option<String>,
    pub actor: Actor,
    #[serde(default)]
    pub detail: Value,
    /// The bulk action it belongs to.
    #[serde(default)]
    pub action: Option<String>,
    /// On a bulk action's own event: how many tasks it changed.
    #[serde(default)]
    pub tasks: Option<u64>,
}

pub use tasktable::Actor;

/// What an event's detail says, on one line: `priority 1 -> 7`, `pending -> cancelled`.
pub fn describe_detail(detail: &Value) -> String {
    let Some(fields) = detail.as_object() else {
        return String::new();
    };
    let mut parts = Vec::new();
    for (name, value) in fields {
        match (value.get("old"), value.get("new")) {
            (Some(old), Some(new)) if name == "state" => parts.push(format!(
                "{} -> {}",
                old.as_str().unwrap_or("?"),
                new.as_str().unwrap_or("?")
            )),
            (Some(old), Some(new)) => parts.push(format!("{name} {old} -> {new}")),
            _ if name == "filter" => parts.push(format!("tasks with {}", filter_words(value))),
            (None, Some(new)) => parts.push(format!("{name} -> {new}")),
            _ if name == "error" || name == "line" => {
                parts.push(value.as_str().unwrap_or_default().to_owned())
            }
            _ => parts.push(format!("{name} {value}")),
        }
    }
    output::one_line(&parts.join("; "), 100)
}

/// A bulk action's filter in words: `queue "q", state failed`.
fn filter_words(filter: &Value) -> String {
    let Some(fields) = filter.as_object() else {
        return filter.to_string();
    };
    let words: Vec<String> = fields
        .iter()
        .map(|(name, value)| match value {
            Value::Array(states) => {
                let names: Vec<&str> = states.iter().filter_map(Value::as_str).collect();
                format!("{} {}", name.trim_end_matches('s'), names.join(" or "))
            }
            other => format!("{} {other}", name.replace('_', " ")),
        })
        .collect();
    words.join(", ")
}

pub async fn run(api: &Api, args: &AuditArgs, json: bool) -> Result<(), CliError> {
    let limit = args.limit.or(args.all.then_some(MAX_PAGE));
    let mut before = args.before;
    let mut events: Vec<Value> = Vec::new();
    let next = loop {
        let mut query: Vec<(&str, String)> = Vec::new();
        let mut push = |name, value: Option<String>| {
            if let Some(v) = value {
                query.push((name, v));
            }
        };
        push("actor", args.actor.clone());
        push("actor_kind", args.actor_kind.clone());
        push("task", args.task.map(|t| t.to_string()));
        push("queue", args.queue.clone());
        push(
            "event",
            (!args.event.is_empty()).then(|| args.event.join(",")),
        );
        push("from", args.from.map(|t| t.to_rfc3339()));
        push("to", args.to.map(|t| t.to_rfc3339()));
        push("limit", limit.map(|l| l.to_string()));
        push("before", before.map(|b| b.to_string()));
        push("action", args.action.clone());
        let page = api.get(&["api", "v1", "audit"], &query).await?;
        events.extend(field::<Vec<Value>>(&page, "events")?);
        let next: Option<i64> = field(&page, "next")?;
        match next {
            Some(id) if args.all => before = Some(id),
            _ => break next,
        }
    };
    if json {
        return output::json(&json!({ "events": events, "next": next }));
    }
    let mut table = Table::new(["ID", "AT", "EVENT", "OF", "BY", "WHAT", "ACTION"]);
    for value in events {
        let e: Event = serde_json::from_value(value).map_err(|e| {
            CliError::failure(format!(
                "the server sent an event this CLI cannot read: {e}"
            ))
        })?;
        let of = match (e.task_id, e.tasks, e.schedule_id, &e.worker_id, &e.queue) {
            (Some(task), ..) => format!("task {task}"),
            // A bulk action's own event: how many tasks it changed.
            (None, Some(tasks), ..) => output::tasks(tasks),
            (None, None, Some(schedule), _, _) => format!("schedule {schedule}"),
            (None, None, None, Some(worker), _) => format!("worker {worker}"),
            (None, None, None, None, Some(queue)) => format!("queue {queue}"),
            _ => String::new(),
        };
        table.row(vec![
            e.id.to_string(),
            output::time(e.at),
            e.event,
            of,
            e.actor.label(),
            describe_detail(&e.detail),
            e.action.unwrap_or_default(),
        ]);
    }
    if table.is_empty() {
        output::line("no events match")?;
    } else {
        output::emit(&table.render())?;
    }
    if let Some(next) = next {
        output::line(format!(
            "more events follow: add --before {next} for the next page, or --all"
        ))?;
    }
    Ok(())
}
