//! The worker registry: heartbeats register and update workers on the database's clock,
//! an operator's drain outlives a restart until released, silent workers are marked gone
//! and later forgotten, the queues with work are found for workers that take every
//! queue, and a pending task says why it waits.

pub mod discovery;
pub mod ownership;
pub mod registry;
pub mod waiting;

use tasktable_core::worker::{Protocol, Queues, WorkerFacts};

pub(crate) fn facts(id: &str) -> WorkerFacts {
    WorkerFacts {
        id: id.into(),
        host: "host-a".into(),
        pid: Some(4242),
        version: "1.2.3".into(),
        groups: vec!["gpu".into(), "eu".into()],
        queues: Queues::Listed(vec!["default".into(), "emails".into()]),
        capacity: 8,
        protocol: Protocol::Process,
        kinds: None,
    }
}
