//! Results: rows of named figures, printed as a table and written as JSON.

use serde_json::{json, Map, Value};
use std::io::Write;

/// One measurement: a scenario, a case, and its figures in the order they were set.
#[derive(Debug, Clone)]
pub struct Row {
    pub scenario: String,
    pub case: String,
    pub fields: Vec<(String, Value)>,
}

impl Row {
    pub fn new(scenario: impl Into<String>, case: impl Into<String>) -> Self {
        Row {
            scenario: scenario.into(),
            case: case.into(),
            fields: Vec::new(),
        }
    }

    pub fn set(&mut self, name: &str, value: impl Into<Value>) {
        self.fields.push((name.to_owned(), value.into()));
    }
}

#[derive(Debug, Default)]
pub struct Report {
    pub rows: Vec<Row>,
}

impl Report {
    /// Adds a row and prints it at once, so a long run shows progress.
    pub fn push(&mut self, row: Row) {
        let mut out = std::io::stdout().lock();
        let figures = row
            .fields
            .iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join("  ");
        let _ = writeln!(out, "{:<11} | {:<58} | {figures}", row.scenario, row.case);
        let _ = out.flush();
        self.rows.push(row);
    }

    pub fn to_json(&self, header: Value) -> Value {
        let rows: Vec<Value> = self
            .rows
            .iter()
            .map(|r| {
                let mut m = Map::new();
                m.insert("scenario".into(), json!(r.scenario));
                m.insert("case".into(), json!(r.case));
                for (k, v) in &r.fields {
                    m.insert(k.clone(), v.clone());
                }
                Value::Object(m)
            })
            .collect();
        json!({ "run": header, "results": rows })
    }
}

pub fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|s| s.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

pub fn loadavg_1m() -> f64 {
    loadavg()
        .split_whitespace()
        .next()
        .and_then(|s| s.parse().ok())
        .unwrap_or(f64::NAN)
}

/// The machine: CPUs, model, memory, kernel.
pub fn machine() -> Value {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_gib = meminfo
        .lines()
        .find(|l| l.starts_with("MemTotal:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<f64>().ok())
        .map_or(0.0, |kb| (kb / 1024.0 / 1024.0 * 10.0).round() / 10.0);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_owned())
        .unwrap_or_default();
    json!({
        "cpus": std::thread::available_parallelism().map_or(0, |n| n.get()),
        "cpu_model": model,
        "memory_gib": mem_gib,
        "kernel": kernel,
    })
}
