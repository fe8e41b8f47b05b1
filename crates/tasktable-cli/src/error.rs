//! What a command that failed tells its caller: one line of text on stderr and an exit
//! code that says what kind of failure it was, so scripts can tell them apart.

use std::fmt;
use std::process::ExitCode;

/// Exit codes, as documented in `tasktable --help` and docs/cli.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// The server refused or failed the request, could not be reached, or a local
    /// operation (database, file, socket) failed.
    Failure = 1,
    /// The command line is wrong. clap uses the same code for what it rejects.
    Usage = 2,
    /// The task, schedule or endpoint does not exist.
    NotFound = 3,
    /// The change is not allowed from the task's current state, or a schedule of that
    /// name exists.
    Conflict = 4,
    /// No token, an unknown token, or a role that may not do this.
    Denied = 5,
}

/// The help text for the exit codes; kept beside [`Exit`] so the two cannot drift.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  failure: the server refused or failed the request, could not be reached, or a
     database, file or socket operation failed
  2  usage: the command line is wrong (unknown option, bad JSON, bad duration, a bulk
     change without --yes when stdin is not a terminal, a public --listen without
     tokens, an OTEL_ variable asking for what is not supported)
  3  not found: no task with that id, or no schedule with that name or id
  4  conflict: the change is not allowed from the task's state, or a schedule of that
     name exists
  5  unauthorized or forbidden: no token, an unknown token, or a role that may not do it";

#[derive(Debug)]
pub struct CliError {
    pub exit: Exit,
    pub message: String,
}

impl CliError {
    pub fn new(exit: Exit, message: impl Into<String>) -> Self {
        CliError {
            exit,
            message: message.into(),
        }
    }

    pub fn failure(message: impl Into<String>) -> Self {
        Self::new(Exit::Failure, message)
    }

    pub fn usage(message: impl Into<String>) -> Self {
        Self::new(Exit::Usage, message)
    }

    pub fn exit_code(&self) -> ExitCode {
        ExitCode::from(self.exit as u8)
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl From<tasktable::StoreError> for CliError {
    fn from(err: tasktable::StoreError) -> Self {
        CliError::failure(err.to_string())
    }
}

impl From<tasktable::WorkerError> for CliError {
    fn from(err: tasktable::WorkerError) -> Self {
        CliError::usage(err.to_string())
    }
}

impl From<std::io::Error> for CliError {
    fn from(err: std::io::Error) -> Self {
        CliError::failure(err.to_string())
    }
}
