//! Databases for tests: a fresh, migrated database per test on each backend, so test
//! binaries run their tests in parallel against real servers.
//!
//! Owns: creating, migrating and dropping test databases, and the rule for a server that
//! cannot be reached ([`unreachable`]: fail in CI, skip with a printed reason locally).
//!
//! Must not know: what the tests do with the database. It hands out URLs; tests open
//! stores, servers or raw connections on them as they need.

mod postgres;

pub use postgres::PgDb;

use std::sync::Arc;
use tasktable_sqlite::SqliteStore;
use tasktable_store::Store;

/// Decides what to do when a test's database server is unreachable.
pub fn unreachable(backend: &str, reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{backend} is required in CI but unreachable: {reason}");
    }
    eprintln!("SKIPPED: {backend} unreachable ({reason}); set up the server or run with CI=1 to make this fail");
}

/// A migrated SQLite database in a temporary directory, removed with it.
#[derive(Debug)]
pub struct SqliteDb {
    _dir: tempfile::TempDir,
    url: String,
}

impl SqliteDb {
    pub async fn fresh() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("tasktable.db").display());
        let store = SqliteStore::open(&url).await.expect("open sqlite");
        store.migrate().await.expect("migrate");
        store.close().await;
        SqliteDb { _dir: dir, url }
    }

    pub fn url(&self) -> &str {
        &self.url
    }
}

/// A test database on any backend.
#[derive(Debug)]
pub enum TestDb {
    Sqlite(SqliteDb),
    Postgres(PgDb),
}

impl TestDb {
    /// A fresh database on the named backend (`sqlite` or `postgres`); `None` when its
    /// server is unreachable outside CI.
    pub async fn fresh(backend: &str) -> Option<Self> {
        match backend {
            "sqlite" => Some(TestDb::Sqlite(SqliteDb::fresh().await)),
            "postgres" => PgDb::fresh().await.map(TestDb::Postgres),
            other => panic!("unknown test backend {other:?}"),
        }
    }

    pub fn url(&self) -> &str {
        match self {
            TestDb::Sqlite(db) => db.url(),
            TestDb::Postgres(db) => db.url(),
        }
    }

    /// A store with a pool of its own on this database.
    pub async fn store(&self) -> Arc<dyn Store> {
        match self {
            TestDb::Sqlite(db) => Arc::new(SqliteStore::open(db.url()).await.expect("open sqlite")),
            TestDb::Postgres(db) => Arc::new(
                tasktable_postgres::PgStore::open(db.url())
                    .await
                    .expect("open postgres"),
            ),
        }
    }
}
