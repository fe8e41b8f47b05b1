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

    async fn store_with_probe(
        &self,
        connections: u32,
    ) -> (Arc<dyn Store>, tasktable_conformance::Probe) {
        let store = MySqlStore::connect(MySqlConfig {
            max_connections: connections,
            ..MySqlConfig::new(self.0.url())
        })
        .await
        .expect("open mysql");
        let pool = store.pool().clone();
        let probe: tasktable_conformance::Probe =
            Box::new(move || Box::pin(in_transaction(pool.clone())));
        (Arc::new(store), probe)
    }
}

/// A probe of a MySQL pool: MariaDB says whether a session is inside a transaction
/// (`@@in_transaction`); MySQL, which has no such variable, shows in `INNODB_TRX` one that
/// has locked or changed rows (so on MySQL an empty transaction left open goes unseen,
/// until a write in it locks a row).
async fn in_transaction(pool: sqlx::MySqlPool) -> usize {
    tasktable_testdb::probe::in_transaction(&pool, |conn| {
        Box::pin(async move {
            let variable = sqlx::query_scalar("SELECT CAST(@@in_transaction AS SIGNED)")
                .fetch_one(&mut *conn)
                .await;
            let inside: i64 = match variable {
                Ok(inside) => inside,
                Err(_) => sqlx::query_scalar(
                    "SELECT COUNT(*) FROM information_schema.INNODB_TRX \
                     WHERE trx_mysql_thread_id = CONNECTION_ID() \
                       AND trx_rows_locked + trx_rows_modified > 0",
                )
                .fetch_one(conn)
                .await
                .expect("the session's transaction"),
            };
            inside > 0
        })
    })
    .await
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

    async fn lock_waiters(&self) -> u64 {
        let mut conn = MySqlConnection::connect(self.0.url())
            .await
            .expect("own connection");
        // MariaDB lists no lock waits in INNODB_TRX or INNODB_LOCK_WAITS: a session that
        // has run one statement for a second or more on this quiet database is waiting.
        let waiting: i64 = sqlx::query_scalar(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST \
             WHERE DB = DATABASE() AND ID <> CONNECTION_ID() \
               AND COMMAND IN ('Query', 'Execute') AND TIME >= 1",
        )
        .fetch_one(&mut conn)
        .await
        .expect("lock waits");
        conn.close().await.expect("close");
        waiting as u64
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
