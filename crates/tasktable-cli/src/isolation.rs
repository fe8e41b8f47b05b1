//! What `serve` and `worker` do at start when `exec` is on, so the commands they run cannot
//! read this process's secrets: its environment (`TASKTABLE_TOKENS`), its command line,
//! its memory, its database file and its tokens file.
//!
//! - Commands run as another user (`--exec-user`, by default `nobody` when this process
//!   can switch users), without privileges (the handler's own doing).
//! - This process is made non-dumpable, so a command running as its user cannot read
//!   `/proc/<pid>/environ` or its memory either.
//! - Its umask becomes 077, so the files it creates (the SQLite database and its -wal and
//!   -shm files) are readable by its user only.
//! - A `--database-url` with a password is refused: every local user can read
//!   `/proc/<pid>/cmdline`.
//!
//! docs/security.md ("exec isolation") says the same for operators.

use crate::database::{DatabaseArgs, URL_ENV};
use crate::error::CliError;
use tasktable_handlers::{can_switch_users, ExecUser};

/// The user `exec` commands run as when `--exec-user` is not given and this process can
/// switch users.
pub const DEFAULT_EXEC_USER: &str = "nobody";

/// Checks and applies the above, before the database is opened; returns the user commands
/// run as. `exec_user`: `--exec-user`.
pub fn isolate_exec(
    exec_user: Option<&str>,
    database: &DatabaseArgs,
) -> Result<ExecUser, CliError> {
    refuse_password_on_command_line(&database.url)?;
    let user = exec_user_for(exec_user)?;
    not_dumpable()?;
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(0o077));
    if user.is_current() {
        tracing::warn!(
            user = %user,
            "exec commands run as this process's own user, so they can read whatever it \
             can, its database file included; to keep them out, run tasktable as root or \
             with CAP_SETUID and CAP_SETGID, so they run as {DEFAULT_EXEC_USER} or as \
             --exec-user names (see docs/security.md)"
        );
    }
    tracing::info!(
        user = %user,
        "exec commands run as this user, with no_new_privs and no capabilities; this \
         process is not dumpable, and creates files only its user can read (umask 077)"
    );
    Ok(user)
}

/// The user named by `--exec-user`, or the default; a usage error when there is no such
/// user, or this process cannot start commands as it.
fn exec_user_for(exec_user: Option<&str>) -> Result<ExecUser, CliError> {
    let Some(spec) = exec_user else {
        if !can_switch_users() {
            return Ok(ExecUser::current());
        }
        return ExecUser::lookup(DEFAULT_EXEC_USER).map_err(|e| {
            CliError::usage(format!(
                "exec commands would run as {DEFAULT_EXEC_USER}, but {e}; create that \
                 user, or name another with --exec-user USER"
            ))
        });
    };
    let user =
        ExecUser::lookup(spec).map_err(|e| CliError::usage(format!("--exec-user {spec}: {e}")))?;
    if !user.is_reachable() {
        let me = ExecUser::current();
        return Err(CliError::usage(format!(
            "--exec-user {spec}: this process runs as {me} and cannot start commands as \
             another user; run tasktable as root or with CAP_SETUID and CAP_SETGID, or leave \
             --exec-user out to run commands as {} (which can then read what this process \
             can; see docs/security.md)",
            me.name()
        )));
    }
    Ok(user)
}

/// A URL on the command line is in `/proc/<pid>/cmdline`, which every local user may read,
/// the commands of `exec` tasks included; the environment is not.
fn refuse_password_on_command_line(url: &str) -> Result<(), CliError> {
    if !tasktable_core::url::has_password(url) {
        return Ok(());
    }
    let on_command_line = std::env::args_os()
        .skip(1)
        .any(|arg| arg.to_string_lossy().contains(url));
    if !on_command_line {
        return Ok(());
    }
    Err(CliError::usage(format!(
        "refusing to start with exec enabled: the --database-url holds a password, which \
         every local user, exec commands included, could read in /proc/{}/cmdline; give the \
         URL in the {URL_ENV} environment variable instead",
        std::process::id()
    )))
}

/// No process running as this one's user may read its memory or its environment through
/// `/proc`, or attach a debugger; and it leaves no core dump.
#[cfg(target_os = "linux")]
fn not_dumpable() -> Result<(), CliError> {
    nix::sys::prctl::set_dumpable(false)
        .map_err(|e| CliError::failure(format!("cannot make this process non-dumpable: {e}")))
}

#[cfg(not(target_os = "linux"))]
fn not_dumpable() -> Result<(), CliError> {
    Ok(())
}
