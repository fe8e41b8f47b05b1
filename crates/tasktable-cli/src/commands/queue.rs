//! `tasktable pause`, `resume` and `stats`: queues and the counts of their tasks.

use crate::client::{field, Api};
use crate::error::CliError;
use crate::output::{self, Table};
use serde::Deserialize;
use std::collections::BTreeMap;
use tasktable::TaskState;

pub async fn set_paused(api: &Api, queue: &str, paused: bool, json: bool) -> Result<(), CliError> {
    let op = if paused { "pause" } else { "resume" };
    let answer = api
        .post(&["api", "v1", "queues", queue, op], &serde_json::json!({}))
        .await?;
    if json {
        return output::json(&answer);
    }
    output::line(if paused {
        format!("queue {queue:?} paused: workers claim none of its tasks until it is resumed; running tasks finish")
    } else {
        format!("queue {queue:?} resumed")
    })
}

#[derive(Deserialize)]
struct Queue {
    name: String,
    paused: bool,
    counts: BTreeMap<String, u64>,
}

pub async fn stats(api: &Api, json: bool) -> Result<(), CliError> {
    let answer = api.get(&["api", "v1", "stats"], &[]).await?;
    if json {
        return output::json(&answer);
    }
    let queues: Vec<Queue> = field(&answer, "queues")?;
    let totals: BTreeMap<String, u64> = field(&answer, "totals")?;
    if queues.is_empty() {
        return output::line("no tasks yet");
    }
    let row = |name: String, counts: &BTreeMap<String, u64>| {
        let mut cells = vec![name];
        let mut sum = 0;
        for state in TaskState::ALL {
            let n = counts.get(state.as_str()).copied().unwrap_or(0);
            sum += n;
            cells.push(n.to_string());
        }
        cells.push(sum.to_string());
        cells
    };
    let mut headers = vec!["QUEUE".to_owned()];
    headers.extend(TaskState::ALL.map(|s| s.as_str().to_uppercase()));
    headers.push("TOTAL".into());
    let mut table = Table::new(headers);
    for q in &queues {
        let name = if q.paused {
            format!("{} (paused)", q.name)
        } else {
            q.name.clone()
        };
        table.row(row(name, &q.counts));
    }
    table.row(row("all queues".into(), &totals));
    output::emit(&table.render())
}
