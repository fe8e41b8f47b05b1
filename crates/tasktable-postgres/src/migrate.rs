//! Migrations ship inside the library and are recorded in tasktable's own table
//! (`tasktable_migrations`, not sqlx's), so they never clash with the host application's.

use crate::db;
use sqlx::PgPool;
use tasktable_store::{StoreError, StoreResult};

/// (version, name, SQL). Versions are the same in every backend.
const MIGRATIONS: &[(i64, &str, &str)] = &[
    (1, "tasks", include_str!("../migrations/0001_tasks.sql")),
    (2, "stats", include_str!("../migrations/0002_stats.sql")),
    (
        3,
        "idempotency_index",
        include_str!("../migrations/0003_idempotency_index.sql"),
    ),
    (
        4,
        "lease_credential",
        include_str!("../migrations/0004_lease_credential.sql"),
    ),
];

/// Serialises migrators across processes. An arbitrary fixed key ("tasktabl" in ASCII);
/// advisory locks are per database, so databases on one server do not wait on each other.
const MIGRATION_LOCK: i64 = 0x7461_736b_7461_626c;

/// The migrations this version ships: (version, name, SQL), oldest first.
pub fn migrations() -> &'static [(i64, &'static str, &'static str)] {
    MIGRATIONS
}

pub async fn run(pool: &PgPool) -> StoreResult<()> {
    let mut tx = pool.begin().await.map_err(db)?;
    // The lock comes before anything else, even CREATE TABLE IF NOT EXISTS (which races
    // with itself in Postgres); it is released when the transaction ends, so a concurrent
    // migrator waits here and then finds the work done.
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS tasktable_migrations (\
            version BIGINT PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)",
    )
    .execute(&mut *tx)
    .await
    .map_err(db)?;
    let applied: Vec<i64> = sqlx::query_scalar("SELECT version FROM tasktable_migrations")
        .fetch_all(&mut *tx)
        .await
        .map_err(db)?;
    if let Some(newest) = applied.iter().max() {
        let known = MIGRATIONS.last().map(|m| m.0).unwrap_or(0);
        if *newest > known {
            return Err(StoreError::Migration(format!(
                "the database is at schema version {newest}, newer than this tasktable ({known}); upgrade tasktable"
            )));
        }
    }
    for (version, name, sql) in MIGRATIONS {
        if applied.contains(version) {
            continue;
        }
        apply(&mut tx, sql)
            .await
            .map_err(|e| StoreError::Migration(format!("{version} {name}: {e}")))?;
        sqlx::query(
            "INSERT INTO tasktable_migrations (version, name, applied_at) VALUES ($1, $2, now())",
        )
        .bind(version)
        .bind(name)
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tracing::info!(version, name, "applied migration");
    }
    tx.commit().await.map_err(db)
}

/// A migration file holds several statements: a query without arguments goes over the
/// simple query protocol, which accepts that.
async fn apply(conn: &mut sqlx::PgConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    use sqlx::Executor;
    conn.execute(sql).await.map(|_| ())
}
