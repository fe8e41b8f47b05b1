//! The `exec` handler: one command per attempt, in a process group of its own, started
//! only as its [`ExecPolicy`] allows, as its [`ExecUser`] and without privileges, its exit
//! status sorted into success, retry or permanent failure.

mod confine;
mod environment;
mod payload;
mod policy;
mod process;
mod user;
mod workdir;

pub use environment::{EnvName, INHERITED_ENV};
pub use payload::{ExecPayload, ExecResult};
pub use policy::ExecPolicy;
pub use user::{can_switch_users, ExecUser};

use crate::captured::{last_chars, SNIPPET_CHARS};
use crate::secrets::{redact, redact_cut};
use process::{Exited, Running};
use serde_json::Value;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::time::Duration;
use tasktable_runtime::{Handler, HandlerError, StopReason, TaskContext};
use tokio::process::Command;

/// Exit code meaning "this will never work; do not retry" (`EX_DATAERR` in sysexits.h:
/// the input was wrong). The task fails at once, whatever attempts remain.
pub const EXIT_PERMANENT: i32 = 65;
/// Exit code meaning "temporary failure, try again later" (`EX_TEMPFAIL`). Retried after
/// the task's backoff, like every other non-zero exit except [`EXIT_PERMANENT`].
pub const EXIT_TEMPFAIL: i32 = 75;

/// How long a stopped command's process group has between SIGTERM and SIGKILL, unless
/// [`ExecHandler::kill_grace`] says otherwise.
pub const DEFAULT_KILL_GRACE: Duration = Duration::from_secs(5);

/// Runs tasks of kind `exec`: starts the command an [`ExecPayload`] names, if its
/// [`ExecPolicy`] allows it.
///
/// Exit 0 succeeds with an [`ExecResult`]. [`EXIT_PERMANENT`] (65) fails the task at once.
/// Any other exit code, and death by a signal, is retried after the task's backoff; the
/// error names the code or signal and ends with the tail of stderr.
///
/// The command leads a process group of its own. When the command exits, the rest of the
/// group is killed with SIGKILL (so nothing it started outlives the attempt), and output
/// still held open by a process outside the group is read for 2 seconds at most. When the
/// task's timeout passes or the handler is told to stop (cancelled, lease lost, worker
/// shutting down), the attempt ends at once and the group gets SIGTERM, then SIGKILL after
/// the kill grace. A process that leaves the group (`setsid`, daemons) escapes the
/// signals, but cannot keep the attempt running.
///
/// Every command starts with `no_new_privs` set and no capability (its bounding set
/// emptied too when it still has the capabilities to do so), so neither a set-user-ID
/// program nor file capabilities give it more than it started with. It runs as the
/// worker's own user unless [`ExecHandler::run_as`] names another.
#[derive(Debug, Clone)]
pub struct ExecHandler {
    policy: ExecPolicy,
    kill_grace: Duration,
    user: Option<ExecUser>,
}

impl ExecHandler {
    pub fn new(policy: ExecPolicy) -> Self {
        ExecHandler {
            policy,
            kill_grace: DEFAULT_KILL_GRACE,
            user: None,
        }
    }

    /// Runs every command as `user`, with its primary group and no supplementary group,
    /// so it cannot read what only the worker's user may (its database file, its tokens
    /// file, `/proc/<pid>/environ`). Starting a command as another user takes a worker
    /// that [can switch users](can_switch_users); otherwise every attempt fails. A
    /// program or `cwd` the user may not reach fails the attempt, saying so.
    pub fn run_as(mut self, user: ExecUser) -> Self {
        self.user = Some(user);
        self
    }

    /// How long a stopped command's process group has between SIGTERM and SIGKILL
    /// (default [`DEFAULT_KILL_GRACE`]). The attempt does not wait for it.
    pub fn kill_grace(mut self, grace: Duration) -> Self {
        self.kill_grace = grace;
        self
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
        let launch = self
            .policy
            .launch(&payload)
            .map_err(HandlerError::permanent)?;
        let mut command = Command::new(&launch.program);
        command
            .args(&payload.command[1..])
            .env_clear()
            .envs(launch.env);
        if let Some(cwd) = &launch.cwd {
            command.current_dir(cwd);
        }
        confine::confine(&mut command, self.user.as_ref());
        let input = payload.stdin.map(|value| match value {
            Value::String(text) => text.into_bytes(),
            other => other.to_string().into_bytes(),
        });
        // A command may print its variables; their values are secrets like headers are.
        let secrets: Vec<&str> = payload.env.values().map(String::as_str).collect();
        let running = Running::spawn(command, input.is_some(), self.kill_grace).map_err(|e| {
            let user = self.user.as_ref().filter(|user| !user.is_current());
            cannot_start(&payload.command[0], user, launch.cwd.as_deref(), e)
        })?;
        tokio::select! {
            exited = running.finish(input) => match exited {
                Ok(exited) => judge(exited, &secrets),
                Err(e) => Err(HandlerError::retry(format!("talking to the command: {e}"))),
            },
            // Returning drops `running`, which stops the process group.
            reason = ctx.stopped() => Err(stopped(reason)),
        }
    }
}

fn judge(exited: Exited, secrets: &[&str]) -> Result<ExecResult, HandlerError> {
    let Exited {
        status,
        stdout,
        stderr,
        abandoned_pipes,
    } = exited;
    // What is kept of the output is cut from it, and readers see it: the variables'
    // values are hidden, and so is a piece of one at a cut edge.
    let stderr_cut = stderr.is_dropped();
    let mut stderr = redact_cut(stderr.text(), secrets, stderr_cut, false);
    if abandoned_pipes {
        stderr.push_str(ABANDONED_PIPES);
    }
    let with_stderr = |what: String| {
        let kept = stderr.trim_end();
        let tail = match last_chars(kept, SNIPPET_CHARS) {
            cut if kept.chars().count() > SNIPPET_CHARS => {
                let rest = cut.trim_start_matches("...").to_owned();
                format!("...{}", redact_cut(rest, secrets, true, false))
            }
            whole => whole,
        };
        let message = if tail.is_empty() {
            what
        } else {
            format!("{what}; stderr: {tail}")
        };
        redact(message, secrets.iter().copied())
    };
    match (status.code(), status.signal()) {
        (Some(0), _) => Ok(ExecResult {
            exit_code: 0,
            stdout: match stdout.json_or_text() {
                Value::String(text) => {
                    Value::String(redact_cut(text, secrets, false, stdout.is_truncated()))
                }
                json => redact_value(json, secrets),
            },
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

/// `value` with every secret hidden in each of its strings, object keys and numbers (a
/// number holding one becomes the string that hides it).
fn redact_value(value: Value, secrets: &[&str]) -> Value {
    match value {
        Value::String(text) => Value::String(redact(text, secrets.iter().copied())),
        Value::Number(n) => {
            let text = n.to_string();
            let hidden = redact(text.clone(), secrets.iter().copied());
            if hidden == text {
                Value::Number(n)
            } else {
                Value::String(hidden)
            }
        }
        Value::Array(items) => Value::Array(
            items
                .into_iter()
                .map(|v| redact_value(v, secrets))
                .collect(),
        ),
        Value::Object(fields) => Value::Object(
            fields
                .into_iter()
                .map(|(k, v)| (redact(k, secrets.iter().copied()), redact_value(v, secrets)))
                .collect(),
        ),
        other => other,
    }
}

/// Added to the kept stderr when output was cut short, so whoever reads the result knows.
const ABANDONED_PIPES: &str = "\n[tasktable: stopped reading output 2 s after the command \
exited, because a process outside its process group kept the pipes open]\n";

/// A program that does not exist or may not be executed will not start on a retry either,
/// nor will arguments the system cannot pass (a NUL byte). `user`: the user the command
/// was to run as, when not the worker's own, who may be the one refused.
fn cannot_start(
    program: &str,
    user: Option<&ExecUser>,
    cwd: Option<&Path>,
    e: io::Error,
) -> HandlerError {
    let mut message = format!("cannot start {program:?}: {e}");
    match (user, e.raw_os_error()) {
        (Some(user), Some(libc::EACCES)) => {
            let dir = cwd.map_or_else(
                || "the worker's working directory".to_owned(),
                |cwd| format!("{:?}", cwd.display().to_string()),
            );
            message.push_str(&format!(
                "; commands run as user {user}, who must be allowed to execute the program \
                 and to enter {dir} and every directory above both"
            ));
        }
        (Some(user), Some(libc::EPERM)) => message.push_str(&format!(
            "; this worker may not start commands as user {user}: that takes root, or \
             CAP_SETUID and CAP_SETGID"
        )),
        _ => {}
    }
    match e.kind() {
        io::ErrorKind::NotFound | io::ErrorKind::PermissionDenied | io::ErrorKind::InvalidInput => {
            HandlerError::permanent(message)
        }
        _ => HandlerError::retry(message),
    }
}

/// The runtime records nothing for a stopped attempt, so this only has to be an error.
fn stopped(reason: StopReason) -> HandlerError {
    let message = format!(
        "stopped ({reason:?}); the command's process group was sent SIGTERM, and SIGKILL \
         follows after the kill grace"
    );
    match reason {
        StopReason::Cancelled => HandlerError::cancel(message),
        StopReason::LeaseLost | StopReason::Retargeted | StopReason::Shutdown => {
            HandlerError::retry(message)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::redact_value;
    use serde_json::json;

    #[test]
    fn json_output_hides_the_variables_in_every_string_and_key() {
        let out = json!({"token": "s3cret-v", "s3cret-v": [1, "a s3cret-v b"], "n": 2});
        assert_eq!(
            redact_value(out, &["s3cret-v"]),
            json!({"token": "[redacted]", "[redacted]": [1, "a [redacted] b"], "n": 2})
        );
        let numbers = json!({"k": 987654321987_u64, "n": 12});
        assert_eq!(
            redact_value(numbers, &["987654321987"]),
            json!({"k": "[redacted]", "n": 12})
        );
    }
}
