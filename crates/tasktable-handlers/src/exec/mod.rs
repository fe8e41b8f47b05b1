//! The `exec` handler: one command per attempt, in a process group of its own, its exit
//! status sorted into success, retry or permanent failure.

mod policy;
mod process;

pub use policy::ExecPolicy;

use crate::captured::{last_chars, SNIPPET_CHARS};
use process::{Exited, Running};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::io;
use std::os::unix::process::ExitStatusExt;
use tasktable_runtime::{Handler, HandlerError, StopReason, TaskContext};
use tokio::process::Command;

/// Exit code meaning "this will never work; do not retry" (`EX_DATAERR` in sysexits.h:
/// the input was wrong). The task fails at once, whatever attempts remain.
pub const EXIT_PERMANENT: i32 = 65;
/// Exit code meaning "temporary failure, try again later" (`EX_TEMPFAIL`). Retried after
/// the task's backoff, like every other non-zero exit except [`EXIT_PERMANENT`].
pub const EXIT_TEMPFAIL: i32 = 75;

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
    /// Added to the worker's environment.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Working directory; default the worker's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

impl ExecPayload {
    /// Runs `command` with no input, in the worker's environment and directory.
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

/// Runs tasks of kind `exec`: starts the command an [`ExecPayload`] names, if its
/// [`ExecPolicy`] allows it.
///
/// Exit 0 succeeds with an [`ExecResult`]. [`EXIT_PERMANENT`] (65) fails the task at once.
/// Any other exit code, and death by a signal, is retried after the task's backoff; the
/// error names the code or signal and ends with the tail of stderr.
///
/// The command leads a process group of its own. The whole group is killed with SIGKILL
/// when the command exits (so nothing it started outlives the attempt), when the task's
/// timeout passes, and when the handler is told to stop (cancelled, lease lost, worker
/// shutting down). A process that leaves the group (`setsid`, daemons) escapes this.
#[derive(Debug, Clone)]
pub struct ExecHandler {
    policy: ExecPolicy,
}

impl ExecHandler {
    pub fn new(policy: ExecPolicy) -> Self {
        ExecHandler { policy }
    }
}

impl Handler for ExecHandler {
    const KIND: &'static str = "exec";
    type Payload = ExecPayload;
    type Output = ExecResult;

    async fn run(
        &self,
        ctx: TaskContext,
        payload: ExecPayload,
    ) -> Result<ExecResult, HandlerError> {
        let program = self
            .policy
            .program(&payload)
            .map_err(HandlerError::permanent)?;
        let mut command = Command::new(&program);
        command.args(&payload.command[1..]).envs(&payload.env);
        if let Some(cwd) = &payload.cwd {
            command.current_dir(cwd);
        }
        let input = payload.stdin.map(|value| match value {
            Value::String(text) => text.into_bytes(),
            other => other.to_string().into_bytes(),
        });
        let running = Running::spawn(command, input.is_some())
            .map_err(|e| cannot_start(&payload.command[0], e))?;
        tokio::select! {
            exited = running.finish(input) => match exited {
                Ok(exited) => judge(exited),
                Err(e) => Err(HandlerError::retry(format!("talking to the command: {e}"))),
            },
            // Returning drops `running`, which kills the process group.
            reason = ctx.stopped() => Err(stopped(reason)),
        }
    }
}

fn judge(exited: Exited) -> Result<ExecResult, HandlerError> {
    let Exited {
        status,
        stdout,
        stderr,
    } = exited;
    let stderr = stderr.text();
    let with_stderr = |what: String| {
        let tail = last_chars(stderr.trim_end(), SNIPPET_CHARS);
        if tail.is_empty() {
            what
        } else {
            format!("{what}; stderr: {tail}")
        }
    };
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(ExecResult {
            exit_code: 0,
            stdout: stdout.json_or_text(),
            stderr,
        }),
        (Some(EXIT_PERMANENT), _) => Err(HandlerError::permanent(with_stderr(format!(
            "exit code {EXIT_PERMANENT} (permanent failure, not retried)"
        )))),
        (Some(code), _) => Err(HandlerError::retry(with_stderr(format!(
            "exit code {code}"
        )))),
        (None, signal) => {
            let name = signal
                .and_then(|s| nix::sys::signal::Signal::try_from(s).ok())
                .map_or_else(|| format!("{signal:?}"), |s| s.as_str().to_owned());
            Err(HandlerError::retry(with_stderr(format!(
                "killed by signal {name}"
            ))))
        }
    }
}

/// A program that does not exist or may not be executed will not start on a retry either.
fn cannot_start(program: &str, e: io::Error) -> HandlerError {
    let message = format!("cannot start {program:?}: {e}");
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied => {
            HandlerError::permanent(message)
        }
        _ => HandlerError::retry(message),
    }
}

/// The runtime records nothing for a stopped attempt, so this only has to be an error.
fn stopped(reason: StopReason) -> HandlerError {
    let message = format!("stopped ({reason:?}); the command's process group was killed");
    match reason {
        StopReason::Cancelled => HandlerError::cancel(message),
        StopReason::LeaseLost | StopReason::Shutdown => HandlerError::retry(message),
    }
}
