//! What a MySQL session brings: time zones, packet limits, collations, DDL that commits
//! on its own.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_follow_utc_whatever_the_session_time_zone() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    // One connection, so the store's every call runs on the session changed below.
    let store = db.store_with(|c| c.max_connections = 1).await;
    {
        let mut conn = store.pool().acquire().await.unwrap();
        run(&mut conn, "SET time_zone = '+05:00'").await;
    }
    let zone: String = sqlx::query_scalar("SELECT @@SESSION.time_zone")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(zone, "+05:00", "the store's session runs five hours east");
    let skew: i64 = sqlx::query_scalar("SELECT TIMESTAMPDIFF(HOUR, UTC_TIMESTAMP(), NOW())")
        .fetch_one(store.pool())
        .await
        .unwrap();
    assert_eq!(skew, 5, "NOW() would have shifted every lease");

    let before = Utc::now() - chrono::Duration::seconds(2);
    let id = store
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", json!(0))],
            now: None,
        })
        .await
        .unwrap()[0]
        .id;
    let t = store
        .task_claim(ClaimParams {
            now: None,
            ..claim_params("default", &["k"], 1, t0())
        })
        .await
        .unwrap()
        .remove(0);
    let after = Utc::now() + chrono::Duration::seconds(2);
    let db_now = store.db_now().await.unwrap();
    let started = t.started_at.expect("started");
    for (what, time) in [
        ("db_now", db_now),
        ("created_at", t.created_at),
        ("run_at", t.run_at),
        ("started_at", started),
    ] {
        assert!(
            before <= time && time <= after,
            "{what} {time} is not the current UTC time"
        );
    }
    assert_eq!(t.id, id);
    assert_eq!(
        t.lease_expires_at,
        Some(started + chrono::Duration::seconds(30))
    );
    assert!(
        started.timestamp_subsec_micros() > 0 || t.created_at.timestamp_subsec_micros() > 0,
        "sub-second precision is kept"
    );
    let renewed = store
        .task_renew(RenewParams {
            leases: vec![t.lease()],
            lease_for: Duration::from_millis(1500),
            now: None,
        })
        .await
        .unwrap();
    let LeaseStatus::Held {
        expires_at: Some(expires),
    } = renewed[0]
    else {
        panic!("{renewed:?}");
    };
    let lead = expires - Utc::now();
    assert!(
        lead > chrono::Duration::zero() && lead <= chrono::Duration::milliseconds(1500),
        "a renewed lease runs 1.5 s from now in UTC, not {lead}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn payloads_up_to_the_limit_fit_and_packet_limits_fail_clearly() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    let store = db.store_with(|_| {}).await;
    // The largest payload allowed: a JSON string of exactly the limit, quotes included.
    let biggest = json!("é".repeat((DEFAULT_MAX_PAYLOAD_BYTES - 2) / 2));
    assert!(serde_json::to_vec(&biggest).unwrap().len() <= DEFAULT_MAX_PAYLOAD_BYTES);
    let id = store
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", biggest.clone())],
            now: Some(t0()),
        })
        .await
        .unwrap()[0]
        .id;
    assert_eq!(store.task_get(id).await.unwrap().unwrap().payload, biggest);

    let packet: u64 = sqlx::query_scalar("SELECT @@max_allowed_packet")
        .fetch_one(store.pool())
        .await
        .unwrap();
    let err = MySqlStore::connect(MySqlConfig {
        max_payload_bytes: packet as usize,
        ..MySqlConfig::new(db.url())
    })
    .await
    .unwrap_err();
    assert!(
        matches!(err, StoreError::InvalidInput(_))
            && err.to_string().contains("max_allowed_packet"),
        "{err}"
    );

    // A result no statement could carry is refused before it is sent (by the size limit
    // every backend applies to results, which connect keeps under max_allowed_packet),
    // and the store goes on.
    let t = store
        .task_claim(claim_params("default", &["k"], 1, t0()))
        .await
        .unwrap()
        .remove(0);
    let huge = FinishItem {
        lease: t.lease(),
        plan: FinishPlan::for_handler(
            HandlerOutcome::Succeeded {
                result: Some(json!("x".repeat(packet as usize))),
            },
            1,
            &tasktable_core::Backoff::default(),
            0.5,
        ),
    };
    let err = store
        .task_finish(FinishParams {
            items: vec![huge],
            only_if_expired: false,
            now: Some(at(1)),
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::PayloadTooLarge { .. }), "{err}");
    let applied = store
        .task_finish(FinishParams {
            items: vec![complete(t.lease())],
            only_if_expired: false,
            now: Some(at(2)),
        })
        .await
        .unwrap();
    assert_eq!(applied, vec![true]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_compare_byte_for_byte() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    let store = db.store_with(|_| {}).await;
    let out = store
        .task_submit(SubmitParams {
            tasks: vec![
                NewTask::new("k", json!(0)).idempotency_key("order-1"),
                NewTask::new("k", json!(1)).idempotency_key("order-1 "),
                NewTask::new("k", json!(2)).idempotency_key("Order-1"),
                NewTask::new("k", json!(3)).queue("q "),
            ],
            now: Some(t0()),
        })
        .await
        .unwrap();
    assert!(out.iter().all(|s| s.created), "{out:?}");
    let claimed = store
        .task_claim(claim_params("q", &["k"], 10, t0()))
        .await
        .unwrap();
    assert!(claimed.is_empty(), "queue 'q' is not queue 'q '");
    let names: Vec<String> = store
        .queue_list()
        .await
        .unwrap()
        .into_iter()
        .map(|q| q.name)
        .collect();
    assert_eq!(names, vec!["default", "q "]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrate_runs_again_over_a_half_applied_schema() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    let store = db.store_with(|_| {}).await;
    // As if a migrator died after the DDL (which MySQL commits at once) but before it
    // recorded the version, with one table not created yet.
    run(
        &mut store.pool().acquire().await.unwrap(),
        "DELETE FROM tasktable_migrations",
    )
    .await;
    run(
        &mut store.pool().acquire().await.unwrap(),
        "DROP TABLE tasktable_queues",
    )
    .await;
    store.migrate().await.expect("migrate again");
    let versions: Vec<(i64, String)> =
        sqlx::query_as("SELECT version, name FROM tasktable_migrations")
            .fetch_all(store.pool())
            .await
            .unwrap();
    let shipped: Vec<(i64, String)> = tasktable_mysql::migrations()
        .iter()
        .map(|m| (m.version, m.name.to_owned()))
        .collect();
    assert_eq!(
        versions, shipped,
        "every migration ran again and was recorded"
    );
    store
        .queue_set_paused(QueuePauseParams {
            actor: tasktable_core::Actor::rust(),
            queue: "default".into(),
            paused: true,
        })
        .await
        .unwrap();
    run(
        &mut store.pool().acquire().await.unwrap(),
        "INSERT INTO tasktable_migrations VALUES (999, 'future', UTC_TIMESTAMP(6))",
    )
    .await;
    let err = store.migrate().await.unwrap_err();
    assert!(
        err.to_string().contains("newer than this tasktable"),
        "{err}"
    );
}

/// A process that froze inside a store call (here: a transaction of the store's pool left
/// open holding a task's row lock) does not keep the rescuer from that task: MariaDB ends
/// the idle session after `idle_transaction_timeout`, and its locks with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_frozen_inside_a_transaction_loses_its_locks() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    let store = db.store_with(|_| {}).await;
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(store.pool())
        .await
        .unwrap();
    if !version.contains("MariaDB") {
        eprintln!("MySQL has no idle_transaction_timeout; nothing to check on {version}");
        return;
    }
    let id = store
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", json!(0))],
            now: None,
        })
        .await
        .unwrap()[0]
        .id;
    let mut frozen = store.pool().begin().await.unwrap();
    sqlx::query("SELECT id FROM tasktable_tasks WHERE id = ? FOR UPDATE")
        .bind(id)
        .fetch_one(&mut *frozen)
        .await
        .unwrap();
    // Another session waits for the row (up to 30 s, far past the store's 2 s) and gets
    // it as soon as the server ends the idle one: no clock in this test but the server's.
    let mut other = db.store_with(|_| {}).await.pool().acquire().await.unwrap();
    run(&mut other, "SET SESSION innodb_lock_wait_timeout = 30").await;
    let waited = std::time::Instant::now();
    sqlx::query("SELECT id FROM tasktable_tasks WHERE id = ? FOR UPDATE")
        .bind(id)
        .fetch_one(&mut *other)
        .await
        .expect("the frozen session's lock was released");
    assert!(
        waited.elapsed() < std::time::Duration::from_secs(25),
        "released by the timeout, not by the lock wait running out"
    );
    let gone = sqlx::query("SELECT 1").fetch_one(&mut *frozen).await;
    assert!(gone.is_err(), "the frozen session was ended");
}
