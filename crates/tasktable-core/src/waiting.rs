//! Why a pending task waits: the rule that reads a task and the facts around it (the live
//! workers and what they take, the queue's pause and policy, the task's target and
//! affinity) and says, in plain words, what keeps it from being claimed.
//!
//! Each reason holds only where a claim would behave so: a claim takes nothing from a
//! paused queue; a worker claims only from the queues it takes and only the kinds it has
//! handlers for, and a draining worker claims nothing; a target (or an affinity's wait,
//! which is one) lets only the workers it names claim; a limited queue's claim takes
//! nothing past `max_running`, a kind's limit or a rate ([`crate::policy`]). A worker
//! that did not say which kinds it handles ([`WorkerFacts::kinds`] is `None`) might
//! handle any, so no reason about kinds is given while such a worker could take the
//! task. When nothing is found the answer says so ([`WaitReason::Turn`]): the task waits
//! for a worker to claim it, and no cause is made up.

use crate::policy::QueuePolicy;
use crate::state::TaskState;
use crate::target::Target;
use crate::task::Task;
use crate::worker::WorkerFacts;
use chrono::{DateTime, Utc};
use std::collections::BTreeMap;
use std::fmt;

/// A worker the registry holds as live (not gone), as the rule sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LiveWorker {
    /// What it said of itself at its last heartbeat.
    pub facts: WorkerFacts,
    /// An operator asked it to drain: it claims nothing.
    pub draining: bool,
    /// Tasks and runs it holds a lease on now.
    pub running: u64,
    /// Of those, the ones of the task's queue (what `one_per_worker` counts).
    pub running_in_queue: u64,
}

/// What surrounds a pending task when it is asked about.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Surroundings {
    /// The database's now.
    pub now: DateTime<Utc>,
    /// Whether the task's queue is paused.
    pub paused: bool,
    /// The queue's policy (the default: none).
    pub policy: QueuePolicy,
    /// The queue's rate bucket (`None`: full).
    pub rate_tat: Option<DateTime<Utc>>,
    /// The bucket of the task's key in its queue (`None`: full, or no key).
    pub key_tat: Option<DateTime<Utc>>,
    /// The queue's running tasks, by kind.
    pub running_by_kind: BTreeMap<String, u64>,
    /// Every worker not gone, draining ones included.
    pub live: Vec<LiveWorker>,
    /// For a multi-run task that does not repeat: the workers that succeeded at a run of
    /// it, which may not start another.
    pub succeeded_runs: Vec<String>,
}

/// One reason a pending task waits.
#[derive(Debug, Clone, PartialEq)]
pub enum WaitReason {
    /// Its `run_at` is still ahead.
    NotDue {
        /// When it is due.
        until: DateTime<Utc>,
    },
    /// Its queue is paused.
    QueuePaused {
        /// The queue.
        queue: String,
    },
    /// No worker is live.
    NoLiveWorker,
    /// No live worker takes its queue.
    NoWorkerForQueue {
        /// The queue.
        queue: String,
    },
    /// Every live worker that takes its queue said which kinds it handles, and none
    /// handles the task's.
    NoWorkerForKind {
        /// The task's kind.
        kind: String,
        /// Its queue.
        queue: String,
    },
    /// Its target names workers, none of which is live.
    TargetWorkersAbsent {
        /// The ids the target names.
        workers: Vec<String>,
    },
    /// Its target names groups no live worker is in.
    TargetGroupsEmpty {
        /// The groups the target names.
        groups: Vec<String>,
    },
    /// The live workers its target allows do not take its queue, or handle other kinds.
    TargetUnfit {
        /// The target, in words.
        target: String,
        /// The task's queue.
        queue: String,
        /// The task's kind.
        kind: String,
    },
    /// Every live worker that could run it is draining.
    AllDraining,
    /// A retry waits for the worker of its previous attempt.
    Affinity {
        /// That worker.
        worker: String,
        /// When the wait ends at the latest.
        until: DateTime<Utc>,
        /// `until` has passed: the wait is over, and lasts only until the rescuer's next
        /// round lets other workers take the task.
        over: bool,
    },
    /// The worker an affinity waits for is no longer live, or drains: the rescuer ends
    /// the wait at its next round.
    AffinityWorkerAway {
        /// That worker.
        worker: String,
    },
    /// The queue runs as many tasks as its policy's `max_running`.
    QueueAtLimit {
        /// The queue.
        queue: String,
        /// The limit.
        max: u32,
    },
    /// The task's kind runs as many tasks as the queue's limit for it.
    KindAtLimit {
        /// The kind.
        kind: String,
        /// The queue.
        queue: String,
        /// The limit.
        max: u32,
    },
    /// The queue's rate has no start left now.
    QueueRate {
        /// The queue.
        queue: String,
        /// Its rate, in starts a second.
        per_second: f64,
    },
    /// The rate of the task's key has no start left now.
    KeyRate {
        /// The key.
        key: String,
        /// The rate, in starts a second.
        per_second: f64,
    },
    /// Every worker that could run it already runs a task of the queue, which allows one
    /// per worker.
    OnePerWorker {
        /// The queue.
        queue: String,
    },
    /// Every worker that could run it holds at least as many tasks as it runs at once.
    AllBusy,
    /// A multi-run task: every live worker that could run it already succeeded at a run
    /// of it, and the task does not repeat.
    RunsDoneHere,
    /// Nothing holds it back: it waits for a worker to claim it.
    Turn,
}

fn quoted(names: &[String]) -> String {
    names
        .iter()
        .map(|n| format!("{n:?}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl WaitReason {
    /// A short name that stays the same across versions: what a program may test.
    pub fn code(&self) -> &'static str {
        match self {
            WaitReason::NotDue { .. } => "not_due",
            WaitReason::QueuePaused { .. } => "queue_paused",
            WaitReason::NoLiveWorker => "no_live_worker",
            WaitReason::NoWorkerForQueue { .. } => "no_worker_for_queue",
            WaitReason::NoWorkerForKind { .. } => "no_worker_for_kind",
            WaitReason::TargetWorkersAbsent { .. } => "target_workers_absent",
            WaitReason::TargetGroupsEmpty { .. } => "target_groups_empty",
            WaitReason::TargetUnfit { .. } => "target_unfit",
            WaitReason::AllDraining => "all_draining",
            WaitReason::Affinity { .. } => "affinity",
            WaitReason::AffinityWorkerAway { .. } => "affinity_worker_away",
            WaitReason::QueueAtLimit { .. } => "queue_at_limit",
            WaitReason::KindAtLimit { .. } => "kind_at_limit",
            WaitReason::QueueRate { .. } => "queue_rate",
            WaitReason::KeyRate { .. } => "key_rate",
            WaitReason::OnePerWorker { .. } => "one_per_worker",
            WaitReason::AllBusy => "all_busy",
            WaitReason::RunsDoneHere => "runs_done_here",
            WaitReason::Turn => "turn",
        }
    }

    /// Every [`WaitReason::code`], for documents that list them.
    pub const CODES: [&'static str; 19] = [
        "not_due",
        "queue_paused",
        "no_live_worker",
        "no_worker_for_queue",
        "no_worker_for_kind",
        "target_workers_absent",
        "target_groups_empty",
        "target_unfit",
        "all_draining",
        "affinity",
        "affinity_worker_away",
        "queue_at_limit",
        "kind_at_limit",
        "queue_rate",
        "key_rate",
        "one_per_worker",
        "all_busy",
        "runs_done_here",
        "turn",
    ];
}

impl fmt::Display for WaitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WaitReason::NotDue { until } => {
                write!(f, "not due until {}", until.format("%Y-%m-%d %H:%M:%S UTC"))
            }
            WaitReason::QueuePaused { queue } => write!(f, "queue {queue:?} is paused"),
            WaitReason::NoLiveWorker => f.write_str("no worker is live"),
            WaitReason::NoWorkerForQueue { queue } => {
                write!(f, "no live worker takes queue {queue:?}")
            }
            WaitReason::NoWorkerForKind { kind, queue } => {
                write!(f, "no live worker handles kind {kind:?} in queue {queue:?}")
            }
            WaitReason::TargetWorkersAbsent { workers } => write!(
                f,
                "its target names worker ids none of which is live ({})",
                quoted(workers)
            ),
            WaitReason::TargetGroupsEmpty { groups } if groups.len() == 1 => {
                write!(f, "no live worker is in group {:?}", groups[0])
            }
            WaitReason::TargetGroupsEmpty { groups } => {
                write!(f, "no live worker is in any of the groups {}", quoted(groups))
            }
            WaitReason::TargetUnfit {
                target,
                queue,
                kind,
            } => write!(
                f,
                "no live worker its target allows ({target}) takes queue {queue:?} and kind {kind:?}"
            ),
            WaitReason::AllDraining => {
                f.write_str("every live worker that could run it is draining")
            }
            WaitReason::Affinity {
                worker,
                until,
                over: false,
            } => write!(
                f,
                "it waits for worker {worker:?}, which ran its last attempt, until {}",
                until.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            WaitReason::Affinity {
                worker,
                until,
                over: true,
            } => write!(
                f,
                "its wait for worker {worker:?}, which ran its last attempt, ended at {}: \
                 the rescuer lets any allowed worker take it at its next round",
                until.format("%Y-%m-%d %H:%M:%S UTC")
            ),
            WaitReason::AffinityWorkerAway { worker } => write!(
                f,
                "worker {worker:?} is gone or draining: the rescuer ends the wait at its next round"
            ),
            WaitReason::QueueAtLimit { queue, max } => {
                write!(f, "queue {queue:?} is at its limit of {max} running")
            }
            WaitReason::KindAtLimit { kind, queue, max } => write!(
                f,
                "kind {kind:?} is at its limit of {max} running in queue {queue:?}"
            ),
            WaitReason::QueueRate { queue, per_second } => write!(
                f,
                "queue {queue:?} has started as many tasks as its rate of {per_second} a second allows for now"
            ),
            WaitReason::KeyRate { key, per_second } => write!(
                f,
                "tasks with key {key:?} have started as many as their rate of {per_second} a second allows for now"
            ),
            WaitReason::OnePerWorker { queue } => write!(
                f,
                "every worker that could run it already runs a task of queue {queue:?}, which allows one per worker"
            ),
            WaitReason::AllBusy => f.write_str(
                "every worker that could run it holds as many tasks as it runs at once",
            ),
            WaitReason::RunsDoneHere => f.write_str(
                "every worker that could run it now (live and not draining) has already succeeded at a run of it",
            ),
            WaitReason::Turn => f.write_str(
                "nothing holds it back: it waits for a worker with a free slot to claim it",
            ),
        }
    }
}

/// Why `task` waits, most fundamental first; empty unless it is pending. A pending task
/// always has at least one reason ([`WaitReason::Turn`] when nothing else is found).
pub fn reasons(task: &Task, around: &Surroundings) -> Vec<WaitReason> {
    if task.state != TaskState::Pending {
        return Vec::new();
    }
    let mut out = Vec::new();
    let due = task.run_at <= around.now;
    if !due {
        out.push(WaitReason::NotDue { until: task.run_at });
    }
    if around.paused {
        out.push(WaitReason::QueuePaused {
            queue: task.queue.clone(),
        });
    }
    let able = match affinity(task, around, &mut out) {
        Some(able) => able,
        None => match workers(task, &task.target, around, &mut out) {
            Some(able) => able,
            None => return out,
        },
    };
    if !due || around.paused {
        // What holds a due task back now says nothing of when this one will be due.
        return out;
    }
    let before = out.len();
    if task.runs.is_some() {
        runs_done(task, around, &able, &mut out);
    } else {
        limits(task, around, &able, &mut out);
    }
    if out.len() == before
        && able
            .iter()
            .all(|w| w.running >= u64::from(w.facts.capacity))
    {
        out.push(WaitReason::AllBusy);
    }
    if out.is_empty() {
        out.push(WaitReason::Turn);
    }
    out
}

/// While a retry waits for its previous worker: that reason, and whether the worker is
/// there; the workers able to take the task (`None`: the wait is over in all but name,
/// and the task's own target decides).
fn affinity<'a>(
    task: &Task,
    around: &'a Surroundings,
    out: &mut Vec<WaitReason>,
) -> Option<Vec<&'a LiveWorker>> {
    let (Some(until), Some(worker)) = (task.affinity_until, &task.worker_id) else {
        return None;
    };
    out.push(WaitReason::Affinity {
        worker: worker.clone(),
        until,
        over: until <= around.now,
    });
    let found = around
        .live
        .iter()
        .find(|w| &w.facts.id == worker && !w.draining);
    match found {
        Some(w) => Some(vec![w]),
        None => {
            out.push(WaitReason::AffinityWorkerAway {
                worker: worker.clone(),
            });
            None
        }
    }
}

/// The live workers that may claim the task, narrowed step by step: its queue, its kind,
/// its target, not draining. When a step leaves none, that step's reason is given and
/// `None` answered.
fn workers<'a>(
    task: &Task,
    target: &Target,
    around: &'a Surroundings,
    out: &mut Vec<WaitReason>,
) -> Option<Vec<&'a LiveWorker>> {
    let (queue, kind) = (&task.queue, &task.kind);
    if around.live.is_empty() {
        out.push(WaitReason::NoLiveWorker);
        return None;
    }
    let takes: Vec<&LiveWorker> = around
        .live
        .iter()
        .filter(|w| w.facts.queues.takes(queue))
        .collect();
    if takes.is_empty() {
        out.push(WaitReason::NoWorkerForQueue {
            queue: queue.clone(),
        });
        return None;
    }
    // A worker that did not say which kinds it handles may handle this one.
    let handles: Vec<&LiveWorker> = takes
        .into_iter()
        .filter(|w| w.facts.handles(kind) != Some(false))
        .collect();
    if handles.is_empty() {
        out.push(WaitReason::NoWorkerForKind {
            kind: kind.clone(),
            queue: queue.clone(),
        });
        return None;
    }
    let allowed: Vec<&LiveWorker> = handles
        .into_iter()
        .filter(|w| target.allows(&w.facts.id, &w.facts.groups))
        .collect();
    if allowed.is_empty() {
        out.push(target_reason(task, target, around));
        return None;
    }
    let active: Vec<&LiveWorker> = allowed.into_iter().filter(|w| !w.draining).collect();
    if active.is_empty() {
        out.push(WaitReason::AllDraining);
        return None;
    }
    Some(active)
}

/// Why a target leaves out every live worker that takes the task's queue and kind.
fn target_reason(task: &Task, target: &Target, around: &Surroundings) -> WaitReason {
    let anyone = around
        .live
        .iter()
        .any(|w| target.allows(&w.facts.id, &w.facts.groups));
    match target {
        Target::Workers(ids) if !anyone => WaitReason::TargetWorkersAbsent {
            workers: ids.clone(),
        },
        Target::Groups(groups) if !anyone => WaitReason::TargetGroupsEmpty {
            groups: groups.clone(),
        },
        _ => WaitReason::TargetUnfit {
            target: target.to_string(),
            queue: task.queue.clone(),
            kind: task.kind.clone(),
        },
    }
}

/// What the queue's policy holds back now, as its limited claim counts it.
fn limits(task: &Task, around: &Surroundings, able: &[&LiveWorker], out: &mut Vec<WaitReason>) {
    let policy = &around.policy;
    if !policy.is_limited() {
        return;
    }
    let queue = &task.queue;
    let running: u64 = around.running_by_kind.values().sum();
    if let Some(max) = policy.max_running {
        if running >= u64::from(max) {
            out.push(WaitReason::QueueAtLimit {
                queue: queue.clone(),
                max,
            });
        }
    }
    if let Some(max) = policy.kind_max_running.get(&task.kind) {
        let of_kind = around.running_by_kind.get(&task.kind).copied().unwrap_or(0);
        if of_kind >= u64::from(*max) {
            out.push(WaitReason::KindAtLimit {
                kind: task.kind.clone(),
                queue: queue.clone(),
                max: *max,
            });
        }
    }
    if let Some(rate) = &policy.rate {
        if rate.available(around.rate_tat, around.now) == 0 {
            out.push(WaitReason::QueueRate {
                queue: queue.clone(),
                per_second: rate.per_second,
            });
        }
    }
    if let (Some(rate), Some(key)) = (&policy.key_rate, &task.key) {
        if rate.available(around.key_tat, around.now) == 0 {
            out.push(WaitReason::KeyRate {
                key: key.clone(),
                per_second: rate.per_second,
            });
        }
    }
    if policy.one_per_worker && able.iter().all(|w| w.running_in_queue > 0) {
        out.push(WaitReason::OnePerWorker {
            queue: queue.clone(),
        });
    }
}

/// A multi-run task that does not repeat: whether every worker able to take a run has
/// succeeded at one already.
fn runs_done(task: &Task, around: &Surroundings, able: &[&LiveWorker], out: &mut Vec<WaitReason>) {
    let repeats = task.runs.as_ref().is_some_and(|r| r.repeat);
    if !repeats
        && able
            .iter()
            .all(|w| around.succeeded_runs.contains(&w.facts.id))
    {
        out.push(WaitReason::RunsDoneHere);
    }
}

#[cfg(test)]
mod tests;
