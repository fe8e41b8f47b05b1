//! The state index holds no succeeded task, so a successful finish writes no entry into
//! it (schema version 15), and the readers of live tasks still find them through it.

use super::*;
use tasktable_conformance::pinned::{claim, ok};
use tasktable_core::outcome::FinishPlan;

/// Entries in `index` after a vacuum that cleans every index, as it counts them.
async fn entries(conn: &mut PgConnection, index: &str) -> i64 {
    conn.execute("VACUUM (INDEX_CLEANUP ON) tasktable_tasks")
        .await
        .unwrap();
    let n: f32 = sqlx::query_scalar("SELECT reltuples FROM pg_class WHERE relname = $1")
        .bind(index)
        .fetch_one(&mut *conn)
        .await
        .unwrap();
    n as i64
}

/// The plan of `sql`, as text.
async fn plan(conn: &mut PgConnection, sql: &str) -> String {
    let rows: Vec<String> = sqlx::query_scalar(&format!("EXPLAIN {sql}"))
        .fetch_all(&mut *conn)
        .await
        .unwrap();
    rows.join("\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn succeeded_tasks_leave_the_state_index_and_live_ones_are_read_through_it() {
    let Some(db) = Postgres::fresh().await else {
        return;
    };
    let s = db.store().await;
    let done = 2_000;
    submit_at(
        &*s,
        (0..done + 3).map(|i| NewTask::new("k", json!(i))).collect(),
        t0(),
    )
    .await;
    for _ in 0..done / 200 {
        let claimed = claim(&*s, &["k"], 200, at(1)).await;
        let items = claimed
            .iter()
            .map(|t| FinishItem {
                lease: t.lease(),
                plan: FinishPlan::for_handler(ok(), t.attempt, &t.backoff, 0.5),
            })
            .collect();
        let applied = s
            .task_finish(FinishParams {
                items,
                only_if_expired: false,
                now: Some(at(2)),
            })
            .await
            .unwrap();
        assert!(applied.iter().all(|a| *a));
    }
    // One of the three left runs, two wait.
    assert_eq!(claim(&*s, &["k"], 1, at(3)).await.len(), 1);

    let mut conn = PgConnection::connect(db.0.url()).await.unwrap();
    assert_eq!(entries(&mut conn, "tasktable_tasks_pkey").await, done + 3);
    assert_eq!(entries(&mut conn, "tasktable_tasks_state").await, 3);

    conn.execute("ANALYZE tasktable_tasks").await.unwrap();
    // Queue discovery, statistics' active counts, a filter by a bad end.
    for sql in [
        "SELECT MIN(queue) FROM tasktable_tasks WHERE state = 'pending'",
        "SELECT queue, kind, state, count(*) FROM tasktable_tasks \
         WHERE state = ANY('{held,pending,running}') GROUP BY queue, kind, state",
        "SELECT id FROM tasktable_tasks WHERE state = 'failed' ORDER BY id DESC LIMIT 50",
    ] {
        let p = plan(&mut conn, sql).await;
        assert!(p.contains("tasktable_tasks_state"), "{sql}:\n{p}");
    }
    // Readers of succeeded tasks read the table, and find them all.
    let n: i64 =
        sqlx::query_scalar("SELECT count(*) FROM tasktable_tasks WHERE state = 'succeeded'")
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(n, done);
    let counts = s.queue_list().await.unwrap();
    let default = counts.iter().find(|q| q.name == "default").unwrap();
    assert!(default
        .counts
        .contains(&(TaskState::Succeeded, done as u64)));
}
