//! Deadlocks and lock wait timeouts under contention are retried inside the store, and no
//! task is lost or run twice.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn contention_is_retried_without_losing_or_doubling_a_task() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    let store = db.store_with(|c| c.max_connections = 24).await;
    const TASKS: usize = 400;
    let ids: Vec<i64> = store
        .task_submit(SubmitParams {
            tasks: (0..TASKS)
                .map(|i| {
                    NewTask::new(["a", "b"][i % 2], json!(i))
                        .queue("hot")
                        .priority((i % 4) as i32)
                })
                .collect(),
            now: None,
        })
        .await
        .unwrap()
        .iter()
        .map(|s| s.id)
        .collect();
    let done = Arc::new(AtomicUsize::new(0));
    let claimed = Arc::new(Mutex::new(Vec::new()));
    let mut jobs = Vec::new();

    // Claimers that finish what they took, in batches, in reverse id order.
    for w in 0..6 {
        let (store, done, claimed) = (store.clone(), done.clone(), claimed.clone());
        jobs.push(tokio::spawn(async move {
            while done.load(Ordering::SeqCst) < TASKS {
                let got = store
                    .task_claim(ClaimParams {
                        worker_id: format!("w{w}"),
                        lease_for: Duration::from_secs(600),
                        now: None,
                        ..claim_params("hot", &["a", "b"], 8, t0())
                    })
                    .await
                    .expect("a claim never fails under contention");
                if got.is_empty() {
                    tokio::time::sleep(Duration::from_millis(5)).await;
                    continue;
                }
                claimed.lock().unwrap().extend(got.iter().map(|t| t.id));
                let items = got.iter().rev().map(|t| complete(t.lease())).collect();
                let applied = store
                    .task_finish(FinishParams {
                        items,
                        only_if_expired: false,
                        now: None,
                    })
                    .await
                    .expect("a finish never fails under contention");
                assert!(applied.iter().all(|a| *a), "every lease held: {applied:?}");
                done.fetch_add(got.len(), Ordering::SeqCst);
            }
        }));
    }
    // Operators' bulk changes over the same rows, their ids read through different indexes.
    for (n, filter) in [
        TaskFilter::default().queue("hot").state(TaskState::Pending),
        TaskFilter::default().kind("a").state(TaskState::Pending),
        TaskFilter::default().kind("b"),
    ]
    .into_iter()
    .enumerate()
    {
        let (store, done) = (store.clone(), done.clone());
        jobs.push(tokio::spawn(async move {
            let mut i = 0;
            while done.load(Ordering::SeqCst) < TASKS {
                i += 1;
                store
                    .task_update(UpdateParams {
                        actor: tasktable_core::Actor::rust(),
                        target: Target::Filter(filter.clone()),
                        change: Change::SetPriority {
                            priority: ((i + n) % 5) as i32,
                        },
                        now: None,
                        action: None,
                    })
                    .await
                    .expect("a bulk change never fails under contention");
            }
        }));
    }
    // Submitters racing on the same idempotency keys, in opposite orders: each holds keys
    // the other is waiting for. They start each round together (on a loaded machine one
    // could otherwise finish its round before the other begins), and go on past 40 rounds
    // (up to 400) until InnoDB has had to break at least one deadlock somewhere, so the
    // retry is always exercised. The first to arrive decides for both whether to go on.
    let created = Arc::new(Mutex::new(HashMap::<String, Vec<(i64, bool)>>::new()));
    let start = Arc::new(tokio::sync::Barrier::new(2));
    let go_on = Arc::new(std::sync::atomic::AtomicBool::new(true));
    for reverse in [false, true] {
        let (store, created) = (store.clone(), created.clone());
        let (start, go_on) = (start.clone(), go_on.clone());
        jobs.push(tokio::spawn(async move {
            let mut round = 0;
            loop {
                if start.wait().await.is_leader() {
                    let more = round < 40 || (store.db().deadlock_retries() == 0 && round < 400);
                    go_on.store(more, Ordering::SeqCst);
                }
                start.wait().await;
                if !go_on.load(Ordering::SeqCst) {
                    break;
                }
                round += 1;
                let mut keys: Vec<String> = (0..20).map(|k| format!("r{round}-k{k}")).collect();
                if reverse {
                    keys.reverse();
                }
                let out = store
                    .task_submit(SubmitParams {
                        tasks: keys
                            .iter()
                            .map(|k| {
                                NewTask::new("dup", json!(k))
                                    .queue("cold")
                                    .idempotency_key(k)
                            })
                            .collect(),
                        now: None,
                    })
                    .await
                    .expect("a submit never fails under contention");
                let mut created = created.lock().unwrap();
                for (k, s) in keys.iter().zip(out) {
                    created
                        .entry(k.clone())
                        .or_default()
                        .push((s.id, s.created));
                }
            }
        }));
    }
    let started = Instant::now();
    for job in jobs {
        tokio::time::timeout(Duration::from_secs(240), job)
            .await
            .expect("contention test finished in time")
            .unwrap();
    }

    let claimed = claimed.lock().unwrap().clone();
    let unique: HashSet<i64> = claimed.iter().copied().collect();
    assert_eq!(unique.len(), claimed.len(), "no task claimed twice");
    assert_eq!(unique, ids.iter().copied().collect(), "every task claimed");
    for id in &ids {
        let t = store.task_get(*id).await.unwrap().unwrap();
        assert_eq!((t.state, t.attempt), (TaskState::Succeeded, 1), "task {id}");
        assert_eq!(store.attempt_list(*id).await.unwrap().len(), 1, "task {id}");
    }
    let created = created.lock().unwrap().clone();
    for (key, answers) in &created {
        // Both submitters sent the key, unless one stopped a round earlier.
        assert!(matches!(answers.len(), 1 | 2), "{key}: {answers:?}");
        assert!(
            answers.iter().all(|a| a.0 == answers[0].0),
            "{key}: one task"
        );
        assert_eq!(
            answers.iter().filter(|a| a.1).count(),
            1,
            "{key}: created once"
        );
    }
    let cold: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM tasktable_tasks WHERE queue = 'cold'")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(cold as usize, created.len(), "one task per key");
    let retries = store.db().deadlock_retries();
    eprintln!(
        "contention: {TASKS} tasks, {} racing keys, {retries} deadlock retries, {:?}",
        created.len(),
        started.elapsed()
    );
    assert!(retries > 0, "the contention provoked no deadlock to retry");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_wait_timeout_is_retried() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    let store = db
        .store_with(|c| c.lock_wait_timeout = Some(Duration::from_secs(1)))
        .await;
    let id = store
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", json!(0))],
            now: Some(t0()),
        })
        .await
        .unwrap()[0]
        .id;
    let t = store
        .task_claim(claim_params("default", &["k"], 1, t0()))
        .await
        .unwrap()
        .remove(0);
    // Someone else holds the row for longer than the store's lock wait timeout.
    let mut other = MySqlConnection::connect(db.url()).await.unwrap();
    let mut tx = other.begin().await.unwrap();
    sqlx::query("SELECT id FROM tasktable_tasks WHERE id = ? FOR UPDATE")
        .bind(id)
        .fetch_all(&mut *tx)
        .await
        .unwrap();
    let finisher = {
        let store = store.clone();
        tokio::spawn(async move {
            store
                .task_finish(FinishParams {
                    items: vec![complete(t.lease())],
                    only_if_expired: false,
                    now: Some(at(1)),
                })
                .await
        })
    };
    // Hold the lock until the store has hit the timeout and gone round again.
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while store.db().deadlock_retries() == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the lock wait never timed out"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    tx.commit().await.unwrap();
    assert_eq!(finisher.await.unwrap().expect("finish"), vec![true]);
    assert!(
        store.db().deadlock_retries() >= 1,
        "the timeout was retried"
    );
    let t = store.task_get(id).await.unwrap().unwrap();
    assert_eq!(t.state, TaskState::Succeeded);
}
