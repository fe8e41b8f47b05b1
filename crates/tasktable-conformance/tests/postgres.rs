//! The conformance suite on PostgreSQL, then the checks only this backend passes: each
//! test gets a database of its own, copied from a migrated template (see
//! `tasktable-testdb`), so tests run in parallel.

use serde_json::json;
use sqlx::{Connection, Executor, PgConnection};
use std::sync::Arc;
use std::time::Duration;
use tasktable_conformance::pace::Paced;
use tasktable_conformance::pinned::{at, claim_params, get, submit_at, t0};
use tasktable_conformance::{Backend, RowLock, RowLocks};
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
            update_in_chunks(&*paced, &q, &Change::Hold, Some(at(5)), 2).await
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
