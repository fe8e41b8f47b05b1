//! The conformance suite on PostgreSQL: each test gets a database of its own, copied from
//! a migrated template (see `tasktable-testdb`), so tests run in parallel.

use sqlx::{Connection, PgConnection};
use std::sync::Arc;
use tasktable_core::NewTask;
use tasktable_postgres::PgStore;
use tasktable_store::{Store, StoreResult, Submitted};
use tasktable_testdb::PgDb;

struct Postgres(PgDb);

#[async_trait::async_trait]
impl tasktable_conformance::Backend for Postgres {
    async fn fresh() -> Option<Self> {
        PgDb::fresh().await.map(Postgres)
    }

    async fn store(&self) -> Arc<dyn Store> {
        Arc::new(PgStore::open(self.0.url()).await.expect("open postgres"))
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

tasktable_conformance::conformance_suite!(Postgres);
