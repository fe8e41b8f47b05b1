//! The conformance suite on SQLite: each test gets its own database file.

use std::sync::Arc;
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
}

tasktable_conformance::conformance_suite!(Sqlite);
