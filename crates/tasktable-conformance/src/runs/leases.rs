//! Each run's lease on its own: fenced writes, rescue, takeover from a checkpoint.

use super::*;
use crate::Backend;
use tasktable_core::runs::{RunCounts, RunState};
use tasktable_core::{AttemptOutcome, Lease, TaskState};

pub async fn writes_under_a_stale_or_forged_run_lease_change_nothing(db: &impl Backend) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(2))).await;
    let a = one_run(&*s, "a", id, 1).await;
    let b = one_run(&*s, "b", id, 1).await;
    let real = a.lease();
    let forged = [
        Lease {
            token: real.token + 100,
            ..real
        },
        Lease {
            credential: b.lease().credential,
            ..real
        },
        Lease {
            credential: None,
            ..real
        },
        // b's run, under a's token and credential.
        Lease { run: b.run, ..real },
        // The task's row itself, as if it ran once.
        Lease { run: None, ..real },
        Lease {
            run: None,
            credential: None,
            ..real
        },
    ];
    let before = runs_of(&*s, id).await;
    for lease in forged {
        let renewed = s
            .task_renew(RenewParams {
                leases: vec![lease],
                lease_for: LEASE,
                now: Some(at(2)),
            })
            .await
            .unwrap();
        assert!(!renewed[0].is_held(), "{lease:?}: {renewed:?}");
        let saved = s
            .task_checkpoint(CheckpointParams {
                lease,
                checkpoint: Some(json!("forged")),
                progress: None,
            })
            .await
            .unwrap();
        assert!(!saved.is_held(), "{lease:?}");
        assert!(!finish(&*s, lease, ok(), 1, at(2)).await, "{lease:?}");
    }
    assert_eq!(runs_of(&*s, id).await, before, "no run changed");
    let t = get(&*s, id).await;
    assert_eq!(
        (t.state, t.run_counts.unwrap().active),
        (TaskState::Running, 2)
    );
    // The real leases still hold, each on its own run.
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![a.lease(), b.lease()],
            lease_for: LEASE,
            now: Some(at(3)),
        })
        .await
        .unwrap();
    assert_eq!(
        renewed,
        [
            LeaseStatus::Held {
                expires_at: Some(at(33))
            },
            LeaseStatus::Held {
                expires_at: Some(at(33))
            }
        ]
    );
    assert!(finish(&*s, a.lease(), ok(), a.attempt, at(4)).await);
    // Ended: the same lease cannot end it twice.
    assert!(!finish(&*s, a.lease(), ok(), a.attempt, at(4)).await);
    assert_eq!(get(&*s, id).await.run_counts.unwrap().succeeded, 1);
}

pub async fn an_expired_run_is_rescued_and_taken_over_from_its_checkpoint_while_others_go_on(
    db: &impl Backend,
) {
    let s = db.store().await;
    let id = submit_one(&*s, multi(Runs::copies(2))).await;
    let frozen = one_run(&*s, "frozen", id, 0).await;
    let alive = one_run(&*s, "alive", id, 0).await;
    let saved = s
        .task_checkpoint(CheckpointParams {
            lease: frozen.lease(),
            checkpoint: Some(json!({"offset": 5})),
            progress: Some(json!({"done": 0.5})),
        })
        .await
        .unwrap();
    assert!(saved.is_held());
    // alive renews; frozen does not, and its lease (30 s) runs out.
    let renewed = s
        .task_renew(RenewParams {
            leases: vec![alive.lease()],
            lease_for: LEASE,
            now: Some(at(20)),
        })
        .await
        .unwrap();
    assert!(renewed[0].is_held());
    let rescued = rescue_all(&*s, at(40)).await;
    assert_eq!(rescued, [true], "the frozen run alone is rescued");
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Running, "the other run goes on");
    assert_eq!(
        t.run_counts,
        Some(RunCounts {
            active: 1,
            succeeded: 0,
            failed: 1
        })
    );
    // After the expired run's backoff, another worker takes over from its checkpoint.
    assert_eq!(t.run_at, at(50));
    let taker = one_run(&*s, "taker", id, 50).await;
    assert_eq!(taker.run, Some(3));
    assert_eq!(taker.checkpoint, Some(json!({"offset": 5})));
    assert!(taker.lease_token > alive.lease_token);
    // The frozen worker wakes up: its writes are refused.
    assert!(!finish(&*s, frozen.lease(), ok(), frozen.attempt, at(51)).await);
    for t in [&alive, &taker] {
        assert!(finish(&*s, t.lease(), ok(), t.attempt, at(52)).await);
    }
    let t = get(&*s, id).await;
    assert_eq!(t.state, TaskState::Succeeded);
    let runs = runs_of(&*s, id).await;
    assert_eq!(runs[0].state, RunState::Ended(AttemptOutcome::LeaseExpired));
    assert_eq!(runs[2].resumed_from, Some(1));
    let outcomes: Vec<AttemptOutcome> = s
        .attempt_list(id)
        .await
        .unwrap()
        .iter()
        .map(|a| a.outcome)
        .collect();
    assert_eq!(
        outcomes,
        [
            AttemptOutcome::LeaseExpired,
            AttemptOutcome::Succeeded,
            AttemptOutcome::Succeeded
        ]
    );
}
