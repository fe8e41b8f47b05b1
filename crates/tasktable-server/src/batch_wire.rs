//! The JSON of batches: the `batch` object of a submit, a batch as the API shows it, and
//! an edit.

use serde::Deserialize;
use serde_json::Value;
use std::time::Duration;
use tasktable_core::batch::BatchSpec;
pub use tasktable_wire::batch::*;

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
