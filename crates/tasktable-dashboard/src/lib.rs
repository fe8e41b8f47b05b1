//! tasktable's web dashboard.
//!
//! Owns: server-rendered pages under `/ui` (overview with counts, windowed statistics per
//! queue and kind with inline-SVG charts, and queues; tasks with filters and bulk actions, one task with its payload, result, checkpoint and attempts,
//! workers and what they run), sign-in with an API token, sessions, and CSRF protection.
//! Pages need no JavaScript and no build step; everything shown is escaped.
//!
//! Must not know: SQL or any backend. It reads and changes tasks through the same
//! `Arc<dyn Store>` and token set as the HTTP API (`tasktable-server`), so the dashboard
//! and the API cannot disagree about what a role may do.

mod actions;
mod charts;
mod layout;
mod pages;
mod session;

pub use session::{Session, Sessions};

use axum::response::Redirect;
use axum::routing::{get, post};
use axum::Router;
use std::sync::Arc;
use tasktable_server::AppState;

/// What the dashboard's handlers share.
#[derive(Debug, Clone)]
pub struct DashState {
    pub app: AppState,
    pub sessions: Arc<Sessions>,
}

/// The dashboard's routes, to merge with the API's router.
pub fn router(app: AppState) -> Router {
    let state = DashState {
        app,
        sessions: Arc::new(Sessions::default()),
    };
    Router::new()
        .route("/", get(|| async { Redirect::to("/ui") }))
        .route("/ui", get(pages::overview))
        .route("/ui/login", get(actions::login_page).post(actions::login))
        .route("/ui/logout", post(actions::logout))
        .route("/ui/tasks", get(pages::tasks))
        .route(
            "/ui/tasks/bulk",
            get(actions::bulk_review).post(actions::bulk_apply),
        )
        .route("/ui/tasks/{id}", get(pages::task))
        .route("/ui/tasks/{id}/{op}", post(actions::task_action))
        .route("/ui/queues/{name}/{op}", post(actions::queue_action))
        .route("/ui/workers", get(pages::workers))
        .with_state(state)
}
