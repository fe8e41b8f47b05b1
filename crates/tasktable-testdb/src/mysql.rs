//! Fresh MySQL/MariaDB databases for tests. MySQL has no template databases, and
//! `CREATE TABLE ... LIKE` would leave out the foreign key, so each new database is
//! migrated (a few DDL statements, well under a second).
//!
//! The server comes from `TASKTABLE_TEST_MYSQL_URL` (default
//! `mysql://root@127.0.0.1:3306/test`); that database is only used to create and drop the
//! others. A passing test drops its database; a failing one keeps it for inspection, and
//! databases left over by failures or killed runs are swept after an hour.

use crate::{drop_on_thread, is_stale, new_name, url_for, TEST_PREFIX};
use sqlx::{Connection, Executor, MySqlConnection};
use std::time::Duration;
use tasktable_mysql::{MySqlConfig, MySqlStore};
use tasktable_store::Store;
use tokio::sync::OnceCell;

const DEFAULT_URL: &str = "mysql://root@127.0.0.1:3306/test";

fn server_url() -> String {
    std::env::var("TASKTABLE_TEST_MYSQL_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
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

/// Drops test databases left over by failed or killed runs.
async fn sweep(conn: &mut MySqlConnection) {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT schema_name FROM information_schema.schemata WHERE LEFT(schema_name, ?) = ?",
    )
    .bind(TEST_PREFIX.len() as i64)
    .bind(TEST_PREFIX)
    .fetch_all(&mut *conn)
    .await
    .expect("list databases");
    for name in names {
        if is_stale(&name) {
            run(conn, &format!("DROP DATABASE IF EXISTS `{name}`")).await;
        }
    }
}

/// A migrated database of this test's own, dropped when the test passes.
#[derive(Debug)]
pub struct MySqlDb {
    name: String,
    url: String,
}

impl MySqlDb {
    /// A fresh, migrated database. `None` when the server cannot be reached outside CI
    /// (after printing why); inside CI that panics.
    pub async fn fresh() -> Option<Self> {
        let db = MySqlDb::empty().await?;
        let store = MySqlStore::open(&db.url).await.expect("open mysql");
        store.migrate().await.expect("migrate");
        store.close().await;
        Some(db)
    }

    /// A fresh database with no tables, for tests that build its schema their own way;
    /// `None` as for [`MySqlDb::fresh`].
    pub async fn empty() -> Option<Self> {
        if let Err(reason) = server().await {
            crate::unreachable("mysql", &reason);
            return None;
        }
        let name = new_name();
        let mut conn = admin().await.expect("server went away");
        run(
            &mut conn,
            &format!("CREATE DATABASE `{name}` CHARACTER SET utf8mb4"),
        )
        .await;
        let _ = conn.close().await;
        let url = url_for(&server_url(), &name);
        Some(MySqlDb { name, url })
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// A store on this database with its configuration adjusted by `change`.
    pub async fn store_with(&self, change: impl FnOnce(&mut MySqlConfig)) -> MySqlStore {
        let mut config = MySqlConfig::new(&self.url);
        change(&mut config);
        MySqlStore::connect(config).await.expect("open mysql")
    }
}

impl Drop for MySqlDb {
    /// Drops the database unless the test failed.
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS `{}`", self.name);
        drop_on_thread(&self.name, move || async move {
            let mut conn = admin().await.map_err(std::io::Error::other)?;
            conn.execute(sql.as_str())
                .await
                .map_err(std::io::Error::other)?;
            conn.close().await.map_err(std::io::Error::other)
        });
    }
}
