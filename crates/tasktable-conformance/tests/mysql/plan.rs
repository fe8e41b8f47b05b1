//! The claim's plan and locks: it reads the claim index in claim order, sorts nothing,
//! and locks only the rows it takes.

use super::*;

const CLAIM_SELECT: &str = include_str!("../../../tasktable-mysql/queries/task_claim_select.sql");

/// Runs the claim's SELECT on a connection of its own, inside a transaction the caller
/// keeps open (so the locks stay), and returns the ids it took.
async fn claim_select(
    conn: &mut MySqlConnection,
    queue: &str,
    kinds: &[&str],
    limit: i64,
) -> Vec<i64> {
    let sql = CLAIM_SELECT.replace("{kinds}", &vec!["?"; kinds.len()].join(", "));
    let mut q = sqlx::query_scalar(&sql).bind(queue).bind(at(0));
    for k in kinds {
        q = q.bind(*k);
    }
    q.bind(limit)
        .fetch_all(&mut *conn)
        .await
        .expect("claim select")
}

async fn handler_reads(conn: &mut MySqlConnection) -> u64 {
    let rows = sqlx::query("SHOW SESSION STATUS LIKE 'Handler_read%'")
        .fetch_all(&mut *conn)
        .await
        .expect("status");
    rows.iter()
        .map(|r| {
            r.try_get::<String, _>(1)
                .ok()
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claim_reads_and_locks_only_the_rows_it_takes() {
    let Some(db) = MySqlDb::fresh().await else {
        return;
    };
    let store = db.store_with(|_| {}).await;
    // Many due rows in three queues, of three kinds, at five priorities, some not due yet.
    let tasks: Vec<NewTask> = (0..3000)
        .map(|i| {
            let t = NewTask::new(["a", "b", "c"][i % 3], json!(i))
                .queue(["q1", "q2", "q3"][(i / 3) % 3])
                .priority((i % 5) as i32 - 2);
            if i % 7 == 0 {
                t.run_at(at(3600))
            } else {
                t.run_at(at(-(i as i64)))
            }
        })
        .collect();
    for chunk in tasks.chunks(500) {
        store
            .task_submit(SubmitParams {
                tasks: chunk.to_vec(),
                now: Some(t0()),
            })
            .await
            .unwrap();
    }
    let mut a = MySqlConnection::connect(db.url()).await.unwrap();
    run(&mut a, "ANALYZE TABLE tasktable_tasks").await;

    let sql = CLAIM_SELECT.replace("{kinds}", "?, ?");
    let explain = sqlx::query(&format!("EXPLAIN {sql}"))
        .bind("q1")
        .bind(at(0))
        .bind("a")
        .bind("b")
        .bind(10_i64)
        .fetch_all(&mut a)
        .await
        .unwrap();
    assert_eq!(explain.len(), 1, "one table, no derived tables");
    let col = |name: &str| -> String {
        explain[0]
            .try_get::<Option<String>, _>(name)
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    eprintln!(
        "EXPLAIN claim: type={} key={} key_len={} ref={} rows={} Extra={}",
        col("type"),
        col("key"),
        col("key_len"),
        col("ref"),
        explain[0]
            .try_get::<Option<i64>, _>("rows")
            .ok()
            .flatten()
            .unwrap_or_default(),
        col("Extra"),
    );
    assert_eq!(col("key"), "tasktable_tasks_claim");
    assert!(
        !col("Extra").to_lowercase().contains("filesort"),
        "the claim must not sort: {}",
        col("Extra")
    );

    // Reading: about as many index entries as rows taken (plus the few skipped for kind
    // or run_at), not the whole queue. The status query itself reads a little; measure it.
    run(
        &mut a,
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    )
    .await;
    let base0 = handler_reads(&mut a).await;
    let base1 = handler_reads(&mut a).await;
    let overhead = base1 - base0;
    let mut tx_a = a.begin().await.unwrap();
    let before = handler_reads(&mut tx_a).await;
    let first = claim_select(&mut tx_a, "q1", &["a", "b"], 10).await;
    let read = handler_reads(&mut tx_a).await - before - overhead;
    eprintln!("claim of 10 read {read} index entries of 1000 in the queue");
    assert_eq!(first.len(), 10);
    assert!(read < 40, "read {read} rows to take 10");

    // Locking: with the first claimer's transaction still open, a second claimer takes
    // the next rows in claim order at once. Had the first locked every row it could
    // have sorted, the second would find nothing.
    let mut b = MySqlConnection::connect(db.url()).await.unwrap();
    run(
        &mut b,
        "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED",
    )
    .await;
    let mut tx_b = b.begin().await.unwrap();
    let started = Instant::now();
    let second = claim_select(&mut tx_b, "q1", &["a", "b"], 10).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "it must not wait"
    );
    // What a plain read (no locks, so nothing skipped) finds first in claim order.
    let plain = sql.replace("FOR UPDATE SKIP LOCKED", "");
    let all: Vec<i64> = sqlx::query_scalar(&plain)
        .bind("q1")
        .bind(at(0))
        .bind("a")
        .bind("b")
        .bind(20_i64)
        .fetch_all(&mut MySqlConnection::connect(db.url()).await.unwrap())
        .await
        .unwrap();
    assert_eq!(
        first,
        all[..10],
        "the first claimer took the first ten in claim order"
    );
    assert_eq!(second, all[10..], "the second took the next ten");
    tx_a.rollback().await.unwrap();
    tx_b.rollback().await.unwrap();
}
