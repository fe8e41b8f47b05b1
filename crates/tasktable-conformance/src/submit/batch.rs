//! A submit is one batch: ids come back in submit order with the documented defaults
//! applied, a task submitted alone is stored as it is inside a batch, one bad task
//! refuses the whole batch, and a submit inside the caller's transaction commits or
//! rolls back with it.

use crate::pinned::{at, claim_params, get, submit_at, submit_one, t0};
use crate::Backend;
use serde_json::json;
use std::time::Duration;
use tasktable_core::{Actor, ActorKind, Backoff, NewTask, Target, TaskState};
use tasktable_store::*;

pub async fn submit_returns_ids_and_applies_defaults(db: &impl Backend) {
    let s = db.store().await;
    let ids = submit_at(
        &*s,
        vec![
            NewTask::new("a", json!({"n": 1})),
            NewTask::new("b", json!([1, 2])),
        ],
        t0(),
    )
    .await;
    assert_eq!(ids.len(), 2);
    assert!(ids[1] > ids[0], "ids grow in submit order");
    let t = get(&*s, ids[0]).await;
    assert_eq!(t.kind, "a");
    assert_eq!(t.queue, "default");
    assert_eq!(t.state, TaskState::Pending);
    assert_eq!(t.payload, json!({"n": 1}));
    assert_eq!(t.attempt, 0);
    assert_eq!(t.max_attempts, tasktable_core::task::DEFAULT_MAX_ATTEMPTS);
    assert_eq!(t.backoff, Backoff::default());
    assert_eq!(t.run_at, t0());
    assert_eq!(t.created_at, t0());
    assert_eq!(t.lease_token, 0);
    let held = submit_one(
        &*s,
        NewTask::new("a", json!(null))
            .held(true)
            .delay(Duration::from_secs(90)),
    )
    .await;
    let h = get(&*s, held).await;
    assert_eq!(h.state, TaskState::Held);
    assert_eq!(h.run_at, at(90));
}

/// A store may insert a lone task with a statement of its own (PostgreSQL does): every
/// column it writes must come out as the batch's does, for tasks that set every field
/// and for tasks that set none.
pub async fn a_task_submitted_alone_is_stored_as_in_a_batch(db: &impl Backend) {
    let s = db.store().await;
    let full = |idem: &str| {
        NewTask::new("full", json!({"nested": {"n": [1, 2.5, "x"]}, "t": true}))
            .queue("q1")
            .key("order-7")
            .idempotency_key(idem)
            .priority(-3)
            .max_attempts(7)
            .backoff(Backoff {
                initial: Duration::from_millis(1500),
                multiplier: 3.0,
                max: Duration::from_secs(600),
                jitter: 0.25,
            })
            .timeout(Duration::from_millis(45_500))
            .target(Target::Groups(vec!["gpu".into(), "eu".into()]))
            .affinity(Duration::from_secs(30))
            .created_by(Actor::new(ActorKind::Token, "ci", Some("operator")))
    };
    let shapes = [
        (full("alone-1"), full("batch-1")),
        (
            full("alone-2")
                .held(true)
                .delay(Duration::from_millis(2500)),
            full("batch-2")
                .held(true)
                .delay(Duration::from_millis(2500)),
        ),
        (
            full("alone-3").run_at(at(3600)),
            full("batch-3").run_at(at(3600)),
        ),
        (
            NewTask::new("bare", json!(null)),
            NewTask::new("bare", json!(null)),
        ),
    ];
    for (alone, in_batch) in shapes {
        let one = submit_at(&*s, vec![alone], t0()).await[0];
        let both = submit_at(&*s, vec![in_batch, NewTask::new("other", json!(0))], t0()).await;
        let mut a = get(&*s, one).await;
        let mut b = get(&*s, both[0]).await;
        assert_ne!(a.id, b.id);
        b.id = a.id;
        // The idempotency keys differ on purpose: equal ones would be one task.
        if let (Some(ka), Some(kb)) = (&a.idempotency_key, &mut b.idempotency_key) {
            assert_eq!(ka.replace("alone", "batch"), *kb);
            *kb = ka.clone();
        }
        a.lease_credential = None;
        b.lease_credential = None;
        assert_eq!(a, b, "a task submitted alone is stored as in a batch");
    }
}

pub async fn submit_rejects_a_bad_batch_and_writes_nothing(db: &impl Backend) {
    let s = db.store().await;
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![
                NewTask::new("ok", json!(1)),
                NewTask::new("bad", json!(1)).max_attempts(0),
            ],
            now: Some(t0()),
        })
        .await
        .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidTask { index: 1, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("max_attempts"), "{err}");
    let big = json!("x".repeat(DEFAULT_MAX_PAYLOAD_BYTES + 1));
    let err = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("big", big)],
            now: None,
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err}");
    let page = s
        .task_list(ListParams {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(
        page.tasks.is_empty(),
        "nothing may be written: {:?}",
        page.tasks
    );
}

pub async fn transactional_submit_commits_and_rolls_back_with_the_caller(db: &impl Backend) {
    let s = db.store().await;
    let rolled = db
        .submit_in_transaction(vec![NewTask::new("tx", json!("rolled back"))], false)
        .await
        .unwrap();
    assert!(
        s.task_get(rolled[0].id).await.unwrap().is_none(),
        "rolled back task must not exist"
    );
    let committed = db
        .submit_in_transaction(vec![NewTask::new("tx", json!("committed"))], true)
        .await
        .unwrap();
    let claimed = s
        .task_claim(ClaimParams {
            now: None,
            ..claim_params("default", &["tx"], 10, t0())
        })
        .await
        .unwrap();
    assert_eq!(claimed.len(), 1);
    assert_eq!(claimed[0].id, committed[0].id);
    assert_eq!(claimed[0].payload, json!("committed"));
}
