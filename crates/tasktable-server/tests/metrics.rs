//! `GET /metrics` on a real server over a real database, with real tasks run by a real
//! worker in the same process: some succeed, one fails, and one is taken back by the
//! rescuer while its worker still runs it, so that worker loses the lease. The scrape
//! must parse as the Prometheus text format and carry exactly those counts.
//!
//! The recorder is global to the test process, and the cases of the three backends run
//! at the same time: every assertion is about series labelled with the test's own
//! queue, or about the database gauges, which each test reads from its own database.

mod common;

use common::{token, Server};
use reqwest::StatusCode;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::Duration;
use tasktable_core::NewTask;
use tasktable_runtime::{
    Handler, HandlerError, Rescuer, RescuerConfig, StopReason, TaskContext, Worker, WorkerEvent,
};
use tasktable_server::Role;
use tasktable_store::{Store, SubmitParams};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

const PATIENCE: Duration = Duration::from_secs(60);

struct Succeed;

impl Handler for Succeed {
    const KIND: &'static str = "metrics_ok";
    type Payload = Value;
    type Output = Value;
    async fn run(&self, _ctx: TaskContext, payload: Value) -> Result<Value, HandlerError> {
        Ok(payload)
    }
}

struct Fail;

impl Handler for Fail {
    const KIND: &'static str = "metrics_fail";
    type Payload = Value;
    type Output = ();
    async fn run(&self, _ctx: TaskContext, _payload: Value) -> Result<(), HandlerError> {
        Err(HandlerError::permanent("this task always fails"))
    }
}

/// Runs until told to stop, so the test decides when its attempt ends.
struct Hang;

impl Handler for Hang {
    const KIND: &'static str = "metrics_hang";
    type Payload = Value;
    type Output = ();
    async fn run(&self, ctx: TaskContext, _payload: Value) -> Result<(), HandlerError> {
        let reason = ctx.stopped().await;
        Err(HandlerError::retry(format!("stopped: {reason:?}")))
    }
}

async fn submit(store: &dyn Store, task: NewTask) -> i64 {
    store
        .task_submit(SubmitParams {
            tasks: vec![task],
            now: None,
        })
        .await
        .expect("submit")[0]
        .id
}

async fn wait_event(
    rx: &mut broadcast::Receiver<WorkerEvent>,
    what: &str,
    pred: impl Fn(&WorkerEvent) -> bool,
) -> WorkerEvent {
    tokio::time::timeout(PATIENCE, async {
        loop {
            match rx.recv().await {
                Ok(e) if pred(&e) => return e,
                Ok(_) => continue,
                Err(e) => panic!("event stream broke while waiting for {what}: {e}"),
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
}

// ---------------------------------------------------------------------------------------
// A strict reader of the Prometheus text format, version 0.0.4.

type Labels = Vec<(String, String)>;

#[derive(Debug)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

#[derive(Debug, Default)]
struct Exposition {
    types: HashMap<String, String>,
    /// The families that have a HELP line.
    helps: HashSet<String>,
    samples: Vec<Sample>,
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

fn parse_value(s: &str) -> Option<f64> {
    match s {
        "+Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        "NaN" => Some(f64::NAN),
        // Rust would also take "inf" or "infinity"; the format does not.
        _ if s
            .chars()
            .any(|c| c.is_ascii_alphabetic() && c != 'e' && c != 'E') =>
        {
            None
        }
        _ => s.parse().ok(),
    }
}

/// The family a sample belongs to: its own name, or for the `_bucket`, `_sum` and
/// `_count` series of a histogram or summary, the name without the suffix.
fn family<'a>(types: &HashMap<String, String>, name: &'a str) -> Option<&'a str> {
    if types.contains_key(name) {
        return Some(name);
    }
    ["_bucket", "_sum", "_count"].iter().find_map(|suffix| {
        let base = name.strip_suffix(suffix)?;
        match types.get(base).map(String::as_str) {
            Some("histogram") => Some(base),
            Some("summary") if *suffix != "_bucket" => Some(base),
            _ => None,
        }
    })
}

/// Parses `text`, failing on anything the format does not allow: a malformed line, a
/// sample without a `# TYPE` before it, a family split into two groups, a sample given
/// twice.
fn parse(text: &str) -> Exposition {
    let mut out = Exposition::default();
    let mut finished_families: HashSet<String> = HashSet::new();
    let mut current: Option<String> = None;
    let mut seen: HashSet<(String, BTreeMap<String, String>)> = HashSet::new();
    assert!(text.ends_with('\n'), "the exposition ends with a line feed");
    for (n, line) in text.lines().enumerate() {
        let at = |why: &str| format!("line {}: {why}: {line:?}", n + 1);
        if line.is_empty() {
            continue;
        }
        let mut enter = |name: &str, current: &mut Option<String>| {
            if current.as_deref() != Some(name) {
                if let Some(previous) = current.take() {
                    finished_families.insert(previous);
                }
                assert!(
                    !finished_families.contains(name),
                    "{}",
                    at("a family split into two groups")
                );
                *current = Some(name.to_owned());
            }
        };
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let keyword = parts.next().unwrap_or_default();
            let name = parts.next().unwrap_or_default();
            let tail = parts.next().unwrap_or_default();
            assert!(is_metric_name(name), "{}", at("bad metric name"));
            enter(name, &mut current);
            match keyword {
                "HELP" => {
                    assert!(!tail.is_empty(), "{}", at("empty HELP"));
                    out.helps.insert(name.to_owned());
                }
                "TYPE" => {
                    assert!(
                        ["counter", "gauge", "histogram", "summary", "untyped"].contains(&tail),
                        "{}",
                        at("unknown type")
                    );
                    assert!(
                        out.types.insert(name.to_owned(), tail.to_owned()).is_none(),
                        "{}",
                        at("a second TYPE line")
                    );
                    assert!(
                        !out.samples
                            .iter()
                            .any(|s| family(&out.types, &s.name) == Some(name)),
                        "{}",
                        at("TYPE after the family's samples")
                    );
                }
                _ => panic!("{}", at("a comment that is neither HELP nor TYPE")),
            }
            continue;
        }
        assert!(!line.starts_with('#'), "{}", at("malformed comment"));

        let name_end = line
            .find(['{', ' '])
            .unwrap_or_else(|| panic!("{}", at("no value")));
        let name = &line[..name_end];
        assert!(is_metric_name(name), "{}", at("bad metric name"));
        let mut labels = BTreeMap::new();
        let mut rest = &line[name_end..];
        if let Some(after_brace) = rest.strip_prefix('{') {
            let mut chars = after_brace.char_indices().peekable();
            loop {
                if let Some(&(i, '}')) = chars.peek() {
                    rest = &after_brace[i + 1..];
                    break;
                }
                let start = chars.peek().map(|&(i, _)| i).expect("label");
                let eq = after_brace[start..]
                    .find('=')
                    .unwrap_or_else(|| panic!("{}", at("label without '='")))
                    + start;
                let key = &after_brace[start..eq];
                assert!(is_label_name(key), "{}", at("bad label name"));
                while chars.peek().is_some_and(|&(i, _)| i <= eq) {
                    chars.next();
                }
                assert_eq!(
                    chars.next().map(|(_, c)| c),
                    Some('"'),
                    "{}",
                    at("label value not quoted")
                );
                let mut value = String::new();
                loop {
                    match chars.next().map(|(_, c)| c) {
                        Some('"') => break,
                        Some('\\') => match chars.next().map(|(_, c)| c) {
                            Some('\\') => value.push('\\'),
                            Some('"') => value.push('"'),
                            Some('n') => value.push('\n'),
                            _ => panic!("{}", at("bad escape in a label value")),
                        },
                        Some('\n') | None => panic!("{}", at("unterminated label value")),
                        Some(c) => value.push(c),
                    }
                }
                assert!(
                    labels.insert(key.to_owned(), value).is_none(),
                    "{}",
                    at("a label given twice")
                );
                match chars.peek() {
                    Some(&(_, ',')) => {
                        chars.next();
                    }
                    Some(&(_, '}')) => {}
                    _ => panic!("{}", at("expected ',' or '}' after a label")),
                }
            }
        }
        let rest = rest
            .strip_prefix(' ')
            .unwrap_or_else(|| panic!("{}", at("no space before the value")));
        let mut fields = rest.split(' ');
        let value = fields
            .next()
            .and_then(parse_value)
            .unwrap_or_else(|| panic!("{}", at("bad value")));
        if let Some(ts) = fields.next() {
            assert!(ts.parse::<i64>().is_ok(), "{}", at("bad timestamp"));
        }
        assert!(fields.next().is_none(), "{}", at("trailing fields"));
        let fam = family(&out.types, name)
            .unwrap_or_else(|| panic!("{}", at("a sample without a TYPE line before it")))
            .to_owned();
        enter(&fam, &mut current);
        assert!(
            seen.insert((name.to_owned(), labels.clone())),
            "{}",
            at("a sample given twice")
        );
        out.samples.push(Sample {
            name: name.to_owned(),
            labels,
            value,
        });
    }
    for name in out.types.keys() {
        assert!(out.helps.contains(name), "family {name} has no HELP line");
    }
    out
}

impl Exposition {
    fn find(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let want: BTreeMap<String, String> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        self.samples
            .iter()
            .find(|s| s.name == name && s.labels == want)
            .map(|s| s.value)
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.find(name, labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?}"))
    }

    /// The samples of `name` whose labels include `queue`.
    fn of_queue<'a>(&'a self, name: &'a str, queue: &'a str) -> impl Iterator<Item = &'a Sample> {
        self.samples.iter().filter(move |s| {
            s.name == name && s.labels.get("queue").map(String::as_str) == Some(queue)
        })
    }

    /// Every histogram's buckets are cumulative and end in `+Inf`, equal to its count.
    fn check_histograms(&self) {
        for (family, kind) in &self.types {
            if kind != "histogram" {
                continue;
            }
            let bucket = format!("{family}_bucket");
            // Per series (its labels but `le`): each bucket's bound and count.
            let mut series: BTreeMap<Labels, Vec<(f64, f64)>> = BTreeMap::new();
            for s in self.samples.iter().filter(|s| s.name == bucket) {
                let le = parse_value(&s.labels["le"]).expect("le is a number");
                let rest = s
                    .labels
                    .iter()
                    .filter(|(k, _)| *k != "le")
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                series.entry(rest).or_default().push((le, s.value));
            }
            for (labels, buckets) in series {
                assert!(
                    buckets
                        .windows(2)
                        .all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1),
                    "{family} {labels:?}: buckets ascending and cumulative: {buckets:?}"
                );
                let (le, total) = *buckets.last().unwrap();
                assert_eq!(le, f64::INFINITY, "{family} {labels:?} ends in +Inf");
                let labels: Vec<(&str, &str)> = labels
                    .iter()
                    .map(|(k, v)| (k.as_str(), v.as_str()))
                    .collect();
                let count = self.value(&format!("{family}_count"), &labels);
                assert_eq!(total, count, "{family} {labels:?}: +Inf bucket = count");
                assert!(self.find(&format!("{family}_sum"), &labels).is_some());
            }
        }
    }
}

async fn scrape(s: &Server, role: Role) -> Exposition {
    let resp = s
        .http
        .get(format!("{}/metrics", s.base))
        .bearer_auth(token(role))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let content_type = resp.headers()["content-type"].to_str().unwrap().to_owned();
    assert!(
        content_type.starts_with("text/plain; version=0.0.4"),
        "{content_type}"
    );
    let exposition = parse(&resp.text().await.unwrap());
    exposition.check_histograms();
    exposition
}

// ---------------------------------------------------------------------------------------

/// Attempts a pull worker ends through the API are counted in `tasktable_attempts_total`
/// as an in-process worker's are: by queue, kind and outcome.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pull_workers_attempts_are_counted_like_in_process_ones() {
    for backend in ["sqlite", "postgres"] {
        let Some(mut s) = Server::start(backend).await else {
            continue;
        };
        let queue = format!("metrics-pull-{backend}");
        let kind = "metrics_remote";
        for i in 0..2 {
            let task = NewTask::new(kind, json!(i)).queue(queue.as_str());
            submit(&*s.store, task).await;
        }
        s.as_role(Role::Worker);
        let (status, claimed) = s
            .post(
                "/api/v1/claim",
                json!({"queue": queue, "kinds": [kind], "worker_id": "py-metrics", "limit": 2}),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{claimed}");
        let tasks = claimed["tasks"].as_array().expect("tasks").clone();
        assert_eq!(tasks.len(), 2, "{claimed}");
        let lease = |t: &Value, extra: Value| {
            let mut body = extra;
            body["token"] = t["token"].clone();
            body["credential"] = t["credential"].clone();
            body
        };
        let (status, body) = s
            .post(
                &format!("/api/v1/leases/{}/complete", tasks[0]["id"]),
                lease(&tasks[0], json!({"result": {"ok": true}})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let (status, body) = s
            .post(
                &format!("/api/v1/leases/{}/fail", tasks[1]["id"]),
                lease(&tasks[1], json!({"error": "no", "retryable": false})),
            )
            .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        let m = scrape(&s, Role::Reader).await;
        let labels = |outcome| {
            [
                ("queue", queue.as_str()),
                ("kind", kind),
                ("outcome", outcome),
            ]
        };
        let attempts = "tasktable_attempts_total";
        assert_eq!(m.value(attempts, &labels("succeeded")), 1.0, "{backend}");
        assert_eq!(m.value(attempts, &labels("failed")), 1.0, "{backend}");
    }
}

/// A rescuer that starts (as under `serve --workers 0`, with no worker in the process)
/// makes the rescue counters of every queue the database holds exist at zero, so an alert
/// on them has a series before the first rescue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rescuer_starts_the_rescue_counters_of_every_queue_at_zero() {
    let Some(s) = Server::start("sqlite").await else {
        return;
    };
    let queue = "metrics-rescue-zero";
    submit(&*s.store, NewTask::new("k", json!(null)).queue(queue)).await;
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let rescuer = tokio::spawn(Rescuer::new(s.store.clone(), RescuerConfig::default()).run(
        async {
            let _ = stopped.await;
        },
    ));
    let series = |m: &Exposition, outcome| {
        m.find(
            "tasktable_tasks_rescued_total",
            &[("queue", queue), ("outcome", outcome)],
        )
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let m = loop {
        let m = scrape(&s, Role::Reader).await;
        if series(&m, "lease_expired").is_some() || std::time::Instant::now() > deadline {
            break m;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(series(&m, "lease_expired"), Some(0.0));
    assert_eq!(series(&m, "timed_out"), Some(0.0));
    let _ = stop.send(());
    rescuer.await.expect("rescuer");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_metrics_count_what_the_worker_did() {
    if let Some(server) = Server::start("sqlite").await {
        metrics_count_what_the_worker_did(server, "metrics-sqlite").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_metrics_count_what_the_worker_did() {
    if let Some(server) = Server::start("postgres").await {
        metrics_count_what_the_worker_did(server, "metrics-postgres").await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_metrics_count_what_the_worker_did() {
    if let Some(server) = Server::start("mysql").await {
        metrics_count_what_the_worker_did(server, "metrics-mysql").await;
    }
}

async fn metrics_count_what_the_worker_did(s: Server, queue: &str) {
    let store = s.store.clone();
    let paused_queue = format!("{queue}-paused");
    let (status, _) = s
        .post(&format!("/api/v1/queues/{paused_queue}/pause"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);

    let mut ids = Vec::new();
    for i in 0..3 {
        ids.push(submit(&*store, NewTask::new(Succeed::KIND, json!(i)).queue(queue)).await);
    }
    ids.push(submit(&*store, NewTask::new(Fail::KIND, json!(null)).queue(queue)).await);

    let worker = Worker::builder(store.clone())
        .queue(queue, 4)
        .poll_interval(Duration::from_millis(50))
        .lease_for(Duration::from_secs(3))
        .rescue_interval(None)
        .register(Succeed)
        .register(Fail)
        .register(Hang)
        .build()
        .unwrap();
    let mut events = worker.subscribe();
    let stop = CancellationToken::new();
    let running = tokio::spawn(worker.run(stop.clone().cancelled_owned()));

    let mut unfinished: HashSet<i64> = ids.iter().copied().collect();
    while !unfinished.is_empty() {
        let done = wait_event(&mut events, "the first tasks to finish", |e| {
            matches!(e, WorkerEvent::Finished { .. })
        })
        .await;
        let WorkerEvent::Finished {
            task_id, applied, ..
        } = done
        else {
            unreachable!()
        };
        assert!(applied, "{done:?}");
        assert!(unfinished.remove(&task_id), "{done:?}");
    }

    // A task that runs until the rescuer takes it back: one attempt only, so the rescue
    // fails it for good.
    let hang = submit(
        &*store,
        NewTask::new(Hang::KIND, json!(null))
            .queue(queue)
            .max_attempts(1),
    )
    .await;
    wait_event(
        &mut events,
        "the hanging task to be claimed",
        |e| matches!(e, WorkerEvent::Claimed { task_id, .. } if *task_id == hang),
    )
    .await;

    let during = scrape(&s, Role::Reader).await;
    let q = ("queue", queue);
    assert_eq!(during.value("tasktable_workers", &[]), 1.0);
    assert_eq!(
        during.value("tasktable_workers_registered", &[("state", "active")]),
        1.0,
        "the worker registered before its first claim"
    );
    assert_eq!(during.value("tasktable_worker_running_tasks", &[q]), 1.0);
    assert_eq!(
        during.value("tasktable_tasks", &[q, ("state", "running")]),
        1.0
    );

    // The rescuer, pinned an hour ahead, sees the lease as expired and takes the task
    // back while its worker still runs it; the worker's next renewal finds it lost.
    let later = store.db_now().await.unwrap() + chrono::Duration::hours(1);
    let rescued = Rescuer::new(store.clone(), RescuerConfig::default())
        .run_once(Some(later))
        .await
        .unwrap();
    assert_eq!(rescued, 1);
    wait_event(&mut events, "the worker to learn it lost the lease", |e| {
        matches!(e, WorkerEvent::Stopped { task_id, reason: StopReason::LeaseLost } if *task_id == hang)
    })
    .await;
    stop.cancel();
    tokio::time::timeout(PATIENCE, running)
        .await
        .expect("the worker stops")
        .unwrap();

    let m = scrape(&s, Role::Reader).await;
    let ok = ("kind", Succeed::KIND);
    let fail = ("kind", Fail::KIND);
    let hung = ("kind", Hang::KIND);
    let outcome = |o| ("outcome", o);

    for (kind, n) in [(ok, 3.0), (fail, 1.0), (hung, 1.0)] {
        assert_eq!(m.value("tasktable_tasks_claimed_total", &[q, kind]), n);
        assert_eq!(
            m.value("tasktable_attempt_duration_seconds_count", &[q, kind]),
            n
        );
        assert_eq!(m.value("tasktable_queue_wait_seconds_count", &[q, kind]), n);
    }
    // Present from the start, whether or not anything happened yet (the recorder is
    // the process's: other cases may have moved them, never below zero).
    for call in [
        "claim",
        "renew",
        "finish",
        "rescue",
        "schedule",
        "retention",
        "heartbeat",
    ] {
        assert!(m.value("tasktable_store_errors_total", &[("call", call)]) >= 0.0);
    }
    for name in [
        "tasktable_api_due_checks_total",
        "tasktable_api_event_streams",
        "tasktable_api_waiting_claims",
    ] {
        assert!(m.value(name, &[]) >= 0.0, "{name}");
    }
    let attempts = "tasktable_attempts_total";
    assert_eq!(m.value(attempts, &[q, ok, outcome("succeeded")]), 3.0);
    assert_eq!(m.value(attempts, &[q, fail, outcome("failed")]), 1.0);
    assert_eq!(m.value(attempts, &[q, hung, outcome("lease_expired")]), 1.0);
    assert_eq!(
        m.value(attempts, &[q, ok, outcome("error")]),
        0.0,
        "every outcome is there from the start, at zero"
    );
    assert_eq!(
        m.of_queue(attempts, queue).map(|s| s.value).sum::<f64>(),
        5.0,
        "no other attempt was counted"
    );
    assert_eq!(m.value("tasktable_lease_lost_total", &[q, hung]), 1.0);
    assert_eq!(m.value("tasktable_lease_lost_total", &[q, ok]), 0.0);
    assert_eq!(m.value("tasktable_lease_lost_total", &[q, fail]), 0.0);
    assert_eq!(
        m.value(
            "tasktable_tasks_rescued_total",
            &[q, outcome("lease_expired")]
        ),
        1.0
    );
    assert_eq!(
        m.value("tasktable_tasks_rescued_total", &[q, outcome("timed_out")]),
        0.0,
        "both rescue outcomes are there from the start, at zero"
    );
    assert_eq!(
        m.of_queue("tasktable_tasks_rescued_total", queue).count(),
        2
    );
    assert_eq!(m.value("tasktable_worker_running_tasks", &[q]), 0.0);
    assert!(m.value("tasktable_claims_total", &[q]) >= 2.0);
    let le_inf = [q, ok, ("le", "+Inf")];
    assert_eq!(
        m.value("tasktable_attempt_duration_seconds_bucket", &le_inf),
        3.0
    );
    assert_eq!(m.types["tasktable_attempts_total"], "counter");
    assert_eq!(m.types["tasktable_attempt_duration_seconds"], "histogram");
    assert_eq!(m.types["tasktable_worker_running_tasks"], "gauge");
    // Process-wide (no labels), so other tests' workers may hold tasks in it: only its
    // presence is checked here.
    assert!(m.find("tasktable_worker_waiting_tasks", &[]).is_some());
    assert_eq!(m.types["tasktable_worker_waiting_tasks"], "gauge");

    // Read from the database at scrape time.
    for (state, n) in [
        ("pending", 0.0),
        ("running", 0.0),
        ("succeeded", 3.0),
        ("failed", 2.0),
        ("cancelled", 0.0),
        ("held", 0.0),
    ] {
        assert_eq!(
            m.find("tasktable_tasks", &[q, ("state", state)]),
            Some(n),
            "{state}"
        );
    }
    assert_eq!(m.types["tasktable_tasks"], "gauge");
    assert_eq!(m.value("tasktable_queue_paused", &[q]), 0.0);
    assert_eq!(
        m.value("tasktable_queue_paused", &[("queue", &paused_queue)]),
        1.0
    );
    assert_eq!(m.value("tasktable_workers", &[]), 0.0);
    for state in ["active", "draining", "gone"] {
        assert!(
            m.find("tasktable_workers_registered", &[("state", state)])
                .is_some(),
            "every registry state is written, zeros included: {state}"
        );
    }
    assert_eq!(m.value("tasktable_store_up", &[]), 1.0);
    let allowed = ["queue", "kind", "outcome", "state", "call", "le"];
    for sample in &m.samples {
        assert!(
            sample.labels.keys().all(|k| allowed.contains(&k.as_str())),
            "only low-cardinality labels, never a task id: {sample:?}"
        );
    }

    // Any role that may read may scrape; others are refused as on every other endpoint.
    for role in [Role::Admin, Role::Operator] {
        scrape(&s, role).await;
    }
    let resp = s
        .http
        .get(format!("{}/metrics", s.base))
        .bearer_auth(token(Role::Worker))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    let resp = s
        .http
        .get(format!("{}/metrics", s.base))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    assert!(resp.headers().contains_key("www-authenticate"));
    assert!(resp.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json"));
    let answer: Value = resp.json().await.unwrap();
    assert_eq!(answer["error"]["code"], "unauthorized", "{answer}");
}

#[test]
fn the_parser_refuses_what_the_format_does_not_allow() {
    let good = "# HELP a_total A.\n# TYPE a_total counter\na_total{q=\"x\\\"y\"} 1\n";
    assert_eq!(parse(good).value("a_total", &[("q", "x\"y")]), 1.0);
    for bad in [
        "a_total 1\n",
        "# TYPE a_total counter\na_total{q=x} 1\n",
        "# TYPE a_total counter\na_total{q=\"x\"} one\n",
        "# TYPE a_total counter\na_total{q=\"x\"} inf\n",
        "# TYPE a_total counter\na_total 1\na_total 2\n",
        "# TYPE a gauge\na 1\n# TYPE b gauge\nb 1\na{x=\"1\"} 2\n",
        "# TYPE a gauge\n# note\na 1\n",
        "# TYPE a gauge\na 1",
    ] {
        let result = std::panic::catch_unwind(|| parse(bad));
        assert!(result.is_err(), "accepted {bad:?}");
    }
}
