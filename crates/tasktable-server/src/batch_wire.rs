//! The JSON of batches: the `batch` object of a submit, a batch as the API shows it, and
//! an edit.

use crate::wire::TaskView;
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::Duration;
use tasktable_core::batch::BatchSpec;
use tasktable_store::{Batch, ItemFailure};

/// `"batch"` in a submit: what the batch asks for; every field may be left out.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchSpecWire {
    /// Items `0..items`; absent or null: open-ended.
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub items: Option<u64>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub parallelism: Option<u32>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub rate: Option<u32>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub window: Option<u64>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub error_budget: Option<u64>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub item_retries: Option<u32>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub item_backoff_ms: Option<u64>,
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub prestart_timeout_ms: Option<u64>,
}

impl BatchSpecWire {
    /// Core's spec, defaults filled in; the store checks the values.
    pub fn into_spec(self) -> BatchSpec {
        let d = BatchSpec::default();
        BatchSpec {
            items: self.items,
            parallelism: self.parallelism.unwrap_or(d.parallelism),
            rate: self.rate,
            window: self.window,
            error_budget: self.error_budget.unwrap_or(d.error_budget),
            item_retries: self.item_retries.unwrap_or(d.item_retries),
            item_backoff: self
                .item_backoff_ms
                .map_or(d.item_backoff, Duration::from_millis),
            prestart_timeout: self
                .prestart_timeout_ms
                .map_or(d.prestart_timeout, Duration::from_millis),
        }
    }
}

/// `PATCH /api/v1/batches/{id}`: a new error budget, new data, or both.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BatchEdit {
    #[serde(default, deserialize_with = "crate::whole::optional")]
    pub error_budget: Option<u64>,
    /// Any JSON but null (the batch's data is its task's payload); a null is kept, to
    /// be refused.
    #[serde(default, deserialize_with = "present")]
    pub data: Option<Value>,
}

/// A field that is present, null included.
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(d).map(Some)
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// A batch as the API shows it (`Batch` in the OpenAPI document).
#[derive(Debug, Clone, Serialize)]
pub struct BatchView {
    pub task: TaskView,
    pub status: &'static str,
    pub control: &'static str,
    pub items: Option<u64>,
    pub parallelism: u32,
    pub rate: Option<u32>,
    pub window: u64,
    pub error_budget: u64,
    pub item_retries: u32,
    pub item_backoff_ms: u64,
    pub prestart_timeout_ms: u64,
    pub low_water: u64,
    pub end: Option<u64>,
    pub errors: u64,
    pub items_per_second: Option<f64>,
    /// Seconds left at the last measured rate, when the end is known.
    pub eta_seconds: Option<f64>,
    pub data_version: u64,
    pub saved_at: Option<DateTime<Utc>>,
    pub created_at: DateTime<Utc>,
}

impl BatchView {
    pub fn new(b: Batch, task: TaskView) -> Self {
        let eta = tasktable_core::batch::eta(b.low_water, b.end, b.items_per_second);
        BatchView {
            task,
            status: b.status.as_str(),
            control: b.control.as_str(),
            items: b.spec.items,
            parallelism: b.spec.parallelism,
            rate: b.spec.rate,
            window: b.spec.window_size(),
            error_budget: b.spec.error_budget,
            item_retries: b.spec.item_retries,
            item_backoff_ms: millis(b.spec.item_backoff),
            prestart_timeout_ms: millis(b.spec.prestart_timeout),
            low_water: b.low_water,
            end: b.end,
            errors: b.errors,
            items_per_second: b.items_per_second,
            eta_seconds: eta.map(|d| d.as_secs_f64()),
            data_version: b.data_version,
            saved_at: b.saved_at,
            created_at: b.created_at,
        }
    }
}

/// An item that failed for good (`ItemFailure` in the OpenAPI document).
#[derive(Debug, Clone, Serialize)]
pub struct ItemFailureView {
    pub item: u64,
    pub error: String,
    pub tries: u32,
    pub failed_at: Option<DateTime<Utc>>,
}

impl From<ItemFailure> for ItemFailureView {
    fn from(f: ItemFailure) -> Self {
        ItemFailureView {
            item: f.item,
            error: f.error,
            tries: f.tries,
            failed_at: f.failed_at,
        }
    }
}
