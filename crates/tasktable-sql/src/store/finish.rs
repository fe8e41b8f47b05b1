//! Which lane a worker's writes under a lease go through.
//!
//! A lease of a task that runs once is held on the task's row, and the backend's hot
//! path renews, checkpoints and ends it, many in one statement. A lease of a run of a
//! multi-run task (`Lease::run`) is held on the run's row, and [`crate::runs`] writes
//! it, one run at a time, in a transaction that also moves the task's counters. A call
//! may mix both; its answers come back in its order.

use crate::runs::{Ended, OpenRuns};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tasktable_core::Lease;
use tasktable_store::{
    Checked, CheckpointParams, FinishItem, FinishParams, LeaseStatus, RenewParams, StoreResult,
};

/// The lanes a lease's writes may take, as this module sees them.
#[async_trait]
pub trait LeaseLanes: Send + Sync {
    /// The hot path's renewal of leases of tasks that run once.
    async fn renew(&self, p: RenewParams) -> StoreResult<Vec<LeaseStatus>>;

    /// Renews the lease of run `run` of a multi-run task, on the run's row.
    async fn renew_run(
        &self,
        lease: &Lease,
        run: u32,
        lease_for: Duration,
        now: Option<DateTime<Utc>>,
    ) -> StoreResult<LeaseStatus>;

    /// The hot path's checkpoint of a task that runs once.
    async fn checkpoint(&self, p: Checked<CheckpointParams>) -> StoreResult<LeaseStatus>;

    /// Saves the checkpoint and progress of run `run`, on the run's row.
    async fn checkpoint_run(
        &self,
        p: &Checked<CheckpointParams>,
        run: u32,
    ) -> StoreResult<LeaseStatus>;

    /// The hot path's end of attempts of tasks that run once.
    async fn finish(&self, p: Checked<FinishParams>) -> StoreResult<Vec<bool>>;

    /// Ends run `run` in a transaction of its own ([`crate::runs::finish_in`]).
    async fn finish_run(
        &self,
        item: &FinishItem,
        run: u32,
        only_if_expired: bool,
        now: Option<DateTime<Utc>>,
    ) -> StoreResult<Ended>;
}

/// Renews leases: those of tasks that run once in one call of the hot path, those of
/// runs one by one.
pub async fn renew(lanes: &impl LeaseLanes, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
    if p.leases.iter().all(|l| l.run.is_none()) {
        return lanes.renew(p).await;
    }
    let mut out = vec![LeaseStatus::Lost; p.leases.len()];
    let (mut single, mut at) = (Vec::new(), Vec::new());
    for (i, lease) in p.leases.iter().enumerate() {
        match lease.run {
            Some(run) => out[i] = lanes.renew_run(lease, run, p.lease_for, p.now).await?,
            None => {
                single.push(*lease);
                at.push(i);
            }
        }
    }
    if !single.is_empty() {
        let renewed = lanes
            .renew(RenewParams {
                leases: single,
                ..p
            })
            .await?;
        for (i, status) in at.into_iter().zip(renewed) {
            out[i] = status;
        }
    }
    Ok(out)
}

/// Saves a checkpoint: on the run's row for a run's lease, through the hot path
/// otherwise.
pub async fn checkpoint(
    lanes: &impl LeaseLanes,
    p: Checked<CheckpointParams>,
) -> StoreResult<LeaseStatus> {
    match p.lease.run {
        Some(run) => lanes.checkpoint_run(&p, run).await,
        None => lanes.checkpoint(p).await,
    }
}

/// Ends attempts: of runs one by one (a run that leaves room for another stirs what
/// the store knows of its queue's open runs), the rest in one call of the hot path.
pub async fn finish(
    lanes: &impl LeaseLanes,
    open: &OpenRuns,
    p: Checked<FinishParams>,
) -> StoreResult<Vec<bool>> {
    if p.items.iter().all(|i| i.lease.run.is_none()) {
        return lanes.finish(p).await;
    }
    let mut out = vec![false; p.items.len()];
    let (only_if_expired, now) = (p.only_if_expired, p.now);
    let (runs, at, single) = p.split_runs();
    for (i, item) in runs {
        let run = item.lease.run.expect("split by run");
        let ended = lanes.finish_run(&item, run, only_if_expired, now).await?;
        out[i] = ended.applied;
        if let Some(queue) = &ended.wake {
            open.stir(queue);
        }
    }
    if !single.items.is_empty() {
        for (i, applied) in at.into_iter().zip(lanes.finish(single).await?) {
            out[i] = applied;
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::lanes_fake::{lease, Fake};
    use tasktable_core::outcome::FinishPlan;
    use tasktable_store::Limits;

    fn finish_params(leases: &[Lease]) -> Checked<FinishParams> {
        let items = leases
            .iter()
            .map(|&lease| FinishItem {
                lease,
                plan: FinishPlan::unheard(),
            })
            .collect();
        Limits::default()
            .finish(FinishParams {
                items,
                only_if_expired: false,
                now: None,
            })
            .expect("valid")
    }

    #[tokio::test]
    async fn ends_of_single_tasks_go_to_the_hot_path_in_one_call() {
        let fake = Fake::default();
        let out = finish(
            &fake,
            &OpenRuns::default(),
            finish_params(&[lease(1, None), lease(2, None)]),
        )
        .await
        .expect("finish");
        assert_eq!(out, [true, true]);
        assert_eq!(fake.calls(), ["finish 1,2"]);
    }

    #[tokio::test]
    async fn ends_of_runs_go_one_by_one_and_answers_keep_the_calls_order() {
        let fake = Fake::default().refuse(3);
        let leases = [
            lease(1, Some(1)),
            lease(2, None),
            lease(3, Some(2)),
            lease(4, None),
        ];
        let out = finish(&fake, &OpenRuns::default(), finish_params(&leases))
            .await
            .expect("finish");
        assert_eq!(out, [true, true, false, true]);
        assert_eq!(
            fake.calls(),
            ["finish_run 1/1", "finish_run 3/2", "finish 2,4"]
        );
    }

    #[tokio::test]
    async fn a_run_that_frees_a_slot_stirs_its_queue() {
        let fake = Fake::default();
        let open = OpenRuns::default();
        open.found_none("q");
        assert!(!open.due("q", "w", false));
        finish(&fake, &open, finish_params(&[lease(1, Some(1))]))
            .await
            .expect("finish");
        assert!(open.due("q", "w", false), "the run freed a slot of q");
    }

    #[tokio::test]
    async fn renewals_of_runs_go_one_by_one_beside_one_call_for_the_rest() {
        let fake = Fake::default().refuse(2);
        let p = RenewParams {
            leases: vec![lease(1, None), lease(2, Some(4)), lease(3, None)],
            lease_for: Duration::from_secs(30),
            now: None,
        };
        let out = renew(&fake, p).await.expect("renew");
        assert_eq!(out[1], LeaseStatus::Lost);
        assert!(matches!(out[0], LeaseStatus::Held { .. }));
        assert!(matches!(out[2], LeaseStatus::Held { .. }));
        assert_eq!(fake.calls(), ["renew_run 2/4", "renew 1,3"]);
    }

    #[tokio::test]
    async fn a_checkpoint_goes_to_its_runs_row_or_its_tasks() {
        let fake = Fake::default();
        for l in [lease(1, None), lease(2, Some(3))] {
            let p = Limits::default()
                .checkpoint(CheckpointParams {
                    lease: l,
                    checkpoint: None,
                    progress: None,
                })
                .expect("valid");
            checkpoint(&fake, p).await.expect("checkpoint");
        }
        assert_eq!(fake.calls(), ["checkpoint 1", "checkpoint_run 2/3"]);
    }
}
