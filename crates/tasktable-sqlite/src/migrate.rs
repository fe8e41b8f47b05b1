//! Migrations ship inside the library and are recorded in tasktable's own table, so they
//! never clash with the host application's migrations.

use crate::{db, time, SqliteStore};
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

pub async fn run(store: &SqliteStore) -> StoreResult<()> {
    // One write transaction for all of it: a concurrent migrator waits on the lock and
    // then finds the work done.
    let mut tx = store.begin_write().await?;
    sqlx::query(
        "CREATE TABLE IF NOT EXISTS tasktable_migrations (\
            version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)",
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
        let now = crate::db_now(&mut tx).await?;
        sqlx::query(
            "INSERT INTO tasktable_migrations (version, name, applied_at) VALUES (?, ?, ?)",
        )
        .bind(version)
        .bind(name)
        .bind(time::to_text(now))
        .execute(&mut *tx)
        .await
        .map_err(db)?;
        tracing::info!(version, name, "applied migration");
    }
    tx.commit().await.map_err(db)
}

async fn apply(conn: &mut sqlx::SqliteConnection, sql: &'static str) -> Result<(), sqlx::Error> {
    use sqlx::Executor;
    conn.execute(sql).await.map(|_| ())
}
