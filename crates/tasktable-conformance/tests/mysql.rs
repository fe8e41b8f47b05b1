//! The conformance suite on MySQL and MariaDB, then the checks only this backend needs:
//! the claim's plan and locks, retries under contention, time zones, packet limits.
//!
//! Each test gets a database of its own (see `tasktable-testdb`), so tests run in parallel.

use chrono::Utc;
use serde_json::json;
use sqlx::{Connection, Executor, MySqlConnection, Row};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tasktable_conformance::pinned::{at, claim_params, t0};
use tasktable_conformance::RowLock;
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{HandlerOutcome, NewTask, TaskId, TaskState};
use tasktable_mysql::{MySqlConfig, MySqlStore};
use tasktable_store::*;
use tasktable_testdb::MySqlDb;

async fn run(conn: &mut MySqlConnection, sql: &str) {
    conn.execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

struct MySql(MySqlDb);

#[async_trait::async_trait]
impl tasktable_conformance::Backend for MySql {
    async fn fresh() -> Option<Self> {
        MySqlDb::fresh().await.map(MySql)
    }

    async fn store(&self) -> Arc<dyn Store> {
        Arc::new(MySqlStore::open(self.0.url()).await.expect("open mysql"))
    }

    async fn store_with_bulk_chunk(&self, rows: u32) -> (Arc<dyn Store>, Arc<dyn ChunkedUpdate>) {
        let store = Arc::new(
            MySqlStore::connect(MySqlConfig {
                bulk_chunk_rows: rows,
                ..MySqlConfig::new(self.0.url())
            })
            .await
            .expect("open mysql"),
        );
        (store.clone(), store)
    }

    async fn submit_in_transaction(
        &self,
        tasks: Vec<NewTask>,
        commit: bool,
    ) -> StoreResult<Vec<Submitted>> {
        let mut conn = MySqlConnection::connect(self.0.url())
            .await
            .expect("own connection");
        // DDL commits on its own in MySQL, so the table is made before the transaction.
        run(
            &mut conn,
            "CREATE TABLE IF NOT EXISTS business (note TEXT) ENGINE = InnoDB",
        )
        .await;
        let mut tx = conn.begin().await.expect("begin");
        sqlx::query("INSERT INTO business (note) VALUES ('paid')")
            .execute(&mut *tx)
            .await
            .expect("own write");
        let out = MySqlStore::submit_in(&mut tx, tasks).await?;
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
impl tasktable_conformance::RowLocks for MySql {
    async fn lock_row(&self, id: TaskId) -> RowLock {
        let mut conn = MySqlConnection::connect(self.0.url())
            .await
            .expect("own connection");
        run(&mut conn, "BEGIN").await;
        let locked: Option<TaskId> =
            sqlx::query_scalar("SELECT id FROM tasktable_tasks WHERE id = ? FOR UPDATE")
                .bind(id)
                .fetch_optional(&mut conn)
                .await
                .expect("lock");
        assert_eq!(locked, Some(id), "task {id} to lock");
        RowLock::new(async move {
            run(&mut conn, "ROLLBACK").await;
            conn.close().await.expect("close");
        })
    }
}

tasktable_conformance::conformance_suite!(MySql, row_locks);

// ---- Checks only MySQL needs ------------------------------------------------------------

#[path = "mysql/contention.rs"]
mod contention;
#[path = "mysql/plan.rs"]
mod plan;
#[path = "mysql/session.rs"]
mod session;

fn ok() -> HandlerOutcome {
    HandlerOutcome::Succeeded {
        result: Some(json!({"ok": true})),
    }
}

fn complete(lease: tasktable_core::Lease) -> FinishItem {
    FinishItem {
        lease,
        plan: FinishPlan::for_handler(ok(), 1, &tasktable_core::Backoff::default(), 0.5),
    }
}
