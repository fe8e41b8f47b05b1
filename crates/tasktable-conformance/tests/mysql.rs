//! The conformance suite on MySQL and MariaDB, then the checks only this backend needs:
//! the claim's plan and locks, retries under contention, time zones, packet limits.
//!
//! Each test gets a database of its own, so tests run in parallel. MySQL has no template
//! databases, and `CREATE TABLE ... LIKE` would leave out the foreign key, so each new
//! database is migrated (a few DDL statements, well under a second).
//!
//! The server comes from `TASKTABLE_TEST_MYSQL_URL` (default
//! `mysql://root@127.0.0.1:3306/test`); that database is only used to create and drop the
//! others. A passing test drops its database; a failing one keeps it for inspection, and
//! databases left over by failures or killed runs are swept after an hour.

use chrono::Utc;
use serde_json::json;
use sqlx::{Connection, Executor, MySqlConnection, Row};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tasktable_conformance::cases::{at, claim_params, t0};
use tasktable_core::outcome::FinishPlan;
use tasktable_core::{HandlerOutcome, NewTask, TaskState};
use tasktable_mysql::{MySqlConfig, MySqlStore};
use tasktable_store::*;
use tokio::sync::OnceCell;

const DEFAULT_URL: &str = "mysql://root@127.0.0.1:3306/test";
const TEST_PREFIX: &str = "tasktable_test_";
/// Test databases older than this are leftovers of failed or killed runs.
const STALE_AFTER: Duration = Duration::from_secs(3600);

fn server_url() -> String {
    std::env::var("TASKTABLE_TEST_MYSQL_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// The URL of database `name` on the server of `base`.
fn url_for(base: &str, name: &str) -> String {
    let (head, query) = match base.split_once('?') {
        Some((h, q)) => (h, format!("?{q}")),
        None => (base, String::new()),
    };
    let authority = head.find("://").map_or(0, |i| i + 3);
    let root = match head[authority..].find('/') {
        Some(i) => &head[..authority + i],
        None => head,
    };
    format!("{root}/{name}{query}")
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

async fn admin() -> Result<MySqlConnection, String> {
    match tokio::time::timeout(
        Duration::from_secs(5),
        MySqlConnection::connect(&server_url()),
    )
    .await
    {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connection timed out".to_owned()),
    }
}

async fn run(conn: &mut MySqlConnection, sql: &str) {
    conn.execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Reaches the server and sweeps leftovers, once per process; `Err` when the server
/// cannot be reached.
async fn server() -> Result<(), String> {
    static SWEPT: OnceCell<Result<(), String>> = OnceCell::const_new();
    SWEPT
        .get_or_init(|| async {
            let mut conn = admin().await?;
            sweep(&mut conn).await;
            let _ = conn.close().await;
            Ok(())
        })
        .await
        .clone()
}

/// Drops test databases older than [`STALE_AFTER`]; names carry their creation time.
async fn sweep(conn: &mut MySqlConnection) {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT schema_name FROM information_schema.schemata WHERE LEFT(schema_name, ?) = ?",
    )
    .bind(TEST_PREFIX.len() as i64)
    .bind(TEST_PREFIX)
    .fetch_all(&mut *conn)
    .await
    .expect("list databases");
    let now = unix_secs();
    for name in names {
        let stale = name
            .strip_prefix(TEST_PREFIX)
            .and_then(|rest| rest.split('_').next())
            .and_then(|s| s.parse::<u64>().ok())
            .is_some_and(|created| now.saturating_sub(created) > STALE_AFTER.as_secs());
        if stale {
            run(conn, &format!("DROP DATABASE IF EXISTS `{name}`")).await;
        }
    }
}

/// A migrated database of this test's own, dropped when the test passes.
struct MySqlDb {
    name: String,
    url: String,
}

impl MySqlDb {
    async fn fresh() -> Option<Self> {
        if let Err(reason) = server().await {
            tasktable_conformance::unreachable("mysql", &reason);
            return None;
        }
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let name = format!("{TEST_PREFIX}{}_{}_{n}", unix_secs(), std::process::id());
        let mut conn = admin().await.expect("server went away");
        run(
            &mut conn,
            &format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"),
        )
        .await;
        let _ = conn.close().await;
        let url = url_for(&server_url(), &name);
        let store = MySqlStore::open(&url).await.expect("open mysql");
        store.migrate().await.expect("migrate");
        store.close().await;
        Some(MySqlDb { name, url })
    }

    async fn store_with(&self, change: impl FnOnce(&mut MySqlConfig)) -> MySqlStore {
        let mut config = MySqlConfig::new(&self.url);
        change(&mut config);
        MySqlStore::connect(config).await.expect("open mysql")
    }
}

impl Drop for MySqlDb {
    /// Drops the database unless the test failed. Drop cannot await, so this runs on a
    /// thread of its own with a small runtime of its own.
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "kept database {} of the failed test for inspection",
                self.name
            );
            return;
        }
        let sql = format!("DROP DATABASE IF EXISTS `{}`", self.name);
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            rt.block_on(async {
                let mut conn = admin().await.map_err(std::io::Error::other)?;
                conn.execute(sql.as_str())
                    .await
                    .map_err(std::io::Error::other)?;
                conn.close().await.map_err(std::io::Error::other)
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!(
                "could not drop database {} (swept later): {dropped:?}",
                self.name
            );
        }
    }
}

struct MySql(MySqlDb);

#[async_trait::async_trait]
impl tasktable_conformance::Backend for MySql {
    async fn fresh() -> Option<Self> {
        MySqlDb::fresh().await.map(MySql)
    }

    async fn store(&self) -> Arc<dyn Store> {
        Arc::new(MySqlStore::open(&self.0.url).await.expect("open mysql"))
    }

    async fn submit_in_transaction(
        &self,
        tasks: Vec<NewTask>,
        commit: bool,
    ) -> StoreResult<Vec<Submitted>> {
        let mut conn = MySqlConnection::connect(&self.0.url)
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

tasktable_conformance::conformance_suite!(MySql);

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
