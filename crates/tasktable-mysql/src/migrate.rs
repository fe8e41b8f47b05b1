//! Migrations ship inside the library and are recorded in tasktable's own table
//! (`tasktable_migrations`, not sqlx's), so they never clash with the host application's.
//!
//! MySQL commits every DDL statement on its own, so unlike PostgreSQL a migration cannot
//! run in one transaction that a concurrent migrator waits on. Instead the migrator holds
//! a named lock (`GET_LOCK`) for the whole run, and every migration statement is
//! idempotent (`IF NOT EXISTS`): one cut short half-way is simply run again from the top,
//! and its version is recorded only once all of it is in place.

use crate::db;
use crate::sql::Db;
use sqlx::pool::PoolConnection;
use sqlx::{MySql, MySqlPool};
use std::borrow::Cow;
use tasktable_sql::migrate::{apply, Migration};
use tasktable_store::{StoreError, StoreResult};

/// How long a migrator waits for another one to finish, in seconds.
const LOCK_WAIT_SECS: i64 = 300;

/// The migrations this version ships: version, name and SQL, oldest first. The SQL is as
/// written for MariaDB; on MySQL the migrator swaps the collation (see `for_server`).
pub fn migrations() -> [Migration; 20] {
    tasktable_sql::backend_migrations!()
}

pub async fn run(pool: &MySqlPool) -> StoreResult<()> {
    let mut conn = pool.acquire().await.map_err(db)?;
    // GET_LOCK names are server-wide, so the name carries the database: migrators of
    // different databases on one server do not wait for each other. Names are limited to
    // 64 characters, hence the hash.
    let lock: String =
        sqlx::query_scalar("SELECT CONCAT('tasktable_migrate_', MD5(COALESCE(DATABASE(), '')))")
            .fetch_one(&mut *conn)
            .await
            .map_err(db)?;
    let got: Option<i64> = sqlx::query_scalar("SELECT GET_LOCK(?, ?)")
        .bind(&lock)
        .bind(LOCK_WAIT_SECS)
        .fetch_one(&mut *conn)
        .await
        .map_err(db)?;
    if got != Some(1) {
        return Err(StoreError::Migration(format!(
            "another migrator held the lock {lock} for more than {LOCK_WAIT_SECS} s"
        )));
    }
    let result = run_locked(&mut conn).await;
    let released = sqlx::query("SELECT RELEASE_LOCK(?)")
        .bind(&lock)
        .execute(&mut *conn)
        .await;
    if released.is_err() {
        // The lock belongs to the session: ending it releases the lock for sure.
        conn.close_on_drop();
    }
    result
}

async fn run_locked(conn: &mut PoolConnection<MySql>) -> StoreResult<()> {
    let version: String = sqlx::query_scalar("SELECT VERSION()")
        .fetch_one(&mut **conn)
        .await
        .map_err(db)?;
    let mariadb = version.contains("MariaDB");
    let for_this_server: Vec<Migration> = migrations()
        .into_iter()
        .map(|m| Migration {
            sql: Cow::Owned(for_server(&m.sql, mariadb)),
            ..m
        })
        .collect();
    apply(&mut Db(&mut **conn), &for_this_server).await
}

/// MySQL and MariaDB share no binary collation without trailing-space padding: MariaDB
/// calls it `utf8mb4_nopad_bin`, MySQL `utf8mb4_0900_bin`. The files use MariaDB's name.
fn for_server(sql: &str, mariadb: bool) -> String {
    if mariadb {
        sql.to_owned()
    } else {
        sql.replace("utf8mb4_nopad_bin", "utf8mb4_0900_bin")
            .replace("ADD COLUMN IF NOT EXISTS", "ADD COLUMN")
            .replace("ADD INDEX IF NOT EXISTS", "ADD INDEX")
            .replace("DROP INDEX IF EXISTS", "DROP INDEX")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_migration_files_are_the_shared_list() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        tasktable_sql::migrate::check_files(&migrations(), &dir).unwrap();
    }

    #[test]
    fn mysql_gets_its_own_no_pad_collation() {
        let sql = &migrations()[0].sql;
        assert!(sql.contains("utf8mb4_nopad_bin"));
        let mysql = for_server(sql, false);
        assert!(!mysql.contains("nopad"));
        assert!(mysql.contains("COLLATE = utf8mb4_0900_bin"));
        assert_eq!(for_server(sql, true), sql.as_ref());
    }
}
