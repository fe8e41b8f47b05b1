//! tasktable's built-in handlers, which the `tasktable` binary registers.
//!
//! Owns: [`HttpHandler`] (kind `http`: sends one HTTP request and classifies the answer)
//! and [`ExecHandler`] (kind `exec`: runs one command in its own process group, guarded by
//! an [`ExecPolicy`]); their payload and result types; and how much of a response or of a
//! command's output is kept in a task's result. `docs/handlers.md` describes the payloads,
//! outcomes and exit codes for people who submit these tasks.
//!
//! Must not know: any store or backend, how workers claim or retry tasks, or how the
//! binary is configured. Each handler only answers with a result or a
//! [`HandlerError`](tasktable_runtime::HandlerError); the runtime turns that into a
//! transition, enforces the task's timeout by dropping the handler, and says through
//! [`TaskContext::stopped`](tasktable_runtime::TaskContext::stopped) when to give up.
//!
//! # Security
//!
//! Whoever can submit an `exec` task chooses a command for the worker to run: without a
//! limit, that is remote code execution. [`ExecHandler::new`] therefore takes an
//! [`ExecPolicy`]: [`ExecPolicy::allow`] names the programs that may run (anything else
//! fails permanently without starting), and [`ExecPolicy::allow_any`] lifts the limit, for
//! deployments where everyone who can submit may already run code on the workers. An
//! allowed program that interprets its arguments (`sh`, `python`, `env`, ...) can run
//! anything, so allowing one is the same as allowing any.
//!
//! The `http` handler likewise sends requests wherever a payload points, including to
//! addresses only the worker can reach. Header values may hold credentials, so they never
//! appear in an error message.
//!
//! Both handlers work on Unix only: `exec` relies on process groups.

mod captured;
mod exec;
mod http;

pub use exec::{ExecHandler, ExecPayload, ExecPolicy, ExecResult, EXIT_PERMANENT, EXIT_TEMPFAIL};
pub use http::{HttpHandler, HttpMethod, HttpPayload, HttpResult};
