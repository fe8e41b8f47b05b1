//! `tasktable show`: one task, everything about it, and the history of its attempts.

use crate::client::{field, runs_summary, Api, Attempt, Run, Task};
use crate::commands::audit::{describe_detail, Actor};
use crate::error::CliError;
use crate::output::{self, Table};
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::Value;

pub async fn run(api: &Api, id: i64, json: bool) -> Result<(), CliError> {
    let answer = api
        .get(&["api", "v1", "tasks", &id.to_string()], &[])
        .await?;
    if json {
        return output::json(&answer);
    }
    let task: Task = field(&answer, "task")?;
    let attempts: Vec<Attempt> = field(&answer, "attempts")?;
    // Older servers send no runs, and no timeline.
    let runs: Vec<Run> = field(&answer, "runs").unwrap_or_default();
    let timeline: Vec<Entry> = field(&answer, "timeline").unwrap_or_default();
    let waiting: Vec<Waiting> = field(&answer, "waiting").unwrap_or_default();
    let mut text = render(&task, &attempts, &runs, &waiting);
    if !timeline.is_empty() {
        text.push_str("\nhistory\n");
        text.push_str(&history(&timeline));
    }
    output::emit(&text)
}

/// One reason a pending task waits, as the server words it.
#[derive(Debug, Clone, Deserialize)]
struct Waiting {
    text: String,
}

/// One line of a task's timeline as the server sends it.
#[derive(Debug, Clone, Deserialize)]
struct Entry {
    at: DateTime<Utc>,
    event: String,
    actor: Option<Actor>,
    attempt: Option<u32>,
    #[serde(default)]
    detail: Value,
}

fn history(timeline: &[Entry]) -> String {
    let mut table = Table::new(["AT", "EVENT", "BY", "WHAT"]);
    for e in timeline {
        let event = match e.attempt {
            Some(n) => format!("{} (attempt {n})", e.event),
            None => e.event.clone(),
        };
        table.row(vec![
            output::time(e.at),
            event,
            e.actor.as_ref().map(Actor::label).unwrap_or_default(),
            describe_detail(&e.detail),
        ]);
    }
    table.render()
}

fn render(task: &Task, attempts: &[Attempt], runs: &[Run], waiting: &[Waiting]) -> String {
    let mut fields: Vec<(&str, String)> = vec![
        ("state", task.state.to_string()),
        ("kind", task.kind.clone()),
        ("queue", task.queue.clone()),
        (
            "attempt",
            format!("{} of {}", task.attempt, task.max_attempts),
        ),
        ("priority", task.priority.to_string()),
        ("run at", output::time(task.run_at)),
        ("created", output::time(task.created_at)),
        ("updated", output::time(task.updated_at)),
    ];
    let mut optional = |name, value: Option<String>| {
        if let Some(v) = value {
            fields.push((name, v));
        }
    };
    optional("started", task.started_at.map(output::time));
    optional("finished", task.finished_at.map(output::time));
    optional("key", task.key.clone());
    optional("idempotency", task.idempotency_key.clone());
    optional("timeout", task.timeout_ms.map(output::millis));
    optional("target", task.target.as_ref().map(|t| t.0.to_string()));
    optional("affinity", affinity(task));
    optional("runs", runs_summary(task));
    optional(
        "at once",
        task.copies.and(task.at_once).map(|n| n.to_string()),
    );
    optional(
        "worker",
        worker(task.worker_host.as_deref(), task.worker_id.as_deref()),
    );
    // The trace its attempts continue, as tracing tools search for it.
    optional(
        "trace",
        task.traceparent.as_ref().map(|tp| tp.trace_id().to_owned()),
    );
    // Why a pending task waits, a reason a line (older servers say nothing).
    optional(
        "waiting",
        (!waiting.is_empty()).then(|| {
            waiting
                .iter()
                .map(|w| w.text.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        }),
    );
    optional("last error", task.current_error().map(str::to_owned));
    optional("payload", Some(pretty(&task.payload)));
    optional("result", task.result.as_ref().map(pretty));
    optional("checkpoint", task.checkpoint.as_ref().map(pretty));
    optional("progress", task.progress.as_ref().map(pretty));

    let mut text = format!("task {}\n", task.id);
    text.push_str(&field_lines(&fields));
    if !runs.is_empty() {
        let mut table = Table::new(["RUN", "STATE", "WORKER", "STARTED", "FINISHED", "NOTE"]);
        for r in runs {
            let note = match (r.resumed_from, r.error.as_deref()) {
                (_, Some(error)) => output::one_line(error, 80),
                (Some(from), None) => format!("took over from run {from}"),
                (None, None) => String::new(),
            };
            table.row(vec![
                r.run.to_string(),
                r.state.clone(),
                worker(r.worker_host.as_deref(), Some(&r.worker_id)).unwrap_or_default(),
                output::time(r.started_at),
                output::opt_time(r.finished_at),
                note,
            ]);
        }
        text.push_str("\nruns\n");
        text.push_str(&table.render());
    }
    if attempts.is_empty() {
        text.push_str("\nno attempt has ended yet\n");
        return text;
    }
    let mut table = Table::new(["#", "OUTCOME", "WORKER", "STARTED", "FINISHED", "ERROR"]);
    for a in attempts {
        table.row(vec![
            a.attempt.to_string(),
            a.outcome.clone(),
            worker(a.worker_host.as_deref(), a.worker_id.as_deref()).unwrap_or_else(|| "-".into()),
            output::opt_time(a.started_at),
            output::time(a.finished_at),
            output::one_line(a.error.as_deref().unwrap_or(""), 80),
        ]);
    }
    text.push_str("\nattempts\n");
    text.push_str(&table.render());
    text
}

/// One indented line per field, names in a column; multi-line values (pretty JSON) stay
/// aligned under their first line.
pub fn field_lines(fields: &[(&str, String)]) -> String {
    let mut text = String::new();
    for (name, value) in fields {
        let value = value.replace('\n', &format!("\n  {:12}", ""));
        text.push_str(&format!("  {name:<12}{value}\n"));
    }
    text
}

/// How long a retry waits for the worker of its previous attempt and, while it waits, a
/// second line with that worker and the end of the wait.
fn affinity(task: &Task) -> Option<String> {
    let wait = task.affinity_ms.map(output::millis);
    let until = task.affinity_until.map(|until| {
        let whom = match task.worker_id.as_deref() {
            Some(id) => format!("worker {id}"),
            None => "its previous worker".to_owned(),
        };
        format!("waits for {whom} until {}", output::time(until))
    });
    match (wait, until) {
        (Some(wait), Some(until)) => Some(format!("{wait}\n{until}")),
        (wait, until) => wait.or(until),
    }
}

fn worker(host: Option<&str>, id: Option<&str>) -> Option<String> {
    match (host, id) {
        (Some(host), Some(id)) => Some(format!("{id} on {host}")),
        (None, Some(id)) => Some(id.to_owned()),
        (Some(host), None) => Some(host.to_owned()),
        (None, None) => None,
    }
}

/// On one line when short, indented otherwise.
pub fn pretty(value: &Value) -> String {
    let compact = value.to_string();
    if compact.chars().count() <= 80 {
        compact
    } else {
        serde_json::to_string_pretty(value).expect("a JSON value serializes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn task(fields: Value) -> Task {
        let mut task = json!({
            "id": 7, "kind": "k", "queue": "default", "state": "pending", "payload": null,
            "result": null, "checkpoint": null, "progress": null, "key": null,
            "idempotency_key": null, "priority": 0, "run_at": "2030-01-01T00:00:12Z",
            "attempt": 1, "max_attempts": 5, "timeout_ms": null, "worker_id": "w1",
            "worker_host": "h", "last_error": "try again",
            "created_at": "2030-01-01T00:00:00Z", "updated_at": "2030-01-01T00:00:02Z",
            "started_at": "2030-01-01T00:00:01Z", "finished_at": null, "lease_token": 1,
            "backoff": {"initial_ms": 1000, "multiplier": 2.0, "max_ms": 60000, "jitter": 0.1},
        });
        let object = task.as_object_mut().unwrap();
        object.extend(fields.as_object().unwrap().clone());
        serde_json::from_value(task).unwrap()
    }

    #[test]
    fn the_affinity_shows_with_the_worker_it_waits_for_while_it_waits() {
        let waiting = task(json!({
            "affinity_ms": 60_000, "affinity_until": "2030-01-01T00:01:12Z",
        }));
        assert_eq!(
            affinity(&waiting).as_deref(),
            Some("1m\nwaits for worker w1 until 2030-01-01 00:01:12Z")
        );
        let text = render(&waiting, &[], &[], &[]);
        assert!(
            text.contains(
                "  affinity    1m\n              waits for worker w1 until 2030-01-01 00:01:12Z\n"
            ),
            "{text}"
        );

        let not_waiting = task(json!({"affinity_ms": 30_000, "affinity_until": null}));
        assert_eq!(affinity(&not_waiting).as_deref(), Some("30s"));
        assert!(render(&not_waiting, &[], &[], &[]).contains("  affinity    30s\n"));

        // An older server sends neither field; a task without an affinity shows no line.
        let none = task(json!({}));
        assert_eq!(affinity(&none), None);
        assert!(!render(&none, &[], &[], &[]).contains("affinity"));
    }
}
