//! `tasktable pause`, `resume` and `stats`: queues, the counts of their tasks (with
//! each queue's pause and policy), and how each queue and kind has done over a recent
//! window.

use super::policy::{self, Policy};
use crate::client::{field, Api};
use crate::error::CliError;
use crate::output::{self, Table};
use clap::Args;
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

/// What `tasktable stats` asks the server for.
#[derive(Args, Debug)]
pub struct StatsArgs {
    /// How far back the second table looks: a whole number of minutes, hours or days
    /// (15m, 1h, 24h, 7d; at most 31 days). The server checks it and refuses a bad one.
    #[arg(long, value_name = "WINDOW", default_value = "1h")]
    pub window: String,
    /// Only this queue in the second table.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only this kind in the second table.
    #[arg(long)]
    pub kind: Option<String>,
}

impl StatsArgs {
    /// As `GET /api/v1/stats` query parameters. The window goes as typed: the server's
    /// parser is the one that decides, so the CLI cannot drift from it.
    fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = vec![("window", self.window.clone())];
        if let Some(queue) = &self.queue {
            query.push(("queue", queue.clone()));
        }
        if let Some(kind) = &self.kind {
            query.push(("kind", kind.clone()));
        }
        query
    }
}

#[derive(Deserialize)]
struct Queue {
    name: String,
    paused: bool,
    /// Absent from a server older than policies: none.
    #[serde(default)]
    policy: Policy,
    counts: BTreeMap<String, u64>,
}

/// One queue and kind over the window; only the fields the table shows.
#[derive(Deserialize)]
struct Group {
    queue: String,
    kind: String,
    active: BTreeMap<String, u64>,
    succeeded: u64,
    failed: u64,
    retried: u64,
    submitted_per_min: f64,
    success_rate: Option<f64>,
    wait_seconds: Percentiles,
    run_seconds: Percentiles,
}

#[derive(Deserialize)]
struct Percentiles {
    p50: Option<f64>,
    p95: Option<f64>,
    p99: Option<f64>,
}

pub async fn stats(api: &Api, args: &StatsArgs, json: bool) -> Result<(), CliError> {
    let answer = api.get(&["api", "v1", "stats"], &args.query()).await?;
    if json {
        return output::json(&answer);
    }
    let queues: Vec<Queue> = field(&answer, "queues")?;
    let totals: BTreeMap<String, u64> = field(&answer, "totals")?;
    let groups: Vec<Group> = field(&answer, "groups")?;
    if queues.is_empty() && groups.is_empty() {
        return output::line("no tasks yet");
    }
    let mut text = counts_table(&queues, &totals).render();
    let window = args.window.trim();
    text.push('\n');
    if groups.is_empty() {
        text.push_str(&format!(
            "last {window}: no tasks submitted, waiting, running or ended{}\n",
            filter_note(args)
        ));
    } else {
        text.push_str(&format!("last {window}{}\n", filter_note(args)));
        text.push_str(&window_table(groups).render());
    }
    output::emit(&text)
}

/// Tasks now in each state, per queue and over all queues; and, when a queue has a
/// policy, a last column that says what each queue's policy holds back.
fn counts_table(queues: &[Queue], totals: &BTreeMap<String, u64>) -> Table {
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
    let policies: Vec<Option<String>> =
        queues.iter().map(|q| policy::describe(&q.policy)).collect();
    let any_policy = policies.iter().any(Option::is_some);
    if any_policy {
        headers.push("POLICY".into());
    }
    let mut table = Table::new(headers);
    for (q, policy) in queues.iter().zip(policies) {
        let name = if q.paused {
            format!("{} (paused)", q.name)
        } else {
            q.name.clone()
        };
        let mut cells = row(name, &q.counts);
        if any_policy {
            cells.push(policy.unwrap_or_else(|| "-".into()));
        }
        table.row(cells);
    }
    table.row(row("all queues".into(), totals));
    table
}

/// ` (queue "mail", kind "email")` when the window table is narrowed; empty otherwise.
fn filter_note(args: &StatsArgs) -> String {
    let parts: Vec<String> = [("queue", &args.queue), ("kind", &args.kind)]
        .into_iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name} {v:?}")))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!(" ({})", parts.join(", "))
    }
}

/// Throughput and latency per queue and kind, the troubled ones first: what an operator
/// looking at stats wants to see is where attempts are failing.
fn window_table(mut groups: Vec<Group>) -> Table {
    // Stable, so groups with as many failures keep the server's queue-and-kind order.
    groups.sort_by_key(|g| std::cmp::Reverse(g.failed + g.retried));
    let mut table = Table::new([
        "QUEUE",
        "KIND",
        "PENDING",
        "RUNNING",
        "SUBMITTED/MIN",
        "SUCCEEDED",
        "FAILED",
        "RETRIED",
        "SUCCESS",
        "WAIT p50/p95/p99",
        "RUN p50/p95/p99",
    ]);
    for g in groups {
        let active = |state: &str| g.active.get(state).copied().unwrap_or(0).to_string();
        table.row(vec![
            g.queue.clone(),
            g.kind.clone(),
            active("pending"),
            active("running"),
            per_minute(g.submitted_per_min),
            g.succeeded.to_string(),
            g.failed.to_string(),
            g.retried.to_string(),
            g.success_rate.map_or_else(|| NONE.into(), percent),
            percentiles(&g.wait_seconds),
            percentiles(&g.run_seconds),
        ]);
    }
    table
}

/// Shown for a rate or duration that has nothing to measure.
const NONE: &str = "–";

/// A rate per minute with about two significant digits: a trickle of one task in an hour
/// still shows as more than nothing.
fn per_minute(rate: f64) -> String {
    if rate <= 0.0 {
        "0".into()
    } else if rate < 0.01 {
        "<0.01".into()
    } else if rate < 10.0 {
        format!("{rate:.2}")
    } else if rate < 100.0 {
        format!("{rate:.1}")
    } else {
        format!("{rate:.0}")
    }
}

/// A share from 0 to 1 as `97.5 %`.
fn percent(share: f64) -> String {
    format!("{:.1} %", share * 100.0)
}

/// `12 ms / 3.4 s / 2.1 min`, or a single dash when nothing was measured.
fn percentiles(p: &Percentiles) -> String {
    let values = [p.p50, p.p95, p.p99];
    if values.iter().all(Option::is_none) {
        return NONE.into();
    }
    values
        .map(|v| v.map_or_else(|| NONE.into(), seconds))
        .join(" / ")
}

/// Seconds, short, in the largest unit that keeps the number readable (`12 ms`, `3.4 s`,
/// `2.1 min`, `1.5 h`, `2.0 d`). Each unit is chosen on the rounded value, so 59.97 s
/// reads `1.0 min` rather than `60.0 s`.
fn seconds(secs: f64) -> String {
    let ms = secs * 1000.0;
    if ms.round() < 1.0 {
        return "<1 ms".into();
    }
    if ms.round() < 1000.0 {
        return format!("{ms:.0} ms");
    }
    let tenths = |v: f64| (v * 10.0).round() / 10.0;
    if tenths(secs) < 60.0 {
        return format!("{secs:.1} s");
    }
    let minutes = secs / 60.0;
    if tenths(minutes) < 60.0 {
        return format!("{minutes:.1} min");
    }
    let hours = minutes / 60.0;
    if tenths(hours) < 24.0 {
        return format!("{hours:.1} h");
    }
    format!("{:.1} d", hours / 24.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_read_in_the_largest_sensible_unit() {
        assert_eq!(seconds(0.0004), "<1 ms");
        assert_eq!(seconds(0.012), "12 ms");
        assert_eq!(seconds(0.9996), "1.0 s");
        assert_eq!(seconds(3.42), "3.4 s");
        assert_eq!(seconds(59.97), "1.0 min");
        assert_eq!(seconds(126.0), "2.1 min");
        assert_eq!(seconds(5400.0), "1.5 h");
        assert_eq!(seconds(172_800.0), "2.0 d");
    }

    #[test]
    fn percentiles_show_one_dash_when_nothing_was_measured() {
        let none = Percentiles {
            p50: None,
            p95: None,
            p99: None,
        };
        assert_eq!(percentiles(&none), "–");
        let some = Percentiles {
            p50: Some(0.012),
            p95: Some(3.4),
            p99: Some(126.0),
        };
        assert_eq!(percentiles(&some), "12 ms / 3.4 s / 2.1 min");
    }

    #[test]
    fn rates_and_shares_keep_small_values_visible() {
        assert_eq!(per_minute(0.0), "0");
        assert_eq!(per_minute(1.0 / 60.0), "0.02");
        assert_eq!(per_minute(0.001), "<0.01");
        assert_eq!(per_minute(42.25), "42.2");
        assert_eq!(percent(0.975), "97.5 %");
        assert_eq!(percent(1.0), "100.0 %");
    }

    #[test]
    fn the_counts_table_has_a_policy_column_only_when_a_queue_has_a_policy() {
        let queue = |name: &str, policy: serde_json::Value| Queue {
            name: name.into(),
            paused: name == "b",
            policy: serde_json::from_value(policy).unwrap(),
            counts: BTreeMap::from([("pending".to_owned(), 1)]),
        };
        let totals = BTreeMap::from([("pending".to_owned(), 2)]);
        let plain = [queue("a", json!({})), queue("b", json!({}))];
        let text = counts_table(&plain, &totals).render();
        assert!(text.lines().next().unwrap().ends_with("TOTAL"), "{text}");

        let limited = [queue("a", json!({})), queue("b", json!({"max_running": 2}))];
        let text = counts_table(&limited, &totals).render();
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[0].ends_with("TOTAL  POLICY"), "{text}");
        assert!(
            lines[1].starts_with("a ") && lines[1].ends_with("  -"),
            "{text}"
        );
        assert!(
            lines[2].starts_with("b (paused)") && lines[2].ends_with("  at most 2 running"),
            "{text}"
        );
        assert!(lines[3].ends_with("  2"), "{text}");
    }

    #[test]
    fn the_window_table_puts_the_most_failures_first() {
        let group = |queue: &str, failed, retried| Group {
            queue: queue.into(),
            kind: "k".into(),
            active: BTreeMap::new(),
            succeeded: 0,
            failed,
            retried,
            submitted_per_min: 0.0,
            success_rate: None,
            wait_seconds: Percentiles {
                p50: None,
                p95: None,
                p99: None,
            },
            run_seconds: Percentiles {
                p50: None,
                p95: None,
                p99: None,
            },
        };
        let text =
            window_table(vec![group("a", 0, 0), group("b", 1, 0), group("c", 0, 2)]).render();
        let queues: Vec<&str> = text
            .lines()
            .skip(1)
            .map(|l| l.split_whitespace().next().unwrap())
            .collect();
        assert_eq!(queues, ["c", "b", "a"]);
    }
}
