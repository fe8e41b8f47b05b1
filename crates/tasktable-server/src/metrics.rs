//! `GET /metrics`: the Prometheus text exposition (format 0.0.4) of what this process
//! records through the `metrics` facade (the worker runtime's series, when a worker or a
//! rescuer runs in the same process; see `tasktable_runtime::metrics`), followed by gauges
//! read from the database at scrape time:
//!
//! | series | type | labels | meaning |
//! |---|---|---|---|
//! | `tasktable_tasks` | gauge | queue, state | tasks in the database, every state of every queue (zeros included) |
//! | `tasktable_queue_paused` | gauge | queue | 1 while the queue is paused, else 0 |
//! | `tasktable_workers` | gauge | | distinct worker ids holding a live (unexpired) lease |
//! | `tasktable_workers_registered` | gauge | state | workers in the registry by state: `active`, `draining`, `gone` |
//! | `tasktable_store_up` | gauge | | 1 when the database answered this scrape's queries; 0 leaves the three above out |
//!
//! The database gauges describe the whole system, so every server reports the same
//! values: aggregate them with `max`, not `sum`.
//!
//! The exporter is installed as the process's global recorder once ([`install`]); it
//! runs no listener of its own. A process that installed another recorder first still
//! answers `/metrics`, with the database gauges only.

use crate::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use chrono::{DateTime, Utc};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::OnceLock;
use std::time::Duration;
use tasktable_core::worker::WorkerState;
use tasktable_core::TaskState;
use tasktable_store::{
    ListParams, Store, StoreResult, TaskFilter, WorkerListParams, MAX_PAGE_SIZE,
};

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub const TASKS: &str = "tasktable_tasks";
pub const QUEUE_PAUSED: &str = "tasktable_queue_paused";
pub const WORKERS: &str = "tasktable_workers";
pub const REGISTERED: &str = "tasktable_workers_registered";
pub const STORE_UP: &str = "tasktable_store_up";

/// Upper bounds, in seconds, of the buckets of every histogram: handlers and waits run
/// from a millisecond to an hour.
pub const BUCKETS: [f64; 20] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    120.0, 300.0, 600.0, 1800.0, 3600.0,
];

/// Running tasks read to count workers; past this many the count is a lower bound. The
/// dashboard's workers page stops at the same number.
const WORKER_SCAN_LIMIT: usize = 10_000;

/// Histograms keep raw samples until a render or an upkeep folds them into buckets; with
/// nobody scraping, upkeep is what keeps them from growing without bound.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// Installs the Prometheus recorder as this process's `metrics` recorder, the first time
/// it is called; every call returns the same handle. Call it before starting workers:
/// they bind their metrics to the recorder present when they start.
pub fn install() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets(&BUCKETS)
            .expect("the bucket list is not empty")
            .build_recorder();
        let handle = recorder.handle();
        if ::metrics::set_global_recorder(recorder).is_err() {
            tracing::warn!(
                "another metrics recorder was installed first; /metrics shows only the database gauges"
            );
        }
        describe_api();
        // The series of attempts, which this server counts for pull workers too.
        tasktable_runtime::metrics::describe();
        let upkeep = handle.clone();
        let spawned = std::thread::Builder::new()
            .name("tasktable-metrics-upkeep".into())
            .spawn(move || loop {
                std::thread::sleep(UPKEEP_EVERY);
                upkeep.run_upkeep();
            });
        if let Err(e) = spawned {
            tracing::warn!(error = %e, "no metrics upkeep thread; histograms are folded only when scraped");
        }
        handle
    })
}

/// Due checks of waiting claims ([`crate::doorbell`]).
pub(crate) const API_DUE_CHECKS_TOTAL: &str = "tasktable_api_due_checks_total";
/// Live event streams open now ([`crate::live`]).
pub(crate) const API_EVENT_STREAMS: &str = "tasktable_api_event_streams";
/// Claims of pull workers waiting for work now ([`crate::waiting`]).
pub(crate) const API_WAITING_CLAIMS: &str = "tasktable_api_waiting_claims";

/// The API's own series: their help, and each present at zero from the start, so that
/// alerts and dashboards on them have something to read before the first event.
fn describe_api() {
    use ::metrics::Unit;
    ::metrics::describe_counter!(
        API_DUE_CHECKS_TOTAL,
        Unit::Count,
        "Reads of whether a queue has due work, made on behalf of claims waiting for work."
    );
    ::metrics::describe_gauge!(
        API_EVENT_STREAMS,
        Unit::Count,
        "Live event streams open now (GET /api/v1/events, the dashboard's refresh)."
    );
    ::metrics::describe_gauge!(
        API_WAITING_CLAIMS,
        Unit::Count,
        "Claims of pull workers waiting for work now (claims with wait_ms)."
    );
    ::metrics::counter!(API_DUE_CHECKS_TOTAL).increment(0);
    ::metrics::gauge!(API_EVENT_STREAMS).increment(0.0);
    ::metrics::gauge!(API_WAITING_CLAIMS).increment(0.0);
}

/// What this process recorded, without the database gauges.
pub fn render_recorded() -> String {
    install().render()
}

/// A router serving only `GET /metrics` with [`render_recorded`], without authentication:
/// for processes that run workers but no API (`tasktable worker --metrics-listen`).
pub fn recorded_only_router() -> Router {
    install();
    Router::new().route("/metrics", get(|| async { exposition(render_recorded()) }))
}

fn exposition(body: String) -> Response {
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], body).into_response()
}

/// `GET /metrics` on the API: what this process recorded, then the database gauges.
pub async fn scrape(State(state): State<AppState>) -> Response {
    let mut body = render_recorded();
    if !body.is_empty() && !body.ends_with('\n') {
        body.push('\n');
    }
    match store_gauges(state.store.as_ref()).await {
        Ok(gauges) => {
            body.push_str(&gauges);
            push_family(
                &mut body,
                STORE_UP,
                "1 when the database answered this scrape.",
            );
            body.push_str("tasktable_store_up 1\n");
        }
        Err(e) => {
            // The recorded series are still worth serving, above all while the database
            // is down; the scrape reports the failure in `tasktable_store_up` (and an
            // unreachable database is told once, by the store, not once a scrape).
            if !e.is_unreachable() {
                tracing::warn!(error = %e, "cannot read the database gauges for /metrics");
            }
            push_family(
                &mut body,
                STORE_UP,
                "1 when the database answered this scrape.",
            );
            body.push_str("tasktable_store_up 0\n");
        }
    }
    exposition(body)
}

async fn store_gauges(store: &dyn Store) -> StoreResult<String> {
    let queues = store.queue_list().await?;
    let workers = live_workers(store).await?;
    let mut out = String::new();
    push_family(
        &mut out,
        TASKS,
        "Tasks in the database by queue and state, read at scrape time.",
    );
    for q in &queues {
        let queue = escape(&q.name);
        for state in TaskState::ALL {
            let n = q
                .counts
                .iter()
                .find(|(s, _)| *s == state)
                .map_or(0, |(_, n)| *n);
            let _ = writeln!(
                out,
                "{TASKS}{{queue=\"{queue}\",state=\"{}\"}} {n}",
                state.as_str()
            );
        }
    }
    push_family(&mut out, QUEUE_PAUSED, "1 while the queue is paused.");
    for q in &queues {
        let _ = writeln!(
            out,
            "{QUEUE_PAUSED}{{queue=\"{}\"}} {}",
            escape(&q.name),
            u8::from(q.paused)
        );
    }
    push_family(
        &mut out,
        WORKERS,
        "Distinct workers holding a live lease, read at scrape time.",
    );
    let _ = writeln!(out, "{WORKERS} {workers}");
    push_family(
        &mut out,
        REGISTERED,
        "Workers in the registry by state (active, draining, gone), read at scrape time.",
    );
    let registry = store
        .worker_list(WorkerListParams {
            include_gone: true,
            ..Default::default()
        })
        .await?;
    for state in [
        WorkerState::Active,
        WorkerState::Draining,
        WorkerState::Gone,
    ] {
        let n = registry.iter().filter(|w| w.state == state).count();
        let _ = writeln!(out, "{REGISTERED}{{state=\"{state}\"}} {n}");
    }
    Ok(out)
}

/// Distinct ids of the workers whose running tasks' leases have not expired by the
/// database's clock: a worker that died still "runs" its tasks until the rescuer takes
/// them back, but its leases have run out.
async fn live_workers(store: &dyn Store) -> StoreResult<usize> {
    let now: DateTime<Utc> = store.db_now().await?;
    let filter = TaskFilter::default().state(TaskState::Running);
    let mut workers = BTreeSet::new();
    let mut seen = 0;
    let mut after = None;
    loop {
        let page = store
            .task_list(ListParams {
                filter: filter.clone(),
                after,
                limit: MAX_PAGE_SIZE,
                // Who holds a lease, not what the tasks hold.
                light: true,
            })
            .await?;
        seen += page.tasks.len();
        for t in page.tasks {
            if t.lease_expires_at.is_some_and(|l| l > now) {
                if let Some(id) = t.worker_id {
                    workers.insert(id);
                }
            }
        }
        after = page.next;
        if after.is_none() || seen >= WORKER_SCAN_LIMIT {
            return Ok(workers.len());
        }
    }
}

/// Starts a gauge family, a blank line apart from the one before as the exporter does.
fn push_family(out: &mut String, name: &str, help: &str) {
    if !out.is_empty() && !out.ends_with("\n\n") {
        out.push('\n');
    }
    let _ = write!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n");
}

/// A label value as the exposition format wants it: backslash, double quote and line
/// feed escaped.
fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(escape("plain-queue"), "plain-queue");
    }

    #[test]
    fn installing_twice_returns_the_same_handle() {
        let a: *const PrometheusHandle = install();
        let b: *const PrometheusHandle = install();
        assert_eq!(a, b);
    }
}
