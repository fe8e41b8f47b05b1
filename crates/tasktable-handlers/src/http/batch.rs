//! The `http_batch` handler: a batch whose items are HTTP calls, so that the binary alone
//! runs a batch for a service in any language. Each item is one `POST` of
//! `{"index": i, "data": ...}` to the batch's URL, under the same [`HttpPolicy`] and the
//! same reading of the answer as the `http` handler.

use super::request::{HttpMethod, Prepared};
use super::{HttpHandler, HttpPayload};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use tasktable_runtime::{BatchContext, BatchHandler, HandlerError, Item};

/// The data of an `http_batch` batch (its task's payload).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpBatchData {
    /// `http://` or `https://`: every item is a `POST` here.
    pub url: String,
    /// Sent with every item; never shown in errors, redacted for readers.
    #[serde(default)]
    pub headers: BTreeMap<String, String>,
    /// Sent with every item as `data`.
    #[serde(default)]
    pub data: Value,
    /// How long one item's request may take (default 30 s).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// Runs batches of kind `http_batch` through an [`HttpHandler`]'s client and policy.
///
/// A 2xx answer ends the item; one whose JSON body holds `"past_end": true` says the index
/// is past the last item (an open-ended batch ends there). A 5xx, 429 or 408 answer, a
/// connection failure or a timeout is retried as the batch's item retries say (after the
/// answer's `Retry-After` in seconds, when it has one); any other answer, or an address
/// the policy refuses, fails the item for good at once.
#[derive(Debug, Clone)]
pub struct HttpBatchHandler {
    http: HttpHandler,
}

impl HttpBatchHandler {
    pub fn new(http: HttpHandler) -> Self {
        HttpBatchHandler { http }
    }
}

impl BatchHandler for HttpBatchHandler {
    const KIND: &'static str = "http_batch";
    type Data = HttpBatchData;

    async fn item(
        &self,
        _ctx: &BatchContext,
        index: u64,
        data: &HttpBatchData,
    ) -> Result<Item, HandlerError> {
        let mut secrets: Vec<String> = data.headers.values().cloned().collect();
        secrets.extend(
            tasktable_core::url::parse_http(&data.url)
                .ok()
                .and_then(|url| url.password().map(str::to_owned)),
        );
        let payload = HttpPayload {
            url: data.url.clone(),
            method: HttpMethod::default(),
            headers: data.headers.clone(),
            body: Some(json!({"index": index, "data": data.data})),
            timeout_ms: data.timeout_ms,
        };
        let request = Prepared::new(payload, None)
            .map_err(|message| super::Failure::Permanent(message).into_error(&secrets))?;
        let answer = self
            .http
            .send(request)
            .await
            .map_err(|f| f.into_error(&secrets))?;
        Ok(if answer.body.get("past_end") == Some(&Value::Bool(true)) {
            Item::PastEnd
        } else {
            Item::Done
        })
    }
}
