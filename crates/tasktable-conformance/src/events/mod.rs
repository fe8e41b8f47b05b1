//! The event log: every operator change is recorded with who made it and what it
//! changed, in the change's own transaction; tasktable's own changes (a schedule firing)
//! name the part that made them; the audit reads the log by actor, task, queue, event
//! and time, newest first in keyset pages; a task's events go with the task, the rest
//! by age.

pub mod audit;
pub mod feed;
pub mod logs;
pub mod retention;

use tasktable_core::{Actor, ActorKind};
use tasktable_store::*;

pub(crate) fn alice() -> Actor {
    Actor::new(ActorKind::Token, "alice", Some("operator"))
}

pub(crate) fn bob() -> Actor {
    Actor::new(ActorKind::Dashboard, "bob", Some("admin"))
}

/// Every event the filter matches, newest first, read in pages of `page`.
pub(crate) async fn all(s: &dyn Store, filter: EventFilter, page: u32) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    loop {
        let got = s
            .event_list(EventListParams {
                filter: filter.clone(),
                before: out.last().map(|e| e.id),
                limit: page,
            })
            .await
            .expect("event list");
        let n = got.len();
        out.extend(got);
        if n < page as usize {
            return out;
        }
    }
}
