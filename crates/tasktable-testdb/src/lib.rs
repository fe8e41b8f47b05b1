//! Databases for tests: a fresh, migrated database per test on each backend (SQLite,
//! PostgreSQL, MySQL/MariaDB), so test binaries run their tests in parallel against real
//! servers.
//!
//! Owns: creating, migrating and dropping test databases, the rule for a prerequisite a
//! test lacks (a server that cannot be reached, [`unreachable()`]; root, [`root`]: fail in
//! CI, skip with a printed reason locally), and the count of a pool's connections left
//! inside a transaction ([`probe`]).
//!
//! Must not know: what the tests do with the database. It hands out URLs; tests open
//! stores, servers or raw connections on them as they need.

mod mysql;
mod postgres;
pub mod probe;

pub use mysql::MySqlDb;
pub use postgres::PgDb;

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tasktable_sqlite::SqliteStore;
use tasktable_store::Store;

/// Whether this test process runs as root, which `test` needs (`why`), under the rule of
/// [`unreachable()`]: outside CI a test without it skips with a note, in CI (which runs as
/// root) it fails.
pub fn root(test: &str, why: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    // /proc/self belongs to the process's effective user.
    if std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0) {
        return true;
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "{test} needs root ({why}), and CI runs as root"
    );
    eprintln!("SKIPPED: {test} needs root ({why}); run it as root, or with CI=1 to make this fail");
    false
}

/// Decides what to do when a test's database server is unreachable.
pub fn unreachable(backend: &str, reason: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{backend} is required in CI but unreachable: {reason}");
    }
    eprintln!("SKIPPED: {backend} unreachable ({reason}); set up the server or run with CI=1 to make this fail");
}

/// Test databases are named `tasktable_test_<unix seconds>_<pid>_<n>`.
const TEST_PREFIX: &str = "tasktable_test_";
/// Test databases older than this are leftovers of failed or killed runs.
const STALE_AFTER: Duration = Duration::from_secs(3600);

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A name no other test database has, carrying its creation time for the sweep.
fn new_name() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!("{TEST_PREFIX}{}_{}_{n}", unix_secs(), std::process::id())
}

/// Whether a test database of [`new_name`]'s form is older than [`STALE_AFTER`].
fn is_stale(name: &str) -> bool {
    name.strip_prefix(TEST_PREFIX)
        .and_then(|rest| rest.split('_').next())
        .and_then(|s| s.parse::<u64>().ok())
        .is_some_and(|created| unix_secs().saturating_sub(created) > STALE_AFTER.as_secs())
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

/// Drops database `name` with `drop` unless the test is failing (then it is kept for
/// inspection). A destructor cannot await, so `drop` runs on a thread of its own with a
/// small runtime of its own.
fn drop_on_thread<F, Fut>(name: &str, drop: F)
where
    F: FnOnce() -> Fut + Send + 'static,
    Fut: Future<Output = std::io::Result<()>>,
{
    if std::thread::panicking() {
        eprintln!("kept database {name} of the failed test for inspection");
        return;
    }
    let dropped = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
            .block_on(drop())
    })
    .join();
    if !matches!(dropped, Ok(Ok(()))) {
        eprintln!("could not drop database {name} (swept later): {dropped:?}");
    }
}

/// A migrated SQLite database in a temporary directory, removed with it.
#[derive(Debug)]
pub struct SqliteDb {
    _dir: tempfile::TempDir,
    url: String,
}

impl SqliteDb {
    pub async fn fresh() -> Self {
        let db = SqliteDb::empty();
        let store = SqliteStore::open(&db.url).await.expect("open sqlite");
        store.migrate().await.expect("migrate");
        store.close().await;
        db
    }

    /// A database with no tables yet (the file is made when a store first opens it), for
    /// tests that build its schema their own way.
    pub fn empty() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let url = format!("sqlite://{}", dir.path().join("tasktable.db").display());
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
    MySql(MySqlDb),
}

impl TestDb {
    /// A fresh database on the named backend (`sqlite`, `postgres` or `mysql`); `None` when its
    /// server is unreachable outside CI.
    pub async fn fresh(backend: &str) -> Option<Self> {
        match backend {
            "sqlite" => Some(TestDb::Sqlite(SqliteDb::fresh().await)),
            "postgres" => PgDb::fresh().await.map(TestDb::Postgres),
            "mysql" => MySqlDb::fresh().await.map(TestDb::MySql),
            other => panic!("unknown test backend {other:?}"),
        }
    }

    pub fn url(&self) -> &str {
        match self {
            TestDb::Sqlite(db) => db.url(),
            TestDb::Postgres(db) => db.url(),
            TestDb::MySql(db) => db.url(),
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
            TestDb::MySql(db) => Arc::new(db.store_with(|_| {}).await),
        }
    }
}
