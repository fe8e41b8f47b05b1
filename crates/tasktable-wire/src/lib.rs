//! tasktable's HTTP API in JSON: what the server writes and the CLI reads, defined once.
//!
//! Owns: the views of a task ([`TaskView`]), its attempts, its runs, a batch and a
//! schedule, the parts they share with requests (a target, a backoff), and the reading of
//! whole numbers as JSON means them ([`whole`]). Durations are whole milliseconds
//! (`*_ms`), times are RFC 3339 in UTC. The server builds each view from the store's types;
//! a reader deserializes it, ignoring fields it does not know, so a newer server still
//! suits an older reader. The OpenAPI document (`tasktable-server/openapi.json`) describes
//! the same fields, which a test of the server holds it to.
//!
//! Must not know: HTTP, the store's calls, any database. The request bodies (submits,
//! schedule edits) stay the server's, beside the rules of what it accepts.

pub mod batch;
pub mod schedule;
pub mod task;
pub mod whole;

pub use batch::{BatchView, ItemFailureView};
pub use schedule::{ScheduleView, TemplateView};
pub use task::{
    millis, AttemptView, BackoffSpec, RunView, SubmittedView, TargetSpec, TaskView, WaitingView,
};

/// The versions of the pull protocol (claims, lease calls, heartbeats). A worker says the
/// one it speaks in its heartbeats (`protocol_version`; absent means 1); the server takes
/// [`OLDEST_PULL_PROTOCOL`] to [`PULL_PROTOCOL`] and names both in its answer, so a worker
/// too new or too old for the server is told so at its first beat instead of failing on
/// some later call. A version changes only when a call changes in a way an older worker
/// or server would misread.
pub const PULL_PROTOCOL: u32 = 1;

/// The oldest version of the pull protocol this server still takes.
pub const OLDEST_PULL_PROTOCOL: u32 = 1;
