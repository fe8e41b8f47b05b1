//! What an `exec` task may do: which programs it may start, which environment variables
//! its payload may set, and in which directories it may start them.

use super::environment::{EnvName, EnvRules};
use super::workdir::workdir;
use super::ExecPayload;
use std::collections::BTreeSet;
use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What [`ExecHandler`](super::ExecHandler) may start, and how. Required, because running
/// commands from payloads lets whoever can submit tasks run code on the worker.
///
/// Every command, in either mode, starts with a minimal environment: the variables of the
/// worker's own listed in [`INHERITED_ENV`](super::INHERITED_ENV) and those added with
/// [`ExecPolicy::inherit_env`], then the payload's `env`. The rest of the worker's
/// environment (its database URL, its tokens) never reaches a command.
#[derive(Debug, Clone)]
pub struct ExecPolicy {
    /// `None`: any program.
    programs: Option<BTreeSet<String>>,
    env: EnvRules,
    dirs: Vec<PathBuf>,
}

/// What to start, once a payload is known to be allowed.
#[derive(Debug)]
pub(super) struct Launch {
    pub program: OsString,
    pub env: Vec<(OsString, OsString)>,
    /// `None`: the worker's working directory.
    pub cwd: Option<PathBuf>,
}

impl ExecPolicy {
    /// Only these programs, matched exactly against the payload's `command[0]`:
    ///
    /// - a bare name (`"convert"`) is looked up on the worker's own `PATH`, never on a
    ///   `PATH` the payload sets in `env`;
    /// - a path (`"/opt/jobs/report.sh"`) is run as it is; a relative one is taken from the
    ///   worker's working directory, not from the payload's `cwd`.
    ///
    /// `"convert"` and `"/usr/bin/convert"` are different entries. A payload may set no
    /// environment variable and no `cwd` until they are allowed with
    /// [`ExecPolicy::allow_env`] and [`ExecPolicy::allow_cwd`]; the loader's variables
    /// (`LD_*`, `DYLD_*`) it may never set. A program that runs what its arguments say
    /// (`sh`, `bash`, `python`, `env`, `xargs`, ...) lets a payload run anything: allowing
    /// it is allowing any.
    pub fn allow<I, S>(programs: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        ExecPolicy {
            programs: Some(programs.into_iter().map(Into::into).collect()),
            env: EnvRules::default(),
            dirs: Vec::new(),
        }
    }

    /// Any program, with any environment variables and in any directory the payload names.
    /// Only for deployments where everyone who can submit tasks may already run code on the
    /// workers: then no limit on variables or directories would stop them, since the
    /// command itself can do anything they could.
    pub fn allow_any() -> Self {
        ExecPolicy {
            programs: None,
            env: EnvRules::default(),
            dirs: Vec::new(),
        }
    }

    /// Lets payloads set these variables in `env`. Allowing one that changes what a
    /// program loads or runs (`PATH`, `BASH_ENV`, `ENV`, `NODE_OPTIONS`, `PERL5OPT`,
    /// `PYTHONSTARTUP`, `PYTHONPATH`, `RUBYOPT`, `JAVA_TOOL_OPTIONS`, ...) lets a payload
    /// run anything through an allowed program. `LD_*` and `DYLD_*` stay refused. No effect
    /// with [`ExecPolicy::allow_any`], which allows every name.
    pub fn allow_env(mut self, names: impl IntoIterator<Item = EnvName>) -> Self {
        self.env.settable.extend(names);
        self
    }

    /// Lets payloads name these directories, and any beneath them, as `cwd`. Compared as
    /// canonical paths, so neither `..` nor a symlink leads out of them. No effect with
    /// [`ExecPolicy::allow_any`], which allows every directory.
    pub fn allow_cwd<I, P>(mut self, dirs: I) -> Self
    where
        I: IntoIterator<Item = P>,
        P: Into<PathBuf>,
    {
        self.dirs.extend(dirs.into_iter().map(Into::into));
        self
    }

    /// Passes these variables of the worker's own environment on to every command, besides
    /// [`INHERITED_ENV`](super::INHERITED_ENV), in either mode.
    pub fn inherit_env(mut self, names: impl IntoIterator<Item = EnvName>) -> Self {
        self.env.inherited.extend(names);
        self
    }

    /// What to start for this payload, or why it may not run.
    pub(super) fn launch(&self, payload: &ExecPayload) -> Result<Launch, String> {
        let Some(name) = payload.command.first() else {
            return Err("command must name a program".into());
        };
        if let Some(allowed) = &self.programs {
            if !allowed.contains(name) {
                return Err(format!(
                    "program {name:?} is not on this worker's exec allow-list; to run it, \
                     start the worker with --exec-allow {name} (ExecPolicy::allow)"
                ));
            }
        }
        let any = self.programs.is_none();
        self.env.check(&payload.env, any)?;
        let cwd = workdir(payload.cwd.as_deref(), (!any).then_some(&self.dirs[..]))?;
        Ok(Launch {
            program: self.program(name)?,
            env: self.env.build(&payload.env),
            cwd,
        })
    }

    fn program(&self, name: &str) -> Result<OsString, String> {
        if self.programs.is_none() {
            // Looked up on the command's own PATH, which the payload may set.
            return Ok(name.into());
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
        let policy = ExecPolicy::allow(["sh"]).allow_env(["PATH".parse().unwrap()]);
        let p = payload(json!({"command": ["sh"], "env": {"PATH": "/nowhere"}}));
        let program = PathBuf::from(policy.launch(&p).unwrap().program);
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
                .launch(&payload(json!({"command": command})))
                .unwrap_err();
            assert!(
                err.contains("is not on this worker's exec allow-list"),
                "{err}"
            );
            assert!(
                err.contains("--exec-allow ") && err.contains("ExecPolicy::allow"),
                "{err}"
            );
        }
    }

    #[test]
    fn env_and_cwd_are_checked_only_under_an_allow_list() {
        let dir = tempfile::tempdir().unwrap();
        let p = payload(json!({
            "command": ["cat"],
            "env": {"LD_PRELOAD": "/tmp/x.so"},
            "cwd": dir.path(),
        }));
        let err = ExecPolicy::allow(["cat"]).launch(&p).unwrap_err();
        assert!(err.contains("LD_PRELOAD"), "{err}");
        let launch = ExecPolicy::allow_any().launch(&p).unwrap();
        assert_eq!(launch.program, "cat");
        assert_eq!(launch.cwd, Some(dir.path().canonicalize().unwrap()));

        let p = payload(json!({"command": ["cat"], "cwd": dir.path()}));
        let err = ExecPolicy::allow(["cat"]).launch(&p).unwrap_err();
        assert!(err.contains("--exec-allow-cwd"), "{err}");
        let allowed = ExecPolicy::allow(["cat"]).allow_cwd([dir.path()]);
        assert!(allowed.launch(&p).is_ok());
    }

    #[test]
    fn an_empty_command_is_refused() {
        let err = ExecPolicy::allow_any()
            .launch(&payload(json!({"command": []})))
            .unwrap_err();
        assert!(err.contains("command"), "{err}");
    }
}
