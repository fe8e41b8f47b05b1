//! Who may run a task: any worker, listed workers, or the members of listed groups; and
//! how that is written into the task's row so that a claim can test it with one string
//! search per name the claimer answers to.
//!
//! The row's `target` column is NULL for [`Target::Any`], and otherwise every allowed name
//! with its sort, each followed by `|`, after a leading `|`: `|w:alice|w:bob|` for two
//! workers, `|g:gpu|` for one group. A worker matches when the column contains
//! `|w:<its id>|` or `|g:<one of its groups>|` ([`Target::needles`]), which is why worker
//! ids and group names may not contain `|`.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Most names one target may list.
pub const MAX_TARGET_NAMES: usize = 64;
pub use crate::names::{valid_member, SEPARATOR};

/// Who may run a task.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Any worker that takes the task's queue and kind.
    #[default]
    Any,
    /// Only the workers with these ids.
    Workers(Vec<String>),
    /// Only workers in at least one of these groups.
    Groups(Vec<String>),
}

/// Why a target cannot be stored.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidTarget {
    /// A list of workers or groups that names none; says which (`worker id`, `group`).
    #[error("a target lists at least one {0}")]
    Empty(&'static str),
    /// More than [`MAX_TARGET_NAMES`] names; holds how many were given.
    #[error("a target lists at most {MAX_TARGET_NAMES} names, not {0}")]
    TooMany(usize),
    /// A name that [`valid_member`] refuses (blank, too long, a control character or
    /// [`SEPARATOR`]); says which sort of name.
    #[error("each {0} of a target is 1 to 255 characters, not all whitespace, without control characters or '|'")]
    Name(&'static str),
}

impl Target {
    /// Whether every worker may run the task: nothing is stored in the `target` column.
    pub fn is_any(&self) -> bool {
        matches!(self, Target::Any)
    }

    /// Checks a list of names: at least one, at most [`MAX_TARGET_NAMES`], each one
    /// [`valid_member`] accepts. Duplicates are allowed (stored once).
    pub fn validate(&self) -> Result<(), InvalidTarget> {
        let (field, names) = match self {
            Target::Any => return Ok(()),
            Target::Workers(n) => ("worker id", n),
            Target::Groups(n) => ("group", n),
        };
        if names.is_empty() {
            return Err(InvalidTarget::Empty(field));
        }
        if names.len() > MAX_TARGET_NAMES {
            return Err(InvalidTarget::TooMany(names.len()));
        }
        if names.iter().any(|n| !valid_member(n)) {
            return Err(InvalidTarget::Name(field));
        }
        Ok(())
    }

    /// Whether a worker with this id and these groups may run the task.
    pub fn allows(&self, worker_id: &str, groups: &[String]) -> bool {
        match self {
            Target::Any => true,
            Target::Workers(ids) => ids.iter().any(|i| i == worker_id),
            Target::Groups(names) => names.iter().any(|g| groups.contains(g)),
        }
    }

    /// The stored form (module docs); `None` for [`Target::Any`]. Names are sorted and
    /// listed once, so equal targets are stored alike.
    pub fn to_column(&self) -> Option<String> {
        let (sort, names) = match self {
            Target::Any => return None,
            Target::Workers(n) => ('w', n),
            Target::Groups(n) => ('g', n),
        };
        let mut names: Vec<&String> = names.iter().collect();
        names.sort();
        names.dedup();
        let mut out = String::from(SEPARATOR);
        for n in names {
            out.push(sort);
            out.push(':');
            out.push_str(n);
            out.push(SEPARATOR);
        }
        Some(out)
    }

    /// Reads the stored form back; `None` when it is not one [`Target::to_column`] writes.
    pub fn from_column(column: Option<&str>) -> Option<Target> {
        let Some(text) = column else {
            return Some(Target::Any);
        };
        let inner = text.strip_prefix(SEPARATOR)?.strip_suffix(SEPARATOR)?;
        let mut sort = None;
        let mut names = Vec::new();
        for member in inner.split(SEPARATOR) {
            let (s, name) = member.split_once(':')?;
            if sort.is_some_and(|k| k != s) || name.is_empty() {
                return None;
            }
            sort = Some(s);
            names.push(name.to_owned());
        }
        match sort? {
            "w" => Some(Target::Workers(names)),
            "g" => Some(Target::Groups(names)),
            _ => None,
        }
    }

    /// What a claim searches the stored form for, for a worker with this id and these
    /// groups: a task is aimed at the worker when its column contains one of them.
    pub fn needles(worker_id: &str, groups: &[String]) -> Vec<String> {
        let mut out = Vec::with_capacity(groups.len() + 1);
        out.push(format!("{SEPARATOR}w:{worker_id}{SEPARATOR}"));
        for g in groups {
            out.push(format!("{SEPARATOR}g:{g}{SEPARATOR}"));
        }
        out
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Any => f.write_str("any worker"),
            Target::Workers(ids) => write!(f, "workers {}", ids.join(", ")),
            Target::Groups(g) => write!(f, "groups {}", g.join(", ")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn the_stored_form_reads_back_sorted_and_once() {
        let t = Target::Workers(s(&["bob", "alice", "bob"]));
        let col = t.to_column().unwrap();
        assert_eq!(col, "|w:alice|w:bob|");
        assert_eq!(
            Target::from_column(Some(&col)),
            Some(Target::Workers(s(&["alice", "bob"])))
        );
        assert_eq!(Target::from_column(None), Some(Target::Any));
        assert_eq!(Target::Any.to_column(), None);
        let g = Target::Groups(s(&["gpu"]));
        assert_eq!(
            Target::from_column(g.to_column().as_deref()),
            Some(g.clone())
        );
        for bad in ["", "|", "w:a|", "|w:a", "|x:a|", "|w:a|g:b|", "|w:|"] {
            assert_eq!(Target::from_column(Some(bad)), None, "{bad:?}");
        }
    }

    #[test]
    fn a_worker_matches_the_stored_form_exactly_when_the_target_allows_it() {
        let targets = [
            Target::Workers(s(&["w1", "w10"])),
            Target::Workers(s(&["w"])),
            Target::Groups(s(&["gpu", "eu"])),
            Target::Groups(s(&["g"])),
        ];
        let workers = [
            ("w1", s(&[])),
            ("w10", s(&["gpu"])),
            ("w", s(&["g"])),
            ("w100", s(&["eu-west", "gp"])),
            ("gpu", s(&["w1"])),
        ];
        for t in &targets {
            let col = t.to_column().unwrap();
            for (id, groups) in &workers {
                let found = Target::needles(id, groups)
                    .iter()
                    .any(|n| col.contains(n.as_str()));
                assert_eq!(found, t.allows(id, groups), "{t:?} for {id} {groups:?}");
            }
        }
        assert!(Target::Any.allows("anyone", &[]));
    }

    #[test]
    fn bad_targets_are_refused() {
        assert!(Target::Workers(vec![]).validate().is_err());
        assert!(Target::Groups(s(&["a|b"])).validate().is_err());
        assert!(Target::Groups(s(&[" "])).validate().is_err());
        assert!(Target::Workers(s(&["a\nb"])).validate().is_err());
        let many: Vec<String> = (0..=MAX_TARGET_NAMES).map(|i| i.to_string()).collect();
        assert_eq!(
            Target::Workers(many).validate(),
            Err(InvalidTarget::TooMany(MAX_TARGET_NAMES + 1))
        );
        assert!(Target::Groups(s(&["gpu"])).validate().is_ok());
        assert!(Target::Any.validate().is_ok());
    }
}
