//! `tasktable watch`: what happens, as it happens: tasks submitted, attempts ended,
//! operators' changes, from the server's event stream. A dropped connection is resumed
//! from the last item seen, so nothing is missed; an item the server gives again is
//! printed once.

use crate::client::Api;
use crate::commands::audit::{describe_detail, Actor};
use crate::error::CliError;
use crate::output;
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Deserialize;
use serde_json::Value;
use std::collections::{HashSet, VecDeque};
use std::time::Duration;

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// Only this queue.
    #[arg(long)]
    queue: Option<String>,
    /// Only this kind.
    #[arg(long)]
    kind: Option<String>,
    /// Only this task.
    #[arg(long, value_name = "ID")]
    task: Option<i64>,
    /// Only these events (submitted, succeeded, error, failed, lease_expired, cancelled,
    /// edited, ...; repeat, or separate with commas).
    #[arg(long, value_delimiter = ',')]
    event: Vec<String>,
    /// Start after this cursor (an id the stream gave, `e0.a0.t0` for the beginning)
    /// instead of from now.
    #[arg(long, value_name = "CURSOR", value_parser = cursor)]
    after: Option<String>,
    /// Stop after this many items.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
}

fn cursor(text: &str) -> Result<String, String> {
    text.parse::<tasktable::store::feed::FeedCursor>()
        .map(|c| c.to_string())
        .map_err(|e| e.to_string())
}

/// One item of the stream.
#[derive(Debug, Deserialize)]
struct Item {
    source: String,
    id: i64,
    at: DateTime<Utc>,
    event: String,
    task_id: Option<i64>,
    queue: Option<String>,
    kind: Option<String>,
    actor: Option<Actor>,
    attempt: Option<u32>,
    #[serde(default)]
    detail: Value,
}

/// Items remembered to print each once: more than a reconnect's window repeats.
const REMEMBERED: usize = 10_000;

pub async fn run(api: &Api, args: &WatchArgs, json: bool) -> Result<(), CliError> {
    let mut query: Vec<(&str, String)> = Vec::new();
    let mut push = |name, value: Option<String>| {
        if let Some(v) = value {
            query.push((name, v));
        }
    };
    push("queue", args.queue.clone());
    push("kind", args.kind.clone());
    push("task", args.task.map(|t| t.to_string()));
    push(
        "event",
        (!args.event.is_empty()).then(|| args.event.join(",")),
    );
    let mut last = args.after.clone();
    let mut seen: HashSet<(String, i64)> = HashSet::new();
    let mut order: VecDeque<(String, i64)> = VecDeque::new();
    let mut printed = 0u64;
    let mut failures = 0u32;
    loop {
        let mut response = match api
            .open_stream(&["api", "v1", "events"], &query, last.as_deref())
            .await
        {
            Ok(r) => r,
            // The first connection's failure is the answer; later ones are retried.
            Err(e) if printed == 0 && last == args.after => return Err(e),
            Err(e) => {
                failures += 1;
                if failures > 10 {
                    return Err(e);
                }
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        // Bytes until a whole message is in: a character may be split across chunks.
        let mut buffer: Vec<u8> = Vec::new();
        let mut got_any = false;
        loop {
            let chunk = match response.chunk().await {
                Ok(Some(chunk)) => chunk,
                // The server closed the stream or the connection dropped: resume.
                Ok(None) | Err(_) => break,
            };
            buffer.extend_from_slice(&chunk);
            // Anything, a keep-alive too, says the stream works.
            got_any = true;
            while let Some(end) = buffer.windows(2).position(|w| w == b"\n\n") {
                let message: Vec<u8> = buffer.drain(..end + 2).collect();
                let message = String::from_utf8_lossy(&message);
                let Some((id, data)) = parse(&message) else {
                    continue;
                };
                last = Some(id);
                let Ok(item) = serde_json::from_str::<Item>(&data) else {
                    continue;
                };
                let key = (item.source.clone(), item.id);
                if !seen.insert(key.clone()) {
                    continue;
                }
                order.push_back(key);
                if order.len() > REMEMBERED {
                    if let Some(old) = order.pop_front() {
                        seen.remove(&old);
                    }
                }
                if json {
                    output::line(data.trim())?;
                } else {
                    output::line(describe(&item))?;
                }
                printed += 1;
                if args.count.is_some_and(|n| printed >= n) {
                    return Ok(());
                }
            }
        }
        if got_any {
            failures = 0;
        } else {
            // A stream that ended before sending anything: wait before asking again, and
            // give up after a while.
            failures += 1;
            if failures > 10 {
                return Err(CliError::failure(
                    "the server keeps ending the event stream without sending anything; see its log",
                ));
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    }
}

/// A message's id and data; `None` for a keep-alive comment.
fn parse(message: &str) -> Option<(String, String)> {
    let mut id = None;
    let mut data = String::new();
    for line in message.lines() {
        if let Some(v) = line.strip_prefix("id:") {
            id = Some(v.trim().to_owned());
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.strip_prefix(' ').unwrap_or(v));
        }
    }
    Some((id?, data))
}

/// One line: `2030-01-02 03:04:05Z  succeeded  task 42 (mail/email)  w-1 (worker)`.
fn describe(item: &Item) -> String {
    let mut line = format!("{}  {}", output::time(item.at), item.event);
    if let Some(n) = item.attempt {
        line.push_str(&format!(" (attempt {n})"));
    }
    if let Some(task) = item.task_id {
        line.push_str(&format!("  task {task}"));
    }
    if let (Some(q), Some(k)) = (&item.queue, &item.kind) {
        line.push_str(&format!(" ({q}/{k})"));
    }
    if let Some(actor) = &item.actor {
        line.push_str(&format!("  {}", actor.label()));
    }
    let what = describe_detail(&item.detail);
    if !what.is_empty() {
        line.push_str(&format!("  {what}"));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_give_their_id_and_data_and_comments_nothing() {
        assert_eq!(
            parse("id: e1.a2.t3\ndata: {\"x\":1}\n\n"),
            Some(("e1.a2.t3".into(), "{\"x\":1}".into()))
        );
        assert_eq!(parse(": keep-alive\n\n"), None);
    }
}
