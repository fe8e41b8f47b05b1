//! tasktable's worker runtime and maintenance services.
//!
//! Owns: running handlers ([`Worker`]: the claim loop, which claims ahead of free slots
//! while handlers are short, and its one step
//! ([`Worker::run_once`]), executor, lease keeper, batched completions, per-worker and
//! per-queue limits, graceful shutdown), what a handler sees ([`Handler`],
//! [`TaskContext`], [`HandlerError`]), the runner of batches and what their handlers see
//! ([`BatchHandler`], [`BatchContext`]), the [`Rescuer`] that takes back tasks whose
//! lease expired, the [`Scheduler`] that fires recurring schedules and saves those
//! declared in code, and the [`Retainer`] that purges finished tasks past their age;
//! each worker's row in the registry (its heartbeat, an operator's drain, and marking
//! silent peers gone); what they record for monitoring ([`metrics`]) and the spans of
//! their work ([`trace`]: a submit's, an attempt's, and the `traceparent` joining them).
//!
//! Must not know: SQL or any backend. It holds an `Arc<dyn Store>`, computes every rule
//! with `tasktable-core`, and never opens a transaction; each store call is one atomic
//! transition. It never reads the local clock to decide a lease: expiry is decided by
//! the database; the local clock only times how long to wait.

#![warn(missing_docs)]

pub mod attempt_log;
mod batch;
mod claimer;
mod completer;
mod config;
mod context;
mod executor;
mod handler;
mod identity;
mod lease_keeper;
pub mod metrics;
mod registry;
mod rescuer;
mod retention;
mod scheduler;
mod shared;
mod shutdown;
pub mod trace;
mod worker;

pub use batch::{BatchContext, BatchHandler, Item, SAVE_EVERY};
pub use config::ahead_limit;
pub use config::{QueueConfig, WorkerConfig, WorkerError};
pub use context::{ContextError, StopReason, TaskContext};
pub use handler::{Handler, HandlerError};
pub use identity::WorkerIdentity;
pub use rescuer::{Rescuer, RescuerConfig};
pub use retention::{Retainer, RetentionConfig, Swept};
pub use scheduler::{Scheduler, SchedulerConfig};
pub use shared::WorkerEvent;
pub use shutdown::shutdown_signal;
pub use worker::{Worker, WorkerBuilder};
