//! An OTLP/HTTP trace receiver of the test's own: it decodes what exporters send to
//! `/v1/traces` (protobuf or JSON, by content type), keeps every span, and wakes whoever
//! waits for one. `/hook` answers 200, for the `http` handler to call.

#![allow(dead_code)]

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::IntoResponse;
use axum::routing::post;
use axum::Router;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use opentelemetry_proto::tonic::common::v1::KeyValue;
use prost::Message;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// One span as received.
#[derive(Debug, Clone)]
pub struct SpanSeen {
    pub name: String,
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// OTLP's SpanKind: 1 internal, 2 server, 3 client, 4 producer, 5 consumer.
    pub kind: i32,
    /// OTLP's status code: 0 unset, 1 ok, 2 error.
    pub status: i32,
    pub attributes: HashMap<String, Value>,
    /// The resource's `service.name`.
    pub service: String,
    /// The content type of the request that brought it.
    pub content_type: String,
}

#[derive(Default)]
struct Seen {
    spans: Mutex<Vec<SpanSeen>>,
    arrived: Condvar,
}

pub struct Receiver {
    /// The base URL, for `OTEL_EXPORTER_OTLP_ENDPOINT`.
    pub url: String,
    seen: Arc<Seen>,
    _runtime: tokio::runtime::Runtime,
}

impl Receiver {
    pub fn start() -> Receiver {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("runtime");
        let seen = Arc::new(Seen::default());
        let app = Router::new()
            .route("/v1/traces", post(receive))
            .route("/hook", post(|| async { "ok" }))
            .with_state(seen.clone());
        let listener = runtime
            .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        runtime.spawn(async move { axum::serve(listener, app).await });
        Receiver {
            url,
            seen,
            _runtime: runtime,
        }
    }

    /// Waits, at most a minute, until `found` finds what it looks for in the spans
    /// received so far; woken by each arrival.
    pub fn wait_for<T>(&self, what: &str, found: impl Fn(&[SpanSeen]) -> Option<T>) -> T {
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut spans = self.seen.spans.lock().unwrap();
        loop {
            if let Some(hit) = found(&spans) {
                return hit;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            assert!(!left.is_zero(), "{what}: not received; spans: {spans:#?}");
            spans = self.seen.arrived.wait_timeout(spans, left).unwrap().0;
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<SpanSeen> {
        self.seen.spans.lock().unwrap().clone()
    }
}

async fn receive(
    State(seen): State<Arc<Seen>>,
    headers: HeaderMap,
    body: Bytes,
) -> impl IntoResponse {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let request = if content_type.starts_with("application/json") {
        serde_json::from_slice::<ExportTraceServiceRequest>(&body).map_err(|e| e.to_string())
    } else {
        ExportTraceServiceRequest::decode(body).map_err(|e| e.to_string())
    };
    let request = match request {
        Ok(request) => request,
        Err(e) => return (StatusCode::BAD_REQUEST, e).into_response(),
    };
    let mut received = Vec::new();
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .map(|r| attributes(&r.attributes))
            .and_then(|a| a.get("service.name").cloned())
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                received.push(SpanSeen {
                    name: span.name,
                    trace_id: hex::encode(&span.trace_id),
                    span_id: hex::encode(&span.span_id),
                    parent_span_id: hex::encode(&span.parent_span_id),
                    kind: span.kind,
                    status: span.status.map(|s| s.code).unwrap_or(0),
                    attributes: attributes(&span.attributes),
                    service: service.clone(),
                    content_type: content_type.clone(),
                });
            }
        }
    }
    seen.spans.lock().unwrap().extend(received);
    seen.arrived.notify_all();
    // An empty ExportTraceServiceResponse, in the request's encoding.
    if content_type.starts_with("application/json") {
        ([(header::CONTENT_TYPE, "application/json")], "{}").into_response()
    } else {
        (
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            Vec::<u8>::new(),
        )
            .into_response()
    }
}

fn attributes(list: &[KeyValue]) -> HashMap<String, Value> {
    list.iter()
        .filter_map(|kv| {
            let value = match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(s) => Value::from(s.clone()),
                AnyValue::IntValue(i) => Value::from(*i),
                AnyValue::BoolValue(b) => Value::from(*b),
                AnyValue::DoubleValue(d) => Value::from(*d),
                other => Value::from(format!("{other:?}")),
            };
            Some((kv.key.clone(), value))
        })
        .collect()
}
