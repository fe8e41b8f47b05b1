//! The operator commands. Each talks to a running server through [`Api`](crate::client::Api)
//! and prints the answer for people, or as the server's JSON with `--json`.

pub mod audit;
pub mod batch;
pub mod change;
pub mod list;
pub mod policy;
pub mod purge;
pub mod queue;
pub mod schedule;
pub mod show;
pub mod submit;
pub mod token;
pub mod watch;
pub mod workers;

use clap::builder::PossibleValuesParser;
use clap::Args;
use serde_json::{json, Map, Value};
use tasktable::TaskState;

/// Which tasks: the filter of `ls` and of bulk changes. Set fields must all match.
#[derive(Args, Debug, Default, Clone)]
pub struct FilterArgs {
    /// Only tasks of this queue.
    #[arg(long)]
    pub queue: Option<String>,
    /// Only tasks of this kind.
    #[arg(long)]
    pub kind: Option<String>,
    /// Only tasks in these states (repeat, or separate with commas).
    #[arg(long, value_delimiter = ',', value_parser = states())]
    pub state: Vec<String>,
    /// Only tasks with this business key.
    #[arg(long)]
    pub key: Option<String>,
    /// Only tasks whose last error contains this text (case-sensitive).
    #[arg(long, value_name = "TEXT")]
    pub error: Option<String>,
}

fn states() -> PossibleValuesParser {
    PossibleValuesParser::new(TaskState::ALL.map(TaskState::as_str))
}

impl FilterArgs {
    pub fn is_empty(&self) -> bool {
        self.queue.is_none()
            && self.kind.is_none()
            && self.state.is_empty()
            && self.key.is_none()
            && self.error.is_none()
    }

    /// As `GET /api/v1/tasks` query parameters.
    pub fn query(&self) -> Vec<(&'static str, String)> {
        let mut query = Vec::new();
        let mut push = |name, value: &Option<String>| {
            if let Some(v) = value {
                query.push((name, v.clone()));
            }
        };
        push("queue", &self.queue);
        push("kind", &self.kind);
        push("key", &self.key);
        push("error", &self.error);
        if !self.state.is_empty() {
            query.push(("state", self.state.join(",")));
        }
        query
    }

    /// As the `filter` object of a bulk change.
    pub fn body(&self) -> Value {
        let mut filter = Map::new();
        let mut put = |name: &str, value: &Option<String>| {
            if let Some(v) = value {
                filter.insert(name.into(), json!(v));
            }
        };
        put("queue", &self.queue);
        put("kind", &self.kind);
        put("key", &self.key);
        put("error_contains", &self.error);
        if !self.state.is_empty() {
            filter.insert("states".into(), json!(self.state));
        }
        Value::Object(filter)
    }

    /// For people: `state failed, kind email`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        let mut add = |name: &str, value: &Option<String>| {
            if let Some(v) = value {
                parts.push(format!("{name} {v:?}"));
            }
        };
        add("queue", &self.queue);
        add("kind", &self.kind);
        add("key", &self.key);
        add("error containing", &self.error);
        if !self.state.is_empty() {
            parts.push(format!("state {}", self.state.join(" or ")));
        }
        parts.join(", ")
    }
}
