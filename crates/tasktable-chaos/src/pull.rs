//! `tasktable-chaos pull-worker`: a worker that speaks only the HTTP pull protocol, as a
//! worker in another language would. It runs the same [`script`] as the in-process
//! worker, renews every third of its lease, and journals every call with its answer.
//!
//! When the server says a lease is lost (after a freeze, say), it sends one more
//! `complete` under the lost token on purpose, a probe that must be refused. Every lease
//! call sends back the claim's `credential` when the claim gave one.

use crate::behaviour::{script, Behaviour, Ending, Mark, Step, KIND, QUEUE};
use crate::journal::{Entry, Journal, Op};
use chrono::{DateTime, Utc};
use clap::Args;
use serde::Deserialize;
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
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
    async fn lease_call(&self, task: &Claimed, op: &str, mut fields: Value) -> Answer {
        fields["token"] = json!(task.token);
        if let Some(credential) = &task.credential {
            fields["credential"] = json!(credential);
        }
        self.post(&format!("/api/v1/leases/{}/{op}", task.id), &fields)
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
                work(&pull, task, &stop).await;
                drop(permit);
            });
        }
    }
    stop.cancel();
    tracker.close();
    tracker.wait().await;
    Ok(())
}

/// The lease as this worker last saw it confirmed.
struct LeaseView {
    confirmed: Mutex<Instant>,
    /// Cancelled once the server calls the lease lost.
    lost: CancellationToken,
}

async fn work(pull: &Pull, task: Claimed, stop: &CancellationToken) {
    let received = Mark::from_value(task.checkpoint.as_ref());
    let mut claim = pull.entry(Op::Claim, &task);
    claim.attempt = Some(task.attempt);
    claim.mark = received;
    claim.accepted = Some(true);
    pull.journal.record(&claim);
    let Ok(behaviour) = serde_json::from_value::<Behaviour>(task.payload.clone()) else {
        eprintln!(
            "task {} has a payload that is not a chaos behaviour",
            task.id
        );
        std::process::exit(3);
    };
    let view = LeaseView {
        confirmed: Mutex::new(Instant::now()),
        lost: CancellationToken::new(),
    };
    let (steps, ending) = script(&behaviour, task.attempt, received, task.token);
    let steps_done = async {
        for step in steps {
            match step {
                Step::Work(d) => tokio::time::sleep(d).await,
                Step::Save(mark) => {
                    let mut entry = pull.entry(Op::Checkpoint, &task);
                    entry.mark = Some(mark);
                    let answer = pull
                        .lease_call(&task, "checkpoint", json!({ "checkpoint": mark }))
                        .await;
                    entry.accepted = certain(&answer);
                    pull.journal.record(&entry);
                    match answer {
                        Answer::Ok => {}
                        Answer::Lost => return lost(&view),
                        Answer::Unknown => return false,
                    }
                }
                Step::Effect => {
                    let mut entry = pull.entry(Op::Effect, &task);
                    entry.accepted = Some(true);
                    pull.journal.record(&entry);
                }
            }
        }
        true
    };
    // Renewals stop when the steps are done (or the lease is lost), before the end is sent.
    let completed = tokio::select! {
        done = steps_done => done,
        () = keep_renewing(pull, &task, &view) => false,
        () = stop.cancelled() => {
            release(pull, &task).await;
            return;
        }
    };
    if view.lost.is_cancelled() {
        probe(pull, &task).await;
    } else if completed {
        end(pull, &task, &view, ending, stop).await;
    }
}

/// Renews every third of the lease; returns when the server calls the lease lost.
async fn keep_renewing(pull: &Pull, task: &Claimed, view: &LeaseView) {
    loop {
        tokio::time::sleep(pull.lease / 3).await;
        if !renew(pull, task, view).await {
            return;
        }
    }
}

/// One renewal; `false` when the server says the lease is lost.
async fn renew(pull: &Pull, task: &Claimed, view: &LeaseView) -> bool {
    let asked = Instant::now();
    let mut entry = pull.entry(Op::Renew, task);
    let answer = pull
        .lease_call(
            task,
            "renew",
            json!({ "lease_ms": pull.lease.as_millis() as u64 }),
        )
        .await;
    entry.accepted = certain(&answer);
    pull.journal.record(&entry);
    match answer {
        Answer::Ok => {
            let mut confirmed = view.confirmed.lock().expect("lease view");
            *confirmed = (*confirmed).max(asked);
            true
        }
        Answer::Lost => lost(view),
        Answer::Unknown => true,
    }
}

/// The server called the lease lost: the attempt is over. Returns `false` so callers can
/// `return` it.
fn lost(view: &LeaseView) -> bool {
    view.lost.cancel();
    false
}

/// After the server called the lease lost, one more `complete` under the same token, on
/// purpose: it must be refused too.
async fn probe(pull: &Pull, task: &Claimed) {
    let mut probe = pull.entry(Op::Probe, task);
    probe.outcome = Some("succeeded".into());
    let answer = pull
        .lease_call(task, "complete", json!({ "result": { "probe": true } }))
        .await;
    probe.accepted = certain(&answer);
    pull.journal.record(&probe);
}

/// Ends the attempt as the script says, retrying while the server cannot be reached and
/// the lease may still hold.
async fn end(
    pull: &Pull,
    task: &Claimed,
    view: &LeaseView,
    ending: Ending,
    stop: &CancellationToken,
) {
    let (op, outcome, fields) = match ending {
        Ending::Succeed(result) => ("complete", "succeeded", json!({ "result": result })),
        Ending::Retry(error) => (
            "fail",
            "error",
            json!({ "error": error, "retryable": true }),
        ),
        Ending::Fail(error) => (
            "fail",
            "failed",
            json!({ "error": error, "retryable": false }),
        ),
        Ending::Snooze(d) => (
            "snooze",
            "snoozed",
            json!({ "delay_ms": d.as_millis() as u64 }),
        ),
        Ending::Overrun => {
            // Work on until the deadline, then give up without a word: the lease is capped
            // at the deadline, and the rescuer records the attempt as timed out.
            if let Some(deadline) = task.deadline_at {
                let left = (deadline - Utc::now()).to_std().unwrap_or_default();
                tokio::select! {
                    () = tokio::time::sleep(left) => {}
                    () = stop.cancelled() => release(pull, task).await,
                }
            }
            return;
        }
    };
    // A lease not confirmed for a whole lease length (the process was frozen, or the
    // server unreachable) is confirmed before the attempt's end is sent.
    let stale = view.confirmed.lock().expect("lease view").elapsed() >= pull.lease;
    if stale && !renew(pull, task, view).await {
        probe(pull, task).await;
        return;
    }
    let mut unanswered = false;
    loop {
        let mut entry = pull.entry(Op::Finish, task);
        entry.outcome = Some(outcome.into());
        let answer = pull.lease_call(task, op, fields.clone()).await;
        entry.accepted = match (&answer, unanswered) {
            (Answer::Ok, _) => Some(true),
            // A refusal after an unanswered try may mean that try was applied.
            (Answer::Lost, false) => Some(false),
            _ => None,
        };
        let lease_gone = view.confirmed.lock().expect("lease view").elapsed() >= pull.lease;
        if !matches!(answer, Answer::Unknown) || lease_gone || stop.is_cancelled() {
            pull.journal.record(&entry);
            return;
        }
        unanswered = true;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Gives the task back without spending the attempt (this worker is stopping).
async fn release(pull: &Pull, task: &Claimed) {
    let mut entry = pull.entry(Op::Finish, task);
    entry.outcome = Some("interrupted".into());
    let answer = pull.lease_call(task, "release", json!({})).await;
    entry.accepted = certain(&answer);
    pull.journal.record(&entry);
}
