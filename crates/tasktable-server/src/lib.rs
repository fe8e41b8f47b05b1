//! tasktable's HTTP API.
//!
//! Owns: the REST API for submitting, querying and intervening (batches among them); the
//! pull protocol that
//! lets workers in any language claim, renew, checkpoint, complete and fail tasks with the
//! same leases and fencing tokens as in-process workers, many leases in one call
//! (`acks`), with waiting claims that share one due check per queue ([`doorbell`]); the
//! operator audit (`audit`) and live events (`/api/v1/events`, [`live`]); bearer-token roles; request
//! limits; the JSON error format; the OpenAPI document describing all of it; the
//! Prometheus exposition at `/metrics` ([`metrics`]); and the Host rule that keeps a server
//! without tokens from answering web pages by DNS rebinding ([`host`]).
//!
//! Must not know: SQL or any backend (it holds an `Arc<dyn Store>`), and how workers run
//! handlers. It computes retry plans with `tasktable-core` exactly as the runtime does,
//! so a remote worker's failure is treated like a local one.

mod acks;
mod audit;
pub mod auth;
mod batch_wire;
mod batches;
mod bulk;
pub mod claimed;
pub mod detail;
pub mod doorbell;
mod error;
mod extract;
mod guard;
pub mod host;
mod leases;
pub mod listen;
pub mod live;
pub mod metrics;
mod openapi;
mod queues;
pub mod redact;
mod schedule_wire;
mod schedules;
mod tasks;
mod waiting;
pub mod wire;
mod workers;

pub use auth::{token_digest, Access, Principal, Role, TokenConfigError, TokenSet};
pub use error::{ApiError, ApiResult};

use axum::routing::{delete, get, patch, post, put};
use axum::Router;
use std::sync::Arc;
use std::time::Duration;
use tasktable_store::Store;
use tasktable_wire::whole;
use tokio_util::sync::CancellationToken;

/// Limits on what one request may ask for.
#[derive(Debug, Clone)]
pub struct Limits {
    /// Largest request body.
    pub max_body_bytes: usize,
    /// Most tasks in one batch submit.
    pub max_batch: usize,
    /// Longest a claim may wait for work.
    pub max_claim_wait: Duration,
    /// Most tasks one claim may take.
    pub max_claim: u32,
    /// Most long-poll claims (`wait_ms` > 0) one token may have waiting at once.
    pub max_waiting_claims_per_token: usize,
    /// How often the claims waiting on a queue learn whether a task became due by the
    /// clock ([`doorbell`]); wake-ups reach them at once.
    pub due_check: Duration,
    /// Most lease calls in one batched acknowledgement (`POST /api/v1/leases`).
    pub max_lease_calls: usize,
    /// Most event streams (`GET /api/v1/events` as server-sent events) open at once.
    pub max_event_streams: usize,
    /// How often an event stream reads the database when nothing woke it.
    pub event_poll: Duration,
    /// Most live worker ids one token may own ([`tasktable_core::ownership`]).
    pub max_workers_per_token: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 8 << 20,
            max_batch: 10_000,
            max_claim_wait: Duration::from_secs(60),
            max_claim: 400,
            max_waiting_claims_per_token: 32,
            due_check: Duration::from_secs(1),
            max_lease_calls: 1000,
            max_event_streams: 64,
            event_poll: Duration::from_secs(1),
            max_workers_per_token: 1000,
        }
    }
}

/// What every request handler shares.
#[derive(Debug, Clone)]
pub struct AppState {
    pub store: Arc<dyn Store>,
    pub tokens: Arc<TokenSet>,
    pub limits: Limits,
    /// Cancelled when the server shuts down: waiting claims return at once instead of
    /// holding the shutdown up for their whole wait.
    pub stop: CancellationToken,
    /// Long-poll claims waiting now, per token.
    pub waiting: Arc<waiting::WaitingClaims>,
    /// One watcher per queue with waiting claims, for tasks that become due by the clock.
    pub doorbells: Arc<doorbell::Doorbells>,
    /// The payload fields readers must not see.
    pub redactions: Arc<redact::Redactions>,
    /// Event streams open now.
    pub streams: Arc<live::Streams>,
    /// Queue and kind of the tasks handed to pull workers, for `/metrics`.
    pub claimed: Arc<claimed::Claimed>,
}

impl AppState {
    /// The state of a server on `store`, [shielded](tasktable_store::Shielded): a client
    /// that hangs up drops its handler, never a store call half way.
    pub fn new(store: Arc<dyn Store>, tokens: TokenSet) -> Self {
        let store = tasktable_store::Shielded::wrap(store);
        AppState {
            store,
            tokens: Arc::new(tokens),
            limits: Limits::default(),
            stop: CancellationToken::new(),
            waiting: Arc::default(),
            doorbells: Arc::default(),
            redactions: Arc::default(),
            streams: Arc::default(),
            claimed: Arc::default(),
        }
    }

    /// How many event streams one token may hold open: a quarter of the server's, or all
    /// of them without tokens (every caller is then the one anonymous admin).
    pub fn streams_per_caller(&self) -> usize {
        if self.tokens.is_empty() {
            self.limits.max_event_streams
        } else {
            (self.limits.max_event_streams / 4).max(1)
        }
    }

    /// A task's payload as a caller of `role` may see it: a reader gets every secret
    /// field of its kind replaced (see [`redact`]); the other roles, who may submit and
    /// edit payloads or run the task, see it whole.
    pub fn payload_for(
        &self,
        role: Role,
        kind: &str,
        mut payload: serde_json::Value,
    ) -> serde_json::Value {
        if role == Role::Reader {
            self.redactions.apply(kind, &mut payload);
        }
        payload
    }
}

/// Every route with the access it needs, in one table: the router is built from it and
/// the tests of roles and of the OpenAPI document walk it.
pub const ROUTES: &[(&str, &str, Access)] = &[
    ("GET", "/api/v1/tasks", Access::Read),
    ("POST", "/api/v1/tasks", Access::Operate),
    ("POST", "/api/v1/tasks/batch", Access::Operate),
    ("POST", "/api/v1/tasks/bulk/{op}", Access::Operate),
    ("GET", "/api/v1/tasks/{id}", Access::Read),
    ("POST", "/api/v1/tasks/{id}/{op}", Access::Operate),
    ("GET", "/api/v1/queues", Access::Read),
    ("POST", "/api/v1/queues/{name}/{op}", Access::Operate),
    ("PUT", "/api/v1/queues/{name}/policy", Access::Operate),
    ("GET", "/api/v1/stats", Access::Read),
    ("GET", "/api/v1/audit", Access::Read),
    ("GET", "/api/v1/events", Access::Read),
    ("GET", "/api/v1/schedules", Access::Read),
    ("POST", "/api/v1/schedules", Access::Operate),
    ("GET", "/api/v1/schedules/{schedule}", Access::Read),
    ("PATCH", "/api/v1/schedules/{schedule}", Access::Operate),
    ("DELETE", "/api/v1/schedules/{schedule}", Access::Operate),
    ("POST", "/api/v1/schedules/{schedule}/{op}", Access::Operate),
    ("GET", "/api/v1/workers", Access::Read),
    ("GET", "/api/v1/workers/{id}", Access::Read),
    ("POST", "/api/v1/workers/{id}/{op}", Access::Operate),
    ("GET", "/api/v1/batches", Access::Read),
    ("POST", "/api/v1/batches", Access::Operate),
    ("GET", "/api/v1/batches/{id}", Access::Read),
    ("PATCH", "/api/v1/batches/{id}", Access::Operate),
    ("POST", "/api/v1/batches/{id}/{op}", Access::Operate),
    ("POST", "/api/v1/heartbeat", Access::Work),
    ("POST", "/api/v1/leave", Access::Work),
    ("POST", "/api/v1/claim", Access::Work),
    ("POST", "/api/v1/leases", Access::Work),
    ("POST", "/api/v1/leases/{id}/{op}", Access::Work),
    ("POST", "/api/v1/admin/migrate", Access::Admin),
    ("POST", "/api/v1/admin/purge", Access::Admin),
    ("GET", "/metrics", Access::Read),
];

/// The API's router. Authentication is on when `state.tokens` is not empty.
pub fn router(state: AppState) -> Router {
    // Before anything records: the exporter behind `/metrics` is the process's recorder.
    metrics::install();
    let max_body = state.limits.max_body_bytes;
    let mut api = Router::new();
    for &(method, path, access) in ROUTES {
        let handler = match (method, path) {
            ("GET", "/api/v1/tasks") => get(tasks::list),
            ("POST", "/api/v1/tasks") => post(tasks::submit),
            ("POST", "/api/v1/tasks/batch") => post(tasks::submit_batch),
            ("POST", "/api/v1/tasks/bulk/{op}") => post(bulk::bulk),
            ("GET", "/api/v1/tasks/{id}") => get(tasks::show),
            ("POST", "/api/v1/tasks/{id}/{op}") => post(tasks::change),
            ("GET", "/api/v1/queues") => get(queues::list),
            ("POST", "/api/v1/queues/{name}/{op}") => post(queues::set_paused),
            ("PUT", "/api/v1/queues/{name}/policy") => put(queues::set_policy),
            ("GET", "/api/v1/stats") => get(queues::stats),
            ("GET", "/api/v1/audit") => get(audit::list),
            ("GET", "/api/v1/events") => get(live::follow),
            ("GET", "/api/v1/schedules") => get(schedules::list),
            ("POST", "/api/v1/schedules") => post(schedules::create),
            ("GET", "/api/v1/schedules/{schedule}") => get(schedules::show),
            ("PATCH", "/api/v1/schedules/{schedule}") => patch(schedules::edit),
            ("DELETE", "/api/v1/schedules/{schedule}") => delete(schedules::delete),
            ("POST", "/api/v1/schedules/{schedule}/{op}") => post(schedules::operate),
            ("GET", "/api/v1/workers") => get(workers::list),
            ("GET", "/api/v1/workers/{id}") => get(workers::show),
            ("POST", "/api/v1/workers/{id}/{op}") => post(workers::operate),
            ("GET", "/api/v1/batches") => get(batches::list),
            ("POST", "/api/v1/batches") => post(batches::create),
            ("GET", "/api/v1/batches/{id}") => get(batches::show),
            ("PATCH", "/api/v1/batches/{id}") => patch(batches::edit),
            ("POST", "/api/v1/batches/{id}/{op}") => post(batches::operate),
            ("POST", "/api/v1/heartbeat") => post(workers::heartbeat),
            ("POST", "/api/v1/leave") => post(workers::leave),
            ("POST", "/api/v1/claim") => post(leases::claim),
            ("POST", "/api/v1/leases") => post(acks::acknowledge),
            ("POST", "/api/v1/leases/{id}/{op}") => post(acks::lease_op),
            ("POST", "/api/v1/admin/migrate") => post(queues::migrate),
            ("POST", "/api/v1/admin/purge") => post(queues::purge),
            ("GET", "/metrics") => get(metrics::scrape),
            _ => unreachable!("every route in ROUTES has a handler"),
        };
        api = api.route(path, guard::require(access, &state, handler));
    }
    api.route("/api/v1/openapi.json", get(openapi::document))
        .route("/healthz", get(|| async { "ok" }))
        .fallback(guard::not_found)
        .method_not_allowed_fallback(guard::method_not_allowed)
        .layer(axum::extract::DefaultBodyLimit::max(max_body))
        .layer(axum::middleware::from_fn_with_state(
            max_body,
            extract::refuse_announced_oversize,
        ))
        // Logs method, path, status and latency; headers (and so tokens) never.
        .layer(tower_http::trace::TraceLayer::new_for_http())
        .with_state(state)
}

/// Serves `router(state)` on `listener` until `shutdown` resolves, then lets requests in
/// flight finish. Without tokens, only loopback host names are answered ([`host`]);
/// connections are held to [`listen::ConnectionLimits::for_this_process`].
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tokens = state.tokens.clone();
    let app = host::enforce(router(state), &tokens, host::AllowedHosts::default());
    let limits = listen::ConnectionLimits::for_this_process();
    listen::serve(listener, app, limits, shutdown).await
}
