//! Lease credentials: every claim gets a random secret of its own, and every write under a
//! lease must present it beside the token. Someone who knows a task's id and token (both
//! are shown to readers) but not the credential changes nothing, and learns nothing from
//! the answer: a wrong credential reads exactly like a stale lease.

use crate::pinned::{at, claim, finish, get, rescue_all, submit_at, update, LEASE};
use crate::Backend;
use serde_json::json;
use std::collections::HashSet;
use tasktable_core::outcome::HandlerOutcome;
use tasktable_core::{Lease, LeaseCredential, NewTask, TaskState};
use tasktable_store::*;

/// `lease` with a different credential, as a guesser would send it.
fn guessed(lease: Lease) -> Lease {
    Lease {
        credential: new_lease_credentials(1).pop(),
        run: None,
        ..lease
    }
}

pub async fn every_claim_gets_a_credential_of_its_own(db: &impl Backend) {
    let s = db.store().await;
    let tasks = (0..6).map(|i| NewTask::new("k", json!(i))).collect();
    submit_at(&*s, tasks, at(0)).await;
    let claimed = claim(&*s, &["k"], 6, at(1)).await;
    assert_eq!(claimed.len(), 6);
    let credentials: HashSet<LeaseCredential> = claimed
        .iter()
        .map(|t| t.lease_credential.expect("a claimed task has a credential"))
        .collect();
    assert_eq!(credentials.len(), 6, "no two tasks of one claim share one");
    let stored = get(&*s, claimed[0].id).await;
    assert_eq!(stored.lease_credential, claimed[0].lease_credential);
    assert!(
        !serde_json::to_string(&stored)
            .unwrap()
            .contains(&claimed[0].lease_credential.unwrap().to_hex()),
        "a task's JSON never carries its credential"
    );

    // Claimed again after the lease expired: a new token and a new credential.
    rescue_all(&*s, at(40)).await;
    // Past the retry's backoff.
    let again = claim(&*s, &["k"], 6, at(3600)).await;
    let first = claimed.iter().find(|t| t.id == again[0].id).unwrap();
    assert_eq!(again[0].lease_token, first.lease_token + 1);
    assert_ne!(again[0].lease_credential, first.lease_credential);
    assert!(
        !credentials.contains(&again[0].lease_credential.unwrap()),
        "a new claim never reuses a credential"
    );
}

pub async fn writes_with_a_wrong_credential_change_nothing(db: &impl Backend) {
    let s = db.store().await;
    let ids = submit_at(
        &*s,
        vec![NewTask::new("k", json!(0)), NewTask::new("k", json!(1))],
        at(0),
    )
    .await;
    let claimed = claim(&*s, &["k"], 2, at(1)).await;
    let t = claimed.iter().find(|t| t.id == ids[0]).unwrap();
    let before = get(&*s, t.id).await;

    let forged = guessed(t.lease());
    let missing = Lease {
        credential: None,
        run: None,
        ..t.lease()
    };
    // The other task's credential, from the same claim, opens nothing but that task.
    let neighbour = Lease {
        credential: claimed
            .iter()
            .find(|o| o.id == ids[1])
            .unwrap()
            .lease_credential,
        ..t.lease()
    };
    for lease in [forged, missing, neighbour] {
        let renewed = s
            .task_renew(RenewParams {
                leases: vec![lease],
                lease_for: LEASE,
                now: Some(at(2)),
            })
            .await
            .unwrap();
        assert_eq!(renewed, vec![LeaseStatus::Lost]);
        let status = s
            .task_checkpoint(CheckpointParams {
                lease,
                checkpoint: Some(json!("forged")),
                progress: Some(json!("forged")),
            })
            .await
            .unwrap();
        assert_eq!(status, LeaseStatus::Lost);
        let done = finish(
            &*s,
            lease,
            HandlerOutcome::Succeeded {
                result: Some(json!("forged")),
            },
            1,
            at(3),
        )
        .await;
        assert!(!done, "a complete under a wrong credential is refused");
        assert_eq!(
            get(&*s, t.id).await,
            before,
            "nothing changed: not the lease, the checkpoint, the progress or the state"
        );
    }
    assert!(s.attempt_list(t.id).await.unwrap().is_empty());

    // An operator's cancel is reported as such only to the lease's holder.
    update(&*s, Target::Id(t.id), Change::Cancel).await.unwrap();
    let statuses = s
        .task_renew(RenewParams {
            leases: vec![forged, t.lease()],
            lease_for: LEASE,
            now: Some(at(6)),
        })
        .await
        .unwrap();
    assert_eq!(statuses, vec![LeaseStatus::Lost, LeaseStatus::Cancelled]);

    // The true credential still works on the other task.
    let other = claimed.iter().find(|o| o.id == ids[1]).unwrap();
    assert!(
        finish(
            &*s,
            other.lease(),
            HandlerOutcome::Succeeded { result: None },
            1,
            at(7)
        )
        .await
    );
    assert_eq!(get(&*s, other.id).await.state, TaskState::Succeeded);
}

/// Where a lease stands, asked without writing (what a fenced write that missed answers):
/// held with its expiry, cancelled only to the holder, lost to a guess and for no task.
pub async fn a_lease_status_tells_the_holder_and_no_one_else(db: &impl Backend) {
    let s = db.store().await;
    let ids = submit_at(&*s, vec![NewTask::new("k", json!(0))], at(0)).await;
    let t = claim(&*s, &["k"], 1, at(1)).await.remove(0);
    let forged = guessed(t.lease());
    let status = |lease: Lease| {
        let s = s.clone();
        async move { s.lease_status(lease).await.unwrap() }
    };
    assert_eq!(
        status(t.lease()).await,
        LeaseStatus::Held {
            expires_at: get(&*s, ids[0]).await.lease_expires_at
        }
    );
    assert_eq!(status(forged).await, LeaseStatus::Lost);
    let before = get(&*s, ids[0]).await;
    update(&*s, Target::Id(t.id), Change::Cancel).await.unwrap();
    assert_eq!(status(t.lease()).await, LeaseStatus::Cancelled);
    assert_eq!(
        status(forged).await,
        LeaseStatus::Lost,
        "a guess learns nothing"
    );
    let nowhere = Lease {
        task_id: t.id + 1000,
        ..t.lease()
    };
    assert_eq!(status(nowhere).await, LeaseStatus::Lost);
    let after = get(&*s, ids[0]).await;
    assert_eq!(
        (after.lease_token, after.lease_credential),
        (before.lease_token, before.lease_credential),
        "asking changed no lease"
    );
}
