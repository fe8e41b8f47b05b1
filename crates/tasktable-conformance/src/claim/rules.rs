//! Core's rules applied by the stores' hand-written SQL: every backend must end each
//! attempt where `tasktable-core` says, whatever an operator changed while it ran.

use crate::Backend;
use chrono::{DateTime, TimeZone, Utc};
use serde_json::json;
use std::time::Duration;
use tasktable_core::outcome::{retry_state, FinishPlan};
use tasktable_core::{AttemptOutcome, Change, FinishAction, NewTask, Task, TaskId, TaskState};
use tasktable_store::*;

const QUEUE: &str = "rules";
const LEASE: Duration = Duration::from_secs(30);

fn at(secs: i64) -> DateTime<Utc> {
    Utc.with_ymd_and_hms(2030, 1, 1, 0, 0, 0).unwrap() + chrono::Duration::seconds(secs)
}

/// One task of the grid: it fails `attempt` times; while its last attempt runs, its
/// `max_attempts` goes from `submitted` to `changed_to` (when set); the last failure is
/// reported by its worker or found by the rescuer.
#[derive(Debug)]
struct Cell {
    attempt: u32,
    submitted: u32,
    changed_to: Option<u32>,
    rescued: bool,
    id: TaskId,
}

impl Cell {
    fn kind(&self) -> String {
        format!(
            "a{}-m{}-to{}-{}",
            self.attempt,
            self.submitted,
            self.changed_to.map_or("-".into(), |m| m.to_string()),
            if self.rescued { "rescued" } else { "worker" }
        )
    }

    /// The `max_attempts` the row holds when attempt `n` ends.
    fn max_attempts_at(&self, n: u32) -> u32 {
        match self.changed_to {
            Some(m) if n == self.attempt => m,
            _ => self.submitted,
        }
    }
}

/// Every (attempt, max_attempts) the grid covers: the attempt that fails last from 1 to 3,
/// `max_attempts` submitted equal to it (the last attempt) or two above, and left alone
/// or set while the last attempt runs to every value from 1 to two above the attempt:
/// lowered below the attempts spent, to exactly them, or raised past them.
fn grid() -> Vec<Cell> {
    let mut cells = Vec::new();
    for attempt in 1..=3 {
        for submitted in [attempt, attempt + 2] {
            let changes = std::iter::once(None).chain((1..=attempt + 2).map(Some));
            for changed_to in changes {
                for rescued in [false, true] {
                    cells.push(Cell {
                        attempt,
                        submitted,
                        changed_to,
                        rescued,
                        id: 0,
                    });
                }
            }
        }
    }
    cells
}

fn failure(rescued: bool) -> FinishPlan {
    let (outcome, error) = if rescued {
        (AttemptOutcome::LeaseExpired, "lease expired")
    } else {
        (AttemptOutcome::Error, "boom")
    };
    FinishPlan {
        outcome,
        action: FinishAction::Retry {
            delay: Duration::ZERO,
        },
        error: Some(error.into()),
    }
}

/// Ends the attempts of `tasks` as failures in one finish call: as their worker at
/// `now`, or as the rescuer once their leases have passed.
async fn fail(store: &dyn Store, tasks: &[&Task], rescued: bool, now: DateTime<Utc>) {
    if tasks.is_empty() {
        return;
    }
    let applied = store
        .task_finish(FinishParams {
            items: tasks
                .iter()
                .map(|t| FinishItem {
                    lease: t.lease(),
                    plan: failure(rescued),
                })
                .collect(),
            only_if_expired: rescued,
            now: Some(now),
        })
        .await
        .expect("finish");
    assert!(
        applied.iter().all(|a| *a),
        "every lease is held: {applied:?}"
    );
}

/// Drives real finishes over a grid of attempts and `max_attempts`, including
/// `max_attempts` raised and lowered while the attempt runs, and checks each task's state
/// and the history row of its last attempt against `tasktable_core::outcome::retry_state`.
/// Each round's finishes go as one batch, as a worker's completer and the rescuer send
/// them.
pub async fn a_retry_ends_where_core_says_whatever_max_attempts_becomes_while_running(
    db: &impl Backend,
) {
    let s = db.store().await;
    let mut cells = grid();
    let tasks = cells
        .iter()
        .map(|c| {
            NewTask::new(c.kind(), json!(null))
                .queue(QUEUE)
                .max_attempts(c.submitted)
        })
        .collect();
    let submitted = s
        .task_submit(SubmitParams {
            tasks,
            now: Some(at(0)),
        })
        .await
        .expect("submit");
    for (cell, s) in cells.iter_mut().zip(submitted) {
        cell.id = s.id;
    }

    for round in 1..=3u32 {
        let now = at(i64::from(round) * 1000);
        let running: Vec<&Cell> = cells.iter().filter(|c| c.attempt >= round).collect();
        let claimed = s
            .task_claim(ClaimParams {
                queue: QUEUE.into(),
                kinds: running.iter().map(|c| c.kind()).collect(),
                limit: running.len() as u32,
                worker_id: "w1".into(),
                worker_host: "host-a".into(),
                worker_groups: Vec::new(),
                lease_for: LEASE,
                now: Some(now),
            })
            .await
            .expect("claim");
        assert_eq!(claimed.len(), running.len(), "round {round}");
        for cell in running.iter().filter(|c| c.attempt == round) {
            if let Some(m) = cell.changed_to {
                let changed = s
                    .task_update(UpdateParams {
                        actor: tasktable_core::Actor::rust(),
                        target: Target::Id(cell.id),
                        change: Change::SetMaxAttempts { max_attempts: m },
                        now: Some(now),
                        action: None,
                    })
                    .await
                    .expect("set max_attempts");
                assert_eq!(changed, 1, "{cell:?}: a running task takes the change");
            }
        }
        let cell_of = |t: &Task| *running.iter().find(|c| c.id == t.id).expect("a grid task");
        let by_worker: Vec<&Task> = claimed.iter().filter(|t| !cell_of(t).rescued).collect();
        let by_rescuer: Vec<&Task> = claimed.iter().filter(|t| cell_of(t).rescued).collect();
        fail(&*s, &by_worker, false, now + chrono::Duration::seconds(1)).await;
        let expired = now + chrono::Duration::from_std(LEASE).unwrap();
        fail(
            &*s,
            &by_rescuer,
            true,
            expired + chrono::Duration::seconds(1),
        )
        .await;

        for cell in &running {
            let task = s.task_get(cell.id).await.expect("get").expect("task");
            assert_eq!(task.attempt, round, "{cell:?}");
            assert_eq!(task.max_attempts, cell.max_attempts_at(round), "{cell:?}");
            let core = retry_state(round, cell.max_attempts_at(round));
            assert_eq!(
                task.state,
                core,
                "{cell:?}: attempt {round} of max_attempts {} ended {:?} on {}, \
                 core says {core:?}",
                task.max_attempts,
                task.state,
                s.backend()
            );
            if round < cell.attempt {
                assert_eq!(core, TaskState::Pending, "{cell:?}: the grid retries here");
            }
        }
    }

    // The history row of each attempt names the state it left its task in (`failed`, or
    // pending for a retry): statistics count the first as failed, the others as retried.
    let stats = s
        .stats(StatsParams {
            window: Duration::from_secs(3600),
            queue: Some(QUEUE.into()),
            kind: None,
            now: Some(at(3600)),
        })
        .await
        .expect("stats");
    let mut outcomes = [0u32; 2];
    for cell in &cells {
        let last = retry_state(cell.attempt, cell.max_attempts_at(cell.attempt));
        outcomes[usize::from(last == TaskState::Failed)] += 1;
        let group = stats
            .groups
            .iter()
            .find(|g| g.kind == cell.kind())
            .unwrap_or_else(|| panic!("{cell:?}: no statistics"));
        let failed = u64::from(last == TaskState::Failed);
        assert_eq!(
            (group.window.failed, group.window.retried),
            (failed, u64::from(cell.attempt) - failed),
            "{cell:?}: the history of its attempts on {}",
            s.backend()
        );
    }
    assert!(
        outcomes.iter().all(|n| *n > 0),
        "the grid ends tasks both ways: {outcomes:?}"
    );
}
