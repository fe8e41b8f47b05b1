//! `tasktable-chaos pull-worker`: a worker that speaks only the HTTP pull protocol, as a
//! worker in another language would. It runs the same [`script`] as the in-process
//! worker, renews every third of its lease, and journals every call with its answer.
//!
//! When the server says a lease is lost (after a freeze, say), it sends one more
//! `complete` under the lost token on purpose, a probe that must be refused. Every lease
//! call sends back the claim's `credential` when the claim gave one.

mod attempt;

use crate::behaviour::{KIND, QUEUE};
use crate::journal::{Entry, Journal, Op};
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

#[derive(Args, Debug, Clone)]
pub struct PullArgs {
    /// The API, e.g. http://127.0.0.1:8080
    #[arg(long)]
    pub server: String,
    #[arg(long)]
    pub id: String,
    #[arg(long)]
    pub journal: PathBuf,
    #[arg(long, default_value_t = 4)]
    pub concurrency: usize,
    #[arg(long, default_value_t = 2000)]
    pub lease_ms: u64,
}

#[derive(Debug, Deserialize)]
struct Claimed {
    id: i64,
    token: i64,
    /// The lease credential, on servers that hand one out; a secret, never journaled.
    #[serde(default)]
    credential: Option<String>,
    payload: Value,
    checkpoint: Option<Value>,
    attempt: u32,
    deadline_at: Option<DateTime<Utc>>,
}

impl Claimed {
    /// `fields` with the lease's token, and its credential when the claim gave one.
    fn lease_body(&self, mut fields: Value) -> Value {
        fields["token"] = json!(self.token);
        if let Some(credential) = &self.credential {
            fields["credential"] = json!(credential);
        }
        fields
    }
}

/// What the server said to one call.
enum Answer {
    Ok,
    /// 409: the lease is lost (or the task cancelled); nothing changed.
    Lost,
    /// No answer, or a 5xx: the call may or may not have been applied.
    Unknown,
}

#[derive(Debug)]
struct Pull {
    http: reqwest::Client,
    base: String,
    id: String,
    lease: Duration,
    journal: Journal,
}

impl Pull {
    async fn post(&self, path: &str, body: &Value) -> (Answer, Option<Value>) {
        let sent = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .body(body.to_string())
            .send()
            .await;
        let Ok(response) = sent else {
            return (Answer::Unknown, None);
        };
        let status = response.status();
        let body = response.json::<Value>().await.ok();
        match status.as_u16() {
            200..=299 => (Answer::Ok, body),
            409 => (Answer::Lost, body),
            500..=599 => (Answer::Unknown, body),
            _ => {
                // The worker sent something the server refuses: a bug in this harness or
                // a protocol change. Stop loudly rather than run a hollow test.
                eprintln!("{} {path} answered {status}: {body:?}", self.base);
                std::process::exit(3);
            }
        }
    }

    /// A lease call for `task`, with its token and credential added to `fields`.
    async fn lease_call(&self, task: &Claimed, op: &str, fields: Value) -> Answer {
        let body = task.lease_body(fields);
        self.post(&format!("/api/v1/leases/{}/{op}", task.id), &body)
            .await
            .0
    }

    fn entry(&self, op: Op, task: &Claimed) -> Entry {
        Entry::new(&self.id, op, task.id, Some(task.token))
    }
}

fn certain(answer: &Answer) -> Option<bool> {
    match answer {
        Answer::Ok => Some(true),
        Answer::Lost => Some(false),
        Answer::Unknown => None,
    }
}

pub async fn run(
    args: PullArgs,
    shutdown: impl std::future::Future<Output = ()>,
) -> Result<(), String> {
    let http = reqwest::Client::builder()
        .connect_timeout(Duration::from_secs(1))
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| e.to_string())?;
    let pull = Arc::new(Pull {
        http,
        base: args.server.trim_end_matches('/').to_owned(),
        id: args.id.clone(),
        lease: Duration::from_millis(args.lease_ms),
        journal: Journal::open(&args.journal).map_err(|e| e.to_string())?,
    });
    let stop = CancellationToken::new();
    let slots = Arc::new(Semaphore::new(args.concurrency));
    let tracker = TaskTracker::new();
    tokio::pin!(shutdown);
    loop {
        // Wait for a free slot; it is taken again below for each task claimed.
        let free = tokio::select! {
            () = &mut shutdown => break,
            permit = slots.acquire() => {
                drop(permit.expect("slots"));
                slots.available_permits()
            }
        };
        let request = json!({
            "queue": QUEUE, "kinds": [KIND], "worker_id": pull.id, "worker_host": "chaos-pull",
            "limit": free, "lease_ms": args.lease_ms, "wait_ms": 1000,
        });
        let answer = tokio::select! {
            () = &mut shutdown => break,
            answer = pull.post("/api/v1/claim", &request) => answer,
        };
        let tasks: Vec<Claimed> = match answer {
            (Answer::Ok, Some(body)) => serde_json::from_value(body["tasks"].clone())
                .map_err(|e| format!("a claim's answer does not parse: {e}"))?,
            _ => {
                // The server is down or restarting; try again shortly.
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        for task in tasks {
            let permit = slots
                .clone()
                .try_acquire_owned()
                .expect("claimed within free slots");
            let (pull, stop) = (pull.clone(), stop.clone());
            tracker.spawn(async move {
                attempt::work(&pull, task, &stop).await;
                drop(permit);
            });
        }
    }
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claimed(answer: Value) -> Claimed {
        serde_json::from_value(answer).expect("a claimed task")
    }

    #[test]
    fn lease_calls_send_the_credential_only_when_the_claim_gave_one() {
        let task = json!({"id": 4, "token": 2, "kind": "chaos", "payload": {"b": "permanent"},
            "checkpoint": null, "attempt": 1, "max_attempts": 25, "deadline_at": null});
        let without = claimed(task.clone());
        assert_eq!(
            without.lease_body(json!({"lease_ms": 2000})),
            json!({"lease_ms": 2000, "token": 2})
        );
        let mut with = task;
        with["credential"] = json!("s3cret");
        let with = claimed(with);
        assert_eq!(
            with.lease_body(json!({})),
            json!({"token": 2, "credential": "s3cret"})
        );
        let entry =
            serde_json::to_string(&Entry::new("pull-1", Op::Renew, with.id, Some(with.token)))
                .unwrap();
        assert!(!entry.contains("s3cret"), "{entry}");
    }
}
