//! Submitting tasks: ids and defaults, a bad batch refused whole, submit inside the
//! caller's transaction, idempotency keys (under a race too), and values at the edges of
//! what a task may hold.

pub mod batch;
pub mod idempotency;
pub mod values;
