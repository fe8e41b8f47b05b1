//! Bounded reads of many tasks, for pages that count or group them.
//!
//! Counts by queue and state come from the store's queue counts, which read no task row;
//! any finer filter (a kind, a key, an error text, a time range) is counted by the store
//! up to a cap (`task_count`). Pages that group tasks (running tasks by worker) read light
//! rows, without payloads or results, a page at a time up to a cap; the caller says "at
//! least" when a cap stopped it.

use tasktable_core::{Operation, Task, TaskState};
use tasktable_store::{CountParams, ListParams, Store, StoreResult, TaskFilter};

/// Rows read per store call.
pub const PAGE: u32 = 100;

/// How many tasks there are, or at least are when counting stopped at the cap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Count {
    Exact(u64),
    AtLeast(u64),
}

impl Count {
    pub fn value(self) -> u64 {
        match self {
            Count::Exact(n) | Count::AtLeast(n) => n,
        }
    }
}

/// Hands each task `filter` matches, newest first, to `visit`, reading at most `cap` light
/// rows (`payload` null; no result, checkpoint or progress).
pub async fn scan(
    store: &dyn Store,
    filter: TaskFilter,
    cap: usize,
    mut visit: impl FnMut(&Task),
) -> StoreResult<Count> {
    let (mut rows, mut after) = (0usize, None);
    loop {
        let left = cap.saturating_sub(rows);
        if left == 0 {
            return Ok(Count::AtLeast(rows as u64));
        }
        let page = store
            .task_list(ListParams {
                filter: filter.clone(),
                after,
                limit: PAGE.min(u32::try_from(left).unwrap_or(PAGE)),
                light: true,
            })
            .await?;
        rows += page.tasks.len();
        page.tasks.iter().for_each(&mut visit);
        after = page.next;
        if after.is_none() {
            return Ok(Count::Exact(rows as u64));
        }
    }
}

/// Tasks in `states` summed from the queue counts, over one queue or all of them.
pub async fn by_queue_counts(
    store: &dyn Store,
    queue: Option<&str>,
    states: &[TaskState],
) -> StoreResult<u64> {
    Ok(store
        .queue_list()
        .await?
        .iter()
        .filter(|q| queue.is_none_or(|name| q.name == name))
        .flat_map(|q| &q.counts)
        .filter(|(s, _)| states.contains(s))
        .map(|(_, n)| n)
        .sum())
}

/// How many tasks `filter` matches that `op` may change, counting no further than `cap`.
pub async fn count_changeable(
    store: &dyn Store,
    filter: TaskFilter,
    op: Operation,
    cap: u64,
) -> StoreResult<Count> {
    let Some(filter) = tasktable_store::bulk::changeable(&filter, op) else {
        return Ok(Count::Exact(0));
    };
    let coarse = TaskFilter {
        queue: filter.queue.clone(),
        states: filter.states.clone(),
        ..TaskFilter::default()
    };
    if filter == coarse {
        let n = by_queue_counts(store, filter.queue.as_deref(), &filter.states).await?;
        return Ok(Count::Exact(n));
    }
    let n = store.task_count(CountParams { filter, cap }).await?;
    Ok(if n >= cap {
        Count::AtLeast(n)
    } else {
        Count::Exact(n)
    })
}
