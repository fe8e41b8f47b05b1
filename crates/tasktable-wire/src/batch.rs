//! A batch and its failed items, as the API shows them.

use crate::task::{millis, TaskView};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use tasktable_store::{Batch, ItemFailure};

/// A batch as the API shows it (`Batch` in the OpenAPI document).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BatchView {
    pub task: TaskView,
    pub status: String,
    pub control: String,
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
            status: b.status.as_str().to_owned(),
            control: b.control.as_str().to_owned(),
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
