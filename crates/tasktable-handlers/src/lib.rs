//! tasktable's built-in handlers, which the `tasktable` binary registers.
//!
//! Owns: [`HttpHandler`] (kind `http`: sends one HTTP request, only to addresses its
//! [`HttpPolicy`] allows, and classifies the answer), [`HttpBatchHandler`] (kind
//! `http_batch`: a batch whose items are such requests) and [`ExecHandler`] (kind `exec`: runs
//! one command in its own process group, as its [`ExecPolicy`] allows); their payload and
//! result types; how much of a response or of a command's output is kept in a task's
//! result; and [`SECRET_FIELDS`], which payload fields readers must not see.
//! `docs/handlers.md` describes the payloads, outcomes, guarantees and refusals for people
//! who submit these tasks and operators who run them.
//!
//! Must not know: any store or backend, how workers claim or retry tasks, or how the
//! binary is configured, beyond the names of its flags, which refusals quote so an operator
//! knows what to change. Each handler only answers with a result or a
//! [`HandlerError`](tasktable_runtime::HandlerError); the runtime turns that into a
//! transition, enforces the task's timeout by dropping the handler, and says through
//! [`TaskContext::stopped`](tasktable_runtime::TaskContext::stopped) when to give up.
//!
//! # Security
//!
//! Whoever can submit an `exec` task chooses a command for the worker to run: without a
//! limit, that is remote code execution. [`ExecHandler::new`] therefore takes an
//! [`ExecPolicy`]: [`ExecPolicy::allow`] names the programs that may run, and payloads may
//! set only the environment variables and working directories the operator allows as well
//! (an allowed script with `BASH_ENV` or `NODE_OPTIONS` of the payload's choosing would run
//! anything). [`ExecPolicy::allow_any`] lifts all three limits, for deployments where
//! everyone who can submit may already run code on the workers. In both modes a command
//! starts with a minimal environment, not the worker's (which holds its credentials),
//! with `no_new_privs` and no capabilities, and as the [`ExecUser`] given to
//! [`ExecHandler::run_as`], so that it cannot read the worker's files and memory.
//!
//! The `http` handler would likewise send requests wherever a payload points, including to
//! addresses only the worker can reach (the cloud's metadata service, an admin port on
//! loopback). [`HttpPolicy`] refuses every address that is not public unless the operator
//! allows it, checking each address as it is dialled, so neither DNS answers nor redirects
//! get around it. Header values and `env` values may hold credentials, so they never
//! appear in an error message, and [`SECRET_FIELDS`] tells readers' views to hide them.
//!
//! Both handlers work on Unix only: `exec` relies on process groups.

mod captured;
mod exec;
mod http;
mod secrets;

pub use exec::{
    can_switch_users, EnvName, ExecHandler, ExecPayload, ExecPolicy, ExecResult, ExecUser,
    DEFAULT_KILL_GRACE, EXIT_PERMANENT, EXIT_TEMPFAIL, INHERITED_ENV,
};
pub use http::{
    HostName, HttpBatchData, HttpBatchHandler, HttpHandler, HttpMethod, HttpPayload, HttpPolicy,
    HttpResult, Network,
};
pub use secrets::{SECRET_FIELDS, SECRET_URL_FIELDS};
