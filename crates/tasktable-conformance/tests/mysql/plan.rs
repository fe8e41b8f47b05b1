//! The claim's plan and locks: each of its two lanes (untargeted and targeted tasks)
//! reads the claim index in claim order, sorts no task rows, and it locks only the rows it
//! takes.

use super::*;

const CLAIM_SELECT: &str = include_str!("../../../tasktable-mysql/queries/task_claim_select.sql");

/// The claimer's needles: worker `w1` in group `gpu`.
const NEEDLES: [&str; 2] = ["|w:w1|", "|g:gpu|"];

/// The claim's SELECT for `kinds`, with every `FOR UPDATE SKIP LOCKED` dropped when not
/// `locking`.
fn claim_sql(kinds: usize, locking: bool) -> String {
    let sql = CLAIM_SELECT
        .replace("{kinds}", &vec!["?"; kinds].join(", "))
        .replace("{needles}", "INSTR(target, ?) > 0 OR INSTR(target, ?) > 0");
    if locking {
        sql
    } else {
        sql.replace("FOR UPDATE SKIP LOCKED", "")
    }
}

/// Binds the claim's arguments in the order task_claim_select.sql lists them.
fn bound<'q>(
    sql: &'q str,
    queue: &'q str,
    kinds: &'q [&'q str],
    limit: i64,
) -> sqlx::query::Query<'q, sqlx::MySql, sqlx::mysql::MySqlArguments> {
    let mut q = sqlx::query(sql).bind(queue).bind(at(0));
    for k in kinds {
        q = q.bind(*k);
    }
    q = q.bind(limit).bind(queue).bind(at(0));
    for k in kinds {
        q = q.bind(*k);
    }
    for n in NEEDLES {
        q = q.bind(n);
    }
    q.bind(limit).bind(limit)
}

/// Runs the claim's SELECT on a connection of its own, inside a transaction the caller
/// keeps open (so the locks stay), and returns the ids it took.
async fn claim_select(
    conn: &mut MySqlConnection,
    queue: &str,
    kinds: &[&str],
    limit: i64,
) -> Vec<i64> {
    let sql = claim_sql(kinds.len(), true);
    bound(&sql, queue, kinds, limit)
        .fetch_all(&mut *conn)
        .await
        .expect("claim select")
        .iter()
        .map(|r| r.get::<i64, _>(0))
        .collect()
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
    // Many due rows in three queues, of three kinds, at five priorities, some not due yet;
    // one in eleven aimed at a worker that is away, one in thirteen at group gpu.
    let tasks: Vec<NewTask> = (0..3000)
        .map(|i| {
            let mut t = NewTask::new(["a", "b", "c"][i % 3], json!(i))
                .queue(["q1", "q2", "q3"][(i / 3) % 3])
                .priority((i % 5) as i32 - 2);
            if i % 11 == 0 {
                t = t.target(tasktable_core::Target::Workers(vec!["away".into()]));
            } else if i % 13 == 0 {
                t = t.target(tasktable_core::Target::Groups(vec!["gpu".into()]));
            }
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

    let sql = claim_sql(2, true);
    let explain_sql = format!("EXPLAIN {sql}");
    let explain = bound(&explain_sql, "q1", &["a", "b"], 10)
        .fetch_all(&mut a)
        .await
        .unwrap();
    let col = |row: &sqlx::mysql::MySqlRow, name: &str| -> String {
        row.try_get::<Option<String>, _>(name)
            .ok()
            .flatten()
            .unwrap_or_default()
    };
    let lanes: Vec<_> = explain
        .iter()
        .filter(|r| col(r, "table") == "tasktable_tasks")
        .collect();
    assert_eq!(lanes.len(), 2, "two lanes read the tasks table");
    for row in lanes {
        eprintln!(
            "EXPLAIN claim lane: type={} key={} key_len={} ref={} rows={} Extra={}",
            col(row, "type"),
            col(row, "key"),
            col(row, "key_len"),
            col(row, "ref"),
            row.try_get::<Option<i64>, _>("rows")
                .ok()
                .flatten()
                .unwrap_or_default(),
            col(row, "Extra"),
        );
        assert_eq!(col(row, "key"), "tasktable_tasks_claim");
        assert!(
            !col(row, "Extra").to_lowercase().contains("filesort"),
            "a lane must not sort task rows: {}",
            col(row, "Extra")
        );
    }

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
    // Each lane reads up to 10 of its own, plus what it passes over: rows not yet due or
    // of kind c, and in the targeted lane the tasks for the absent worker ahead of w1's.
    assert!(read < 100, "read {read} rows to take 10");

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
    let plain = claim_sql(2, false);
    let all: Vec<i64> = bound(&plain, "q1", &["a", "b"], 40)
        .fetch_all(&mut MySqlConnection::connect(db.url()).await.unwrap())
        .await
        .unwrap()
        .iter()
        .map(|r| r.get::<i64, _>(0))
        .collect();
    assert_eq!(
        first,
        all[..10],
        "the first claimer took the first ten in claim order"
    );
    // Each lane of the first claim locked up to ten rows and the claim took the first ten
    // of both, so the rows of the other lane it left are still locked until it commits:
    // the second claimer passes over them and takes the next ten it can, in claim order.
    assert_eq!(second.len(), 10);
    assert!(second.iter().all(|id| !first.contains(id)));
    let positions: Vec<usize> = second
        .iter()
        .map(|id| {
            all.iter()
                .position(|a| a == id)
                .expect("among the first 40")
        })
        .collect();
    assert!(
        positions.windows(2).all(|w| w[0] < w[1]),
        "the second took its rows in claim order: {positions:?}"
    );
    assert!(
        positions[9] < 30,
        "and passed over at most ten rows: {positions:?}"
    );
    tx_a.rollback().await.unwrap();
    tx_b.rollback().await.unwrap();
}
