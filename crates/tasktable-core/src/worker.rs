//! Workers as the registry knows them: who a worker is, which queues it reads, and the
//! rules of its state (active, draining, gone).
//!
//! A worker's state is two facts kept apart: whether an operator asked it to drain (it
//! outlives a restart under the same id, until released) and whether it is gone (it left,
//! or fell silent for longer than the cluster allows). Gone wins: a drained worker that
//! is gone shows as gone, and is draining again if it comes back.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use std::fmt;

pub use crate::names::{valid_name, MAX_NAME_CHARS};
/// Most groups one worker may belong to.
pub const MAX_GROUPS: usize = 64;
/// Most queues one worker may list ([`Queues::Listed`]).
pub const MAX_QUEUES: usize = 256;
/// The largest capacity a worker may say it has: what the registry's 32-bit column holds.
pub const MAX_CAPACITY: u32 = i32::MAX as u32;
/// Most kinds one worker may say it handles ([`WorkerFacts::kinds`]): far more handlers
/// than one process registers, and few enough that a heartbeat stays small.
pub const MAX_KINDS: usize = 1000;

/// The queues a worker takes tasks from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Queues {
    /// Every queue that has work, found as it appears.
    All,
    /// These queues only.
    Listed(Vec<String>),
}

impl Queues {
    /// Whether the worker takes tasks from `queue` (names compare exactly).
    pub fn takes(&self, queue: &str) -> bool {
        match self {
            Queues::All => true,
            Queues::Listed(names) => names.iter().any(|n| n == queue),
        }
    }
}

/// How a worker reaches the database.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Protocol {
    /// A `Worker` in a process of its own, on a store of its own.
    Process,
    /// A worker in any language, through the HTTP pull protocol.
    Pull,
}

impl Protocol {
    /// The name in the registry's `protocol` column and the API: `process` or `pull`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Process => "process",
            Protocol::Pull => "pull",
        }
    }

    /// The protocol [`Protocol::as_str`] names `s`; `None` for any other text.
    pub fn parse(s: &str) -> Option<Protocol> {
        match s {
            "process" => Some(Protocol::Process),
            "pull" => Some(Protocol::Pull),
            _ => None,
        }
    }
}

/// What the registry shows for a worker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WorkerState {
    /// Heard from lately, and claiming.
    Active,
    /// Heard from lately, finishing what it runs and claiming nothing new.
    Draining,
    /// Left, or silent for longer than the cluster allows.
    Gone,
}

impl WorkerState {
    /// Gone wins over a drain; a drain over active.
    pub fn of(draining: bool, gone: bool) -> WorkerState {
        match (gone, draining) {
            (true, _) => WorkerState::Gone,
            (false, true) => WorkerState::Draining,
            (false, false) => WorkerState::Active,
        }
    }

    /// The name the API, the CLI and the dashboard show: `active`, `draining` or
    /// `gone`. No column holds it: it is worked out by [`WorkerState::of`].
    pub fn as_str(self) -> &'static str {
        match self {
            WorkerState::Active => "active",
            WorkerState::Draining => "draining",
            WorkerState::Gone => "gone",
        }
    }

    /// The state [`WorkerState::as_str`] names `s`; `None` for any other text.
    pub fn parse(s: &str) -> Option<WorkerState> {
        match s {
            "active" => Some(WorkerState::Active),
            "draining" => Some(WorkerState::Draining),
            "gone" => Some(WorkerState::Gone),
            _ => None,
        }
    }
}

impl fmt::Display for WorkerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a worker says of itself with each heartbeat.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerFacts {
    /// Its name in the registry and the `worker_id` its claims write; a name a target
    /// can hold ([`valid_member`](crate::names::valid_member)).
    pub id: String,
    /// The host name of the machine it runs on.
    pub host: String,
    /// Process id, where the worker has one the registry can show.
    pub pid: Option<u32>,
    /// The worker's software version.
    pub version: String,
    /// The groups it belongs to, which targets may name; at most [`MAX_GROUPS`].
    pub groups: Vec<String>,
    /// The queues it takes tasks from.
    pub queues: Queues,
    /// Most tasks it runs at once.
    pub capacity: u32,
    /// How it reaches the database, and so how its heartbeats arrive.
    pub protocol: Protocol,
    /// The kinds it has handlers for, at most [`MAX_KINDS`], each a name a task's kind
    /// may be; `None`: it did not say (a worker of a version from before heartbeats
    /// carried them), so nothing may be concluded from it.
    #[serde(default)]
    pub kinds: Option<Vec<String>>,
}

/// Why a worker's facts cannot be registered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidWorker {
    /// The host, the version, a listed queue or a kind is no valid name ([`valid_name`]).
    #[error("{field} must be 1 to {MAX_NAME_CHARS} characters, not all whitespace, without control characters")]
    Name {
        /// Which: `host`, `version`, `a queue` or `a kind`.
        field: &'static str,
    },
    /// The id or a group is no name a target can hold
    /// ([`valid_member`](crate::names::valid_member)).
    #[error("{field} must be 1 to {MAX_NAME_CHARS} characters, not all whitespace, without control characters or '|'")]
    Member {
        /// Which: `id` or `a group`.
        field: &'static str,
    },
    /// Too many groups, or a list of queues that is empty or too long.
    #[error("at most {max} {field}")]
    TooMany {
        /// What is counted, as the message words it.
        field: &'static str,
        /// The most allowed: [`MAX_GROUPS`], [`MAX_QUEUES`] or [`MAX_KINDS`].
        max: usize,
    },
    /// A capacity of 0, or over [`MAX_CAPACITY`].
    #[error("capacity must be 1 to {MAX_CAPACITY}")]
    Capacity,
}

impl WorkerFacts {
    /// Checks every fact before it is registered; the error names the first one wrong.
    pub fn validate(&self) -> Result<(), InvalidWorker> {
        for (field, value) in [("host", &self.host), ("version", &self.version)] {
            if !valid_name(value) {
                return Err(InvalidWorker::Name { field });
            }
        }
        // Targets name workers and groups between '|' separators (crate::target).
        if !crate::names::valid_member(&self.id) {
            return Err(InvalidWorker::Member { field: "id" });
        }
        if self.groups.len() > MAX_GROUPS {
            return Err(InvalidWorker::TooMany {
                field: "groups",
                max: MAX_GROUPS,
            });
        }
        if self.groups.iter().any(|g| !crate::names::valid_member(g)) {
            return Err(InvalidWorker::Member { field: "a group" });
        }
        if let Queues::Listed(q) = &self.queues {
            if q.is_empty() || q.len() > MAX_QUEUES {
                return Err(InvalidWorker::TooMany {
                    field: "queues (and at least one)",
                    max: MAX_QUEUES,
                });
            }
            if q.iter().any(|n| !valid_name(n)) {
                return Err(InvalidWorker::Name { field: "a queue" });
            }
        }
        if self.capacity == 0 || self.capacity > MAX_CAPACITY {
            return Err(InvalidWorker::Capacity);
        }
        if let Some(kinds) = &self.kinds {
            if kinds.len() > MAX_KINDS {
                return Err(InvalidWorker::TooMany {
                    field: "kinds",
                    max: MAX_KINDS,
                });
            }
            if kinds.iter().any(|k| !valid_name(k)) {
                return Err(InvalidWorker::Name { field: "a kind" });
            }
        }
        Ok(())
    }

    /// Whether the worker handles `kind`: `None` when it did not say which kinds it
    /// handles.
    pub fn handles(&self, kind: &str) -> Option<bool> {
        self.kinds
            .as_ref()
            .map(|kinds| kinds.iter().any(|k| k == kind))
    }
}

/// A worker as the registry holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkerInfo {
    /// What it said of itself at its last heartbeat.
    #[serde(flatten)]
    pub facts: WorkerFacts,
    /// The address it reaches the database (or the API) from, as that side sees it.
    pub address: Option<String>,
    /// The token that owns its id ([`crate::ownership`]), by name; `None`: no token does
    /// (an in-process worker, or a pull worker of a server without tokens).
    pub owner: Option<String>,
    /// What the registry shows, from `draining` and whether it is gone
    /// ([`WorkerState::of`]).
    pub state: WorkerState,
    /// Whether an operator asked it to drain; kept while it is gone.
    pub draining: bool,
    /// Its first heartbeat since it last started, on the database's clock.
    pub started_at: DateTime<Utc>,
    /// The database's clock at its last heartbeat.
    pub last_seen_at: DateTime<Utc>,
    /// When it left or was found silent; `None` while it is live.
    pub gone_at: Option<DateTime<Utc>>,
    /// Tasks it holds a lease on now.
    pub running: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> WorkerFacts {
        WorkerFacts {
            id: "w1".into(),
            host: "h".into(),
            pid: Some(1),
            version: "0.1.0".into(),
            groups: vec!["gpu".into()],
            queues: Queues::Listed(vec!["default".into()]),
            capacity: 4,
            protocol: Protocol::Process,
            kinds: Some(vec!["email".into()]),
        }
    }

    #[test]
    fn gone_wins_over_a_drain_and_a_drain_over_active() {
        assert_eq!(WorkerState::of(true, true), WorkerState::Gone);
        assert_eq!(WorkerState::of(false, true), WorkerState::Gone);
        assert_eq!(WorkerState::of(true, false), WorkerState::Draining);
        assert_eq!(WorkerState::of(false, false), WorkerState::Active);
        for s in [
            WorkerState::Active,
            WorkerState::Draining,
            WorkerState::Gone,
        ] {
            assert_eq!(WorkerState::parse(s.as_str()), Some(s));
        }
    }

    #[test]
    fn facts_are_checked_field_by_field() {
        assert_eq!(facts().validate(), Ok(()));
        let mut f = facts();
        f.id = String::new();
        assert_eq!(f.validate(), Err(InvalidWorker::Member { field: "id" }));
        f.id = "a|b".into();
        assert_eq!(f.validate(), Err(InvalidWorker::Member { field: "id" }));
        f = facts();
        f.groups = vec!["gpu|eu".into()];
        assert_eq!(
            f.validate(),
            Err(InvalidWorker::Member { field: "a group" })
        );
        f = facts();
        f.host = "a\nb".into();
        assert_eq!(f.validate(), Err(InvalidWorker::Name { field: "host" }));
        f = facts();
        f.id = "x".repeat(MAX_NAME_CHARS + 1);
        assert!(f.validate().is_err());
        f.id = "é".repeat(MAX_NAME_CHARS);
        assert_eq!(f.validate(), Ok(()));
        f = facts();
        f.groups = (0..=MAX_GROUPS).map(|i| format!("g{i}")).collect();
        assert!(matches!(f.validate(), Err(InvalidWorker::TooMany { .. })));
        f = facts();
        f.queues = Queues::Listed(vec![]);
        assert!(matches!(f.validate(), Err(InvalidWorker::TooMany { .. })));
        f.queues = Queues::All;
        assert_eq!(f.validate(), Ok(()));
        f.capacity = 0;
        assert_eq!(f.validate(), Err(InvalidWorker::Capacity));
        f.capacity = MAX_CAPACITY + 1;
        assert_eq!(f.validate(), Err(InvalidWorker::Capacity));
        f.capacity = MAX_CAPACITY;
        assert_eq!(f.validate(), Ok(()));
        f = facts();
        f.kinds = Some((0..=MAX_KINDS).map(|i| format!("k{i}")).collect());
        assert_eq!(
            f.validate(),
            Err(InvalidWorker::TooMany {
                field: "kinds",
                max: MAX_KINDS
            })
        );
        f.kinds = Some((0..MAX_KINDS).map(|i| format!("k{i}")).collect());
        assert_eq!(f.validate(), Ok(()));
        for bad in ["", " ", "a\nb", &"k".repeat(MAX_NAME_CHARS + 1)] {
            f.kinds = Some(vec![bad.to_owned()]);
            assert_eq!(
                f.validate(),
                Err(InvalidWorker::Name { field: "a kind" }),
                "{bad:?}"
            );
        }
        f.kinds = Some(vec![]);
        assert_eq!(f.validate(), Ok(()), "a worker may handle no kind yet");
        f.kinds = None;
        assert_eq!(f.validate(), Ok(()));
    }

    #[test]
    fn kinds_unknown_say_nothing_and_known_ones_answer() {
        let mut f = facts();
        assert_eq!(f.handles("email"), Some(true));
        assert_eq!(f.handles("resize"), Some(false));
        f.kinds = None;
        assert_eq!(f.handles("email"), None);
    }

    #[test]
    fn all_queues_take_any_queue_and_a_list_only_its_own() {
        assert!(Queues::All.takes("anything"));
        let listed = Queues::Listed(vec!["a".into()]);
        assert!(listed.takes("a") && !listed.takes("b"));
    }
}
