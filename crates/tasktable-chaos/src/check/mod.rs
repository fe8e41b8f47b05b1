//! The invariants a run must keep, each a pure function of the evidence gathered after
//! the drain: what the run submitted (its ledger), what the task table and its history
//! say, what every worker journaled, the effects table, and the stuck samples.
//!
//! A check compares sources that are written independently: the history against the
//! workers' own accounts and against the effects table; the table against the ledger.
//! Each check's tests build a history that breaks its property and see it fire.
//!
//! Tokens and history rows: a task's fencing token starts at 0 and grows by one on every
//! claim, and every claim ends with exactly one history row (complete, fail, snooze,
//! release or rescue), written before the next claim can happen. So, with no operator
//! changes in a run, history row `T` (1-based, in order of writing) is the attempt that
//! held token `T`.

mod attempts;
mod explain;
mod lost;
mod stale;
mod stuck;
mod twice;

use crate::behaviour::Behaviour;
use crate::effects::EffectRow;
use crate::journal::Entry;
use crate::sampler::Sample;
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use tasktable::{AttemptOutcome, TaskState};

/// A task as the table had it after the drain.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskRecord {
    pub id: i64,
    pub idempotency_key: Option<String>,
    pub state: TaskState,
    pub attempt: u32,
    pub max_attempts: u32,
    pub lease_token: i64,
    pub result: Option<Value>,
    /// The history, oldest first.
    pub rows: Vec<Row>,
}

impl TaskRecord {
    /// The history row of the attempt that held `token`.
    pub fn row(&self, token: i64) -> Option<&Row> {
        usize::try_from(token - 1)
            .ok()
            .and_then(|i| self.rows.get(i))
    }

    /// Whether `token` is the attempt still running (a run whose drain did not finish).
    pub fn runs_under(&self, token: i64) -> bool {
        self.state == TaskState::Running && self.lease_token == token
    }
}

/// One history row.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    pub attempt: u32,
    pub worker: Option<String>,
    pub outcome: AttemptOutcome,
    /// When the attempt was claimed, wall-clock milliseconds.
    pub started_ms: Option<i64>,
    /// When the attempt ended, wall-clock milliseconds (the database's clock, on the same
    /// host as the workers).
    pub finished_ms: i64,
}

/// A span of wall-clock time in which rescue could not run (the database was down).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub from_ms: i64,
    pub to_ms: i64,
}

/// A fault as the checks see it: what it hit and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Disruption {
    pub kind: &'static str,
    /// The process it hit; `None` for the database.
    pub target: Option<String>,
    pub from_ms: i64,
    pub to_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Limits {
    /// A lease expired longer ago than this, outside an outage, is stuck: the rescue
    /// interval plus the time a scan may take.
    pub stuck_after_ms: i64,
    /// The lease length workers ask for.
    pub lease_ms: i64,
    /// The longest a connection pool waits between attempts to reach a database that
    /// refuses connections: sqlx doubles its wait from 10 ms up to a fifth of its 30 s
    /// acquire timeout. After an outage of `d`, a worker's next call may come about
    /// `min(d, this)` after the server is back.
    pub reconnect_ms: i64,
}

impl Limits {
    /// How long after an outage ends work may still be catching up: the pool's reconnect
    /// wait, then a rescue interval and a scan.
    fn after_outage(&self, outage: Window) -> i64 {
        (outage.to_ms - outage.from_ms).min(self.reconnect_ms) + self.stuck_after_ms
    }
}

#[derive(Debug, Clone, Default)]
pub struct Evidence {
    pub seed: u64,
    pub specs: Vec<Behaviour>,
    /// The id the API gave each task, by submission index.
    pub ledger: Vec<Option<i64>>,
    /// Every task in the run's queue.
    pub tasks: BTreeMap<i64, TaskRecord>,
    pub journal: Vec<Entry>,
    /// Workers whose effects are journal lines (pull workers) rather than table rows.
    pub pull_workers: BTreeSet<String>,
    pub effects: Vec<EffectRow>,
    pub samples: Vec<Sample>,
    pub outages: Vec<Window>,
    pub disruptions: Vec<Disruption>,
    pub limits: Option<Limits>,
    /// `None` when every task reached a final state; otherwise how long the drain waited.
    pub drain_gave_up_after_ms: Option<i64>,
}

impl Evidence {
    fn limits(&self) -> Limits {
        self.limits.unwrap_or(Limits {
            stuck_after_ms: 3000,
            lease_ms: 2000,
            reconnect_ms: 6000,
        })
    }
}

/// The result of one check.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    pub name: &'static str,
    /// What passing proves.
    pub proves: &'static str,
    /// How many things it examined, to show it had something to check.
    pub examined: usize,
    pub violations: Vec<String>,
}

impl Verdict {
    fn new(name: &'static str, proves: &'static str) -> Self {
        Verdict {
            name,
            proves,
            examined: 0,
            violations: Vec::new(),
        }
    }

    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    fn fail(&mut self, violation: String) {
        self.violations.push(violation);
    }
}

pub fn run_all(evidence: &Evidence) -> Vec<Verdict> {
    vec![
        lost::check(evidence),
        twice::check(evidence),
        stale::check(evidence),
        attempts::check(evidence),
        stuck::check(evidence),
    ]
}

pub use explain::{unexplained_expiries, HANGUP_WORKER};

/// Attempts that count against `max_attempts` (core's rule).
fn spends(outcome: AttemptOutcome) -> bool {
    outcome.spends_attempt()
}

#[cfg(test)]
pub(crate) mod fixtures {
    //! Small histories to break, one property at a time.

    use super::*;

    /// Asserts that `check` finds a violation whose message holds `text` in `e`.
    pub fn fires(check: fn(&Evidence) -> Verdict, e: &Evidence, text: &str) {
        let v = check(e);
        assert!(
            v.violations.iter().any(|m| m.contains(text)),
            "expected a violation with {text:?}, got {:?}",
            v.violations
        );
    }
    use crate::journal::Op;
    use AttemptOutcome as O;

    pub fn row(attempt: u32, worker: &str, outcome: AttemptOutcome, finished_ms: i64) -> Row {
        Row {
            attempt,
            worker: Some(worker.into()),
            outcome,
            started_ms: Some(finished_ms - 100),
            finished_ms,
        }
    }

    /// One `ok` task (id 1) that lost its first lease to a freeze of worker "w1" and
    /// succeeded on "w2": consistent in every source.
    pub fn healthy() -> Evidence {
        let rows = vec![
            row(1, "w1", O::LeaseExpired, 5_000),
            row(2, "w2", O::Succeeded, 6_000),
        ];
        let task = TaskRecord {
            id: 1,
            idempotency_key: Some(crate::behaviour::idempotency_key(0, 0)),
            state: TaskState::Succeeded,
            attempt: 2,
            max_attempts: 25,
            lease_token: 2,
            result: Some(serde_json::json!({ "done": true })),
            rows,
        };
        let mut claim1 = entry("w1", Op::Claim, 1, 1000);
        claim1.attempt = Some(1);
        let mut claim2 = entry("w2", Op::Claim, 2, 5_100);
        claim2.attempt = Some(2);
        let mut finish = entry("w2", Op::Finish, 2, 5_900);
        finish.outcome = Some("succeeded".into());
        Evidence {
            specs: vec![Behaviour::Ok { ms: 10 }],
            ledger: vec![Some(1)],
            tasks: BTreeMap::from([(1, task)]),
            journal: vec![
                claim1,
                entry("w1", Op::Renew, 1, 1_500),
                claim2,
                entry("w2", Op::Effect, 2, 5_800),
                finish,
            ],
            effects: vec![effect(1, 2, "w2", 2)],
            samples: vec![Sample {
                at_ms: 4_000,
                writable: true,
                expired: vec![crate::sampler::Expired {
                    task: 1,
                    ago_ms: 900,
                    worker: Some("w1".into()),
                }],
            }],
            ..Evidence::default()
        }
    }

    /// An accepted entry of task 1.
    pub fn entry(worker: &str, op: Op, token: i64, at_ms: i64) -> Entry {
        let mut e = Entry::new(worker, op, 1, Some(token));
        e.at_ms = at_ms;
        e.accepted = Some(true);
        e
    }

    pub fn effect(task: i64, token: i64, worker: &str, seen_token: i64) -> EffectRow {
        EffectRow {
            task,
            token,
            worker: worker.into(),
            seen_token: Some(seen_token),
            seen_state: Some("running".into()),
        }
    }

    pub fn task(e: &mut Evidence) -> &mut TaskRecord {
        e.tasks.get_mut(&1).expect("task 1")
    }

    #[test]
    fn the_healthy_history_passes_every_check() {
        for verdict in run_all(&healthy()) {
            assert!(
                verdict.passed(),
                "{}: {:?}",
                verdict.name,
                verdict.violations
            );
            assert!(verdict.examined > 0, "{} examined nothing", verdict.name);
        }
    }
}
