//! Targets: who may run a task. Claims hand a targeted task only to a worker it allows,
//! and a worker's own tasks before untargeted ones of equal priority; a new target takes
//! a running task from a worker it leaves out without spending the attempt; a retry with
//! an affinity waits for the worker of its previous attempt, then goes to any.

pub mod affinity;
pub mod change;
pub mod claim;

use tasktable_core::Target;

pub(crate) fn workers(ids: &[&str]) -> Target {
    Target::Workers(ids.iter().map(|s| s.to_string()).collect())
}

pub(crate) fn groups(names: &[&str]) -> Target {
    Target::Groups(names.iter().map(|s| s.to_string()).collect())
}
