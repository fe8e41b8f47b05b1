//! Fresh PostgreSQL databases for tests: each is a copy of a template database that is
//! migrated once per schema, so tests run in parallel without migrating each time.
//!
//! The server comes from `TASKTABLE_TEST_POSTGRES_URL` (default
//! `postgres://postgres@127.0.0.1:5432/postgres`); that database is only used to create
//! and drop the others. A passing test drops its database; a failing one keeps it for
//! inspection, and databases left over by failures or killed runs are swept after an hour.

use crate::{drop_on_thread, is_stale, new_name, url_for, TEST_PREFIX};
use sqlx::{Connection, Executor, PgConnection};
use std::time::Duration;
use tasktable_postgres::PgStore;
use tasktable_store::Store;
use tokio::sync::OnceCell;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/postgres";
const TEMPLATE_PREFIX: &str = "tasktable_tpl_";
/// Serialises template setup across test binaries running at once (taken on the server
/// URL's database, which they all share).
const TEMPLATE_LOCK: i64 = 0x7474_5f74_706c_0001;

fn server_url() -> String {
    std::env::var("TASKTABLE_TEST_POSTGRES_URL").unwrap_or_else(|_| DEFAULT_URL.to_owned())
}

/// Names a template after its schema (FNV-1a of every migration), so a changed schema
/// gets a new template and parallel binaries of one build agree on the name.
fn template_name() -> String {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for m in tasktable_postgres::migrations() {
        for byte in m
            .version
            .to_le_bytes()
            .iter()
            .chain(m.name.as_bytes())
            .chain(m.sql.as_bytes())
        {
            hash = (hash ^ u64::from(*byte)).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    format!("{TEMPLATE_PREFIX}{hash:016x}")
}

async fn admin() -> Result<PgConnection, String> {
    match tokio::time::timeout(Duration::from_secs(5), PgConnection::connect(&server_url())).await {
        Ok(Ok(conn)) => Ok(conn),
        Ok(Err(e)) => Err(e.to_string()),
        Err(_) => Err("connection timed out".to_owned()),
    }
}

async fn run(conn: &mut PgConnection, sql: &str) {
    conn.execute(sql)
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
}

/// Creates and migrates the template once per process; `Err` when the server cannot be
/// reached. Any other failure panics.
async fn template() -> Result<String, String> {
    static TEMPLATE: OnceCell<Result<String, String>> = OnceCell::const_new();
    TEMPLATE
        .get_or_init(|| async {
            let mut conn = admin().await?;
            let lock = format!("SELECT pg_advisory_lock({TEMPLATE_LOCK})");
            run(&mut conn, &lock).await;
            let name = template_name();
            sweep(&mut conn, &name).await;
            let exists: bool =
                sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)")
                    .bind(&name)
                    .fetch_one(&mut conn)
                    .await
                    .expect("look up template");
            if !exists {
                build_template(&mut conn, &name).await;
            }
            let unlock = format!("SELECT pg_advisory_unlock({TEMPLATE_LOCK})");
            run(&mut conn, &unlock).await;
            let _ = conn.close().await;
            Ok(name)
        })
        .await
        .clone()
}

/// Migrates under a temporary name and renames when done, so a run killed half-way
/// never leaves a template that looks ready.
async fn build_template(conn: &mut PgConnection, name: &str) {
    let building = format!("{name}_build");
    run(
        conn,
        &format!("DROP DATABASE IF EXISTS \"{building}\" WITH (FORCE)"),
    )
    .await;
    run(conn, &format!("CREATE DATABASE \"{building}\"")).await;
    let store = PgStore::open(&url_for(&server_url(), &building))
        .await
        .expect("open template");
    store.migrate().await.expect("migrate template");
    store.close().await;
    // A closed pool can still hold a connection that was being returned to it when it
    // closed, and closed connections' backends take a moment to exit: end whatever is
    // still connected to the template-to-be, then rename.
    let rename = format!("ALTER DATABASE \"{building}\" RENAME TO \"{name}\"");
    for attempt in 0.. {
        sqlx::query("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1")
            .bind(&building)
            .execute(&mut *conn)
            .await
            .unwrap_or_else(|e| panic!("end connections to {building}: {e}"));
        match conn.execute(rename.as_str()).await {
            Ok(_) => break,
            Err(e) if attempt < 50 => {
                eprintln!("retrying template rename: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{rename}: {e}"),
        }
    }
}

/// Drops test databases left over by failed or killed runs, and templates of other schemas.
async fn sweep(conn: &mut PgConnection, keep_template: &str) {
    let names: Vec<String> = sqlx::query_scalar(
        "SELECT datname FROM pg_database WHERE starts_with(datname, $1) OR starts_with(datname, $2)",
    )
    .bind(TEST_PREFIX)
    .bind(TEMPLATE_PREFIX)
    .fetch_all(&mut *conn)
    .await
    .expect("list databases");
    for name in names {
        let stale = match name.strip_prefix(TEST_PREFIX) {
            Some(_) => is_stale(&name),
            None => name != keep_template,
        };
        if stale {
            run(
                conn,
                &format!("DROP DATABASE IF EXISTS \"{name}\" WITH (FORCE)"),
            )
            .await;
        }
    }
}

/// A database of one test's own on the PostgreSQL server, dropped when the test passes.
#[derive(Debug)]
pub struct PgDb {
    name: String,
    url: String,
}

impl PgDb {
    /// A fresh, migrated database. `None` when the server cannot be reached outside CI
    /// (after printing why); inside CI that panics.
    pub async fn fresh() -> Option<Self> {
        let template = match template().await {
            Ok(t) => t,
            Err(reason) => {
                crate::unreachable("postgres", &reason);
                return None;
            }
        };
        let name = new_name();
        let mut conn = admin().await.expect("server went away");
        run(
            &mut conn,
            &format!("CREATE DATABASE \"{name}\" TEMPLATE \"{template}\""),
        )
        .await;
        let _ = conn.close().await;
        let url = url_for(&server_url(), &name);
        Some(PgDb { name, url })
    }

    /// A fresh database with no tables (not copied from the template), for tests that
    /// build its schema their own way; `None` as for [`PgDb::fresh`].
    pub async fn empty() -> Option<Self> {
        let mut conn = match admin().await {
            Ok(conn) => conn,
            Err(reason) => {
                crate::unreachable("postgres", &reason);
                return None;
            }
        };
        let name = new_name();
        run(&mut conn, &format!("CREATE DATABASE \"{name}\"")).await;
        let _ = conn.close().await;
        let url = url_for(&server_url(), &name);
        Some(PgDb { name, url })
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for PgDb {
    /// Drops the database unless the test failed.
    fn drop(&mut self) {
        let sql = format!("DROP DATABASE IF EXISTS \"{}\" WITH (FORCE)", self.name);
        drop_on_thread(&self.name, move || async move {
            let mut conn = admin().await.map_err(std::io::Error::other)?;
            conn.execute(sql.as_str())
                .await
                .map_err(std::io::Error::other)?;
            conn.close().await.map_err(std::io::Error::other)
        });
    }
}
