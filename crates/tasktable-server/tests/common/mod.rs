//! A real server on a real database for each test: a fresh database on the named backend,
//! the API on an ephemeral loopback port, and a client that speaks to it.

#![allow(dead_code)]

use reqwest::{Method, StatusCode};
use serde_json::Value;
use std::sync::Arc;
use tasktable_server::{AppState, Role, TokenSet};
use tasktable_store::Store;
use tasktable_testdb::TestDb;
use tokio::sync::oneshot;

/// One token per role, as the tests send them.
pub const TOKENS: [(Role, &str); 4] = [
    (Role::Admin, "admin-token-0123456789"),
    (Role::Operator, "operator-token-0123456789"),
    (Role::Worker, "worker-token-0123456789"),
    (Role::Reader, "reader-token-0123456789"),
];

/// A worker as a process on host `host-a` would register itself.
pub fn worker_facts(id: &str) -> tasktable_core::worker::WorkerFacts {
    use tasktable_core::worker::{Protocol, Queues, WorkerFacts};
    WorkerFacts {
        id: id.into(),
        host: "host-a".into(),
        pid: Some(77),
        version: "0.1.0".into(),
        groups: vec!["blue".into()],
        queues: Queues::Listed(vec!["default".into()]),
        capacity: 4,
        protocol: Protocol::Process,
        kinds: None,
    }
}

/// A token set with [`TOKENS`].
pub fn all_tokens() -> TokenSet {
    let mut tokens = TokenSet::default();
    for (role, token) in TOKENS {
        tokens.add_plain(role.as_str(), role, token).unwrap();
    }
    tokens
}

pub fn token(role: Role) -> &'static str {
    TOKENS
        .iter()
        .find(|(r, _)| *r == role)
        .map(|(_, t)| *t)
        .unwrap()
}

pub struct Server {
    pub base: String,
    pub store: Arc<dyn Store>,
    pub http: reqwest::Client,
    /// The token sent by [`Server::call`]; `None` sends no Authorization header.
    pub token: Option<String>,
    stop: Option<oneshot::Sender<()>>,
    _db: TestDb,
}

impl Server {
    /// A server with a token per role, on a fresh database; `None` when the backend is
    /// unreachable outside CI.
    pub async fn start(backend: &str) -> Option<Server> {
        Self::start_with(backend, all_tokens(), |_| {}).await
    }

    pub async fn start_with(
        backend: &str,
        tokens: TokenSet,
        adjust: impl FnOnce(&mut AppState),
    ) -> Option<Server> {
        Self::start_wrapped(backend, tokens, |store| store, adjust).await
    }

    /// A server whose store is `wrap` of the fresh database's (a store that counts or
    /// freezes calls, say); [`Server::store`] is the wrapped one too.
    pub async fn start_wrapped(
        backend: &str,
        tokens: TokenSet,
        wrap: impl FnOnce(Arc<dyn Store>) -> Arc<dyn Store>,
        adjust: impl FnOnce(&mut AppState),
    ) -> Option<Server> {
        let db = TestDb::fresh(backend).await?;
        let store = wrap(db.store().await);
        let mut state = AppState::new(store.clone(), tokens);
        // As `tasktable serve` hands over its built-in `http` handler's secret fields.
        state.redactions = std::sync::Arc::new(tasktable_server::redact::Redactions::new(
            &[("http", "/headers")],
            &[("http", "/url")],
        ));
        adjust(&mut state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = oneshot::channel();
        tokio::spawn(tasktable_server::serve(listener, state, async {
            let _ = stopped.await;
        }));
        Some(Server {
            base,
            store,
            http: reqwest::Client::new(),
            token: Some(token(Role::Admin).to_owned()),
            stop: Some(stop),
            _db: db,
        })
    }

    pub fn as_role(&mut self, role: Role) -> &mut Self {
        self.token = Some(token(role).to_owned());
        self
    }

    pub fn request(&self, method: Method, path: &str) -> reqwest::RequestBuilder {
        let req = self.http.request(method, format!("{}{path}", self.base));
        match &self.token {
            Some(t) => req.bearer_auth(t),
            None => req,
        }
    }

    /// Sends `body` (when given) as JSON and returns the status and the JSON answer.
    pub async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.request(method, path);
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("server answers");
        let status = resp.status();
        let text = resp.text().await.unwrap();
        let json = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{status} answer is not JSON: {text:?}"));
        (status, json)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None).await
    }

    /// The body of a GET of `path`, as text, whatever its status: what a caller could read.
    #[allow(dead_code)]
    pub async fn get_text(&self, path: &str) -> String {
        let resp = self
            .request(Method::GET, path)
            .send()
            .await
            .expect("server answers");
        resp.text().await.expect("a body")
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(body)).await
    }

    /// How many tasks the database holds, read straight from the store.
    pub async fn task_count(&self) -> usize {
        let queues = self.store.queue_list().await.unwrap();
        queues
            .iter()
            .flat_map(|q| q.counts.iter().map(|(_, n)| *n as usize))
            .sum()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

/// Asserts an error answer: its status and its code, and that the message says something.
pub fn assert_error(answer: &(StatusCode, Value), status: u16, code: &str) {
    let (got, body) = answer;
    assert_eq!(got.as_u16(), status, "{body}");
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.len() > 10, "error message too thin: {body}");
}

/// Expands each named `async fn(Server)` into one test per backend.
#[macro_export]
macro_rules! on_every_backend {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(server) = $crate::common::Server::start("sqlite").await {
                        super::$name(server).await;
                    }
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(server) = $crate::common::Server::start("postgres").await {
                        super::$name(server).await;
                    }
                }
            )*
        }
        mod mysql {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    if let Some(server) = $crate::common::Server::start("mysql").await {
                        super::$name(server).await;
                    }
                }
            )*
        }
    };
}
