//! The conformance suite on SQLite: each test gets its own database file.

use sqlx::SqlitePool;
use std::sync::Arc;
use tasktable_conformance::Probe;
use tasktable_core::NewTask;
use tasktable_sqlite::{SqliteConfig, SqliteStore};
use tasktable_store::{ChunkedUpdate, Store, StoreResult, Submitted};

struct Sqlite {
    _dir: tempfile::TempDir,
    url: String,
}

#[async_trait::async_trait]
impl tasktable_conformance::Backend for Sqlite {
    async fn fresh() -> Option<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("tasktable.db").display());
        let store = SqliteStore::open(&url).await.expect("open sqlite");
        store.migrate().await.expect("migrate");
        store.close().await;
        Some(Sqlite { _dir: dir, url })
    }

    async fn store(&self) -> Arc<dyn Store> {
        Arc::new(SqliteStore::open(&self.url).await.expect("open sqlite"))
    }

    async fn store_with_bulk_chunk(&self, rows: u32) -> (Arc<dyn Store>, Arc<dyn ChunkedUpdate>) {
        let store = Arc::new(
            SqliteStore::connect(SqliteConfig {
                bulk_chunk_rows: rows,
                ..SqliteConfig::new(&self.url)
            })
            .await
            .expect("open sqlite"),
        );
        (store.clone(), store)
    }

    async fn submit_in_transaction(
        &self,
        tasks: Vec<NewTask>,
        commit: bool,
    ) -> StoreResult<Vec<Submitted>> {
        let pool = sqlx::SqlitePool::connect(&self.url)
            .await
            .expect("own pool");
        let mut tx = pool.begin_with("BEGIN IMMEDIATE").await.expect("begin");
        sqlx::query("CREATE TABLE IF NOT EXISTS business (note TEXT)")
            .execute(&mut *tx)
            .await
            .expect("own write");
        let out = SqliteStore::submit_in(&mut tx, tasks).await?;
        if commit {
            tx.commit().await.expect("commit");
        } else {
            tx.rollback().await.expect("rollback");
        }
        Ok(out)
    }

    async fn store_with_probe(&self, connections: u32) -> (Arc<dyn Store>, Probe) {
        let store = SqliteStore::connect(SqliteConfig {
            read_connections: connections,
            ..SqliteConfig::new(&self.url)
        })
        .await
        .expect("open sqlite");
        let pools = vec![store.pool().writer.clone(), store.pool().reader.clone()];
        let probe: Probe = Box::new(move || {
            let pools = pools.clone();
            Box::pin(async move {
                let mut open = 0;
                for pool in pools {
                    open += in_transaction(pool).await;
                }
                open
            })
        });
        (Arc::new(store), probe)
    }
}

/// A [`Probe`] of an SQLite pool: `BEGIN` is refused inside a transaction.
async fn in_transaction(pool: SqlitePool) -> usize {
    tasktable_testdb::probe::in_transaction(&pool, |conn| {
        Box::pin(async move {
            if sqlx::query("BEGIN").execute(&mut *conn).await.is_err() {
                return true;
            }
            sqlx::query("ROLLBACK")
                .execute(conn)
                .await
                .expect("rollback");
            false
        })
    })
    .await
}

tasktable_conformance::conformance_suite!(Sqlite);

/// Calls of the store itself (not shielded) cut off anywhere leave no connection inside a
/// transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_calls_cut_off_anywhere_leave_no_connection_inside_a_transaction() {
    use tasktable_conformance::Backend;
    let Some(db) = Sqlite::fresh().await else {
        return;
    };
    let (s, probe) = db.store_with_probe(2).await;
    tasktable_conformance::cutoff::calls::raw_calls_cut_off_anywhere_leave_no_connection_inside_a_transaction(&*s, &probe).await;
}
