//! Which lane a claim goes through.
//!
//! Three lanes claim: the hot path (the backend's one or two statements, for tasks that
//! run once in queues without a policy), the limited queues' claim ([`crate::limits`],
//! under the queue's lock) and the claim of runs of multi-run tasks ([`crate::runs`]).
//! Each writes the same transition; they differ in how they choose rows. [`claim`]
//! chooses among them with what the store remembers ([`LimitedQueues`], [`OpenRuns`]),
//! so that a drain of a queue without a policy or multi-run tasks costs one statement a
//! claim and, at most once a second each, one read when a claim comes back short.

use crate::limits::{LimitedClaim, LimitedQueues};
use crate::runs::OpenRuns;
use async_trait::async_trait;
use tasktable_core::Task;
use tasktable_store::{ClaimParams, StoreResult};

/// The lanes a claim may take, as [`claim`] sees them.
#[async_trait]
pub trait ClaimLanes: Send + Sync {
    /// The hot path: takes nothing from a paused or limited queue, and no run.
    async fn hot(&self, p: &ClaimParams) -> StoreResult<Vec<Task>>;

    /// The claim of a limited queue.
    async fn limited(&self, p: &ClaimParams) -> StoreResult<LimitedClaim>;

    /// Whether the queue has a policy now.
    async fn is_limited(&self, queue: &str) -> StoreResult<bool>;

    /// Whether the queue has an open multi-run task (at the claim's time).
    async fn any_open(&self, p: &ClaimParams) -> StoreResult<bool>;

    /// The claim of runs of open multi-run tasks, up to `p.limit`.
    async fn runs(&self, p: &ClaimParams) -> StoreResult<Vec<Task>>;
}

/// Claims up to `p.limit` tasks: single tasks first (the hot path, unless the queue is
/// known to be limited; a hot-path claim that finds nothing asks whether the queue has
/// become limited, at most once per [`crate::limits::RECHECK`]), then runs of open
/// multi-run tasks fill what is left, when the store may expect some. In claim order.
pub async fn claim(
    lanes: &impl ClaimLanes,
    limited: &LimitedQueues,
    open: &OpenRuns,
    p: &ClaimParams,
) -> StoreResult<Vec<Task>> {
    let mut tasks = single(lanes, limited, p).await?;
    let room = p.limit.saturating_sub(tasks.len() as u32);
    if room == 0 || !open.due(&p.queue, &p.worker_id, p.now.is_some()) {
        return Ok(tasks);
    }
    if !lanes.any_open(p).await? {
        open.found_none(&p.queue);
        return Ok(tasks);
    }
    let more = lanes
        .runs(&ClaimParams {
            limit: room,
            ..p.clone()
        })
        .await?;
    if more.is_empty() {
        open.found_nothing_for(&p.queue, &p.worker_id);
        return Ok(tasks);
    }
    tasks.extend(more);
    tasks.sort_by(Task::claim_order);
    Ok(tasks)
}

/// The claim of tasks that run once.
async fn single(
    lanes: &impl ClaimLanes,
    limited: &LimitedQueues,
    p: &ClaimParams,
) -> StoreResult<Vec<Task>> {
    if limited.contains(&p.queue) {
        match lanes.limited(p).await? {
            LimitedClaim::Claimed(tasks) => return Ok(tasks),
            LimitedClaim::NotLimited => limited.forget(&p.queue),
        }
    }
    let tasks = lanes.hot(p).await?;
    if !tasks.is_empty() || !limited.due_for_check(&p.queue) {
        return Ok(tasks);
    }
    if !lanes.is_limited(&p.queue).await? {
        limited.found_free(&p.queue);
        return Ok(tasks);
    }
    limited.remember(&p.queue);
    match lanes.limited(p).await? {
        LimitedClaim::Claimed(tasks) => Ok(tasks),
        LimitedClaim::NotLimited => Ok(Vec::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lanes_fake::Fake;

    fn params(limit: u32) -> ClaimParams {
        ClaimParams {
            limit,
            ..crate::store::lanes_fake::claim_params()
        }
    }

    async fn run(fake: &Fake, limited: &LimitedQueues, open: &OpenRuns, limit: u32) -> Vec<i64> {
        claim(fake, limited, open, &params(limit))
            .await
            .expect("claim")
            .iter()
            .map(|t| t.id)
            .collect()
    }

    #[tokio::test]
    async fn a_full_hot_claim_asks_nothing_else() {
        let fake = Fake::default().hot(&[1, 2]).open_runs(&[9]);
        let ids = run(&fake, &Default::default(), &Default::default(), 2).await;
        assert_eq!(ids, [1, 2]);
        assert_eq!(fake.calls(), ["hot"]);
    }

    #[tokio::test]
    async fn runs_fill_what_the_hot_claim_left() {
        let fake = Fake::default().hot(&[5]).open_runs(&[3, 4]);
        let ids = run(&fake, &Default::default(), &Default::default(), 3).await;
        assert_eq!(ids, [3, 4, 5], "in claim order");
        assert_eq!(fake.calls(), ["hot", "any_open", "runs 2"]);
    }

    #[tokio::test]
    async fn a_queue_without_open_runs_is_not_asked_again_at_once() {
        let fake = Fake::default().hot(&[1]);
        let (limited, open) = (LimitedQueues::default(), OpenRuns::default());
        run(&fake, &limited, &open, 5).await;
        run(&fake, &limited, &open, 5).await;
        assert_eq!(fake.calls(), ["hot", "any_open", "hot"]);
    }

    #[tokio::test]
    async fn an_empty_hot_claim_finds_the_queue_limited_and_claims_there() {
        let fake = Fake::default().limited(&[7]);
        let (limited, open) = (LimitedQueues::default(), OpenRuns::default());
        assert_eq!(run(&fake, &limited, &open, 5).await, [7]);
        assert!(limited.contains("q"), "remembered");
        assert_eq!(
            fake.take_calls(),
            ["hot", "is_limited", "limited", "any_open"]
        );
        // Known limited: straight to its lane.
        run(&fake, &limited, &open, 5).await;
        assert_eq!(fake.calls(), ["limited"]);
    }

    #[tokio::test]
    async fn a_queue_whose_policy_went_is_claimed_on_the_hot_path_again() {
        let fake = Fake::default().hot(&[1]);
        let limited = LimitedQueues::default();
        limited.remember("q");
        run(&fake, &limited, &OpenRuns::default(), 1).await;
        assert!(!limited.contains("q"), "forgotten");
        assert_eq!(fake.calls(), ["limited", "hot"]);
    }

    #[tokio::test]
    async fn an_empty_hot_claim_asks_about_a_policy_once_a_second_at_most() {
        let fake = Fake::default();
        let (limited, open) = (LimitedQueues::default(), OpenRuns::default());
        run(&fake, &limited, &open, 1).await;
        run(&fake, &limited, &open, 1).await;
        assert_eq!(fake.calls(), ["hot", "is_limited", "any_open", "hot"]);
    }

    #[tokio::test]
    async fn a_claim_at_a_pinned_time_always_looks_for_runs() {
        let fake = Fake::default();
        let (limited, open) = (LimitedQueues::default(), OpenRuns::default());
        open.found_none("q");
        let p = ClaimParams {
            now: Some(crate::store::lanes_fake::t0()),
            ..params(1)
        };
        claim(&fake, &limited, &open, &p).await.expect("claim");
        assert!(fake.calls().contains(&"any_open".to_owned()));
    }

    #[tokio::test]
    async fn a_worker_that_may_start_no_run_is_not_asked_again_at_once() {
        let fake = Fake::default().open_but_none_for_this_worker();
        let (limited, open) = (LimitedQueues::default(), OpenRuns::default());
        run(&fake, &limited, &open, 1).await;
        run(&fake, &limited, &open, 1).await;
        assert_eq!(
            fake.calls(),
            ["hot", "is_limited", "any_open", "runs 1", "hot"]
        );
        open.stir("q");
        fake.take_calls();
        run(&fake, &limited, &open, 1).await;
        assert_eq!(fake.calls(), ["hot", "any_open", "runs 1"], "stirred");
    }
}
