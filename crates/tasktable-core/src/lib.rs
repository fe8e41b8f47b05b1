//! tasktable's pure domain.
//!
//! Owns: what a task is ([`Task`], [`NewTask`]), its states and the one table of legal
//! transitions ([`state`]) and what each operator change does to a row ([`change`]), what
//! a handler may answer and what that means for the task ([`outcome`], with the rule that
//! sends a failed attempt back to `pending` or ends the task: [`outcome::attempts_left`]),
//! the retry/backoff maths ([`Backoff`]), a batch's sliding window, rate limit, error
//! budget and lifecycle ([`batch`]), when a recurring schedule's slots fall and which
//! to fire after a pause ([`schedule`]), who a worker is and what its registry state
//! means ([`worker`]), who may run a task ([`target`]), what a queue's policy lets a claim take ([`policy`]), how a task that wants several runs
//! counts them ([`runs`]), why a pending task waits ([`waiting`]), what becomes of text a worker writes on its way into a row and
//! how far a lease or a delay may reach ([`stored`]), the bounds of names and counts
//! ([`names`]), who did something ([`actor`]), and how a URL is read and its password
//! hidden ([`url`]).
//!
//! Must not know: SQL, any database, tokio, or the time of day. Every function here is
//! pure: the current time and any randomness are passed in as arguments, so the rules can
//! be tested exhaustively and the stores can apply them with the database's clock.

#![warn(missing_docs)]

pub mod actor;
pub mod backoff;
pub mod batch;
pub mod change;
pub mod event;
pub mod names;
pub mod outcome;
pub mod ownership;
pub mod policy;
pub mod retention;
pub mod runs;
pub mod schedule;
pub mod state;
pub mod stored;
pub mod target;
pub mod task;
pub mod trace;
pub mod url;
pub mod waiting;
pub mod worker;

pub use backoff::Backoff;
pub use change::{Change, ChangeEffect};
pub use event::{Actor, ActorKind, EventKind};
pub use outcome::{AttemptOutcome, FinishAction, HandlerOutcome};
pub use state::{Operation, TaskState};
pub use stored::MAX_LEASE;
pub use target::Target;
pub use task::{
    Attempt, InvalidTask, Lease, LeaseCredential, MalformedCredential, NewTask, Task, TaskId,
};
