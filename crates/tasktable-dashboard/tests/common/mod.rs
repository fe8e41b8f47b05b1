//! The dashboard served as `tasktable serve` composes it (API and `/ui` on one router, the
//! Host rule of a server without tokens, client addresses for sign-in throttling) on a
//! fresh database, and browser-like clients that keep cookies and stop at redirects.

#![allow(dead_code)]

use chrono::{DateTime, Utc};
use reqwest::redirect::Policy;
use reqwest::{Client, StatusCode};
use std::net::SocketAddr;
use std::sync::Arc;
use tasktable_core::{NewTask, TaskState};
use tasktable_dashboard::DashConfig;
use tasktable_server::host::AllowedHosts;
use tasktable_server::redact::Redactions;
use tasktable_server::{AppState, Role, TokenSet};
use tasktable_store::{CreateScheduleParams, OnExisting, Schedule, Store, SubmitParams};
use tasktable_testdb::TestDb;

pub const ADMIN: &str = "admin-token-0123456789";
pub const OPERATOR: &str = "operator-token-0123456789";
pub const READER: &str = "reader-token-0123456789";
pub const WORKER: &str = "worker-token-0123456789";

/// A token per role, as most tests sign in.
pub fn tokens() -> TokenSet {
    let mut tokens = TokenSet::default();
    tokens.add_plain("root", Role::Admin, ADMIN).unwrap();
    tokens.add_plain("ops", Role::Operator, OPERATOR).unwrap();
    tokens.add_plain("viewer", Role::Reader, READER).unwrap();
    tokens.add_plain("w", Role::Worker, WORKER).unwrap();
    tokens
}

pub struct Ui {
    pub base: String,
    pub store: Arc<dyn Store>,
    pub db: TestDb,
}

impl Ui {
    /// Tokens for every role and the default configuration; `None` when the backend is
    /// unreachable outside CI.
    pub async fn start(backend: &str) -> Option<Ui> {
        Ui::start_with(backend, tokens(), DashConfig::default()).await
    }

    pub async fn start_with(backend: &str, tokens: TokenSet, config: DashConfig) -> Option<Ui> {
        let db = TestDb::fresh(backend).await?;
        let store = db.store().await;
        let mut state = AppState::new(store.clone(), tokens);
        // As the binary hands over the built-in `http` handler's secret fields.
        state.redactions = Arc::new(Redactions::new(
            &[("http", "/headers")],
            &[("http", "/url")],
        ));
        let app = tasktable_server::router(state.clone())
            .merge(tasktable_dashboard::router_with(state.clone(), config));
        let app = tasktable_server::host::enforce(app, &state.tokens, AllowedHosts::default());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            axum::serve(
                listener,
                app.into_make_service_with_connect_info::<SocketAddr>(),
            )
            .await
        });
        Some(Ui { base, store, db })
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    pub async fn submit(&self, task: NewTask) -> i64 {
        self.store
            .task_submit(SubmitParams {
                tasks: vec![task],
                now: None,
            })
            .await
            .unwrap()[0]
            .id
    }

    /// Saves the schedule `spec` (as the API takes it) as if created at `now`.
    pub async fn schedule(&self, spec: serde_json::Value, now: Option<DateTime<Utc>>) -> Schedule {
        self.store
            .schedule_create(CreateScheduleParams {
                actor: tasktable_core::Actor::rust(),
                spec: serde_json::from_value(spec).expect("a schedule spec"),
                on_existing: OnExisting::Refuse,
                now,
            })
            .await
            .unwrap()
    }

    pub async fn state(&self, id: i64) -> TaskState {
        self.store.task_get(id).await.unwrap().unwrap().state
    }

    pub async fn paused(&self, queue: &str) -> bool {
        self.store
            .queue_list()
            .await
            .unwrap()
            .iter()
            .any(|q| q.name == queue && q.paused)
    }

    /// A browser-like client signed in with `token`, and the sign-in's status.
    pub async fn sign_in(&self, token: &str) -> (Client, StatusCode) {
        let client = client();
        let resp = client
            .post(self.url("/ui/login"))
            .form(&[("token", token)])
            .send()
            .await
            .unwrap();
        (client, resp.status())
    }

    pub async fn page(&self, client: &Client, path: &str) -> String {
        let resp = client.get(self.url(path)).send().await.unwrap();
        assert_eq!(resp.status(), 200, "{path}");
        resp.text().await.unwrap()
    }
}

/// A client that keeps cookies and does not follow redirects.
pub fn client() -> Client {
    Client::builder()
        .cookie_store(true)
        .redirect(Policy::none())
        .build()
        .unwrap()
}

/// The CSRF token in a page's forms.
pub fn csrf(html: &str) -> String {
    let at = html
        .find("name=\"csrf\" value=\"")
        .expect("a form with a CSRF token")
        + 19;
    html[at..at + 64].to_owned()
}

/// Expands each named `async fn(&'static str)` into one test per backend.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name("sqlite").await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name("postgres").await;
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test]
                async fn $name() {
                    super::$name("mysql").await;
                }
            )*
        }
    };
}
