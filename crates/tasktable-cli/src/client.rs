//! The HTTP client of the operator commands: requests to a running `tasktable serve`,
//! its answers as JSON, and every way a request can fail turned into one line and an
//! exit code. The commands never touch a database; the server decides what is legal.

use crate::error::{CliError, Exit};
use chrono::{DateTime, Utc};
use reqwest::{RequestBuilder, StatusCode, Url};
use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;

/// A running server's API.
#[derive(Debug)]
pub struct Api {
    http: reqwest::Client,
    base: Url,
    token: Option<String>,
}

impl Api {
    pub fn new(server: &str, token: Option<String>) -> Result<Self, CliError> {
        let base = Url::parse(server)
            .ok()
            .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
            .ok_or_else(|| {
                CliError::usage(format!(
                    "--server {server:?} is not an http:// or https:// URL (for example http://127.0.0.1:8080)"
                ))
            })?;
        let http = reqwest::Client::builder()
            .user_agent(concat!("tasktable-cli/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(300))
            .build()
            .map_err(|e| CliError::failure(format!("cannot set up the HTTP client: {e}")))?;
        Ok(Api {
            http,
            base,
            token: token.filter(|t| !t.is_empty()),
        })
    }

    /// The URL of `segments` under the server's base URL; each segment is escaped, so a
    /// queue name cannot change the path.
    fn url(&self, segments: &[&str]) -> Url {
        let mut url = self.base.clone();
        url.path_segments_mut()
            .expect("an http URL has a path")
            .pop_if_empty()
            .extend(segments);
        url
    }

    pub async fn get(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
    ) -> Result<Value, CliError> {
        let mut url = self.url(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        self.send(self.http.get(url)).await
    }

    pub async fn post(&self, segments: &[&str], body: &Value) -> Result<Value, CliError> {
        self.send(self.http.post(self.url(segments)).json(body))
            .await
    }

    pub async fn put(&self, segments: &[&str], body: &Value) -> Result<Value, CliError> {
        self.send(self.http.put(self.url(segments)).json(body))
            .await
    }

    pub async fn patch(&self, segments: &[&str], body: &Value) -> Result<Value, CliError> {
        self.send(self.http.patch(self.url(segments)).json(body))
            .await
    }

    /// A DELETE has no body, but the server asks every write for a JSON content type (so
    /// no web page can send one without a CORS preflight).
    pub async fn delete(&self, segments: &[&str]) -> Result<Value, CliError> {
        let request = self
            .http
            .delete(self.url(segments))
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        self.send(request).await
    }

    /// A server-sent events stream, resumed after `last_id` when given; its body is read
    /// as it comes. (The client's 300 s request timeout ends it; callers reconnect.)
    pub async fn open_stream(
        &self,
        segments: &[&str],
        query: &[(&str, String)],
        last_id: Option<&str>,
    ) -> Result<reqwest::Response, CliError> {
        let mut url = self.url(segments);
        if !query.is_empty() {
            url.query_pairs_mut().extend_pairs(query);
        }
        let mut request = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "text/event-stream");
        if let Some(id) = last_id {
            request = request.header("last-event-id", id);
        }
        if let Some(token) = &self.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        if !status.is_success() {
            let body = response.bytes().await.map_err(|e| self.unreachable(&e))?;
            return Err(self.refused(status, &body));
        }
        Ok(response)
    }

    async fn send(&self, request: RequestBuilder) -> Result<Value, CliError> {
        let request = match &self.token {
            Some(token) => request.bearer_auth(token),
            None => request,
        };
        let response = request.send().await.map_err(|e| self.unreachable(&e))?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| self.unreachable(&e))?;
        if !status.is_success() {
            return Err(self.refused(status, &body));
        }
        serde_json::from_slice(&body).map_err(|e| {
            CliError::failure(format!(
                "the server at {} answered {status} with a body that is not JSON ({e}); is it a tasktable server?",
                self.base
            ))
        })
    }

    fn unreachable(&self, err: &reqwest::Error) -> CliError {
        CliError::failure(format!(
            "cannot reach server at {}: {}",
            self.base,
            cause(err)
        ))
    }

    /// A non-2xx answer: the server's own code and message when it sent the API's error
    /// document, and what to do about a missing or weak token.
    fn refused(&self, status: StatusCode, body: &[u8]) -> CliError {
        #[derive(Deserialize)]
        struct Document {
            error: ErrorBody,
        }
        #[derive(Deserialize)]
        struct ErrorBody {
            code: String,
            message: String,
        }
        let mut message = match serde_json::from_slice::<Document>(body) {
            Ok(Document { error }) => format!("{} ({})", error.message, error.code),
            Err(_) => format!(
                "the server at {} answered {status}: {}",
                self.base,
                crate::output::one_line(&String::from_utf8_lossy(body), 200)
            ),
        };
        let exit = match status {
            StatusCode::NOT_FOUND => Exit::NotFound,
            StatusCode::CONFLICT => Exit::Conflict,
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Exit::Denied,
            _ => Exit::Failure,
        };
        match (status, &self.token) {
            (StatusCode::UNAUTHORIZED, None) => message.push_str(
                "; no token was sent: pass --token or set TASKTABLE_TOKEN (`tasktable token new` makes one)",
            ),
            (StatusCode::UNAUTHORIZED, Some(_)) => message.push_str(
                "; check the token given with --token or TASKTABLE_TOKEN",
            ),
            (StatusCode::FORBIDDEN, _) => message.push_str(
                "; use a token whose role allows this with --token or TASKTABLE_TOKEN",
            ),
            _ => {}
        }
        CliError::new(exit, message)
    }
}

/// The innermost cause of an error, which is the one that says what happened
/// ("Connection refused"), after reqwest's own summary.
fn cause(err: &(dyn std::error::Error + 'static)) -> String {
    let mut inner = err;
    while let Some(next) = inner.source() {
        inner = next;
    }
    if std::ptr::eq(inner, err) {
        err.to_string()
    } else {
        format!("{err}: {inner}")
    }
}

/// A task as the API returns it; only the fields the commands show. Unknown fields are
/// ignored, so a newer server still works.
#[derive(Debug, Clone, Deserialize)]
pub struct Task {
    pub id: i64,
    pub kind: String,
    pub queue: String,
    pub state: String,
    pub payload: Value,
    pub result: Option<Value>,
    pub checkpoint: Option<Value>,
    pub progress: Option<Value>,
    pub key: Option<String>,
    pub idempotency_key: Option<String>,
    pub priority: i32,
    pub run_at: DateTime<Utc>,
    pub attempt: u32,
    pub max_attempts: u32,
    pub timeout_ms: Option<u64>,
    pub worker_id: Option<String>,
    pub worker_host: Option<String>,
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Who may run it; null or absent for any worker.
    #[serde(default)]
    pub target: Option<tasktable_server::wire::TargetSpec>,
    /// How long a retry waits for the worker of its previous attempt (`worker_id`).
    #[serde(default)]
    pub affinity_ms: Option<u64>,
    /// While set, the task waits for that worker until then (or until it is gone).
    #[serde(default)]
    pub affinity_until: Option<DateTime<Utc>>,
    /// A multi-run task's wanted successes and counters; null for a task that runs once.
    #[serde(default)]
    pub copies: Option<u32>,
    #[serde(default)]
    pub at_once: Option<u32>,
    #[serde(default)]
    pub runs_active: Option<u32>,
    #[serde(default)]
    pub runs_succeeded: Option<u32>,
    #[serde(default)]
    pub runs_failed: Option<u32>,
    /// Failed runs the task survives.
    #[serde(default)]
    pub max_failed_runs: Option<u32>,
}

impl Task {
    /// "4 of 6 done, 2 running, 1 failed" for a multi-run task.
    pub fn runs_summary(&self) -> Option<String> {
        let copies = self.copies?;
        let mut text = format!("{} of {copies} done", self.runs_succeeded.unwrap_or(0));
        if let Some(n) = self.runs_active.filter(|n| *n > 0) {
            text.push_str(&format!(", {n} running"));
        }
        if let Some(n) = self.runs_failed.filter(|n| *n > 0) {
            text.push_str(&format!(", {n} failed"));
            if let Some(allowed) = self.max_failed_runs {
                text.push_str(&format!(" ({allowed} allowed)"));
            }
        }
        Some(text)
    }
}

/// One run of a multi-run task.
#[derive(Debug, Clone, Deserialize)]
pub struct Run {
    pub run: u32,
    pub worker_id: String,
    pub worker_host: Option<String>,
    pub state: String,
    pub started_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    pub error: Option<String>,
    pub resumed_from: Option<u32>,
}

/// One ended attempt of a task.
#[derive(Debug, Clone, Deserialize)]
pub struct Attempt {
    pub attempt: u32,
    pub worker_id: Option<String>,
    pub worker_host: Option<String>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: DateTime<Utc>,
    pub outcome: String,
    pub error: Option<String>,
}

/// Reads a field of an answer as `T`, or says the server answered something else.
pub fn field<T: serde::de::DeserializeOwned>(answer: &Value, name: &str) -> Result<T, CliError> {
    answer
        .get(name)
        .cloned()
        .and_then(|v| serde_json::from_value(v).ok())
        .ok_or_else(|| {
            CliError::failure(format!(
                "the server's answer has no valid {name:?}; is the server the same version as this CLI?"
            ))
        })
}
