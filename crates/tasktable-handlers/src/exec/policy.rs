//! Which programs an `exec` task may start.

use super::ExecPayload;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// Which programs [`ExecHandler`](super::ExecHandler) may start. Required, because running
/// commands from payloads lets whoever can submit tasks run code on the worker.
#[derive(Debug, Clone)]
pub struct ExecPolicy {
    /// `None`: any program.
    allowed: Option<BTreeSet<String>>,
}

impl ExecPolicy {
    /// Only these programs, matched exactly against the payload's `command[0]`:
    ///
    /// - a bare name (`"convert"`) is looked up on the worker's own `PATH`, never on a
    ///   `PATH` the payload sets in `env`;
    /// - a path (`"/opt/jobs/report.sh"`) is run as it is; a relative one is taken from the
    ///   worker's working directory, not from the payload's `cwd`.
    ///
    /// `"convert"` and `"/usr/bin/convert"` are different entries. Payloads may not set
    /// environment variables that make the dynamic loader load other code (`LD_*`,
    /// `DYLD_*`). A program that runs what its arguments say (`sh`, `bash`, `python`,
    /// `env`, `xargs`, ...) lets a payload run anything: allowing it is allowing any.
    pub fn allow<I, S>(programs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecPolicy {
            allowed: Some(programs.into_iter().map(Into::into).collect()),
        }
    }

    /// Any program, with any environment. Only for deployments where everyone who can
    /// submit tasks may already run code on the workers.
    pub fn allow_any() -> Self {
        ExecPolicy { allowed: None }
    }

    /// The program to start for this payload, or why it may not run.
    pub(super) fn program(&self, payload: &ExecPayload) -> Result<OsString, String> {
        let Some(name) = payload.command.first() else {
            return Err("command must name a program".into());
        };
        let Some(allowed) = &self.allowed else {
            return Ok(name.into());
        };
        if !allowed.contains(name) {
            return Err(format!(
                "program {name:?} is not on this worker's exec allow-list; to run it, add \
                 {name:?} to the programs the worker allows (ExecPolicy::allow)"
            ));
        }
        if let Some(var) = payload.env.keys().find(|k| loader_variable(k)) {
            return Err(format!(
                "env {var:?} is not allowed: it changes which code an allowed program loads"
            ));
        }
        if name.contains('/') {
            return std::path::absolute(name)
                .map(PathBuf::into_os_string)
                .map_err(|e| format!("cannot resolve {name:?}: {e}"));
        }
        find_on_path(name)
            .map(PathBuf::into_os_string)
            .ok_or_else(|| format!("program {name:?} is not on the worker's PATH"))
    }
}

fn loader_variable(name: &str) -> bool {
    name.starts_with("LD_") || name.starts_with("DYLD_")
}

/// The first executable file called `name` in the worker's `PATH`.
fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(path: &Path) -> bool {
    path.metadata()
        .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(v: serde_json::Value) -> ExecPayload {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn an_allowed_name_is_resolved_on_the_workers_path_whatever_the_payload_says() {
        let policy = ExecPolicy::allow(["sh"]);
        let p = payload(json!({"command": ["sh"], "env": {"PATH": "/nowhere"}}));
        let program = PathBuf::from(policy.program(&p).unwrap());
        assert!(
            program.is_absolute() && program.ends_with("sh"),
            "{program:?}"
        );
    }

    #[test]
    fn a_program_not_on_the_list_is_refused_with_how_to_allow_it() {
        let policy = ExecPolicy::allow(["cat"]);
        for command in [json!(["/bin/cat"]), json!(["rm", "-rf", "/"])] {
            let err = policy
                .program(&payload(json!({"command": command})))
                .unwrap_err();
            assert!(err.contains("ExecPolicy::allow"), "{err}");
        }
    }

    #[test]
    fn loader_variables_are_refused_under_an_allow_list_only() {
        let p = payload(json!({"command": ["cat"], "env": {"LD_PRELOAD": "/tmp/x.so"}}));
        let err = ExecPolicy::allow(["cat"]).program(&p).unwrap_err();
        assert!(err.contains("LD_PRELOAD"), "{err}");
        assert_eq!(ExecPolicy::allow_any().program(&p).unwrap(), "cat");
    }

    #[test]
    fn an_empty_command_is_refused() {
        let err = ExecPolicy::allow_any()
            .program(&payload(json!({"command": []})))
            .unwrap_err();
        assert!(err.contains("command"), "{err}");
    }
}
