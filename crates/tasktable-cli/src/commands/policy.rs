//! `tasktable policy`: what a queue allows its claims (limits on what runs, rates of
//! starts, one task per worker, fair shares), set whole or shown; and the short
//! description of a policy that `stats` shows beside each queue.

use crate::client::{field, Api};
use crate::error::CliError;
use crate::output;
use clap::Args;
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// What `tasktable policy` sets. The server checks the ranges and refuses a bad value
/// with its own message; the flags only check that each value is a number.
#[derive(Args, Debug)]
pub struct PolicyArgs {
    /// The queue.
    pub queue: String,
    /// At most N of the queue's tasks run at once, across all workers.
    #[arg(long, value_name = "N")]
    pub max_running: Option<u32>,
    /// At most N of the queue's tasks of kind KIND run at once, across all workers
    /// (repeat for more kinds).
    #[arg(long = "kind-limit", value_name = "KIND=N", value_parser = kind_limit)]
    pub kind_limit: Vec<(String, u32)>,
    /// Start at most PER_SECOND of the queue's tasks a second on average (0.5 is one
    /// every two seconds; at least one a day).
    #[arg(long, value_name = "PER_SECOND", value_parser = per_second)]
    pub rate: Option<f64>,
    /// With --rate: how many may start at once after a quiet spell (default: one
    /// second's worth, at least 1).
    #[arg(long, value_name = "N", requires = "rate")]
    pub burst: Option<u32>,
    /// Start at most PER_SECOND of the tasks that share a task key (`submit --key`) a
    /// second on average; tasks without a key are not limited by it.
    #[arg(long, value_name = "PER_SECOND", value_parser = per_second)]
    pub key_rate: Option<f64>,
    /// With --key-rate: how many tasks of one key may start at once after a quiet spell.
    #[arg(long, value_name = "N", requires = "key_rate")]
    pub key_burst: Option<u32>,
    /// A worker is never handed a second task of the queue before its first ends.
    #[arg(long)]
    pub one_per_worker: bool,
    /// Long tasks: each worker runs at most its share, ceil((running + due) / live
    /// workers that take the queue).
    #[arg(long)]
    pub fair_share: bool,
    /// Remove every limit: the queue's claims are no longer held back.
    #[arg(
        long,
        conflicts_with_all = [
            "max_running", "kind_limit", "rate", "burst", "key_rate", "key_burst",
            "one_per_worker", "fair_share",
        ]
    )]
    pub clear: bool,
}

/// `KIND=N`: the last `=` separates the two, so a kind may hold one.
fn kind_limit(text: &str) -> Result<(String, u32), String> {
    let (kind, n) = text
        .rsplit_once('=')
        .ok_or_else(|| format!("{text:?} is not KIND=N: write it like pdf=2"))?;
    if kind.is_empty() {
        return Err(format!("{text:?} names no kind: write it like pdf=2"));
    }
    let n = n.trim().parse().map_err(|_| {
        format!("{text:?}: the limit {n:?} is not a whole number from 0: write it like pdf=2")
    })?;
    Ok((kind.to_owned(), n))
}

/// A number of starts per second: any finite decimal (the server says which are too
/// fast or too slow).
fn per_second(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|n| n.is_finite())
        .ok_or_else(|| format!("{text:?} is not a number of starts per second, such as 2.5"))
}

impl PolicyArgs {
    /// Whether a flag asks for a change; without one, the command shows the policy.
    fn changes(&self) -> bool {
        self.clear
            || self.max_running.is_some()
            || !self.kind_limit.is_empty()
            || self.rate.is_some()
            || self.key_rate.is_some()
            || self.one_per_worker
            || self.fair_share
    }

    /// The whole policy, as `PUT /api/v1/queues/{name}/policy` takes it: what no flag
    /// sets is left out, and so not limited (`--clear` sends `{}`).
    fn body(&self) -> Result<Value, CliError> {
        let mut body = Map::new();
        if let Some(n) = self.max_running {
            body.insert("max_running".into(), json!(n));
        }
        let mut kinds = Map::new();
        for (kind, n) in &self.kind_limit {
            if kinds.insert(kind.clone(), json!(n)).is_some() {
                return Err(CliError::usage(format!(
                    "--kind-limit names kind {kind:?} twice; give each kind one limit"
                )));
            }
        }
        if !kinds.is_empty() {
            body.insert("kind_max_running".into(), Value::Object(kinds));
        }
        let rate = |per_second: f64, burst: Option<u32>| match burst {
            Some(b) => json!({"per_second": per_second, "burst": b}),
            None => json!({ "per_second": per_second }),
        };
        if let Some(r) = self.rate {
            body.insert("rate".into(), rate(r, self.burst));
        }
        if let Some(r) = self.key_rate {
            body.insert("key_rate".into(), rate(r, self.key_burst));
        }
        if self.one_per_worker {
            body.insert("one_per_worker".into(), json!(true));
        }
        if self.fair_share {
            body.insert("fair_share".into(), json!(true));
        }
        Ok(Value::Object(body))
    }
}

/// A queue's policy as the API shows it: absent fields limit nothing. Fields of a newer
/// server that this CLI does not know are kept, so they are still shown.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Policy {
    #[serde(default)]
    pub max_running: Option<u32>,
    #[serde(default)]
    pub kind_max_running: BTreeMap<String, u32>,
    #[serde(default)]
    pub rate: Option<Rate>,
    #[serde(default)]
    pub key_rate: Option<Rate>,
    #[serde(default)]
    pub one_per_worker: bool,
    #[serde(default)]
    pub fair_share: bool,
    #[serde(flatten)]
    pub other: BTreeMap<String, Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Deserialize)]
pub struct Rate {
    pub per_second: f64,
    #[serde(default)]
    pub burst: Option<u32>,
}

impl Rate {
    /// `2.5 starts/s (burst 3)`: the burst in force, the one set or core's default.
    fn describe(&self) -> String {
        let burst = tasktable::policy::Rate {
            per_second: self.per_second,
            burst: self.burst,
        }
        .burst();
        format!("{} (burst {burst})", starts(self.per_second))
    }
}

/// What a policy holds back, for people: `at most 4 running; 2.5 starts/s (burst 3); one
/// per worker`. `None` when it limits nothing.
pub fn describe(p: &Policy) -> Option<String> {
    let mut parts = Vec::new();
    if let Some(n) = p.max_running {
        parts.push(format!("at most {n} running"));
    }
    for (kind, n) in &p.kind_max_running {
        parts.push(format!("at most {n} of kind {kind:?} running"));
    }
    if let Some(r) = &p.rate {
        parts.push(r.describe());
    }
    if let Some(r) = &p.key_rate {
        parts.push(format!("per key {}", r.describe()));
    }
    if p.one_per_worker {
        parts.push("one per worker".into());
    }
    if p.fair_share {
        parts.push("fair share among workers".into());
    }
    for (name, value) in &p.other {
        if !matches!(value, Value::Null | Value::Bool(false)) {
            parts.push(format!("{name} {value}"));
        }
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// A rate in the unit in which it is at least one: `2.5 starts/s`, `30 starts/min`,
/// `1 start/day`.
fn starts(per_second: f64) -> String {
    let units = [(1.0, "s"), (60.0, "min"), (3600.0, "h"), (86_400.0, "day")];
    let (n, unit) = units
        .iter()
        .map(|&(seconds, unit)| (per_second * seconds, unit))
        .find(|&(n, _)| n >= 0.9995)
        .unwrap_or((per_second * 86_400.0, "day"));
    let n = format!("{n:.3}");
    let n = n.trim_end_matches('0').trim_end_matches('.');
    let noun = if n == "1" { "start" } else { "starts" };
    format!("{n} {noun}/{unit}")
}

/// `queue "reports": at most 4 running; ...`.
fn line(queue: &str, policy: &Policy) -> String {
    match describe(policy) {
        Some(text) => format!("queue {queue:?}: {text}"),
        None => format!("queue {queue:?}: no policy; nothing holds its claims back"),
    }
}

pub async fn run(api: &Api, args: &PolicyArgs, json: bool) -> Result<(), CliError> {
    if !args.changes() {
        return show(api, &args.queue, json).await;
    }
    let body = args.body()?;
    let answer = api
        .put(&["api", "v1", "queues", &args.queue, "policy"], &body)
        .await?;
    if json {
        return output::json(&answer);
    }
    let policy: Policy = field(&answer, "policy")?;
    output::line(line(&args.queue, &policy))
}

/// The policy in force, from the queue list: `{"name", "policy"}` with `--json`, as
/// setting one answers. A queue the server does not list has none.
async fn show(api: &Api, queue: &str, json: bool) -> Result<(), CliError> {
    #[derive(Deserialize)]
    struct Listed {
        name: String,
        #[serde(default)]
        policy: Option<Value>,
    }
    let answer = api.get(&["api", "v1", "queues"], &[]).await?;
    let queues: Vec<Listed> = field(&answer, "queues")?;
    let policy = queues
        .into_iter()
        .find(|q| q.name == queue)
        .and_then(|q| q.policy)
        .unwrap_or_else(|| json!({}));
    if json {
        return output::json(&json!({"name": queue, "policy": policy}));
    }
    let policy: Policy = serde_json::from_value(policy).map_err(|e| {
        CliError::failure(format!(
            "the server's policy of queue {queue:?} is not valid ({e}); is the server the same version as this CLI?"
        ))
    })?;
    output::line(line(queue, &policy))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_in_the_unit_that_keeps_them_at_least_one() {
        assert_eq!(starts(2.5), "2.5 starts/s");
        assert_eq!(starts(1.0), "1 start/s");
        assert_eq!(starts(0.5), "30 starts/min");
        assert_eq!(starts(1.0 / 60.0), "1 start/min");
        assert_eq!(starts(1.0 / 7200.0), "12 starts/day");
        assert_eq!(starts(1.0 / 86_400.0), "1 start/day");
        assert_eq!(starts(1_000_000.0), "1000000 starts/s");
        assert_eq!(starts(1.0 / 3.0), "20 starts/min");
    }

    #[test]
    fn a_policy_is_described_limit_by_limit() {
        let policy: Policy = serde_json::from_value(json!({
            "max_running": 4,
            "kind_max_running": {"pdf": 2},
            "rate": {"per_second": 2.5, "burst": 3},
            "key_rate": {"per_second": 0.5},
            "one_per_worker": true,
            "fair_share": true,
        }))
        .unwrap();
        assert_eq!(
            describe(&policy).unwrap(),
            "at most 4 running; at most 2 of kind \"pdf\" running; 2.5 starts/s (burst 3); \
             per key 30 starts/min (burst 1); one per worker; fair share among workers"
        );
        assert_eq!(describe(&Policy::default()), None);
        let newer: Policy = serde_json::from_value(json!({"affinity": "1m"})).unwrap();
        assert_eq!(describe(&newer).unwrap(), "affinity \"1m\"");
    }

    #[test]
    fn kind_limits_are_kind_equals_a_whole_number() {
        assert_eq!(kind_limit("pdf=2"), Ok(("pdf".into(), 2)));
        assert_eq!(kind_limit("a=b=0"), Ok(("a=b".into(), 0)));
        for bad in ["nonsense", "=2", "pdf=", "pdf=-1", "pdf=two"] {
            assert!(kind_limit(bad).is_err(), "{bad}");
        }
        assert!(per_second("nan").is_err() && per_second("inf").is_err());
        assert_eq!(per_second("0"), Ok(0.0));
    }
}
