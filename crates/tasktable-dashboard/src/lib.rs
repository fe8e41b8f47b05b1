//! tasktable's web dashboard.
//!
//! Owns: server-rendered pages under `/ui` (overview with counts, windowed statistics per
//! queue and kind with inline-SVG charts, and queues with their policies in brief; a
//! queue's policy page with the form that sets or clears it; tasks with filters and bulk
//! actions, one task with its payload, result, checkpoint and attempts, the worker
//! registry with what each worker runs and its drain and release buttons, batches with
//! their progress and the start, pause, stop and resume buttons, one batch with its failed
//! items,
//! schedules with their next fire times and one schedule with its template and the tasks
//! it fired, and the forms that enable, disable and fire a schedule; the audit, the event
//! log filtered by actor, task, queue and event; a task's history on its page),
//! sign-in with an API token and its throttling, sessions, CSRF protection, the headers
//! every page is sent with, the bounds on what a page reads, and the refresh of live
//! pages from the event stream (`/ui/events`, one script allowed by its hash). Pages
//! need no JavaScript and no build step; everything shown is escaped.
//!
//! Must not know: SQL or any backend. It reads and changes tasks and schedules through the
//! same `Arc<dyn Store>` and token set as the HTTP API (`tasktable-server`), so the
//! dashboard and the API cannot disagree about what a role may do. Which host names a
//! server without tokens answers is the server's rule (`tasktable_server::host`), applied
//! to the whole application where it is composed.

mod actions;
mod audit;
mod batches;
mod bulk;
mod charts;
mod failure;
mod headers;
mod layout;
mod links;
mod overview;
mod policy;
mod refresh;
mod scan;
mod schedule_actions;
mod schedules;
mod session;
mod signin;
mod tasks;
mod throttle;
mod workers;

pub use throttle::ThrottleConfig;

use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::{any, get, post};
use axum::{middleware, Router};
use session::Sessions;
use std::sync::Arc;
use std::time::Duration;
use tasktable_server::AppState;
use throttle::SignInThrottle;

/// How the dashboard behaves; every field has a default fit for production.
#[derive(Debug, Clone)]
pub struct DashConfig {
    /// Mark the session cookie `Secure` on every response. Without it the cookie is
    /// `Secure` when a proxy in front says the browser used HTTPS (`X-Forwarded-Proto:
    /// https` or `Forwarded: proto=https`). Default off.
    pub secure_cookies: bool,
    /// Most sessions held at once; when full, the oldest ends. Default 10,000.
    pub max_sessions: usize,
    /// Most sessions of one token at once; when a token has as many, its own oldest
    /// ends, so no token can sign the others out. Default 100.
    pub max_sessions_per_token: usize,
    /// How long a session lasts after sign-in. Default 12 hours.
    pub session_ttl: Duration,
    /// How failed sign-ins are slowed down.
    pub sign_in: ThrottleConfig,
    /// Most running tasks the workers page reads (their ids, kinds and workers, never
    /// their documents). Default 1,000.
    pub max_scan_rows: usize,
    /// Most tasks a bulk review counts before it says "at least" (the store counts index
    /// entries and reads no document). Default 100,000.
    pub max_count: u64,
}

impl Default for DashConfig {
    fn default() -> Self {
        DashConfig {
            secure_cookies: false,
            max_sessions: 10_000,
            max_sessions_per_token: 100,
            session_ttl: Duration::from_secs(12 * 3600),
            sign_in: ThrottleConfig::default(),
            max_scan_rows: 1000,
            max_count: 100_000,
        }
    }
}

/// What the dashboard's handlers share.
#[derive(Debug, Clone)]
struct DashState {
    app: AppState,
    config: Arc<DashConfig>,
    sessions: Arc<Sessions>,
    throttle: Arc<SignInThrottle>,
}

impl DashState {
    /// Whether a cookie set in answer to a request with `headers` must be `Secure`.
    fn cookie_secure(&self, headers: &HeaderMap) -> bool {
        self.config.secure_cookies || session::over_https(headers)
    }
}

/// The dashboard's routes with the default [`DashConfig`], to merge with the API's router.
pub fn router(app: AppState) -> Router {
    router_with(app, DashConfig::default())
}

/// The dashboard's routes, to merge with the API's router. Serve the result with
/// `tasktable_server::listen::serve` (or axum's
/// `into_make_service_with_connect_info::<SocketAddr>()`) so failed sign-ins are counted
/// per client address; without the client's address all clients share one count.
pub fn router_with(app: AppState, config: DashConfig) -> Router {
    let state = DashState {
        app,
        sessions: Arc::new(Sessions::new(
            config.max_sessions,
            config.max_sessions_per_token,
            config.session_ttl,
        )),
        throttle: Arc::new(SignInThrottle::new(config.sign_in.clone())),
        config: Arc::new(DashConfig {
            max_scan_rows: config.max_scan_rows.max(1),
            max_count: config.max_count.max(1),
            ..config
        }),
    };
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui") }))
        .route("/ui", get(overview::overview))
        .route("/ui/login", get(signin::login_page).post(signin::login))
        .route("/ui/logout", post(signin::logout))
        .route("/ui/tasks", get(tasks::tasks))
        .route(
            "/ui/tasks/bulk",
            get(bulk::bulk_review).post(bulk::bulk_apply),
        )
        .route("/ui/tasks/{id}", get(tasks::task))
        .route("/ui/tasks/{id}/{op}", post(actions::task_action))
        // A fixed segment wins over `{op}`: `policy` is never taken for a pause or resume.
        .route(
            "/ui/queues/policy",
            get(policy::policy_page).post(policy::set_policy),
        )
        .route("/ui/queues/{op}", post(actions::queue_action))
        .route("/ui/workers", get(workers::workers))
        .route("/ui/workers/{op}", post(workers::worker_action))
        .route("/ui/batches", get(batches::batches))
        // One segment: a batch's id to GET, an operation to POST (the form names the batch).
        .route(
            "/ui/batches/{id}",
            get(batches::batch).post(batches::batch_action),
        )
        .route("/ui/schedules", get(schedules::schedules))
        .route("/ui/audit", get(audit::audit))
        .route("/ui/events", get(refresh::events))
        .route("/ui/schedules/{id}", get(schedules::schedule))
        .route(
            "/ui/schedules/{id}/{op}",
            post(schedule_actions::schedule_action),
        )
        // Claims every other path under /ui, so its 404 carries the headers too.
        .route("/ui/{*rest}", any(not_found))
        .layer(middleware::from_fn(headers::protect))
        .with_state(state)
}

async fn not_found() -> Response {
    let body = maud::html! { h1 { "Not found" } p { a href="/ui" { "Overview" } } };
    (
        StatusCode::NOT_FOUND,
        layout::page("Not found", "", None, false, body),
    )
        .into_response()
}
