//! Carrying out lease calls, one or many at once. A remote worker acknowledges many
//! leases in one request (`POST /api/v1/leases`): every call is fenced on its own lease,
//! and answered on its own, so a stale lease among them spoils nothing else. The calls
//! are grouped as the store takes them: the renewals of one length in one store call, all
//! the ends of attempts (complete, fail, snooze, release) in one, checkpoints one by one.
//! The single-lease route (`POST /api/v1/leases/{id}/{op}`) is a group of one.

use crate::error::{ApiError, ApiResult};
use crate::extract::{Body, Path};
use crate::leases::{Call, LeaseRequest};
use crate::AppState;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::Json;
use chrono::{DateTime, Utc};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::time::Duration;
use tasktable_core::outcome::{FinishPlan, HandlerOutcome};
use tasktable_core::{Lease, TaskId};
use tasktable_store::{
    CheckpointParams, FinishItem, FinishParams, LeaseStatus, RenewParams, StoreError,
};

/// What a lease call did.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Done {
    Renewed { expires_at: Option<DateTime<Utc>> },
    Saved,
    Finished,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AckRequest {
    leases: Vec<LeaseRequest>,
}

/// `POST /api/v1/leases`: `{"leases": [{task, op, token, credential, run?, ...}]}`, each
/// call checked as its single route checks it (a malformed one refuses the whole request,
/// changing nothing), then carried out; `{"results": [...]}` in the same order.
pub async fn acknowledge(
    State(state): State<AppState>,
    Body(req): Body<AckRequest>,
) -> ApiResult<Response> {
    let max = state.limits.max_lease_calls;
    if req.leases.is_empty() || req.leases.len() > max {
        return Err(ApiError::invalid(format!(
            "leases lists 1 to {max} lease calls, not {}",
            req.leases.len()
        )));
    }
    let mut calls = Vec::with_capacity(req.leases.len());
    for (i, call) in req.leases.into_iter().enumerate() {
        let in_item = |e: ApiError| ApiError::invalid(format!("leases[{i}]: {}", e.message));
        let task = call
            .task
            .ok_or_else(|| in_item(ApiError::invalid("task is required")))?;
        let op = call.op.clone().ok_or_else(|| {
            in_item(ApiError::invalid(
                "op is required: renew, checkpoint, complete, fail, snooze, release or log",
            ))
        })?;
        calls.push(call.into_call(task, &op).map_err(in_item)?);
    }
    let leases: Vec<Lease> = calls.iter().map(|(lease, _)| *lease).collect();
    let results = carry_out(&state, calls).await?;
    let results: Vec<Value> = leases
        .iter()
        .zip(results)
        .map(|(lease, done)| {
            let mut item = json!({"task": lease.task_id, "run": lease.run, "ok": done.is_ok()});
            match done {
                Ok(Done::Renewed { expires_at }) => item["lease_expires_at"] = json!(expires_at),
                Ok(_) => {}
                Err(e) => item["error"] = json!({"code": e.code, "message": e.message}),
            }
            item
        })
        .collect();
    Ok(Json(json!({ "results": results })).into_response())
}

/// Carries out `calls`, answering each on its own in their order. A failure of the
/// database fails the whole request (calls carried out before it stay done: repeating the
/// request is safe, as an attempt already ended answers `lease_lost`).
pub(crate) async fn carry_out(
    state: &AppState,
    calls: Vec<(Lease, Call)>,
) -> ApiResult<Vec<ApiResult<Done>>> {
    let mut out: Vec<Option<ApiResult<Done>>> = vec![None; calls.len()];
    let mut seen = HashSet::new();
    let mut renewals: BTreeMap<Duration, Vec<usize>> = BTreeMap::new();
    let mut ends = Vec::new();
    for (i, (lease, call)) in calls.iter().enumerate() {
        // A stale call and the current one for the same task differ in their token: each
        // is carried out (the stale one is answered lease_lost).
        // Log lines may go beside another call on the same lease (they are appended before
        // any attempt of the request ends).
        if !matches!(call, Call::Log { .. })
            && !seen.insert((lease.task_id, lease.run, lease.token))
        {
            out[i] = Some(Err(ApiError::invalid(format!(
                "leases[{i}] names the lease of task {} again; a request names each lease once",
                lease.task_id
            ))));
            continue;
        }
        match call {
            Call::Renew { lease_for } => renewals.entry(*lease_for).or_default().push(i),
            Call::Checkpoint {
                checkpoint,
                progress,
            } => {
                let saved = state
                    .store
                    .task_checkpoint(CheckpointParams {
                        lease: *lease,
                        checkpoint: checkpoint.clone(),
                        progress: progress.clone(),
                    })
                    .await;
                out[i] = Some(match saved {
                    Ok(LeaseStatus::Held { .. }) => Ok(Done::Saved),
                    Ok(other) => Err(status_error(lease.task_id, other)),
                    Err(e @ StoreError::PayloadTooLarge { .. }) => Err(e.into()),
                    Err(e) => return Err(e.into()),
                });
            }
            Call::Finish(outcome) => ends.push((i, outcome.clone())),
            Call::Log { lines } => {
                let status = state
                    .store
                    .task_log(tasktable_store::LogParams {
                        lease: *lease,
                        lines: lines.clone(),
                        now: None,
                    })
                    .await?;
                out[i] = Some(match status {
                    LeaseStatus::Held { .. } => Ok(Done::Saved),
                    other => Err(status_error(lease.task_id, other)),
                });
            }
        }
    }
    for (lease_for, indices) in renewals {
        let statuses = state
            .store
            .task_renew(RenewParams {
                leases: indices.iter().map(|&i| calls[i].0).collect(),
                lease_for,
                now: None,
            })
            .await?;
        for (k, &i) in indices.iter().enumerate() {
            let id = calls[i].0.task_id;
            out[i] = Some(
                match statuses.get(k).copied().unwrap_or(LeaseStatus::Lost) {
                    LeaseStatus::Held { expires_at } => Ok(Done::Renewed { expires_at }),
                    other => Err(status_error(id, other)),
                },
            );
        }
    }
    end_attempts(state, &calls, ends, &mut out).await?;
    Ok(out
        .into_iter()
        .map(|done| done.unwrap_or_else(|| Err(ApiError::invalid("not carried out"))))
        .collect())
}

/// Ends the attempts of `ends` (index into `calls`, outcome; `None` releases) in one store
/// call. A result too large is that call's own failure: it is answered 413 and the rest
/// go ahead without it (the store checks sizes before it writes anything).
async fn end_attempts(
    state: &AppState,
    calls: &[(Lease, Call)],
    ends: Vec<(usize, Option<HandlerOutcome>)>,
    out: &mut [Option<ApiResult<Done>>],
) -> ApiResult<()> {
    let mut items: Vec<(usize, FinishItem)> = Vec::with_capacity(ends.len());
    for (i, outcome) in ends {
        let lease = calls[i].0;
        let plan = match outcome {
            None => FinishPlan::interrupted(),
            // A retry's delay follows the task's backoff from its attempt (a run's number
            // is its attempt); no other outcome reads either.
            Some(outcome @ HandlerOutcome::Error { .. }) => {
                let Some(task) = state.store.task_get(lease.task_id).await? else {
                    out[i] = Some(Err(ApiError::lease_lost(lease.task_id)));
                    continue;
                };
                let attempt = lease.run.unwrap_or(task.attempt);
                FinishPlan::for_handler(outcome, attempt, &task.backoff, rand::random())
            }
            Some(outcome) => {
                FinishPlan::for_handler(outcome, 1, &Default::default(), rand::random())
            }
        };
        items.push((i, FinishItem { lease, plan }));
    }
    let applied = loop {
        if items.is_empty() {
            return Ok(());
        }
        let finished = state
            .store
            .task_finish(FinishParams {
                items: items.iter().map(|(_, item)| item.clone()).collect(),
                only_if_expired: false,
                now: None,
            })
            .await;
        match finished {
            Ok(applied) => break applied,
            Err(StoreError::PayloadTooLarge { index, size, limit }) if index < items.len() => {
                let (i, _) = items.remove(index);
                out[i] = Some(Err(ApiError::from(StoreError::PayloadTooLarge {
                    index: i,
                    size,
                    limit,
                })));
            }
            Err(e) => return Err(e.into()),
        }
    };
    for (k, (i, item)) in items.iter().enumerate() {
        out[*i] = Some(if applied.get(k) == Some(&true) {
            crate::claimed::count_ended(state, item).await;
            Ok(Done::Finished)
        } else {
            // Why it missed: cancelled or retargeted under this very lease, or lost.
            let status = state.store.lease_status(item.lease).await?;
            Err(status_error(item.lease.task_id, status))
        });
    }
    Ok(())
}

fn status_error(id: TaskId, status: LeaseStatus) -> ApiError {
    match status {
        LeaseStatus::Cancelled => ApiError::task_cancelled(id),
        LeaseStatus::Retargeted => ApiError::task_retargeted(id),
        _ => ApiError::lease_lost(id),
    }
}

/// One lease call, named by its path: `POST /api/v1/leases/{id}/{op}`.
pub async fn lease_op(
    State(state): State<AppState>,
    Path((id, op)): Path<(TaskId, String)>,
    Body(req): Body<LeaseRequest>,
) -> ApiResult<Response> {
    if req.task.is_some() || req.op.is_some() {
        return Err(ApiError::invalid(
            "the path names the task and the operation; the body may not (task and op belong in POST /api/v1/leases)",
        ));
    }
    let (lease, call) = req.into_call(id, &op)?;
    let done = carry_out(&state, vec![(lease, call)])
        .await?
        .pop()
        .unwrap_or_else(|| Err(ApiError::lease_lost(id)))?;
    Ok(match done {
        Done::Renewed { expires_at } => Json(json!({ "lease_expires_at": expires_at })),
        Done::Saved => Json(json!({ "saved": true })),
        Done::Finished => {
            let (state_now, run_at) = state
                .store
                .task_get(id)
                .await?
                .map(|t| (Some(t.state), Some(t.run_at)))
                .unwrap_or_default();
            Json(json!({ "state": state_now, "run_at": run_at }))
        }
    }
    .into_response())
}
