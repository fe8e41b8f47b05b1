//! The exporter's HTTP client: the workspace's reqwest client (rustls, proxies from the
//! environment), sending from the process's tokio runtime. The OTLP exporter calls it
//! from its own thread, outside any runtime, so each request is spawned onto the runtime
//! and awaited from there.
//!
//! A collector that cannot be reached, or that refuses spans, is one WARN line, and its
//! return one INFO line, however many exports failed between them (at thousands of
//! attempts a second an export leaves many times a second).

use crate::TelemetryError;
use opentelemetry_http::{Bytes, HttpClient, HttpError, Request, Response};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Sends the exporter's requests.
#[derive(Debug)]
pub struct Sender {
    client: reqwest::Client,
    runtime: tokio::runtime::Handle,
    /// Whether the last export failed (its WARN line written).
    failing: AtomicBool,
    /// Set once the process shuts down: what fails then is said by the shutdown.
    closing: Arc<AtomicBool>,
}

impl Sender {
    /// A client whose every request, response body included, ends within `timeout`.
    pub fn new(
        runtime: tokio::runtime::Handle,
        timeout: Duration,
        closing: Arc<AtomicBool>,
    ) -> Result<Sender, TelemetryError> {
        let client = reqwest::Client::builder()
            .timeout(timeout)
            // A collector answers where it is asked; a redirect is a misconfiguration.
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
        Ok(Sender {
            client,
            runtime,
            failing: AtomicBool::new(false),
            closing,
        })
    }

    async fn send(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        let client = self.client.clone();
        let request = reqwest::Request::try_from(request).map_err(cause)?;
        let sent = self.runtime.spawn(async move {
            let response = client.execute(request).await.map_err(cause)?;
            let mut answer = Response::builder().status(response.status());
            if let Some(headers) = answer.headers_mut() {
                *headers = response.headers().clone();
            }
            let body = response.bytes().await.map_err(cause)?;
            Ok::<_, HttpError>(answer.body(body)?)
        });
        match sent.await {
            Ok(answer) => answer,
            Err(_) => Err("the process is shutting down".into()),
        }
    }

    /// Logs the first export of an outage and the first one after it.
    fn heard(&self, endpoint: &str, answer: &Result<Response<Bytes>, HttpError>) {
        let failure = match answer {
            Ok(response) if response.status().is_success() => None,
            Ok(response) => Some(format!("the collector answered {}", response.status())),
            Err(e) => Some(e.to_string()),
        };
        if self.closing.load(Ordering::Relaxed) {
            return;
        }
        match failure {
            Some(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::warn!(
                        endpoint,
                        error,
                        "spans cannot be sent to the collector; they are dropped until it takes them again"
                    );
                }
            }
            None => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(endpoint, "spans reach the collector again");
                }
            }
        }
    }
}

/// A reqwest error as the log may show it: its causes in order ("connection refused",
/// "timed out"), without the URL, whose user information or query may hold a secret.
fn cause(error: reqwest::Error) -> HttpError {
    let error = error.without_url();
    let mut text = error.to_string();
    let mut source = std::error::Error::source(&error);
    while let Some(inner) = source {
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text.into()
}

#[async_trait::async_trait]
impl HttpClient for Sender {
    async fn send_bytes(&self, request: Request<Bytes>) -> Result<Response<Bytes>, HttpError> {
        // Where spans go, without any user information the URL may hold.
        let uri = request.uri();
        let endpoint = format!(
            "{}://{}{}",
            uri.scheme_str().unwrap_or("http"),
            uri.host().unwrap_or_default(),
            uri.port().map(|p| format!(":{p}")).unwrap_or_default()
        ) + uri.path();
        let answer = self.send(request).await;
        self.heard(&endpoint, &answer);
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::{Arc, Mutex};

    /// What the test's subscriber wrote.
    #[derive(Clone, Default)]
    struct Lines(Arc<Mutex<Vec<u8>>>);

    impl Write for Lines {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn post(url: &str) -> Request<Bytes> {
        Request::post(url)
            .body(Bytes::from_static(b"spans"))
            .unwrap()
    }

    #[test]
    fn an_outage_is_one_warn_line_and_its_end_one_info_line() {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        // A collector that refuses two exports, then takes them.
        let answers = Arc::new(Mutex::new(vec![200u16, 200, 503, 503]));
        let app = {
            let answers = answers.clone();
            axum::Router::new().route(
                "/v1/traces",
                axum::routing::post(move || {
                    let status = answers.lock().unwrap().pop().unwrap_or(200);
                    async move { axum::http::StatusCode::from_u16(status).unwrap() }
                }),
            )
        };
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
        runtime.spawn(async move { axum::serve(listener, app).await });

        let lines = Lines::default();
        let writer = lines.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        let sender = Sender::new(
            runtime.handle().clone(),
            Duration::from_secs(5),
            Arc::default(),
        )
        .unwrap();
        tracing::subscriber::with_default(subscriber, || {
            // Called as the exporter calls it: from a thread outside the runtime.
            for _ in 0..4 {
                let _ = futures::executor::block_on(sender.send_bytes(post(&url)));
            }
            // A closed port, at a URL holding secrets: a new outage, said without them.
            let _ = futures::executor::block_on(sender.send_bytes(post(
                "http://user:pw-secret@127.0.0.1:9/v1/traces?k=q-secret",
            )));
        });
        let text = String::from_utf8(lines.0.lock().unwrap().clone()).unwrap();
        let warns: Vec<&str> = text.lines().filter(|l| l.contains("WARN")).collect();
        let infos: Vec<&str> = text.lines().filter(|l| l.contains("INFO")).collect();
        assert_eq!(warns.len(), 2, "{text}");
        assert!(warns[0].contains("503"), "{text}");
        assert!(warns[1].contains("127.0.0.1:9/v1/traces"), "{text}");
        assert!(warns[1].contains("onnection refused"), "the cause: {text}");
        assert!(!text.contains("secret"), "{text}");
        assert_eq!(infos.len(), 1, "{text}");
        assert!(
            infos[0].contains("spans reach the collector again"),
            "{text}"
        );
    }
}
