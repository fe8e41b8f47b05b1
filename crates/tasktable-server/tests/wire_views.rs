//! The views the API answers with (`tasktable_wire`), held against the OpenAPI document
//! field by field: each view's fields are exactly its schema's properties, and each value
//! has a type its property allows. Every sample sets every field, so no field can hide
//! behind a null.

#![recursion_limit = "256"]

use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use std::collections::BTreeSet;
use tasktable_wire::{
    AttemptView, BackoffSpec, BatchView, ItemFailureView, RunView, ScheduleView, TaskView,
    TemplateView, WaitingView,
};

const DOCUMENT: &str = include_str!("../openapi.json");

fn schema(name: &str) -> Value {
    let doc: Value = serde_json::from_str(DOCUMENT).expect("valid JSON");
    doc.pointer(&format!("/components/schemas/{name}"))
        .unwrap_or_else(|| panic!("the document has no schema {name}"))
        .clone()
}

fn backoff() -> Value {
    json!({"initial_ms": 1000, "multiplier": 2.0, "max_ms": 60000, "jitter": 0.1})
}

fn task() -> Value {
    let t = "2030-01-01T00:00:00Z";
    json!({
        "id": 7, "kind": "k", "queue": "q", "state": "running", "payload": {"a": 1},
        "result": {"r": 1}, "checkpoint": {"c": 1}, "progress": {"p": 1}, "key": "key",
        "idempotency_key": "idem", "priority": 3, "run_at": t, "attempt": 2,
        "max_attempts": 5, "backoff": backoff(), "timeout_ms": 1000, "lease_token": 4,
        "lease_expires_at": t, "deadline_at": t, "worker_id": "w", "worker_host": "h",
        "last_error": "e", "created_at": t, "updated_at": t, "started_at": t,
        "finished_at": t, "schedule_id": 9, "slot_at": t, "target": {"workers": ["w"]},
        "affinity_ms": 500, "affinity_until": t, "copies": 3, "at_once": 2, "repeat": true,
        "joining": false, "max_failed_runs": 1, "runs_active": 1, "runs_succeeded": 1,
        "runs_failed": 0, "created_by": {"kind": "token", "name": "ops", "role": "operator"},
        "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
    })
}

fn template() -> Value {
    json!({
        "kind": "k", "queue": "q", "payload": {"a": 1}, "key": "key", "priority": 0,
        "max_attempts": 5, "backoff": backoff(), "timeout_ms": 1000,
        "target": {"groups": ["g"]},
    })
}

/// `sample` read as `T` and written again: what the server sends for it.
fn written<T: Serialize + DeserializeOwned>(sample: Value) -> Map<String, Value> {
    let view: T = serde_json::from_value(sample).expect("the sample is a view");
    match serde_json::to_value(view).expect("a view serializes") {
        Value::Object(fields) => fields,
        other => panic!("a view is an object, not {other}"),
    }
}

/// The JSON types a property allows, or none when it names another schema.
fn types(property: &Value) -> Option<BTreeSet<String>> {
    match property.get("type")? {
        Value::String(t) => Some([t.clone()].into()),
        Value::Array(ts) => Some(
            ts.iter()
                .filter_map(|t| t.as_str().map(String::from))
                .collect(),
        ),
        _ => None,
    }
}

fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn check(name: &str, fields: Map<String, Value>) {
    let schema = schema(name);
    let properties = schema["properties"]
        .as_object()
        .unwrap_or_else(|| panic!("schema {name} has no properties"));
    let documented: BTreeSet<&String> = properties.keys().collect();
    let sent: BTreeSet<&String> = fields.keys().collect();
    assert_eq!(
        sent, documented,
        "{name}: the view's fields and the document's properties differ"
    );
    for (field, value) in &fields {
        assert!(
            !value.is_null(),
            "{name}.{field}: the sample leaves it null"
        );
        if let Some(allowed) = types(&properties[field]) {
            let t = json_type(value);
            let fits = allowed.contains(t) || (t == "integer" && allowed.contains("number"));
            assert!(
                fits,
                "{name}.{field} is {t}, the document allows {allowed:?}"
            );
        }
    }
    if let Some(required) = schema["required"].as_array() {
        for field in required {
            let field = field.as_str().expect("a name");
            assert!(fields.contains_key(field), "{name}.{field} is required");
        }
    }
}

#[test]
fn every_view_is_its_schema_field_by_field() {
    let t = "2030-01-01T00:00:00Z";
    check("Backoff", written::<BackoffSpec>(backoff()));
    check("Task", written::<TaskView>(task()));
    check(
        "Run",
        written::<RunView>(json!({
            "run": 1, "worker_id": "w", "worker_host": "h", "state": "running",
            "lease_token": 2, "lease_expires_at": t, "deadline_at": t, "checkpoint": {"c": 1},
            "progress": {"p": 1}, "result": {"r": 1}, "error": "e", "resumed_from": 1,
            "started_at": t, "finished_at": t,
        })),
    );
    check(
        "Attempt",
        written::<AttemptView>(json!({
            "attempt": 1, "worker_id": "w", "worker_host": "h", "started_at": t,
            "finished_at": t, "outcome": "failed", "error": "e",
        })),
    );
    check(
        "Batch",
        written::<BatchView>(json!({
            "task": task(), "status": "running", "control": "run", "items": 100,
            "parallelism": 4, "rate": 10, "window": 8, "error_budget": 5, "item_retries": 2,
            "item_backoff_ms": 100, "prestart_timeout_ms": 1000, "low_water": 10, "end": 100,
            "errors": 1, "items_per_second": 2.5, "eta_seconds": 36.0, "data_version": 1,
            "saved_at": t, "created_at": t,
        })),
    );
    check(
        "ItemFailure",
        written::<ItemFailureView>(json!({
            "item": 3, "error": "e", "tries": 2, "failed_at": t,
        })),
    );
    check("Template", written::<TemplateView>(template()));
    check(
        "WaitReason",
        written::<WaitingView>(json!({"reason": "queue_paused", "text": "queue \"q\" is paused"})),
    );
    check(
        "Schedule",
        written::<ScheduleView>(json!({
            "id": 1, "name": "nightly",
            "recurrence": {"type": "cron", "expr": "0 2 * * *", "zone": "UTC"},
            "template": template(), "missed": {"policy": "skip"}, "overlap": "allow",
            "enabled": true, "covered_until": t, "next_run_at": t, "last_task_id": 4,
            "last_slot_at": t, "created_at": t, "updated_at": t,
            "upcoming": ["2030-01-02T02:00:00+00:00"],
        })),
    );
}

#[test]
fn a_view_missing_a_documented_field_is_found() {
    let mut fields = written::<AttemptView>(json!({
        "attempt": 1, "worker_id": "w", "worker_host": "h",
        "started_at": "2030-01-01T00:00:00Z", "finished_at": "2030-01-01T00:00:00Z",
        "outcome": "failed", "error": "e",
    }));
    fields.remove("error");
    let missed = std::panic::catch_unwind(|| check("Attempt", fields));
    assert!(missed.is_err(), "a field the document lists was not missed");
}
