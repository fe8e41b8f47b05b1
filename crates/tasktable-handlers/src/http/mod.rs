//! The `http` handler: one request per attempt (and the redirects it is sent on), only to
//! addresses its [`HttpPolicy`] allows, its answer sorted into success, retry or permanent
//! failure.

mod address;
mod batch;
mod policy;
mod redirect;
mod request;
mod resolver;
mod response;

pub use batch::{HttpBatchData, HttpBatchHandler};
pub use policy::{HostName, HttpPolicy, Network};
pub use request::{HttpMethod, HttpPayload};

use request::Prepared;
use resolver::GuardedResolver;
use response::Failure;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;
use tasktable_runtime::{Handler, HandlerError, TaskContext};
use tokio::time::Instant;

/// Redirects followed before the request fails permanently.
const MAX_REDIRECTS: usize = 5;

/// The result of an `http` task: the status and the response body (parsed when it is
/// JSON, else text; at most the first 64 KiB, as text when cut).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HttpResult {
    pub status: u16,
    pub body: Value,
}

/// Runs tasks of kind `http`: sends the request an [`HttpPayload`] describes, if its
/// [`HttpPolicy`] allows the address.
///
/// A 2xx answer succeeds with an [`HttpResult`]. A 5xx, 429 or 408 answer, a connection
/// failure or a request timeout is retried, after the server's `Retry-After` (seconds, at
/// most 1 h) when it sends one, else after the task's backoff. Any other answer fails
/// permanently, naming the status and the start of the body. Redirects are followed up to
/// 5 times, each to an address the policy allows, never from https to http, and without
/// the payload's headers once the origin changes; a redirect not followed fails
/// permanently. An address the policy refuses fails permanently, before anything is sent.
#[derive(Debug, Clone)]
pub struct HttpHandler {
    client: reqwest::Client,
    policy: Arc<HttpPolicy>,
}

impl HttpHandler {
    /// A handler that connects only where `policy` allows: User-Agent
    /// `tasktable/<version>`, no proxy (a proxy would connect on the handler's behalf,
    /// out of the policy's sight), no timeout of its own (each request gets the
    /// payload's).
    ///
    /// # Panics
    ///
    /// When the TLS backend cannot be initialised, like `reqwest::Client::new`.
    pub fn new(policy: HttpPolicy) -> Self {
        let policy = Arc::new(policy);
        let client = reqwest::Client::builder()
            .user_agent(concat!("tasktable/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .dns_resolver(Arc::new(GuardedResolver {
                policy: policy.clone(),
            }))
            .build()
            .expect("the HTTP client's TLS backend initialises");
        HttpHandler { client, policy }
    }

    async fn send(&self, mut request: Prepared) -> Result<HttpResult, Failure> {
        // The payload's timeout covers the whole chain of redirects.
        let deadline = request.timeout.map(|t| Instant::now() + t);
        let mut redirects = 0;
        loop {
            let what = request.describe();
            // Names are checked as they resolve; an address in the URL never is, so here.
            self.policy
                .check_url(&request.url)
                .map_err(|refused| Failure::Permanent(format!("{what}: {refused}")))?;
            let mut builder = self
                .client
                .request(request.method.clone(), request.url.clone())
                .headers(request.headers.clone());
            if let Some(deadline) = deadline {
                builder = builder.timeout(deadline.saturating_duration_since(Instant::now()));
            }
            if let Some(body) = &request.body {
                builder = builder.json(body);
            }
            let mut response = builder
                .send()
                .await
                .map_err(|e| response::transport(&what, e))?;
            let status = response.status();
            if let Some(location) = redirect::location(status, response.headers()) {
                if redirects == MAX_REDIRECTS {
                    return Err(Failure::Permanent(format!(
                        "{what}: HTTP {}: too many redirects (more than {MAX_REDIRECTS}); the redirect was not followed",
                        status.as_u16()
                    )));
                }
                let location = location.to_owned();
                redirect::follow(&mut request, status, &location).map_err(|why| {
                    Failure::Permanent(format!("{what}: HTTP {}: {why}", status.as_u16()))
                })?;
                redirects += 1;
                continue;
            }
            let body = response::read_body(&mut response).await;
            return response::judge(&what, status, response.headers(), body);
        }
    }
}

/// Public addresses only.
impl Default for HttpHandler {
    fn default() -> Self {
        Self::new(HttpPolicy::default())
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
        let mut secrets: Vec<String> = payload.headers.values().cloned().collect();
        // A careless server may quote the URL's password back, too.
        secrets.extend(
            tasktable_core::url::parse_http(&payload.url)
                .ok()
                .and_then(|url| url.password().map(str::to_owned)),
        );
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
