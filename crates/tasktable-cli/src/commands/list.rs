//! `tasktable ls`: tasks matching a filter, newest first, a page at a time or all of them.

use super::FilterArgs;
use crate::client::{field, Api, Task};
use crate::error::CliError;
use crate::output::{self, Table};
use clap::Args;
use serde_json::{json, Value};

/// The largest page the server gives; `--all` asks for pages of this size.
const MAX_PAGE: u32 = 1000;

#[derive(Args, Debug)]
pub struct ListArgs {
    #[command(flatten)]
    filter: FilterArgs,
    /// Tasks per page (at most 1000); default 50, or 1000 with --all.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=i64::from(MAX_PAGE)))]
    limit: Option<u32>,
    /// Start after this task id (the `next` of the previous page).
    #[arg(long, value_name = "ID")]
    after: Option<i64>,
    /// Follow every page to the end.
    #[arg(long)]
    all: bool,
}

pub async fn run(api: &Api, args: &ListArgs, json: bool) -> Result<(), CliError> {
    let limit = args.limit.or(args.all.then_some(MAX_PAGE));
    let mut after = args.after;
    let mut tasks: Vec<Value> = Vec::new();
    let next = loop {
        let mut query = args.filter.query();
        query.extend(limit.map(|l| ("limit", l.to_string())));
        query.extend(after.map(|a| ("after", a.to_string())));
        let page = api.get(&["api", "v1", "tasks"], &query).await?;
        tasks.extend(field::<Vec<Value>>(&page, "tasks")?);
        let next: Option<i64> = field(&page, "next")?;
        match next {
            Some(id) if args.all => after = Some(id),
            _ => break next,
        }
    };
    if json {
        return output::json(&json!({ "tasks": tasks, "next": next }));
    }
    let mut table = Table::new([
        "ID",
        "STATE",
        "KIND",
        "QUEUE",
        "ATTEMPT",
        "RUN AT / UPDATED",
        "LAST ERROR",
    ]);
    for value in tasks {
        let task: Task = serde_json::from_value(value).map_err(|e| {
            CliError::failure(format!("the server sent a task this CLI cannot read: {e}"))
        })?;
        let when = match task.state.as_str() {
            "pending" | "held" => task.run_at,
            _ => task.updated_at,
        };
        table.row(vec![
            task.id.to_string(),
            task.state.to_string(),
            task.kind,
            task.queue,
            // A multi-run task shows its copies done of those wanted instead.
            match task.copies {
                Some(copies) => format!("{}/{copies} done", task.runs_succeeded.unwrap_or(0)),
                None => format!("{}/{}", task.attempt, task.max_attempts),
            },
            output::time(when),
            output::one_line(task.last_error.as_deref().unwrap_or(""), 60),
        ]);
    }
    if table.is_empty() {
        output::line("no tasks match")?;
    } else {
        output::emit(&table.render())?;
    }
    if let Some(next) = next {
        output::line(format!(
            "more tasks follow: add --after {next} for the next page, or --all"
        ))?;
    }
    Ok(())
}
