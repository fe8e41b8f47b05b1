//! The one entry point of validation. Every store call's parameters are checked against
//! the store's own [`Limits`] (its configuration, not the caller's) before any backend
//! code sees them, and come out as [`Checked`] values, which nothing else can build: a
//! backend function that takes a `Checked` cannot be handed unchecked input, whichever
//! path the call came by (the HTTP API, the pull protocol, the Rust `Client`, a
//! transactional `submit_in`).

use crate::params::{
    check_finish, prepare_checkpoint, prepare_submit, prepare_update, validate_change,
    validate_list, AffinityReleaseParams, CheckpointParams, CountParams, FinishItem, FinishParams,
    ListParams, QueuePolicyParams, SubmitParams, UpdateParams, DEFAULT_MAX_PAYLOAD_BYTES,
};
use crate::{StoreError, StoreResult, UpdateChunkParams};
use std::ops::Deref;
use tasktable_core::schedule::ScheduleSpec;
use tasktable_core::NewTask;

/// What a store accepts, from its configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload, result, checkpoint or progress document, in bytes of JSON.
    pub max_payload_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
        }
    }
}

/// Parameters that passed their checks, in the form every backend stores (NUL replaced
/// where stored, `run_at` within the stored range). Only [`Limits`] builds one.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked<T>(T);

impl<T> Deref for Checked<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> Checked<T> {
    /// The checked parameters, as a backend takes them apart to write them.
    pub fn into_inner(self) -> T {
        self.0
    }
}

impl Checked<FinishParams> {
    /// Splits off the ends of runs of multi-run tasks, each with its place in the call;
    /// the rest (a part of checked parameters is checked) comes with its places.
    pub fn split_runs(self) -> (Vec<(usize, FinishItem)>, Vec<usize>, Checked<FinishParams>) {
        let FinishParams {
            items,
            only_if_expired,
            now,
        } = self.0;
        let (mut runs, mut at, mut single) = (Vec::new(), Vec::new(), Vec::new());
        for (i, item) in items.into_iter().enumerate() {
            if item.lease.run.is_some() {
                runs.push((i, item));
            } else {
                at.push(i);
                single.push(item);
            }
        }
        let rest = FinishParams {
            items: single,
            only_if_expired,
            now,
        };
        (runs, at, Checked(rest))
    }
}

impl Limits {
    /// A batch to submit: every task valid and within size, or the whole call refused.
    pub fn submit(&self, mut p: SubmitParams) -> StoreResult<Checked<SubmitParams>> {
        prepare_submit(&mut p.tasks, self.max_payload_bytes)?;
        Ok(Checked(p))
    }

    /// Tasks to submit inside the caller's own transaction.
    pub fn tasks(&self, mut tasks: Vec<NewTask>) -> StoreResult<Checked<Vec<NewTask>>> {
        prepare_submit(&mut tasks, self.max_payload_bytes)?;
        Ok(Checked(tasks))
    }

    /// A batch of affinity releases: 1 to [`crate::params::MAX_AFFINITY_BATCH`] tasks.
    pub fn affinity_release(
        &self,
        p: AffinityReleaseParams,
    ) -> StoreResult<Checked<AffinityReleaseParams>> {
        if p.limit == 0 || p.limit > crate::params::MAX_AFFINITY_BATCH {
            return Err(StoreError::InvalidInput(format!(
                "limit must be from 1 to {}",
                crate::params::MAX_AFFINITY_BATCH
            )));
        }
        Ok(Checked(p))
    }

    /// A queue's policy: the queue a name, the policy within core's bounds.
    pub fn queue_policy(&self, p: QueuePolicyParams) -> StoreResult<Checked<QueuePolicyParams>> {
        let name_ok = !p.queue.trim().is_empty()
            && p.queue.chars().count() <= tasktable_core::task::MAX_NAME_LEN;
        if !name_ok {
            return Err(StoreError::InvalidInput(format!(
                "a queue is 1 to {} characters, not all blank",
                tasktable_core::task::MAX_NAME_LEN
            )));
        }
        p.policy
            .validate()
            .map_err(|e| StoreError::InvalidInput(e.to_string()))?;
        Ok(Checked(p))
    }

    /// A checkpoint or progress write: each document within
    /// [`max_payload_bytes`](Limits::max_payload_bytes), NUL replaced as it is stored.
    pub fn checkpoint(&self, p: CheckpointParams) -> StoreResult<Checked<CheckpointParams>> {
        prepare_checkpoint(p, self.max_payload_bytes).map(Checked)
    }

    /// Ends of attempts: every completion's result within size, or the whole call
    /// refused ([`StoreError::PayloadTooLarge`] names the item).
    pub fn finish(&self, p: FinishParams) -> StoreResult<Checked<FinishParams>> {
        check_finish(&p.items, self.max_payload_bytes)?;
        Ok(Checked(p))
    }

    /// An operator's change: its filter's texts free of NUL, the change's values within
    /// core's bounds (a payload also within size), a new `run_at` within the stored range.
    pub fn update(&self, mut p: UpdateParams) -> StoreResult<Checked<UpdateParams>> {
        prepare_update(&mut p, self.max_payload_bytes)?;
        Ok(Checked(p))
    }

    /// One chunk of a bulk change (its filter and change checked again: the chunk is a
    /// public call of its own).
    pub fn chunk<'p, 'a>(
        &self,
        p: &'p UpdateChunkParams<'a>,
    ) -> StoreResult<Checked<&'p UpdateChunkParams<'a>>> {
        p.filter.validate()?;
        crate::action::check_action_key(p.action)?;
        validate_change(p.change, self.max_payload_bytes)?;
        Ok(Checked(p))
    }

    /// A schedule to save: every part valid, its template's payload within size.
    /// An interval's start is kept to the millisecond, as stored times and slot keys
    /// are, so a slot computed from it equals the slot read back.
    pub fn schedule(&self, mut spec: ScheduleSpec) -> StoreResult<Checked<ScheduleSpec>> {
        if let tasktable_core::schedule::Recurrence::Every { start, .. } = &mut spec.recurrence {
            use chrono::DurationRound;
            *start = start
                .duration_trunc(chrono::TimeDelta::milliseconds(1))
                .unwrap_or(*start);
        }
        spec.validate()?;
        let size = spec.template.payload.to_string().len();
        if size > self.max_payload_bytes {
            return Err(crate::StoreError::InvalidInput(format!(
                "the template's payload is {size} bytes; the limit is {}",
                self.max_payload_bytes
            )));
        }
        Ok(Checked(spec))
    }

    /// A heartbeat: the worker's facts as core allows them, an address of a sane length.
    pub fn worker_beat(
        &self,
        p: crate::WorkerBeatParams,
    ) -> StoreResult<Checked<crate::WorkerBeatParams>> {
        let invalid = |m: String| {
            Err(crate::StoreError::InvalidInput(format!(
                "invalid worker: {m}"
            )))
        };
        if let Err(e) = p.facts.validate() {
            return invalid(e.to_string());
        }
        if p.address
            .as_deref()
            .is_some_and(|a| !tasktable_core::worker::valid_name(a))
        {
            return invalid(format!(
                "address must be 1 to {} characters",
                tasktable_core::worker::MAX_NAME_CHARS
            ));
        }
        if p.owner
            .as_deref()
            .is_some_and(|o| !tasktable_core::worker::valid_name(o))
        {
            return invalid(format!(
                "owner must be 1 to {} characters",
                tasktable_core::worker::MAX_NAME_CHARS
            ));
        }
        if p.max_live_per_owner == Some(0) {
            return invalid("max_live_per_owner must be at least 1".into());
        }
        Ok(Checked(p))
    }

    /// A listing of the registry: a page of 1 to [`MAX_WORKER_PAGE`](crate::MAX_WORKER_PAGE)
    /// workers, after an id that is a name.
    pub fn worker_list(
        &self,
        p: crate::WorkerListParams,
    ) -> StoreResult<Checked<crate::WorkerListParams>> {
        if p.limit
            .is_some_and(|l| l == 0 || l > crate::MAX_WORKER_PAGE)
        {
            return Err(crate::StoreError::InvalidInput(format!(
                "a page of workers holds 1 to {}",
                crate::MAX_WORKER_PAGE
            )));
        }
        if p.after.as_deref().is_some_and(|a| a.contains('\0')) {
            return Err(crate::StoreError::InvalidInput(
                "after must not hold NUL".into(),
            ));
        }
        Ok(Checked(p))
    }

    /// A reaping: a silence of at least a second, ages of at most 100 years.
    pub fn worker_reap(
        &self,
        p: crate::WorkerReapParams,
    ) -> StoreResult<Checked<crate::WorkerReapParams>> {
        let max = tasktable_core::retention::MAX_AGE;
        if p.silence < std::time::Duration::from_secs(1) || p.silence > max || p.forget_after > max
        {
            return Err(crate::StoreError::InvalidInput(
                "a silence of 1 s to 100 years and a forget_after of at most 100 years".into(),
            ));
        }
        Ok(Checked(p))
    }

    /// A batch of retention: a final state, a batch size in range.
    pub fn purge(&self, p: crate::PurgeParams) -> StoreResult<Checked<crate::PurgeParams>> {
        if !p.state.is_finished() {
            return Err(crate::StoreError::InvalidInput(format!(
                "retention applies to succeeded, failed and cancelled tasks, not {}",
                p.state
            )));
        }
        if p.limit == 0 || p.limit > crate::MAX_PURGE_BATCH {
            return Err(crate::StoreError::InvalidInput(format!(
                "a purge batch takes 1 to {} tasks, not {}",
                crate::MAX_PURGE_BATCH,
                p.limit
            )));
        }
        if p.older_than > tasktable_core::retention::MAX_AGE {
            return Err(crate::StoreError::InvalidInput(
                "an age of at most 100 years".into(),
            ));
        }
        Ok(Checked(p))
    }

    /// A page of tasks: its filter's texts free of NUL, a page size of 1 to
    /// [`MAX_PAGE_SIZE`](crate::MAX_PAGE_SIZE).
    pub fn list(&self, p: ListParams) -> StoreResult<Checked<ListParams>> {
        validate_list(&p)?;
        Ok(Checked(p))
    }

    /// A count: its filter's texts free of NUL (any cap is taken).
    pub fn count(&self, p: CountParams) -> StoreResult<Checked<CountParams>> {
        p.filter.validate()?;
        Ok(Checked(p))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_limits_are_the_stores_own() {
        let small = Limits {
            max_payload_bytes: 16,
        };
        let big = NewTask::new("k", json!({"text": "more than sixteen bytes"}));
        assert!(small.tasks(vec![big.clone()]).is_err());
        assert!(Limits::default().tasks(vec![big]).is_ok());
    }

    #[test]
    fn checked_submit_keeps_values_in_their_stored_form() {
        let far = chrono::DateTime::<chrono::Utc>::MAX_UTC;
        let task = NewTask::new("k", json!(1)).run_at(far);
        let checked = Limits::default().tasks(vec![task]).unwrap();
        assert!(
            checked[0].run_at.unwrap() < far,
            "run_at clamped to what is stored"
        );
    }
}
