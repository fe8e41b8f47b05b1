//! The lanes off the hot path, each a write transaction of its own through
//! [`Backend::transact`]: the claim of a limited queue, runs' claims and writes, submits
//! that mark multi-run tasks and batches, batches' saves and controls, queue policies
//! and pauses, operators' changes.

use super::claim::ClaimLanes;
use super::finish::LeaseLanes;
use super::SqlStore;
use crate::backend::change;
use crate::backend::Changed;
use crate::limits::{self, LimitedClaim};
use crate::runs::{self, Ended};
use crate::update;
use crate::{batches, query, Backend, Exec};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use std::time::Duration;
use tasktable_core::{Change, Lease, Task, TaskId};
use tasktable_store::{
    Batch, BatchControlParams, BatchSaveParams, BatchSaved, BatchUpdateParams, Checked,
    CheckpointParams, ClaimParams, FinishItem, FinishParams, LeaseStatus, QueuePauseParams,
    QueuePolicyParams, RenewParams, StoreResult, SubmitParams, Submitted, Target,
    UpdateChunkParams, UpdateParams,
};

#[async_trait]
impl<B: Backend> ClaimLanes for SqlStore<B> {
    async fn hot(&self, p: &ClaimParams) -> StoreResult<Vec<Task>> {
        self.db.claim(p).await
    }

    async fn limited(&self, p: &ClaimParams) -> StoreResult<LimitedClaim> {
        self.db
            .transact("claim_limited", |mut tx| async move {
                let out = limits::claim_in(&mut tx, p).await?;
                Ok((tx, out))
            })
            .await
    }

    async fn is_limited(&self, queue: &str) -> StoreResult<bool> {
        limits::is_limited(&mut self.db.read().await?, queue).await
    }

    async fn any_open(&self, p: &ClaimParams) -> StoreResult<bool> {
        let mut read = self.db.read().await?;
        let now = read.now(p.now).await?;
        runs::any_open(&mut read, &p.queue, now).await
    }

    async fn runs(&self, p: &ClaimParams) -> StoreResult<Vec<Task>> {
        self.db
            .transact("claim_runs", |mut tx| async move {
                let tasks = runs::claim_in(&mut tx, p).await?;
                Ok((tx, tasks))
            })
            .await
    }
}

#[async_trait]
impl<B: Backend> LeaseLanes for SqlStore<B> {
    async fn renew(&self, p: RenewParams) -> StoreResult<Vec<LeaseStatus>> {
        self.db.renew(p).await
    }

    async fn renew_run(
        &self,
        lease: &Lease,
        run: u32,
        lease_for: Duration,
        now: Option<DateTime<Utc>>,
    ) -> StoreResult<LeaseStatus> {
        self.db
            .transact("renew_run", |mut tx| async move {
                let status = runs::renew_in(&mut tx, lease, run, lease_for, now).await?;
                Ok((tx, status))
            })
            .await
    }

    async fn checkpoint(&self, p: Checked<CheckpointParams>) -> StoreResult<LeaseStatus> {
        self.db.checkpoint(p).await
    }

    async fn checkpoint_run(
        &self,
        p: &Checked<CheckpointParams>,
        run: u32,
    ) -> StoreResult<LeaseStatus> {
        self.db
            .transact("checkpoint_run", |mut tx| async move {
                let status = runs::checkpoint_in(&mut tx, p, run).await?;
                Ok((tx, status))
            })
            .await
    }

    async fn finish(&self, p: Checked<FinishParams>) -> StoreResult<Vec<bool>> {
        self.db.finish(p).await
    }

    /// A task that wants more runs has its queue's workers woken.
    async fn finish_run(
        &self,
        item: &FinishItem,
        run: u32,
        only_if_expired: bool,
        now: Option<DateTime<Utc>>,
    ) -> StoreResult<Ended> {
        change(&self.db, "finish_run", |mut tx| async move {
            let ended = runs::finish_in(&mut tx, item, run, only_if_expired, now).await?;
            Ok((tx, ended))
        })
        .await
    }
}

impl<B: Backend> SqlStore<B> {
    /// Submits tasks some of which want several runs or are batches: inserts them as the
    /// hot path does, then marks those ([`runs::mark_submitted`],
    /// [`batches::mark_submitted`]), in one write transaction.
    pub(super) async fn submit_marked(
        &self,
        params: &Checked<SubmitParams>,
    ) -> StoreResult<Vec<Submitted>> {
        let db = &self.db;
        let (submitted, _) = change(db, "submit", |mut tx| async move {
            let now = tx.now(params.now).await?;
            let mut resolved = params.tasks.clone();
            let aimed = runs::resolve_broadcasts(&mut tx, &mut resolved).await?;
            let tasks = db.limits().tasks(resolved)?;
            let submitted = db.insert_tasks(&mut tx, &tasks, now).await?;
            runs::mark_submitted(&mut tx, &tasks, &submitted, &aimed, now).await?;
            batches::mark_submitted(&mut tx, &tasks, &submitted, now).await?;
            let mut wake: Vec<String> = tasks.iter().map(|t| t.queue.clone()).collect();
            wake.sort();
            wake.dedup();
            let count = submitted.len() as u64;
            Ok((tx, (submitted, Changed { count, wake })))
        })
        .await?;
        Ok(submitted)
    }

    pub(super) async fn save_batch(&self, p: &BatchSaveParams) -> StoreResult<BatchSaved> {
        self.db
            .transact("batch_save", |mut tx| async move {
                let saved = batches::save_in(&mut tx, p).await?;
                Ok((tx, saved))
            })
            .await
    }

    /// The queue's workers are woken when the batch became due.
    pub(super) async fn control_batch(&self, p: &BatchControlParams) -> StoreResult<Batch> {
        let (batch, _) = change(&self.db, "batch_control", |mut tx| async move {
            let out = batches::control_in(&mut tx, p).await?;
            Ok((tx, out))
        })
        .await?;
        Ok(batch)
    }

    /// New data is checked as an operator's payload edit is.
    pub(super) async fn update_batch(&self, mut p: BatchUpdateParams) -> StoreResult<Batch> {
        if let Some(data) = p.data.take() {
            let checked = self.db.limits().update(UpdateParams {
                target: Target::Id(p.id),
                change: Change::EditPayload { payload: data },
                actor: p.actor.clone(),
                now: None,
                action: None,
            })?;
            if let Change::EditPayload { payload } = checked.into_inner().change {
                p.data = Some(payload);
            }
        }
        let p = &p;
        self.db
            .transact("batch_update", |mut tx| async move {
                let batch = batches::update_in(&mut tx, p).await?;
                Ok((tx, batch))
            })
            .await
    }

    /// A queue whose policy is cleared has its workers woken, and its claims go back to
    /// the hot path.
    pub(super) async fn set_policy(&self, p: &Checked<QueuePolicyParams>) -> StoreResult<()> {
        change(&self.db, "queue_set_policy", |mut tx| async move {
            limits::set_policy(&mut tx, p).await?;
            let wake = if p.policy.is_limited() {
                Vec::new()
            } else {
                vec![p.queue.clone()]
            };
            Ok((tx, Changed { count: 1, wake }))
        })
        .await?;
        if !p.policy.is_limited() {
            self.limited.forget(&p.queue);
        }
        Ok(())
    }

    /// A resumed queue's workers are woken.
    pub(super) async fn set_paused(&self, p: &QueuePauseParams) -> StoreResult<()> {
        change(&self.db, "queue_set_paused", |mut tx| async move {
            query::set_paused(&mut tx, p).await?;
            let wake = if p.paused {
                Vec::new()
            } else {
                vec![p.queue.clone()]
            };
            Ok((tx, Changed { count: 1, wake }))
        })
        .await?;
        Ok(())
    }

    pub(super) async fn change_one(
        &self,
        id: TaskId,
        p: &Checked<UpdateParams>,
    ) -> StoreResult<u64> {
        let changed = change(&self.db, "update", |mut tx| async move {
            let changed = update::one(&mut tx, id, p).await?;
            Ok((tx, changed))
        })
        .await?;
        Ok(changed.count)
    }

    /// A chunk InnoDB aborts is run again on its own; the chunks before it stay
    /// committed.
    pub(super) async fn change_chunk(
        &self,
        p: &Checked<&UpdateChunkParams<'_>>,
    ) -> StoreResult<u64> {
        let changed = change(&self.db, "update_chunk", |mut tx| async move {
            let changed = update::chunk(&mut tx, p).await?;
            Ok((tx, changed))
        })
        .await?;
        Ok(changed.count)
    }
}
