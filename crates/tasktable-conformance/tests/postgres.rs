//! The conformance suite on PostgreSQL, then the checks only this backend passes: each
//! test gets a database of its own, copied from a migrated template (see
//! `tasktable-testdb`), so tests run in parallel.

use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};
use std::sync::Arc;
use std::time::Duration;
use tasktable_conformance::pace::Paced;
use tasktable_conformance::pinned::{at, claim_params, finish, get, ok, submit_at, t0};
use tasktable_conformance::{Backend, Probe, RowLock, RowLocks};
use tasktable_core::{NewTask, TaskId, TaskState};
use tasktable_postgres::{PgConfig, PgStore};
use tasktable_store::*;
use tasktable_testdb::PgDb;

struct Postgres(PgDb);

#[async_trait::async_trait]
impl Backend for Postgres {
    async fn fresh() -> Option<Self> {
        PgDb::fresh().await.map(Postgres)
    }

    async fn store(&self) -> Arc<dyn Store> {
        Arc::new(PgStore::open(self.0.url()).await.expect("open postgres"))
    }

    async fn store_with_bulk_chunk(&self, rows: u32) -> (Arc<dyn Store>, Arc<dyn ChunkedUpdate>) {
        let store = Arc::new(
            PgStore::connect(PgConfig {
                bulk_chunk_rows: rows,
                ..PgConfig::new(self.0.url())
            })
            .await
            .expect("open postgres"),
        );
        (store.clone(), store)
    }

    async fn submit_in_transaction(
        &self,
        tasks: Vec<NewTask>,
        commit: bool,
    ) -> StoreResult<Vec<Submitted>> {
        let mut conn = PgConnection::connect(self.0.url())
            .await
            .expect("own connection");
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query("CREATE TABLE IF NOT EXISTS business (note TEXT)")
            .execute(&mut *tx)
            .await
            .expect("own write");
        let out = PgStore::submit_in(&mut tx, tasks).await?;
        if commit {
            tx.commit().await.expect("commit");
        } else {
            tx.rollback().await.expect("rollback");
        }
        conn.close().await.expect("close");
        Ok(out)
    }

    async fn store_with_probe(&self, connections: u32) -> (Arc<dyn Store>, Probe) {
        let store = PgStore::connect(PgConfig {
            max_connections: connections,
            ..PgConfig::new(self.0.url())
        })
        .await
        .expect("open postgres");
        let pool = store.pool().clone();
        let probe: Probe = Box::new(move || Box::pin(in_transaction(pool.clone())));
        (Arc::new(store), probe)
    }
}

/// A [`Probe`] of a PostgreSQL pool: `SAVEPOINT` is refused outside a transaction block.
async fn in_transaction(pool: sqlx::PgPool) -> usize {
    tasktable_testdb::probe::in_transaction(&pool, |conn| {
        Box::pin(async move {
            sqlx::query("SAVEPOINT tasktable_probe")
                .execute(conn)
                .await
                .is_ok()
        })
    })
    .await
}

#[async_trait::async_trait]
impl RowLocks for Postgres {
    async fn lock_row(&self, id: TaskId) -> RowLock {
        let mut conn = PgConnection::connect(self.0.url())
            .await
            .expect("own connection");
        conn.execute("BEGIN").await.expect("begin");
        let locked: Option<TaskId> =
            sqlx::query_scalar("SELECT id FROM tasktable_tasks WHERE id = $1 FOR UPDATE")
                .bind(id)
                .fetch_optional(&mut conn)
                .await
                .expect("lock");
        assert_eq!(locked, Some(id), "task {id} to lock");
        RowLock::new(async move {
            conn.execute("ROLLBACK").await.expect("rollback");
            conn.close().await.expect("close");
        })
    }

    async fn lock_waiters(&self) -> u64 {
        let mut conn = PgConnection::connect(self.0.url())
            .await
            .expect("own connection");
        let waiting: i64 = sqlx::query_scalar(
            "SELECT count(*) FROM pg_stat_activity \
             WHERE datname = current_database() AND wait_event_type = 'Lock'",
        )
        .fetch_one(&mut conn)
        .await
        .expect("lock waits");
        conn.close().await.expect("close");
        waiting as u64
    }
}

tasktable_conformance::conformance_suite!(Postgres, row_locks);

/// A chunk checks its states on each row before it locks it, so a task that left them
/// after the change read its ids (a worker claimed it) is dropped without waiting for the
/// worker's write in flight. MySQL waits for such a row once (see `tasktable_sql::update`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bulk_chunk_never_waits_for_a_row_that_left_its_states() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let s = db.store().await;
    let (_, chunked) = db.store_with_bulk_chunk(2).await;
    let tasks = (0..4)
        .map(|i| NewTask::new("k", json!(i)).queue("q"))
        .collect();
    let ids = submit_at(&*s, tasks, t0()).await;
    let (paced, mut chunks) = Paced::new(chunked, 0);
    let change = tokio::spawn({
        let paced = paced.clone();
        async move {
            let q = TaskFilter::default().queue("q");
            update_in_chunks(
                &*paced,
                &q,
                &Change::Hold,
                &tasktable_core::Actor::rust(),
                Some(at(5)),
                2,
                "paced-hold",
            )
            .await
        }
    });
    assert_eq!(chunks.recv().await, Some(2), "the first chunk");
    let claimed = s
        .task_claim(claim_params("q", &["k"], 1, at(6)))
        .await
        .unwrap();
    assert_eq!(claimed[0].id, ids[2]);
    let lock = db.lock_row(ids[2]).await;
    paced.open();
    let held = tokio::time::timeout(Duration::from_secs(30), change)
        .await
        .expect("the hold waited for a running row, which it does not apply to")
        .unwrap()
        .unwrap();
    lock.release().await;
    assert_eq!(held, 3);
    assert_eq!(get(&*s, ids[2]).await.state, TaskState::Running);
    assert_eq!(get(&*s, ids[3]).await.state, TaskState::Held);
}

/// A task's history goes with it when a user deletes or truncates tasks by hand, as the
/// foreign key's `ON DELETE CASCADE` did before version 19 (its triggers do it now), and
/// the history of the tasks left stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_users_own_delete_or_truncate_takes_the_history_with_the_tasks() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let s = db.store().await;
    let tasks = (0..3).map(|i| NewTask::new("k", json!(i))).collect();
    let ids = submit_at(&*s, tasks, t0()).await;
    for task in s
        .task_claim(claim_params("default", &["k"], 3, at(1)))
        .await
        .unwrap()
    {
        assert!(finish(&*s, task.lease(), ok(), task.attempt, at(2)).await);
    }
    let mut conn = PgConnection::connect(db.0.url()).await.expect("connect");
    let history = |id: TaskId| {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM tasktable_attempts WHERE task_id = $1")
            .bind(id)
    };
    assert_eq!(history(ids[0]).fetch_one(&mut conn).await.unwrap(), 1);
    sqlx::query("DELETE FROM tasktable_tasks WHERE id = ANY($1)")
        .bind(&ids[..2])
        .execute(&mut conn)
        .await
        .unwrap();
    for id in &ids[..2] {
        assert_eq!(
            history(*id).fetch_one(&mut conn).await.unwrap(),
            0,
            "deleted with {id}"
        );
        assert!(s.attempt_list(*id).await.unwrap().is_empty());
    }
    assert_eq!(
        s.attempt_list(ids[2]).await.unwrap().len(),
        1,
        "the other's stays"
    );
    conn.execute("TRUNCATE tasktable_tasks CASCADE")
        .await
        .unwrap();
    let left: i64 = sqlx::query_scalar("SELECT count(*) FROM tasktable_attempts")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(left, 0, "truncated with the tasks");
    conn.close().await.unwrap();
}

/// The claim keeps PostgreSQL's generic plan once it has run a few times, rather than
/// being planned anew at every call (which cost more than running it): its lanes' limit
/// is in its text (task_claim_select.sql says why).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_claim_is_planned_once_not_at_every_call() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let s = db.store().await;
    // A backlog as a drain sees it: with few rows every plan is cheap, and PostgreSQL
    // settles on the generic one whatever the statement.
    for chunk in 0..4 {
        let tasks = (0..5000)
            .map(|i| NewTask::new("k", json!(chunk * 5000 + i)))
            .collect();
        submit_at(&*s, tasks, t0()).await;
    }
    let mut conn = PgConnection::connect(db.0.url()).await.unwrap();
    conn.execute("ANALYZE tasktable_tasks").await.unwrap();
    let claim = tasktable_postgres::claim_statement(4);
    for _ in 0..8 {
        let mut tx = conn.begin().await.unwrap();
        let rows = sqlx::query(&claim)
            .bind("default")
            .bind(Some(at(1)))
            .bind(vec!["k".to_string()])
            .bind(4_i64)
            .bind(30_000_000_i64)
            .bind("w1")
            .bind("host-a")
            .bind(vec!["0".repeat(32); 4])
            .bind(vec!["|w:w1|".to_string()])
            .fetch_all(&mut *tx)
            .await
            .unwrap();
        assert_eq!(rows.len(), 4);
        tx.rollback().await.unwrap();
    }
    let (generic, custom): (i64, i64) = sqlx::query_as(
        "SELECT generic_plans, custom_plans FROM pg_prepared_statements \
         WHERE statement LIKE '%untargeted AS MATERIALIZED%'",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    assert!(
        generic >= 2 && custom <= 5,
        "generic plans {generic}, custom plans {custom}"
    );
}

/// The claim's plan: each lane reads its own partial index in claim order; tasks aimed at
/// a worker that is away are read only by the targeted lane, and only by a claimer that
/// finds too few of its own ahead of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_lane_of_the_claim_reads_its_own_index_and_away_tasks_cost_only_the_targeted_lane() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let s = db.store().await;
    let away = tasktable_core::Target::Workers(vec!["away".into()]);
    let mine = tasktable_core::Target::Workers(vec!["w1".into()]);
    // 5,000 tasks of high priority for a worker that never comes, then work for anyone
    // and for w1.
    for chunk in 0..5 {
        let tasks = (0..1000)
            .map(|i| {
                NewTask::new("k", json!(chunk * 1000 + i))
                    .priority(9)
                    .target(away.clone())
            })
            .collect();
        submit_at(&*s, tasks, t0()).await;
    }
    let open = submit_at(
        &*s,
        (0..2000).map(|i| NewTask::new("k", json!(i))).collect(),
        t0(),
    )
    .await;
    let own = submit_at(
        &*s,
        (0..3)
            .map(|i| NewTask::new("k", json!(i)).target(mine.clone()))
            .collect(),
        t0(),
    )
    .await;
    let mut conn = PgConnection::connect(db.0.url()).await.unwrap();
    conn.execute("ANALYZE tasktable_tasks").await.unwrap();

    let claim = tasktable_postgres::claim_statement(10);
    // Runs the claim under EXPLAIN ANALYZE in a transaction that is rolled back: the plan,
    // and how many rows each lane's index scan read.
    let explain = |worker: &'static str| {
        let claim = claim.clone();
        let url = db.0.url().to_owned();
        async move {
            let mut conn = PgConnection::connect(&url).await.unwrap();
            let mut tx = conn.begin().await.unwrap();
            let plan: serde_json::Value =
                sqlx::query_scalar(&format!("EXPLAIN (ANALYZE, FORMAT JSON) {claim}"))
                    .bind("default")
                    .bind(Some(at(1)))
                    .bind(vec!["k".to_string()])
                    .bind(10_i64)
                    .bind(30_000_000_i64)
                    .bind(worker)
                    .bind("host-a")
                    .bind(vec!["0".repeat(32); 10])
                    .bind(vec![format!("|w:{worker}|")])
                    .fetch_one(&mut *tx)
                    .await
                    .unwrap();
            tx.rollback().await.unwrap();
            plan
        }
    };
    /// (node type, index, rows returned, rows it dropped by its own filter).
    type ScanRow = (String, String, u64, u64);
    fn scans(node: &serde_json::Value, out: &mut Vec<ScanRow>) {
        if let Some(t) = node.get("Node Type").and_then(|t| t.as_str()) {
            if t.contains("Scan") && node.get("Relation Name").is_some() {
                out.push((
                    t.to_owned(),
                    node.get("Index Name")
                        .and_then(|i| i.as_str())
                        .unwrap_or_default()
                        .to_owned(),
                    node["Actual Rows"].as_u64().unwrap_or(0),
                    node["Rows Removed by Filter"].as_u64().unwrap_or(0),
                ));
            }
        }
        for child in node
            .get("Plans")
            .and_then(|p| p.as_array())
            .into_iter()
            .flatten()
        {
            scans(child, out);
        }
    }
    for worker in ["w1", "w2"] {
        let plan = explain(worker).await;
        let mut found = Vec::new();
        scans(&plan[0]["Plan"], &mut found);
        let task_scans: Vec<_> = found
            .iter()
            .filter(|(_, index, _, _)| index.starts_with("tasktable_tasks"))
            .collect();
        eprintln!(
            "claim as {worker}: {task_scans:?}, {} ms",
            plan[0]["Execution Time"]
        );
        assert!(
            !found.iter().any(|(t, _, _, _)| t == "Seq Scan"),
            "no sequential scan: {found:?}"
        );
        let read = |name: &str| {
            task_scans
                .iter()
                .find(|(_, index, _, _)| index == name)
                .unwrap_or_else(|| panic!("a scan of {name}: {found:?}"))
                .2
        };
        // The untargeted lane stops after its limit, whatever waits for the absent
        // worker. The targeted lane reads every due targeted task ahead of the claimer's
        // own (here all of them: it finds fewer than its limit), testing each for the
        // claimer's names: the cost docs/workers.md describes.
        assert_eq!(read("tasktable_tasks_claim"), 10);
        assert_eq!(read("tasktable_tasks_targeted"), 5003);
    }
    let got = s
        .task_claim(claim_params("default", &["k"], 10, at(1)))
        .await
        .unwrap();
    let ids: Vec<i64> = got.iter().map(|t| t.id).collect();
    assert_eq!(ids, [&own[..], &open[..7]].concat());
}

/// Submits `tasks` due by the database's clock.
async fn submit_now(store: &dyn Store, tasks: Vec<NewTask>) {
    store
        .task_submit(SubmitParams { tasks, now: None })
        .await
        .unwrap();
}

/// A store with a listener of its own, subscribed: what another process's worker hears.
async fn listening(db: &Postgres) -> (Arc<dyn Store>, tokio::sync::broadcast::Receiver<Wake>) {
    let listener = db.store().await;
    let wakes = listener.subscribe().await.expect("subscribe");
    (listener, wakes)
}

/// The next wake-up `wakes` hears; fails, saying `what` was awaited, after 20 s.
async fn next_wake(wakes: &mut tokio::sync::broadcast::Receiver<Wake>, what: &str) -> Wake {
    tokio::time::timeout(Duration::from_secs(20), wakes.recv())
        .await
        .unwrap_or_else(|_| panic!("{what}"))
        .expect("wake-up stream")
}

/// A store closed right after a submit returned still sends that submit's wake-up: the
/// wake-ups go out after the commit, and `close` waits for them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_closed_after_a_submit_still_sends_its_wake_up() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let (_listener, mut wakes) = listening(&db).await;
    for round in 0..5 {
        let producer = PgStore::open(db.0.url()).await.expect("open postgres");
        let queue = format!("closing-{round}");
        submit_now(
            &producer,
            vec![NewTask::new("k", json!(round)).queue(queue.clone())],
        )
        .await;
        producer.close().await;
        let wake = next_wake(
            &mut wakes,
            "the wake-up of a submit that returned before close",
        )
        .await;
        assert_eq!(wake.queue, queue);
    }
}

/// Submits wake the workers of other processes through NOTIFY: a store with a pool and
/// listener of its own hears of every queue that got a task due now, and of none that got
/// only a task due later, when many submits commit at once: lone tasks (the one-row
/// statement), a batch, and tasks submitted in the caller's transaction (notified at its
/// commit), alone and in a batch. A wake-up is sent only after the submit that caused it
/// has committed (the store's own submit sends it once its autocommitted insert has
/// returned): at the first wake-up of each queue the listener's own store already finds a
/// task of that queue to claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submits_wake_the_listeners_of_other_stores_after_they_commit() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let (listener, mut wakes) = listening(&db).await;
    let producer = db.store().await;
    let later = NewTask::new("k", json!(0))
        .queue("later")
        .delay(Duration::from_secs(3600));
    submit_now(&*producer, vec![later]).await;
    let submits = (0..16).map(|i| {
        let producer = producer.clone();
        async move {
            let task = NewTask::new("k", json!(i)).queue(format!("q{}", i % 4));
            submit_now(&*producer, vec![task]).await
        }
    });
    let batch = (0..3)
        .map(|i| NewTask::new("k", json!(i)).queue("batch"))
        .collect();
    submit_now(&*producer, batch).await;
    for (queue, n) in [("tx-one", 1), ("tx-batch", 2)] {
        let tasks = (0..n)
            .map(|i| NewTask::new("k", json!(i)).queue(queue))
            .collect();
        db.submit_in_transaction(tasks, true).await.unwrap();
    }
    let submitting = tokio::spawn(futures::future::join_all(submits));
    let mut heard = std::collections::BTreeSet::new();
    while heard.len() < 7 {
        let wake = next_wake(&mut wakes, "a wake-up for every queue with a task due now").await;
        assert_ne!(wake.queue, "later", "a task due later wakes nobody");
        if heard.insert(wake.queue.clone()) {
            let mut claim = claim_params(&wake.queue, &["k"], 100, t0());
            claim.now = None;
            let claimed = listener.task_claim(claim).await.unwrap();
            assert!(
                !claimed.is_empty(),
                "the first wake-up of {} came before any of its tasks had committed",
                wake.queue
            );
        }
    }
    submitting.await.unwrap();
    assert_eq!(
        heard.into_iter().collect::<Vec<_>>(),
        ["batch", "q0", "q1", "q2", "q3", "tx-batch", "tx-one"]
    );
}

/// A pooled connection that sat idle while the server closed it (a restart, an
/// administrator's `pg_terminate_backend`) is tested before it is used again, so the next
/// call succeeds instead of failing on a dead connection. Connections in use are not
/// tested before each statement (sqlx tests them as they go back to the pool); this
/// store counts every connection as having sat idle long enough, so no wait is needed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_after_the_server_closed_idle_connections_succeeds() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let store = PgStore::connect(PgConfig {
        idle_before_ping: Duration::ZERO,
        ..PgConfig::new(db.0.url())
    })
    .await
    .expect("open postgres");
    submit_now(&store, vec![NewTask::new("k", json!(1))]).await;
    let mut admin = PgConnection::connect(db.0.url()).await.expect("connect");
    let closed: i64 = sqlx::query_scalar(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
         WHERE datname = current_database() AND application_name = 'tasktable'",
    )
    .fetch_one(&mut admin)
    .await
    .expect("terminate the store's connections");
    assert!(closed > 0, "the store held no connection");
    let submitted = store
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("k", json!(2))],
            now: None,
        })
        .await
        .expect("a submit after the server closed the pool's connections");
    let claimed = store
        .task_claim(ClaimParams {
            now: None,
            ..claim_params("default", &["k"], 10, t0())
        })
        .await
        .expect("a claim after the server closed the pool's connections");
    assert_eq!(submitted.len(), 1);
    assert_eq!(claimed.len(), 2);
}

/// Calls of the store itself (not shielded) cut off anywhere leave no connection inside a
/// transaction: a `BEGIN` cut off before its answer came closes its connection.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_calls_cut_off_anywhere_leave_no_connection_inside_a_transaction() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let (s, probe) = db.store_with_probe(2).await;
    tasktable_conformance::cutoff::calls::raw_calls_cut_off_anywhere_leave_no_connection_inside_a_transaction(&*s, &probe).await;
}
