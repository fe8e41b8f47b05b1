//! What an `exec` task asks for, and what it answers.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// What an `exec` task runs. Unknown fields are refused.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecPayload {
    /// The program and its arguments; not run through a shell.
    pub command: Vec<String>,
    /// Written to the command's stdin, which is then closed: a JSON string as its raw
    /// text, any other value as JSON. Absent or `null`: nothing is written and stdin is
    /// closed at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stdin: Option<Value>,
    /// Added to the command's environment. Under an allow-list, only names the worker
    /// allows. Readers of the task see the values redacted (see
    /// [`SECRET_FIELDS`](crate::SECRET_FIELDS)).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory; default the worker's. Under an allow-list, only directories the
    /// worker allows, and those beneath them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl ExecPayload {
    /// Runs `command` with no input or variables of its own, in the worker's directory.
    pub fn new<I, S>(command: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecPayload {
            command: command.into_iter().map(Into::into).collect(),
            stdin: None,
            env: BTreeMap::new(),
            cwd: None,
        }
    }
}

/// Shows `env` by name only: values may be credentials.
impl fmt::Debug for ExecPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExecPayload")
            .field("command", &self.command)
            .field("stdin", &self.stdin)
            .field("env", &self.env.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .finish()
    }
}

/// The result of an `exec` task that exited with 0.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExecResult {
    pub exit_code: i32,
    /// Parsed when it is JSON, else text; at most the first 64 KiB, as text when cut.
    pub stdout: Value,
    /// The last 4 KiB.
    pub stderr: String,
}
