//! The exporter's HTTP client: the workspace's reqwest client (rustls, proxies from the
//! environment), sending from the process's tokio runtime. The OTLP exporter calls it
//! from its own thread, outside any runtime, so each request is spawned onto the runtime
//! and awaited from there.

use crate::TelemetryError;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use std::time::Duration;

/// Sends the exporter's requests.
#[derive(Debug)]
pub struct Sender {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
}

impl Sender {
    /// A client whose every request, response body included, ends within `timeout`.
    pub fn new(
        runtime: tokio::runtime::Handle,
        timeout: Duration,
    ) -> Result<Sender, TelemetryError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            // A collector answers where it is asked; a redirect is a misconfiguration.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        Ok(Sender { client, runtime })
    }
}

#[async_trait::async_trait]
impl HttpClient for Sender {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request)?;
        let sent = self.runtime.spawn(async move {
            let response = client.execute(request).await?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        sent.await?
    }
}
