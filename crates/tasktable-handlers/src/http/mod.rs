//! The `http` handler: one request per attempt, its answer sorted into success, retry or
//! permanent failure.

mod request;
mod response;

pub use request::{HttpMethod, HttpPayload};

use request::Prepared;
use response::Failure;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tasktable_runtime::{Handler, HandlerError, TaskContext};

/// Redirects followed before the request fails permanently.
const MAX_REDIRECTS: usize = 5;

/// The result of an `http` task: the status and the response body (parsed when it is
/// JSON, else text; at most the first 64 KiB, as text when cut).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpResult {
    pub status: u16,
    pub body: Value,
}

/// Runs tasks of kind `http`: sends the request an [`HttpPayload`] describes.
///
/// A 2xx answer succeeds with an [`HttpResult`]. A 5xx, 429 or 408 answer, a connection
/// failure or a request timeout is retried, after the server's `Retry-After` (seconds, at
/// most 1 h) when it sends one, else after the task's backoff. Any other answer fails
/// permanently, naming the status and the start of the body. Redirects are followed up to
/// 5 times; a redirect not followed fails permanently.
#[derive(Debug, Clone)]
pub struct HttpHandler {
    client: reqwest::Client,
}

impl HttpHandler {
    /// A handler with its own client: User-Agent `tasktable/<version>`, at most 5
    /// redirects, no timeout of its own (each request gets the payload's).
    ///
    /// # Panics
    ///
    /// When the TLS backend cannot be initialised, like `reqwest::Client::new`.
    pub fn new() -> Self {
        let client = reqwest::Client::builder()
            .user_agent(concat!("tasktable/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::limited(MAX_REDIRECTS))
            .build()
            .expect("the HTTP client's TLS backend initialises");
        Self::with_client(client)
    }

    /// A handler sending with `client` as it is configured (its User-Agent, redirect
    /// policy, proxies, timeouts); each request still gets the payload's timeout.
    pub fn with_client(client: reqwest::Client) -> Self {
        HttpHandler { client }
    }

    async fn send(&self, request: Prepared) -> Result<HttpResult, Failure> {
        let what = request.describe();
        let mut builder = self
            .client
            .request(request.method, request.url)
            .headers(request.headers);
        if let Some(timeout) = request.timeout {
            builder = builder.timeout(timeout);
        }
        if let Some(body) = &request.body {
            builder = builder.json(body);
        }
        let mut response = builder
            .send()
            .await
            .map_err(|e| response::transport(&what, e))?;
        let body = response::read_body(&mut response).await;
        response::judge(&what, response.status(), response.headers(), body)
    }
}

impl Default for HttpHandler {
    fn default() -> Self {
        Self::new()
    }
}

impl Handler for HttpHandler {
    const KIND: &'static str = "http";
    type Payload = HttpPayload;
    type Output = HttpResult;

    async fn run(
        &self,
        ctx: TaskContext,
        payload: HttpPayload,
    ) -> Result<HttpResult, HandlerError> {
        let secrets: Vec<String> = payload.headers.values().cloned().collect();
        let request = Prepared::new(payload, ctx.task().timeout)
            .map_err(|message| Failure::Permanent(message).into_error(&secrets))?;
        tokio::select! {
            result = self.send(request) => result.map_err(|f| f.into_error(&secrets)),
            // Dropping the request closes its connection. The runtime records nothing
            // for a stopped attempt, so the answer only has to be an error.
            reason = ctx.stopped() => {
                let message = format!("stopped ({reason:?}) before the answer arrived");
                Err(HandlerError::retry(message))
            }
        }
    }
}
