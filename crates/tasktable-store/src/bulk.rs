//! Bulk operator changes, in chunks.
//!
//! An operator's change to every task a filter matches (100,000 pending tasks, say) runs
//! as a sequence of short transactions, each over at most `chunk_rows` rows, in id order,
//! so it never holds row locks, or SQLite's one writer, for longer than one chunk takes;
//! claims and finishes go on in between. It first reads, without locks, the ids of the
//! tasks the filter matches in a state the change may start from (8 bytes a task). Each
//! chunk then locks the next of those ids by primary key, with the applicable states and
//! the filter in its `WHERE` clause, so a row that has moved to another state is dropped
//! (PostgreSQL and SQLite never lock it; MySQL waits for it at most once, see
//! `tasktable_sql::update`); it changes the rows that are left and writes their history as a
//! single-task change would, and commits. Backends supply the read and one chunk
//! ([`ChunkedUpdate`]); [`update_in_chunks`] drives them.
//!
//! Why not walk the filter itself by keyset (`id > last ... ORDER BY id LIMIT n`), one
//! chunk per query: a filter on queue and state is served by the state index, which is
//! not in id order, so every such chunk reads and sorts every remaining match: quadratic
//! in the matches, and on SQLite under the writer (12-16 ms a chunk of 500 among 100,000
//! pending tasks, against 0.3 ms by primary key, timed with SQLite 3.40 on the benchmark
//! machine). Walking the primary key instead reads the whole table for a filter that
//! matches a few rows of a large history. One read of the ids, by whatever index the
//! planner likes, is linear either way.
//!
//! What a bulk change guarantees: it changes every task that matched the filter in an
//! applicable state when it began and still does when its chunk runs. A task that leaves
//! the filter or those states before its chunk (a worker finishes it) is not changed; a
//! task submitted after the change began, or that enters the filter or those states
//! later (a worker's retry sends a running task back to `pending`, say), is not part of
//! it. A row a worker holds for a moment (a finish in flight) is waited for, not skipped.
//! A change that fails part-way keeps the chunks already committed; running it again
//! applies the rest.

use crate::filter::TaskFilter;
use crate::params::Change;
use crate::StoreResult;
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use tasktable_core::{Actor, Operation, TaskId, TaskState};

/// Rows per chunk unless a store is configured otherwise. Measured with the benchmark's
/// 100,000-task cancel beside a working worker (docs/benchmarks.md, 2 vCPUs): 100 rows
/// made the cancel 1.7-1.9 x as long as 500 on every backend, and from 1,000 rows a
/// SQLite chunk held the writer long enough for the worker to lose 40-50 % of its
/// throughput while the cancel ran; with 500 a claim waits about one chunk (p50 7-14 ms
/// on SQLite). It also keeps MySQL's id lists (at most 1,000 placeholders) to one
/// statement.
pub const DEFAULT_BULK_CHUNK_ROWS: u32 = 500;

/// One chunk of an operator's change to a filter.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct UpdateChunkParams<'a> {
    /// The filter of the whole change (any states it names still apply).
    pub filter: &'a TaskFilter,
    /// The change, applied to each task of the chunk as to a single task.
    pub change: &'a Change,
    /// Who asks, for the event of each task changed.
    pub actor: &'a Actor,
    /// The change's time; `None`: the database's clock, read in the chunk's own
    /// transaction.
    pub now: Option<DateTime<Utc>>,
    /// The tasks of this chunk, in id order: some of the ids
    /// [`ChunkedUpdate::task_ids_matching`] returned.
    pub ids: &'a [TaskId],
    /// The operator action the change is part of: the chunk adds the tasks it changed to
    /// the action's own event (writing it when it has none yet) and marks each task's
    /// event with the key.
    pub action: &'a str,
}

pub use crate::action::{check_action_key, new_action_key, MAX_ACTION_KEY};

/// A store that applies an operator's change to a filter one chunk at a time.
#[async_trait]
pub trait ChunkedUpdate: Send + Sync {
    /// The ids of the tasks `filter` matches now, in id order, read without taking or
    /// waiting for any lock.
    async fn task_ids_matching(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskId>>;

    /// In one transaction: locks those of `ids` that still match the filter in a state
    /// the change may start from, waiting for any a worker holds at that moment (never for
    /// rows in other states), and changes them as
    /// [`Store::task_update`](crate::Store::task_update) changes one task: history rows
    /// for cancelled attempts, wake-ups when tasks may have become due. Returns how many
    /// changed.
    async fn task_update_chunk(&self, params: &UpdateChunkParams<'_>) -> StoreResult<u64>;
}

/// The filter narrowed to the states `op` may start from, which every chunk puts in its
/// `WHERE` clause; `None` when no matching task could be changed.
pub fn changeable(filter: &TaskFilter, op: Operation) -> Option<TaskFilter> {
    let states: Vec<TaskState> = op
        .allowed_from()
        .iter()
        .filter(|s| filter.states.is_empty() || filter.states.contains(s))
        .copied()
        .collect();
    (!states.is_empty()).then(|| TaskFilter {
        states,
        ..filter.clone()
    })
}

/// Applies `change` to every task `filter` matches, `chunk_rows` rows a transaction (see
/// the module's documentation for what that guarantees), as part of operator action
/// `action`; returns how many changed.
pub async fn update_in_chunks<S: ChunkedUpdate + ?Sized>(
    store: &S,
    filter: &TaskFilter,
    change: &Change,
    actor: &Actor,
    now: Option<DateTime<Utc>>,
    chunk_rows: u32,
    action: &str,
) -> StoreResult<u64> {
    let Some(changeable) = changeable(filter, change.operation()) else {
        return Ok(0);
    };
    let ids = store.task_ids_matching(&changeable).await?;
    let mut changed = 0;
    for ids in ids.chunks(chunk_rows.max(1) as usize) {
        changed += store
            .task_update_chunk(&UpdateChunkParams {
                filter,
                change,
                actor,
                now,
                ids,
                action,
            })
            .await?;
    }
    Ok(changed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changeable_keeps_only_the_states_the_operation_starts_from() {
        let any = TaskFilter::default().queue("q");
        let cancel = changeable(&any, Operation::Cancel).unwrap();
        assert_eq!(
            cancel.states,
            [TaskState::Held, TaskState::Pending, TaskState::Running]
        );
        assert_eq!(cancel.queue.as_deref(), Some("q"));
        let some = TaskFilter::default()
            .state(TaskState::Running)
            .state(TaskState::Failed);
        assert_eq!(
            changeable(&some, Operation::Cancel).unwrap().states,
            [TaskState::Running]
        );
        let finished = TaskFilter::default().state(TaskState::Succeeded);
        assert_eq!(changeable(&finished, Operation::Retry), None);
    }
}
