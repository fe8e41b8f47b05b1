//! Migrations: the shared runner (`tasktable_sql::migrate`) inside one transaction that
//! holds an advisory lock, so concurrent migrators wait for each other.

use crate::{db, PgBackend};
use tasktable_sql::migrate::{apply, Migration};
use tasktable_sql::{Commit, Connect};
use tasktable_store::StoreResult;

/// Serialises migrators across processes. An arbitrary fixed key ("tasktabl" in ASCII);
/// advisory locks are per database, so databases on one server do not wait on each other.
const MIGRATION_LOCK: i64 = 0x7461_736b_7461_626c;

/// The migrations this version ships: version, name and SQL, oldest first.
pub fn migrations() -> [Migration; 20] {
    tasktable_sql::backend_migrations!()
}

pub async fn run(store: &PgBackend) -> StoreResult<()> {
    let mut tx = Connect::write(store).await?;
    // The lock comes before anything else, even CREATE TABLE IF NOT EXISTS (which races
    // with itself in Postgres); it is released when the transaction ends, so a concurrent
    // migrator waits here and then finds the work done.
    sqlx::query("SELECT pg_advisory_xact_lock($1)")
        .bind(MIGRATION_LOCK)
        .execute(&mut *tx.0)
        .await
        .map_err(db)?;
    apply(&mut tx, &migrations()).await?;
    tx.commit().await
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_migration_files_are_the_shared_list() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        tasktable_sql::migrate::check_files(&super::migrations(), &dir).unwrap();
    }
}
