//! The HTTP client of the operator commands: requests to a running `tasktable serve`,
//! its answers as JSON, and every way a request can fail turned into one line and an
//! exit code. The commands never touch a database; the server decides what is legal.

use crate::error::{CliError, Exit};
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

/// A task, an ended attempt and a run of a multi-run task, as the API returns them: the
/// server's own types. Fields a newer server adds are ignored.
pub use tasktable_wire::{AttemptView as Attempt, RunView as Run, TaskView as Task};

/// "4 of 6 done, 2 running, 1 failed" for a multi-run task.
pub fn runs_summary(task: &Task) -> Option<String> {
    let copies = task.copies?;
    let mut text = format!("{} of {copies} done", task.runs_succeeded.unwrap_or(0));
    if let Some(n) = task.runs_active.filter(|n| *n > 0) {
        text.push_str(&format!(", {n} running"));
    }
    if let Some(n) = task.runs_failed.filter(|n| *n > 0) {
        text.push_str(&format!(", {n} failed"));
        if let Some(allowed) = task.max_failed_runs {
            text.push_str(&format!(" ({allowed} allowed)"));
        }
    }
    Some(text)
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
