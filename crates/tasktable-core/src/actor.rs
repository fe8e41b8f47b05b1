//! Who did something, as the event log and a task's `created_by` record it.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Longest actor name kept, in bytes; longer names are cut (on a character boundary).
pub const MAX_ACTOR_LEN: usize = 200;
/// Longest role kept, in bytes; a longer one is cut like a name.
pub const MAX_ROLE_LEN: usize = 32;

/// What kind of caller made a change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ActorKind {
    /// A REST API caller, by its token's name.
    Token,
    /// The `tasktable` command line, through the API, by its token's name.
    Cli,
    /// Someone signed in to the dashboard, by the token they signed in with.
    Dashboard,
    /// A worker, by its id.
    Worker,
    /// tasktable itself: the rescuer, the scheduler, retention, a batch's runner.
    System,
    /// Rust code calling the library directly.
    Rust,
}

impl ActorKind {
    /// Every kind, in the order they are declared.
    pub const ALL: [ActorKind; 6] = [
        ActorKind::Token,
        ActorKind::Cli,
        ActorKind::Dashboard,
        ActorKind::Worker,
        ActorKind::System,
        ActorKind::Rust,
    ];

    /// The name the log's `actor_kind` column, the column form and the API use
    /// (`token`, `cli`, ...), the same as serde writes.
    pub fn as_str(self) -> &'static str {
        match self {
            ActorKind::Token => "token",
            ActorKind::Cli => "cli",
            ActorKind::Dashboard => "dashboard",
            ActorKind::Worker => "worker",
            ActorKind::System => "system",
            ActorKind::Rust => "rust",
        }
    }

    /// The kind [`ActorKind::as_str`] names `s`; `None` for any other text (names are
    /// case-sensitive).
    pub fn parse(s: &str) -> Option<ActorKind> {
        ActorKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Who made a change, as the log records it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Actor {
    /// What sort of caller it was, which says what [`Actor::name`] names.
    pub kind: ActorKind,
    /// The token's name, the worker's id, or the part of tasktable (`scheduler`, ...).
    pub name: String,
    /// The caller's role, for callers with a token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
}

impl Actor {
    /// A caller of kind `kind` named `name` (cut to [`MAX_ACTOR_LEN`] bytes), with `role`
    /// cut to [`MAX_ROLE_LEN`] bytes and any `:` in it made `_`.
    pub fn new(kind: ActorKind, name: &str, role: Option<&str>) -> Actor {
        Actor {
            kind,
            name: cut(name, MAX_ACTOR_LEN),
            // Roles are words; a `:` would end one early in the column form.
            role: role.map(|r| cut(&r.replace(':', "_"), MAX_ROLE_LEN)),
        }
    }

    /// Rust code using the library: what a call that names nobody records.
    pub fn rust() -> Actor {
        Actor::new(ActorKind::Rust, "rust", None)
    }

    /// For people: `alice (operator, token)`, `scheduler (system)`.
    pub fn label(&self) -> String {
        match &self.role {
            Some(role) => format!("{} ({role}, {})", self.name, self.kind.as_str()),
            None => format!("{} ({})", self.name, self.kind.as_str()),
        }
    }

    /// A part of tasktable itself: `rescuer`, `scheduler`, `retention`, `batch`.
    pub fn system(part: &str) -> Actor {
        Actor::new(ActorKind::System, part, None)
    }
}

impl Actor {
    /// The column form, `kind:role:name` (`token:operator:deploy-bot`, `system::scheduler`):
    /// the name last, so it may hold anything.
    pub fn to_column(&self) -> String {
        format!(
            "{}:{}:{}",
            self.kind.as_str(),
            self.role.as_deref().unwrap_or(""),
            self.name
        )
    }

    /// Reads [`Actor::to_column`]'s form back; `None` for anything else.
    pub fn from_column(text: &str) -> Option<Actor> {
        let mut parts = text.splitn(3, ':');
        let kind = ActorKind::parse(parts.next()?)?;
        let role = parts.next()?;
        let name = parts.next()?;
        Some(Actor {
            kind,
            name: name.to_owned(),
            role: (!role.is_empty()).then(|| role.to_owned()),
        })
    }
}

impl Default for Actor {
    fn default() -> Self {
        Actor::rust()
    }
}

impl fmt::Display for Actor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind.as_str(), self.name)?;
        if let Some(role) = &self.role {
            write!(f, " ({role})")?;
        }
        Ok(())
    }
}

fn cut(s: &str, max: usize) -> String {
    let mut end = s.len().min(max);
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    s[..end].to_owned()
}
