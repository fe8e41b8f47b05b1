//! Operators' changes: `cancel`, `retry`, `hold`, `release` and `edit`, on task ids or,
//! in bulk, on every task a filter matches. The server decides whether a change is legal
//! from a task's state; this reports its answer.

use super::FilterArgs;
use crate::client::{field, Api, Task};
use crate::error::{CliError, Exit};
use crate::input;
use crate::output;
use chrono::{DateTime, Utc};
use clap::Args;
use indicatif::{ProgressBar, ProgressStyle};
use serde_json::{json, Value};
use std::io::{IsTerminal, Write};
use std::time::Duration;

/// Which tasks a change applies to.
#[derive(Args, Debug)]
pub struct TargetArgs {
    /// Task ids. Without ids, give a filter (--state, --kind, ...) to change every task it
    /// matches.
    #[arg(value_name = "ID")]
    ids: Vec<i64>,
    #[command(flatten)]
    filter: FilterArgs,
    /// Apply a bulk change without asking for confirmation (required when stdin is not a
    /// terminal).
    #[arg(long, short)]
    yes: bool,
}

#[derive(Args, Debug)]
pub struct EditArgs {
    #[command(flatten)]
    target: TargetArgs,
    #[command(flatten)]
    edits: Edits,
}

/// Each flag is its own change, applied in this order; if one is refused, those before it
/// stay applied.
#[derive(Args, Debug)]
#[group(required = true, multiple = true)]
struct Edits {
    /// New priority (higher runs first).
    #[arg(long, allow_negative_numbers = true)]
    priority: Option<i32>,
    /// New number of attempts before the task fails.
    #[arg(long)]
    max_attempts: Option<u32>,
    /// New payload as JSON, or - to read it from stdin (not while the task runs).
    #[arg(long, value_name = "JSON")]
    payload: Option<String>,
    /// Run at this time instead (RFC 3339).
    #[arg(long, value_parser = input::time, conflicts_with = "delay")]
    run_at: Option<DateTime<Utc>>,
    /// Run this long from now instead (10s, 5m, ...).
    #[arg(long, value_parser = input::duration)]
    delay: Option<Duration>,
    /// Only this worker may run the task from now on (repeat for several). A running task
    /// whose worker is left out goes back to pending without spending its attempt.
    #[arg(long = "target-worker", value_name = "ID", conflicts_with_all = ["target_group", "any_worker"])]
    target_worker: Vec<String>,
    /// Only members of this group may run the task from now on (repeat for several).
    #[arg(
        long = "target-group",
        value_name = "GROUP",
        conflicts_with = "any_worker"
    )]
    target_group: Vec<String>,
    /// Any worker may run the task from now on (clears its target).
    #[arg(long)]
    any_worker: bool,
}

/// One call of `POST /api/v1/tasks/{id}/{op}` or `/api/v1/tasks/bulk/{op}`.
#[derive(Debug)]
pub struct Op {
    name: &'static str,
    body: Value,
    /// What it did, for people: "retried", "priority set to 5".
    done: String,
}

impl Op {
    /// `cancel`, `retry`, `hold` or `release`, which take no values.
    pub fn plain(name: &'static str, done: &str) -> Self {
        Op {
            name,
            body: json!({}),
            done: done.to_owned(),
        }
    }
}

pub async fn edit(api: &Api, args: &EditArgs, json: bool) -> Result<(), CliError> {
    let e = &args.edits;
    let mut ops = Vec::new();
    if let Some(priority) = e.priority {
        ops.push(Op {
            name: "set-priority",
            body: json!({ "priority": priority }),
            done: format!("priority set to {priority}"),
        });
    }
    if let Some(n) = e.max_attempts {
        ops.push(Op {
            name: "set-max-attempts",
            body: json!({ "max_attempts": n }),
            done: format!("max attempts set to {n}"),
        });
    }
    if let Some(payload) = &e.payload {
        ops.push(Op {
            name: "edit-payload",
            body: json!({ "payload": input::json_arg("--payload", payload)? }),
            done: "payload replaced".into(),
        });
    }
    if let Some(at) = e.run_at {
        ops.push(Op {
            name: "reschedule",
            body: json!({ "run_at": at }),
            done: format!("rescheduled to {}", output::time(at)),
        });
    }
    if let Some(delay) = e.delay {
        let ms = input::millis(delay);
        ops.push(Op {
            name: "reschedule",
            body: json!({ "delay_ms": ms }),
            done: format!("rescheduled to run in {}", output::millis(ms)),
        });
    }
    if let Some(target) = input::target(&e.target_worker, &e.target_group) {
        ops.push(Op {
            name: "set-target",
            done: format!("target set to {}", target.0),
            body: json!({ "target": target }),
        });
    }
    if e.any_worker {
        ops.push(Op {
            name: "set-target",
            body: json!({ "target": null }),
            done: "target cleared: any worker".into(),
        });
    }
    apply(api, &args.target, &ops, json).await
}

/// Applies `ops`, in order, to the ids of `target`, or to every task its filter matches.
pub async fn apply(api: &Api, target: &TargetArgs, ops: &[Op], json: bool) -> Result<(), CliError> {
    match (target.ids.is_empty(), target.filter.is_empty()) {
        (false, false) => Err(CliError::usage(
            "give task ids or a filter, not both",
        )),
        (true, true) => Err(CliError::usage(
            "name the tasks: give one or more task ids, or a filter such as --state failed for a bulk change",
        )),
        (false, true) => by_id(api, &target.ids, ops, json).await,
        (true, false) => bulk(api, target, ops, json).await,
    }
}

async fn by_id(api: &Api, ids: &[i64], ops: &[Op], json: bool) -> Result<(), CliError> {
    let mut answers = Vec::new();
    let mut errors = Vec::new();
    'tasks: for &id in ids {
        let mut last = None;
        for op in ops {
            let path = ["api", "v1", "tasks", &id.to_string(), op.name];
            match api.post(&path, &op.body).await {
                Ok(answer) => {
                    if !json {
                        let task: Task = field(&answer, "task")?;
                        output::line(format!(
                            "task {id}: {}; {}",
                            op.done,
                            task.state.described()
                        ))?;
                    }
                    last = Some(answer);
                }
                Err(e) => {
                    errors.push(e);
                    continue 'tasks;
                }
            }
        }
        answers.extend(last);
    }
    if json && !answers.is_empty() {
        if ids.len() == 1 {
            output::json(&answers[0])?;
        } else {
            let tasks: Vec<&Value> = answers.iter().filter_map(|a| a.get("task")).collect();
            output::json(&json!({ "tasks": tasks }))?;
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 if ids.len() == 1 => Err(errors.remove(0)),
        n => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            Err(CliError::new(
                errors[0].exit,
                format!("{n} of {} tasks were not changed", ids.len()),
            ))
        }
    }
}

/// Tasks one step of a bulk change covers: the most the API takes.
const STEP: u32 = 1000;

async fn bulk(api: &Api, target: &TargetArgs, ops: &[Op], json: bool) -> Result<(), CliError> {
    // The first change's count, as just confirmed; later ones are counted when they start.
    let mut confirmed = if target.yes {
        None
    } else {
        confirm(api, &target.filter, ops).await?
    };
    let terminal = !json && std::io::stderr().is_terminal();
    let mut answers = Vec::new();
    for op in ops {
        // A step at a time, so a long change shows how far it is.
        let bar = if terminal {
            let total = match confirmed.take() {
                Some(n) => n,
                None => matching(api, &target.filter, op).await?,
            };
            ProgressBar::new(total).with_style(
                ProgressStyle::with_template(&format!(
                    "{:>16} {{bar:40}} {{pos}}/{{len}} tasks {{per_sec}} eta {{eta}}",
                    op.name
                ))
                .expect("the template is valid"),
            )
        } else {
            ProgressBar::hidden()
        };
        // Every step after the first names the action the first began, so the change
        // is one row of the audit.
        let (mut changed, mut after, mut action) = (0u64, None::<i64>, None::<String>);
        loop {
            let mut body = op.body.clone();
            body["filter"] = target.filter.body();
            body["limit"] = json!(STEP);
            if let Some(after) = after {
                body["after"] = json!(after);
            }
            if let Some(action) = &action {
                body["action"] = json!(action);
            }
            let answer = api
                .post(&["api", "v1", "tasks", "bulk", op.name], &body)
                .await
                .inspect_err(|_| bar.abandon())?;
            let step: u64 = field(&answer, "changed")?;
            changed += step;
            bar.inc(step);
            after = field(&answer, "next")?;
            action = field(&answer, "action")?;
            if after.is_none() {
                break;
            }
        }
        bar.finish_and_clear();
        if !json {
            output::line(format!("{}: {}", output::tasks(changed), op.done))?;
        }
        answers.push(json!({ "operation": op.name, "changed": changed }));
    }
    if json {
        match &answers[..] {
            [one] => output::json(&json!({ "changed": one["changed"] }))?,
            many => output::json(&json!({ "operations": many }))?,
        }
    }
    Ok(())
}

/// How many tasks `op` applies to now among those `filter` matches (the API's dry run).
async fn matching(api: &Api, filter: &FilterArgs, op: &Op) -> Result<u64, CliError> {
    let mut body = op.body.clone();
    body["filter"] = filter.body();
    body["dry_run"] = json!(true);
    let answer = api
        .post(&["api", "v1", "tasks", "bulk", op.name], &body)
        .await?;
    field(&answer, "matching")
}

/// Asks on the terminal, saying how many tasks each change applies to now; answers the
/// first change's count.
async fn confirm(api: &Api, filter: &FilterArgs, ops: &[Op]) -> Result<Option<u64>, CliError> {
    let names: Vec<&str> = ops.iter().map(|op| op.name).collect();
    let what = format!(
        "{} every task with {}",
        names.join(" and "),
        filter.describe()
    );
    if !std::io::stdin().is_terminal() {
        return Err(CliError::usage(format!(
            "this would {what}; pass --yes to confirm (stdin is not a terminal, so there is no one to ask)"
        )));
    }
    let (mut counts, mut first) = (Vec::new(), None);
    for op in ops {
        let n = matching(api, filter, op).await?;
        first = first.or(Some(n));
        counts.push(match ops {
            [_] => output::tasks(n),
            _ => format!("{}: {}", op.name, output::tasks(n)),
        });
    }
    eprint!("{what} ({} match now)? [y/N] ", counts.join(", "));
    std::io::stderr().flush()?;
    let mut answer = String::new();
    std::io::stdin().read_line(&mut answer)?;
    if matches!(answer.trim().to_ascii_lowercase().as_str(), "y" | "yes") {
        Ok(first)
    } else {
        Err(CliError::new(
            Exit::Failure,
            "not confirmed; nothing changed",
        ))
    }
}
