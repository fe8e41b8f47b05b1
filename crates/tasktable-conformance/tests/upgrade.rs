//! The upgrade test: a database made by an earlier release's schema, holding work in every
//! state, is migrated by this code, and then work runs through it, on every backend.
//!
//! Each directory `tests/upgrade/from-NNNN/` stands for the release whose newest migration
//! is NNNN: `sqlite.sql`, `postgres.sql` and `mysql.sql` are plain SQL written against the
//! schema as migrations 1 to NNNN leave it, the three holding the same rows (their header
//! lists them). For each directory and backend the test makes an empty database, applies
//! migrations 1 to NNNN with the migration runner (`tasktable_sql::migrate::apply`, as
//! that release's migrator did), runs the fixture, opens a store the usual way and
//! migrates it as `tasktable migrate` does, and then:
//!
//! - reads every row back through the store: each task with its state, payload, result,
//!   lease and attempts, the archived task, the multi-run task's run, the batch and its
//!   failed item, the schedule, the worker registry, the paused queue and the event log;
//!   what later migrations added reads as it should for old rows (no submitter, no log
//!   lines);
//! - runs work through it, each step driven directly (a worker's `run_once`, the
//!   rescuer's and the scheduler's calls at the fixture's pinned time), never by waiting:
//!   the due task runs; the rescuer takes back the task whose lease expired (not the one
//!   whose lease is live), and it runs again from its checkpoint; the old worker still
//!   finishes its live task under the lease it holds; the held task is released and runs;
//!   a task submitted now runs; the multi-run task runs its second copy; the batch goes
//!   on from its saved mark; the schedule fires its next slot;
//! - finds every migration recorded.
//!
//! A release adds its own directory, `from-NNNN`, written against that release's schema
//! and holding the same rows as the others (the header of `from-0013/*.sql` lists them;
//! a column that schema added holds what it holds for an old row, no submitter for
//! instance), so [`check`] expects the same of every directory; nothing else here changes.

use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::{json, Value};
use std::borrow::Cow;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_core::batch::{BatchControl, BatchSpec, BatchStatus};
use tasktable_core::outcome::FinishPlan;
use tasktable_core::policy::QueuePolicy;
use tasktable_core::runs::{Run, RunCounts, RunState, Runs};
use tasktable_core::schedule::{Missed, Overlap, Recurrence, ScheduleSpec, TaskTemplate};
use tasktable_core::worker::{Protocol, Queues, WorkerFacts, WorkerInfo, WorkerState};
use tasktable_core::{
    Actor, ActorKind, AttemptOutcome, Backoff, Change, EventKind, FinishAction, Lease,
    LeaseCredential, NewTask, Task, TaskId, TaskState,
};
use tasktable_mysql::MySqlStore;
use tasktable_postgres::PgStore;
use tasktable_runtime::{
    BatchContext, BatchHandler, Handler, HandlerError, Item, Rescuer, RescuerConfig, TaskContext,
    Worker, WorkerIdentity,
};
use tasktable_sql::migrate::{apply, Migration, MIGRATIONS};
use tasktable_sql::{Cells, Commit, Connect, Exec, Sql};
use tasktable_sqlite::SqliteStore;
use tasktable_store::event::{EventFilter, EventListParams};
use tasktable_store::feed::{FeedCursor, FeedParams};
use tasktable_store::*;
use tasktable_testdb::{MySqlDb, PgDb, SqliteDb};

// ---------------------------------------------------------------------------------------
// The backends: an empty database, the old schema and its rows, the store of this release.

/// A backend under the upgrade test.
#[async_trait]
trait Old: Sized + Send + Sync {
    /// The fixture's file in each `from-NNNN` directory.
    const FILE: &'static str;

    /// A database of the test's own with no tables; `None` when the server is unreachable
    /// outside CI (inside CI that fails).
    async fn empty() -> Option<Self>;

    /// Migrations 1 to `version` as that release's migrator applied them, then `fixture`;
    /// answers the migrations recorded.
    async fn make_old(&self, version: usize, fixture: &str) -> Vec<(i64, String)>;

    /// A store opened as a new release opens it, and migrated as `tasktable migrate` does
    /// (twice: the second finds nothing to do); with the migrations recorded after.
    async fn upgrade(&self) -> (Arc<dyn Store>, Vec<(i64, String)>);
}

struct Sqlite(SqliteDb);

#[async_trait]
impl Old for Sqlite {
    const FILE: &'static str = "sqlite.sql";

    async fn empty() -> Option<Self> {
        Some(Sqlite(SqliteDb::empty()))
    }

    async fn make_old(&self, version: usize, fixture: &str) -> Vec<(i64, String)> {
        let store = SqliteStore::open(self.0.url()).await.expect("open sqlite");
        // As SQLite's migrator: one write transaction (`BEGIN IMMEDIATE`).
        let mut tx = Connect::write(store.db()).await.expect("begin");
        let shipped = files_of("tasktable-sqlite");
        old_schema(&mut tx, &shipped[..version], fixture).await;
        tx.commit().await.expect("commit");
        let recorded = recorded(store.db()).await;
        store.close().await;
        recorded
    }

    async fn upgrade(&self) -> (Arc<dyn Store>, Vec<(i64, String)>) {
        let store = SqliteStore::open(self.0.url()).await.expect("open sqlite");
        migrate_twice(&store).await;
        let recorded = recorded(store.db()).await;
        (Arc::new(store), recorded)
    }
}

struct Postgres(PgDb);

#[async_trait]
impl Old for Postgres {
    const FILE: &'static str = "postgres.sql";

    async fn empty() -> Option<Self> {
        PgDb::empty().await.map(Postgres)
    }

    async fn make_old(&self, version: usize, fixture: &str) -> Vec<(i64, String)> {
        let store = PgStore::open(self.0.url()).await.expect("open postgres");
        // As PostgreSQL's migrator: one transaction (its advisory lock serialises
        // migrators, and this one is alone).
        let mut tx = Connect::write(store.db()).await.expect("begin");
        old_schema(
            &mut tx,
            &tasktable_postgres::migrations()[..version],
            fixture,
        )
        .await;
        tx.commit().await.expect("commit");
        let recorded = recorded(store.db()).await;
        store.close().await;
        recorded
    }

    async fn upgrade(&self) -> (Arc<dyn Store>, Vec<(i64, String)>) {
        let store = PgStore::open(self.0.url()).await.expect("open postgres");
        migrate_twice(&store).await;
        let recorded = recorded(store.db()).await;
        (Arc::new(store), recorded)
    }
}

struct MySql(MySqlDb);

#[async_trait]
impl Old for MySql {
    const FILE: &'static str = "mysql.sql";

    async fn empty() -> Option<Self> {
        MySqlDb::empty().await.map(MySql)
    }

    async fn make_old(&self, version: usize, fixture: &str) -> Vec<(i64, String)> {
        let store = MySqlStore::open(self.0.url()).await.expect("open mysql");
        // As MySQL's migrator: one connection outside a transaction (DDL commits on its
        // own there), each file as written for MariaDB or changed for MySQL.
        let mut conn = Connect::read(store.db()).await.expect("connection");
        let d = conn.dialect();
        let server = conn
            .fetch(Sql::new(d, "SELECT VERSION() AS v"))
            .await
            .expect("server version");
        let mariadb = server[0]
            .text("v")
            .expect("version")
            .is_some_and(|v| v.contains("MariaDB"));
        let shipped: Vec<Migration> = tasktable_mysql::migrations()[..version]
            .iter()
            .map(|m| Migration {
                sql: Cow::Owned(for_server(&m.sql, mariadb)),
                ..m.clone()
            })
            .collect();
        old_schema(&mut conn, &shipped, fixture).await;
        drop(conn);
        let recorded = recorded(store.db()).await;
        store.close().await;
        recorded
    }

    async fn upgrade(&self) -> (Arc<dyn Store>, Vec<(i64, String)>) {
        let store = self.0.store_with(|_| {}).await;
        migrate_twice(&store).await;
        let recorded = recorded(store.db()).await;
        (Arc::new(store), recorded)
    }
}

/// What the MySQL migrator does to each file before it runs it (`for_server` in
/// tasktable-mysql, which it keeps to itself): the files are written for MariaDB.
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

/// The migrations of the backend crate `name`, read from its `migrations/` folder in the
/// order of [`MIGRATIONS`] (what its `backend_migrations!()` compiles in; SQLite's crate
/// does not hand its list out).
fn files_of(name: &str) -> Vec<Migration> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(name)
        .join("migrations");
    MIGRATIONS
        .iter()
        .map(|&(version, name)| {
            let file = dir.join(format!("{version:04}_{name}.sql"));
            let sql = std::fs::read_to_string(&file)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            Migration {
                version,
                name,
                sql: Cow::Owned(sql),
            }
        })
        .collect()
}

/// The old release's migrations, then the fixture, on `e`.
async fn old_schema<E: Exec>(e: &mut E, migrations: &[Migration], fixture: &str) {
    apply(e, migrations).await.expect("the old migrations");
    e.script(fixture).await.expect("the fixture");
}

async fn migrate_twice(store: &impl Store) {
    store.migrate().await.expect("migrate to this release");
    store.migrate().await.expect("migrate again: nothing to do");
}

/// `tasktable_migrations`, oldest first.
async fn recorded<B: Connect>(b: &B) -> Vec<(i64, String)> {
    let mut conn = b.read().await.expect("connection");
    let d = conn.dialect();
    let rows = conn
        .fetch(Sql::new(
            d,
            "SELECT version, name FROM tasktable_migrations ORDER BY version",
        ))
        .await
        .expect("read tasktable_migrations");
    rows.iter()
        .map(|r| {
            (
                r.int("version").unwrap().expect("version"),
                r.text("name").unwrap().expect("name"),
            )
        })
        .collect()
}

fn listed(migrations: &[(i64, &str)]) -> Vec<(i64, String)> {
    migrations.iter().map(|&(v, n)| (v, n.to_owned())).collect()
}

/// Every `from-NNNN` directory: the release's newest migration, and the directory.
fn releases() -> Vec<(usize, PathBuf)> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upgrade");
    let mut out: Vec<(usize, PathBuf)> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{}: {e}", root.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|p| p.is_dir())
        .map(|p| {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            let version = name
                .strip_prefix("from-")
                .and_then(|n| n.parse::<usize>().ok())
                .unwrap_or_else(|| panic!("{}: name it from-NNNN", p.display()));
            assert!(
                (1..=MIGRATIONS.len()).contains(&version),
                "{}: no migration {version}",
                p.display()
            );
            (version, p)
        })
        .collect();
    out.sort();
    assert!(!out.is_empty(), "no fixture under {}", root.display());
    out
}

async fn every_release<B: Old>() {
    for (version, dir) in releases() {
        let file = dir.join(B::FILE);
        let fixture =
            std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        let Some(db) = B::empty().await else {
            return;
        };
        let old = db.make_old(version, &fixture).await;
        assert_eq!(old, listed(&MIGRATIONS[..version]), "{}", file.display());
        let (store, recorded) = db.upgrade().await;
        assert_eq!(
            recorded,
            listed(&MIGRATIONS),
            "{}: every migration is recorded once",
            file.display()
        );
        check(&store, &format!("from-{version:04}/{}", B::FILE)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_databases_of_earlier_releases_upgrade_and_run() {
    every_release::<Sqlite>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_databases_of_earlier_releases_upgrade_and_run() {
    every_release::<Postgres>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mysql_databases_of_earlier_releases_upgrade_and_run() {
    every_release::<MySql>().await;
}

// ---------------------------------------------------------------------------------------
// What every fixture holds, and what becomes of it.

/// A time of the fixture's day, 2025-01-01, UTC (`"11:30:00"`).
fn at(time: &str) -> DateTime<Utc> {
    format!("2025-01-01T{time}Z").parse().expect("a time")
}

/// When the fixture stands: its rescuer and scheduler run at this time.
fn now() -> DateTime<Utc> {
    at("12:00:00")
}

/// What is not due yet is due then.
fn later() -> DateTime<Utc> {
    "2100-01-01T00:00:00Z".parse().unwrap()
}

fn the_day_before(time: &str) -> DateTime<Utc> {
    format!("2024-12-31T{time}Z").parse().expect("a time")
}

fn credential(hex: &str) -> Option<LeaseCredential> {
    credential_from_db(Some(hex)).expect("a credential")
}

const OLD_WORKER_1: &str = "old-worker-1";
const OLD_WORKER_2: &str = "old-worker-2";
const NEW_WORKER: &str = "new-worker";

/// A task of the fixture as submitted: kind `echo`, queue `default`, payload
/// `{"n": id}`, three attempts, the default backoff, no submitter recorded.
fn submitted(id: TaskId, key: &str, state: TaskState, run_at: DateTime<Utc>) -> Task {
    Task {
        id,
        kind: "echo".into(),
        queue: "default".into(),
        state,
        payload: json!({ "n": id }),
        result: None,
        checkpoint: None,
        progress: None,
        key: Some(key.into()),
        idempotency_key: None,
        priority: 0,
        run_at,
        attempt: 0,
        max_attempts: 3,
        backoff: Backoff::default(),
        timeout: None,
        lease_token: 0,
        lease_credential: None,
        lease_expires_at: None,
        deadline_at: None,
        worker_id: None,
        worker_host: None,
        last_error: None,
        created_at: run_at,
        updated_at: run_at,
        started_at: None,
        finished_at: None,
        schedule_id: None,
        slot_at: None,
        target: tasktable_core::Target::Any,
        affinity: None,
        affinity_until: None,
        runs: None,
        run_counts: None,
        run: None,
        created_by: None,
        traceparent: None,
    }
}

/// The tasks of the fixture as it holds them, 2 to 11 (1 is archived).
fn fixture_task(id: TaskId) -> Task {
    let ran = |attempt: u32, worker: &str, hex: &str| Task {
        attempt,
        lease_token: i64::from(attempt),
        lease_credential: credential(hex),
        worker_id: Some(worker.into()),
        worker_host: Some("old-host".into()),
        ..submitted(id, "", TaskState::Pending, now())
    };
    match id {
        2 => submitted(2, "upgrade:held", TaskState::Held, at("10:00:00")),
        3 => Task {
            idempotency_key: Some("upgrade:pending".into()),
            priority: 5,
            ..submitted(3, "upgrade:pending", TaskState::Pending, at("11:00:00"))
        },
        4 => Task {
            timeout: Some(Duration::from_secs(60)),
            created_at: at("11:00:00"),
            updated_at: at("11:00:00"),
            ..submitted(4, "upgrade:future", TaskState::Pending, later())
        },
        5 => Task {
            key: Some("upgrade:expired".into()),
            state: TaskState::Running,
            checkpoint: Some(json!({"step": 2})),
            progress: Some(json!({"done": 0.5})),
            run_at: at("11:00:00"),
            lease_expires_at: Some(at("11:30:30")),
            created_at: at("11:00:00"),
            updated_at: at("11:30:00"),
            started_at: Some(at("11:30:00")),
            ..ran(1, OLD_WORKER_1, "5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e5e")
        },
        6 => Task {
            key: Some("upgrade:live".into()),
            state: TaskState::Running,
            run_at: at("11:00:00"),
            lease_expires_at: Some(later()),
            created_at: at("11:00:00"),
            updated_at: at("11:59:00"),
            started_at: Some(at("11:59:00")),
            ..ran(1, OLD_WORKER_2, "6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e")
        },
        7 => Task {
            key: Some("upgrade:scheduled".into()),
            state: TaskState::Succeeded,
            result: Some(json!({"echo": {"n": 7}})),
            idempotency_key: Some("schedule:1:2025-01-01T11:00:00.000Z".into()),
            run_at: at("11:00:00"),
            created_at: at("11:00:00"),
            updated_at: at("11:00:02"),
            started_at: Some(at("11:00:01")),
            finished_at: Some(at("11:00:02")),
            schedule_id: Some(1),
            slot_at: Some(at("11:00:00")),
            ..ran(1, OLD_WORKER_1, "7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e7e")
        },
        8 => Task {
            key: Some("upgrade:failed".into()),
            state: TaskState::Failed,
            run_at: at("10:00:50"),
            last_error: Some("invalid address".into()),
            created_at: at("10:00:00"),
            updated_at: at("10:00:51"),
            started_at: Some(at("10:00:50")),
            finished_at: Some(at("10:00:51")),
            ..ran(3, OLD_WORKER_1, "8e8e8e8e8e8e8e8e8e8e8e8e8e8e8e8e")
        },
        9 => Task {
            created_at: at("10:30:00"),
            updated_at: at("10:45:00"),
            finished_at: Some(at("10:45:00")),
            ..submitted(9, "upgrade:cancelled", TaskState::Cancelled, at("13:00:00"))
        },
        10 => Task {
            key: Some("upgrade:runs".into()),
            queue: "runs".into(),
            run_at: at("11:00:00"),
            created_at: at("11:00:00"),
            updated_at: at("11:00:02"),
            started_at: Some(at("11:00:01")),
            runs: Some(Runs {
                copies: 2,
                at_once: 2,
                repeat: false,
                max_failed: Some(2),
                broadcast: false,
                joining: false,
            }),
            run_counts: Some(RunCounts {
                active: 0,
                succeeded: 1,
                failed: 0,
            }),
            ..ran(1, OLD_WORKER_1, "a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0")
        },
        11 => Task {
            key: Some("upgrade:batch".into()),
            kind: "upgrade_items".into(),
            queue: "batches".into(),
            payload: json!({"prefix": "item"}),
            run_at: at("11:20:05"),
            last_error: Some("lease expired".into()),
            created_at: at("11:00:00"),
            updated_at: at("11:20:00"),
            started_at: Some(at("11:10:00")),
            ..ran(1, OLD_WORKER_1, "c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1c1")
        },
        _ => panic!("the fixture has no task {id}"),
    }
}

/// An attempt as the checks compare it: number, worker, start, end, outcome, error.
type Tried = (
    u32,
    Option<String>,
    Option<DateTime<Utc>>,
    DateTime<Utc>,
    AttemptOutcome,
    Option<String>,
);

fn tried(
    attempt: u32,
    worker: &str,
    started: DateTime<Utc>,
    finished: DateTime<Utc>,
    outcome: AttemptOutcome,
    error: Option<&str>,
) -> Tried {
    (
        attempt,
        Some(worker.into()),
        Some(started),
        finished,
        outcome,
        error.map(Into::into),
    )
}

/// The fixture's attempts of task `id`, oldest first.
fn fixture_attempts(id: TaskId) -> Vec<Tried> {
    use AttemptOutcome::*;
    let w = OLD_WORKER_1;
    match id {
        7 => vec![tried(1, w, at("11:00:01"), at("11:00:02"), Succeeded, None)],
        8 => vec![
            tried(
                1,
                w,
                at("10:00:01"),
                at("10:00:02"),
                Error,
                Some("connection reset"),
            ),
            tried(
                2,
                w,
                at("10:00:07"),
                at("10:00:40"),
                LeaseExpired,
                Some("lease expired"),
            ),
            tried(
                3,
                w,
                at("10:00:50"),
                at("10:00:51"),
                Failed,
                Some("invalid address"),
            ),
        ],
        10 => vec![tried(1, w, at("11:00:01"), at("11:00:02"), Succeeded, None)],
        11 => vec![tried(
            1,
            w,
            at("11:10:00"),
            at("11:20:00"),
            LeaseExpired,
            Some("lease expired"),
        )],
        _ => vec![],
    }
}

async fn get(s: &dyn Store, id: TaskId) -> Task {
    s.task_get(id)
        .await
        .expect("task_get")
        .unwrap_or_else(|| panic!("task {id} is gone"))
}

async fn attempts(s: &dyn Store, id: TaskId) -> Vec<Tried> {
    s.attempt_list(id)
        .await
        .expect("attempt_list")
        .into_iter()
        .map(|a| {
            assert_eq!(a.task_id, id);
            (
                a.attempt,
                a.worker_id,
                a.started_at,
                a.finished_at,
                a.outcome,
                a.error,
            )
        })
        .collect()
}

/// Outcomes and workers of task `id`'s attempts, for those the new code wrote (their
/// times are the database's clock).
async fn outcomes(s: &dyn Store, id: TaskId) -> Vec<(u32, Option<String>, AttemptOutcome)> {
    attempts(s, id)
        .await
        .into_iter()
        .map(|(n, w, _, _, o, _)| (n, w, o))
        .collect()
}

fn by(worker: &str) -> Option<String> {
    Some(worker.into())
}

fn ops() -> Actor {
    Actor::new(ActorKind::Cli, "ops", Some("admin"))
}

fn deploy_bot() -> Actor {
    Actor::new(ActorKind::Token, "deploy-bot", Some("operator"))
}

/// Logs a line, and answers with what it saw: the payload, the attempt and the
/// checkpoint it took over.
struct Echo;

impl Handler for Echo {
    const KIND: &'static str = "echo";
    type Payload = Value;
    type Output = Value;
    async fn run(&self, ctx: TaskContext, payload: Value) -> Result<Value, HandlerError> {
        let checkpoint: Option<Value> = ctx.checkpoint()?;
        ctx.log(format!("attempt {}", ctx.attempt())).await?;
        Ok(json!({"echo": payload, "attempt": ctx.attempt(), "checkpoint": checkpoint}))
    }
}

/// Notes the items of batches it runs.
struct Items(Arc<Mutex<Vec<u64>>>);

impl BatchHandler for Items {
    const KIND: &'static str = "upgrade_items";
    type Data = Value;
    async fn item(&self, _: &BatchContext, index: u64, _: &Value) -> Result<Item, HandlerError> {
        self.0.lock().unwrap().push(index);
        Ok(Item::Done)
    }
}

/// A worker of this release on one queue, stepped with `run_once`.
fn worker(store: &Arc<dyn Store>, queue: &str, items: &Arc<Mutex<Vec<u64>>>) -> Worker {
    Worker::builder(store.clone())
        .identity(WorkerIdentity::named(NEW_WORKER))
        .queue(queue, 4)
        .rescue_interval(None)
        .schedule_interval(None)
        .register(Echo)
        .register_batch(Items(items.clone()))
        .build()
        .expect("a worker")
}

/// What every fixture holds (see the header of `from-0013/*.sql`), read back after the
/// upgrade, then work run through it.
async fn check(store: &Arc<dyn Store>, fixture: &str) {
    reads_back(&**store, fixture).await;
    runs(store, fixture).await;
}

/// Every row of the fixture, read through the store.
async fn reads_back(s: &dyn Store, f: &str) {
    for id in 2..=11 {
        assert_eq!(get(s, id).await, fixture_task(id), "{f}: task {id}");
        assert_eq!(
            attempts(s, id).await,
            fixture_attempts(id),
            "{f}: attempts of task {id}"
        );
        assert!(
            s.task_logs(id).await.expect("task_logs").is_empty(),
            "{f}: task {id} logged nothing"
        );
    }

    let (archived, history) = s
        .task_get_archived(1)
        .await
        .expect("task_get_archived")
        .expect("task 1 is archived");
    let expected = Task {
        state: TaskState::Succeeded,
        result: Some(json!({"echo": {"n": 1}})),
        attempt: 1,
        lease_token: 1,
        lease_credential: credential("1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a1a"),
        worker_id: by(OLD_WORKER_1),
        worker_host: Some("old-host".into()),
        updated_at: the_day_before("09:00:02"),
        started_at: Some(the_day_before("09:00:01")),
        finished_at: Some(the_day_before("09:00:02")),
        ..submitted(
            1,
            "upgrade:archived",
            TaskState::Pending,
            the_day_before("09:00:00"),
        )
    };
    assert_eq!(archived, expected, "{f}: the archived task");
    let history: Vec<Tried> = history
        .into_iter()
        .map(|a| {
            (
                a.attempt,
                a.worker_id,
                a.started_at,
                a.finished_at,
                a.outcome,
                a.error,
            )
        })
        .collect();
    assert_eq!(
        history,
        [tried(
            1,
            OLD_WORKER_1,
            the_day_before("09:00:01"),
            the_day_before("09:00:02"),
            AttemptOutcome::Succeeded,
            None
        )],
        "{f}: the archived task's attempts"
    );
    assert_eq!(
        s.task_get(1).await.unwrap(),
        None,
        "{f}: 1 is archived only"
    );

    assert_eq!(
        s.run_list(10).await.expect("run_list"),
        [Run {
            task_id: 10,
            run: 1,
            worker_id: OLD_WORKER_1.into(),
            worker_host: Some("old-host".into()),
            state: RunState::Ended(AttemptOutcome::Succeeded),
            lease_token: 1,
            lease_expires_at: None,
            deadline_at: None,
            checkpoint: None,
            progress: None,
            result: Some(json!({"echo": {"n": 10}})),
            error: None,
            resumed_from: None,
            started_at: at("11:00:01"),
            finished_at: Some(at("11:00:02")),
        }],
        "{f}: the multi-run task's run"
    );

    let batch = s
        .batch_get(11)
        .await
        .expect("batch_get")
        .expect("task 11 is a batch");
    assert_eq!(batch.task, fixture_task(11), "{f}: the batch's task");
    assert_eq!(
        batch.spec,
        BatchSpec {
            items: Some(4),
            parallelism: 1,
            rate: None,
            window: Some(1000),
            error_budget: 2,
            item_retries: 0,
            item_backoff: Duration::from_millis(100),
            prestart_timeout: Duration::from_secs(1800),
        },
        "{f}: the batch's spec"
    );
    assert_eq!(
        (
            batch.control,
            batch.started,
            batch.low_water,
            batch.end,
            batch.errors,
            batch.items_per_second,
            batch.data_version,
            batch.saved_at,
            batch.created_at,
        ),
        (
            BatchControl::Run,
            true,
            2,
            Some(4),
            1,
            Some(1.5),
            0,
            Some(at("11:15:00")),
            at("11:00:00"),
        ),
        "{f}: the batch's progress"
    );
    assert_eq!(
        batch.status,
        BatchStatus::Queued,
        "{f}: the batch waits for a worker"
    );
    assert_eq!(
        s.batch_failures(11).await.expect("batch_failures"),
        [ItemFailure {
            item: 1,
            error: "item 1 is broken".into(),
            tries: 1,
            failed_at: Some(at("11:15:00")),
        }],
        "{f}: the batch's failed item"
    );

    assert_eq!(
        s.schedule_get(ScheduleRef::Id(1))
            .await
            .expect("schedule_get")
            .expect("schedule 1"),
        Schedule {
            id: 1,
            spec: ScheduleSpec {
                name: "upgrade-hourly".into(),
                recurrence: Recurrence::Every {
                    every_ms: 3_600_000,
                    start: at("00:00:00"),
                },
                template: TaskTemplate {
                    kind: "echo".into(),
                    queue: "default".into(),
                    payload: json!({"n": 7}),
                    key: Some("upgrade:scheduled".into()),
                    priority: 0,
                    max_attempts: 3,
                    backoff: Backoff::default(),
                    timeout: None,
                    target: tasktable_core::Target::Any,
                },
                missed: Missed::RunLatest,
                overlap: Overlap::Allow,
                enabled: true,
            },
            covered_until: at("11:00:00"),
            next_run_at: Some(at("12:00:00")),
            last_task_id: Some(7),
            last_slot_at: Some(at("11:00:00")),
            created_at: at("10:30:00"),
            updated_at: at("11:00:00"),
        },
        "{f}: the schedule"
    );

    let mut workers = s
        .worker_list(WorkerListParams {
            include_gone: true,
            ..Default::default()
        })
        .await
        .expect("worker_list");
    workers.sort_by(|a, b| a.facts.id.cmp(&b.facts.id));
    assert_eq!(
        workers,
        [
            WorkerInfo {
                facts: WorkerFacts {
                    id: OLD_WORKER_1.into(),
                    host: "old-host".into(),
                    pid: Some(4001),
                    version: "0.1.0".into(),
                    groups: vec!["gpu".into()],
                    queues: Queues::All,
                    capacity: 10,
                    protocol: Protocol::Process,
                    kinds: None,
                },
                address: None,
                // Rows from before version 15 have no owner.
                owner: None,
                state: WorkerState::Gone,
                draining: false,
                started_at: at("09:00:00"),
                last_seen_at: at("11:30:20"),
                gone_at: Some(at("11:31:00")),
                // Task 5, whose lease ran out, until the rescuer takes it back.
                running: 1,
            },
            WorkerInfo {
                facts: WorkerFacts {
                    id: OLD_WORKER_2.into(),
                    host: "old-host".into(),
                    pid: Some(4002),
                    version: "0.1.0".into(),
                    groups: vec![],
                    queues: Queues::Listed(vec!["default".into(), "runs".into(), "batches".into()]),
                    capacity: 4,
                    protocol: Protocol::Process,
                    kinds: None,
                },
                address: None,
                owner: None,
                state: WorkerState::Draining,
                draining: true,
                started_at: at("09:00:00"),
                last_seen_at: at("11:59:55"),
                gone_at: None,
                running: 1,
            },
        ],
        "{f}: the worker registry"
    );

    let queues = s.queue_list().await.expect("queue_list");
    let queue = |name: &str| {
        let mut q = queues
            .iter()
            .find(|q| q.name == name)
            .unwrap_or_else(|| panic!("{f}: queue {name} is listed: {queues:?}"))
            .clone();
        q.counts.sort();
        q
    };
    assert_eq!(
        queue("reports"),
        QueueInfo {
            name: "reports".into(),
            paused: true,
            policy: QueuePolicy {
                max_running: Some(2),
                ..QueuePolicy::default()
            },
            counts: vec![],
        },
        "{f}: the paused queue"
    );
    let mut counts = vec![
        (TaskState::Held, 1),
        (TaskState::Pending, 2),
        (TaskState::Running, 2),
        (TaskState::Succeeded, 1),
        (TaskState::Failed, 1),
        (TaskState::Cancelled, 1),
    ];
    counts.sort();
    assert_eq!(queue("default").counts, counts, "{f}: the default queue");

    let events = s
        .event_list(EventListParams {
            filter: EventFilter::default(),
            before: None,
            limit: 100,
        })
        .await
        .expect("event_list");
    let events: Vec<_> = events
        .into_iter()
        .map(|e| {
            (
                e.at,
                e.event,
                e.task_id,
                e.schedule_id,
                e.worker_id,
                e.actor,
                e.detail,
            )
        })
        .collect();
    assert_eq!(
        events,
        [
            (
                at("11:50:00"),
                EventKind::WorkerDrained,
                None,
                None,
                by(OLD_WORKER_2),
                deploy_bot(),
                Value::Null
            ),
            (
                at("10:45:00"),
                EventKind::Cancelled,
                Some(9),
                None,
                None,
                ops(),
                json!({"state": {"old": "pending", "new": "cancelled"}})
            ),
            (
                at("10:30:00"),
                EventKind::ScheduleCreated,
                None,
                Some(1),
                None,
                deploy_bot(),
                json!({})
            ),
            (
                at("10:00:00"),
                EventKind::QueuePaused,
                None,
                None,
                None,
                ops(),
                Value::Null
            ),
        ],
        "{f}: the event log, newest first"
    );

    // Who submitted a task was not recorded before version 14: the feed says no one.
    let feed = s
        .event_feed(FeedParams {
            after: FeedCursor {
                events: 0,
                attempts: 0,
                tasks: 0,
            },
            window: Duration::ZERO,
            queue: None,
            kind: None,
            task_id: Some(8),
            limit: 100,
        })
        .await
        .expect("event_feed");
    let feed: Vec<_> = feed
        .items
        .iter()
        .map(|i| (i.event.as_str(), i.actor.clone()))
        .collect();
    let worker = || Some(Actor::new(ActorKind::Worker, OLD_WORKER_1, None));
    assert_eq!(
        feed,
        [
            ("submitted", None),
            ("error", worker()),
            ("lease_expired", Some(Actor::system("rescuer"))),
            ("failed", worker()),
        ],
        "{f}: task 8 in the feed"
    );
}

/// Work through the upgraded database, one step at a time.
async fn runs(store: &Arc<dyn Store>, f: &str) {
    let s = &**store;
    let items = Arc::new(Mutex::new(Vec::new()));
    let mut default = worker(store, "default", &items);

    // A repeated idempotency key finds the old task.
    let again = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("echo", json!({"n": 3})).idempotency_key("upgrade:pending")],
            now: None,
        })
        .await
        .expect("submit");
    assert_eq!(
        (again[0].id, again[0].created),
        (3, false),
        "{f}: the key names task 3"
    );

    // The due task runs; the held one, the one due in 2100 and the running ones do not.
    assert_eq!(
        default.run_once().await.expect("run_once"),
        1,
        "{f}: task 3 runs"
    );
    let t = get(s, 3).await;
    assert_eq!(
        (t.state, t.attempt, t.result, t.worker_id, t.created_by),
        (
            TaskState::Succeeded,
            1,
            Some(json!({"echo": {"n": 3}, "attempt": 1, "checkpoint": null})),
            by(NEW_WORKER),
            None
        ),
        "{f}: task 3"
    );
    assert_eq!(
        outcomes(s, 3).await,
        [(1, by(NEW_WORKER), AttemptOutcome::Succeeded)],
        "{f}: task 3's attempts"
    );

    // At the fixture's time the rescuer takes back task 5, whose lease ran out at 11:30:30,
    // and leaves task 6, whose lease is live; old-worker-2 was seen 5 s before, so it
    // stays in the registry.
    let rescuer = Rescuer::new(store.clone(), RescuerConfig::default());
    assert_eq!(
        rescuer.run_once(Some(now())).await.expect("rescue"),
        1,
        "{f}: one rescued"
    );
    let t = get(s, 5).await;
    assert_eq!(
        (
            t.state,
            t.attempt,
            t.checkpoint,
            t.last_error,
            t.lease_expires_at
        ),
        (
            TaskState::Pending,
            1,
            Some(json!({"step": 2})),
            Some("lease expired".into()),
            None
        ),
        "{f}: task 5 is back, its checkpoint kept"
    );
    assert!(
        now() < t.run_at && t.run_at <= now() + chrono::Duration::seconds(6),
        "{f}: task 5 is due after its backoff: {}",
        t.run_at
    );
    assert_eq!(
        attempts(s, 5).await,
        [(
            1,
            by(OLD_WORKER_1),
            Some(at("11:30:00")),
            now(),
            AttemptOutcome::LeaseExpired,
            Some("lease expired".into())
        )],
        "{f}: task 5's expired attempt"
    );
    assert_eq!(
        get(s, 6).await,
        fixture_task(6),
        "{f}: task 6 is left to its worker"
    );
    let drained = s
        .worker_list(WorkerListParams {
            include_gone: false,
            ..Default::default()
        })
        .await
        .expect("worker_list");
    assert!(
        drained.iter().any(|w| w.facts.id == OLD_WORKER_2),
        "{f}: old-worker-2 is live: {drained:?}"
    );

    // The rescued task runs again from its checkpoint.
    assert_eq!(
        default.run_once().await.expect("run_once"),
        1,
        "{f}: task 5 runs"
    );
    let t = get(s, 5).await;
    assert_eq!(
        (t.state, t.attempt, t.result),
        (
            TaskState::Succeeded,
            2,
            Some(json!({"echo": {"n": 5}, "attempt": 2, "checkpoint": {"step": 2}}))
        ),
        "{f}: task 5"
    );
    assert_eq!(
        outcomes(s, 5).await,
        [
            (1, by(OLD_WORKER_1), AttemptOutcome::LeaseExpired),
            (2, by(NEW_WORKER), AttemptOutcome::Succeeded)
        ],
        "{f}: task 5's attempts"
    );
    let logged: Vec<_> = s
        .task_logs(5)
        .await
        .expect("task_logs")
        .into_iter()
        .map(|l| (l.attempt, l.run, l.line))
        .collect();
    assert_eq!(
        logged,
        [(2, None, "attempt 2".to_owned())],
        "{f}: task 5's log, begun by its second attempt"
    );

    // The worker of the old release still holds task 6, and finishes it under its lease.
    let lease = Lease {
        task_id: 6,
        token: 1,
        credential: credential("6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e6e"),
        run: None,
    };
    assert!(
        s.lease_status(lease).await.expect("lease_status").is_held(),
        "{f}: task 6's lease holds"
    );
    let done = s
        .task_finish(FinishParams {
            items: vec![FinishItem {
                lease,
                plan: FinishPlan {
                    outcome: AttemptOutcome::Succeeded,
                    action: FinishAction::Complete {
                        result: Some(json!({"by": OLD_WORKER_2})),
                    },
                    error: None,
                },
            }],
            only_if_expired: false,
            now: None,
        })
        .await
        .expect("finish");
    assert_eq!(done, [true], "{f}: task 6 is finished");
    let t = get(s, 6).await;
    assert_eq!(
        (t.state, t.result),
        (TaskState::Succeeded, Some(json!({"by": OLD_WORKER_2}))),
        "{f}: task 6"
    );
    assert_eq!(
        outcomes(s, 6).await,
        [(1, by(OLD_WORKER_2), AttemptOutcome::Succeeded)],
        "{f}: task 6's attempts"
    );

    // The held task is released, and runs.
    let released = s
        .task_update(UpdateParams {
            target: Target::Id(2),
            change: Change::Release,
            actor: ops(),
            now: None,
            action: None,
        })
        .await
        .expect("release");
    assert_eq!(released, 1, "{f}: task 2 is released");
    assert_eq!(get(s, 2).await.state, TaskState::Pending, "{f}: task 2");
    assert_eq!(
        default.run_once().await.expect("run_once"),
        1,
        "{f}: task 2 runs"
    );
    let t = get(s, 2).await;
    assert_eq!(
        (t.state, t.attempt, t.result),
        (
            TaskState::Succeeded,
            1,
            Some(json!({"echo": {"n": 2}, "attempt": 1, "checkpoint": null}))
        ),
        "{f}: task 2"
    );
    let events: Vec<_> = s
        .task_events(2)
        .await
        .expect("task_events")
        .into_iter()
        .map(|e| (e.event, e.actor))
        .collect();
    assert_eq!(
        events,
        [(EventKind::Released, ops())],
        "{f}: task 2's events"
    );

    // A task submitted now runs too, and its submitter is recorded.
    let new = s
        .task_submit(SubmitParams {
            tasks: vec![NewTask::new("echo", json!({"n": "new"})).created_by(Actor::rust())],
            now: None,
        })
        .await
        .expect("submit")[0];
    assert!(
        new.created && new.id > 11,
        "{f}: a new task after the fixture's: {new:?}"
    );
    assert_eq!(
        default.run_once().await.expect("run_once"),
        1,
        "{f}: the new task runs"
    );
    let t = get(s, new.id).await;
    assert_eq!(
        (t.state, t.result, t.created_by),
        (
            TaskState::Succeeded,
            Some(json!({"echo": {"n": "new"}, "attempt": 1, "checkpoint": null})),
            Some(Actor::rust())
        ),
        "{f}: the new task"
    );
    assert_eq!(
        default.run_once().await.expect("run_once"),
        0,
        "{f}: nothing else is due"
    );

    // The multi-run task runs its second copy on the new worker (the old one succeeded at
    // the first and may not run another), and succeeds.
    let mut copies = worker(store, "runs", &items);
    assert_eq!(
        copies.run_once().await.expect("run_once"),
        1,
        "{f}: run 2 of task 10"
    );
    let t = get(s, 10).await;
    assert_eq!(
        (t.state, t.attempt, t.run_counts),
        (
            TaskState::Succeeded,
            2,
            Some(RunCounts {
                active: 0,
                succeeded: 2,
                failed: 0
            })
        ),
        "{f}: task 10"
    );
    let logged: Vec<_> = s
        .task_logs(10)
        .await
        .expect("task_logs")
        .into_iter()
        .map(|l| (l.attempt, l.run, l.line))
        .collect();
    assert_eq!(
        logged,
        [(2, Some(2), "attempt 2".to_owned())],
        "{f}: task 10's log, written by run 2"
    );
    let runs: Vec<_> = s
        .run_list(10)
        .await
        .expect("run_list")
        .into_iter()
        .map(|r| (r.run, r.worker_id, r.state, r.result))
        .collect();
    assert_eq!(
        runs,
        [
            (
                1,
                OLD_WORKER_1.to_owned(),
                RunState::Ended(AttemptOutcome::Succeeded),
                Some(json!({"echo": {"n": 10}}))
            ),
            (
                2,
                NEW_WORKER.to_owned(),
                RunState::Ended(AttemptOutcome::Succeeded),
                Some(json!({"echo": {"n": 10}, "attempt": 2, "checkpoint": null}))
            ),
        ],
        "{f}: task 10's runs"
    );

    // The batch goes on from its saved mark: items 2 and 3, not 0 and 1 again.
    let mut batches = worker(store, "batches", &items);
    assert_eq!(
        batches.run_once().await.expect("run_once"),
        1,
        "{f}: the batch runs"
    );
    assert_eq!(*items.lock().unwrap(), [2, 3], "{f}: the items run");
    let b = s.batch_get(11).await.expect("batch_get").expect("batch 11");
    assert_eq!(
        (b.task.state, b.status, b.low_water, b.end, b.errors),
        (TaskState::Succeeded, BatchStatus::Succeeded, 4, Some(4), 1),
        "{f}: the batch"
    );
    assert_eq!(
        outcomes(s, 11).await,
        [
            (1, by(OLD_WORKER_1), AttemptOutcome::LeaseExpired),
            (2, by(NEW_WORKER), AttemptOutcome::Succeeded)
        ],
        "{f}: the batch's attempts"
    );

    // The schedule fires its next slot, 12:00, as the scheduler does at that time.
    let fired = s
        .schedule_run_due(RunDueParams {
            limit: 10,
            now: Some(now()),
        })
        .await
        .expect("run due schedules");
    assert_eq!(fired.len(), 1, "{f}: schedule 1 fires: {fired:?}");
    let slot = fired[0].tasks.as_slice();
    assert!(
        fired[0].schedule_id == 1 && slot.len() == 1 && slot[0].slot_at == now() && slot[0].created,
        "{f}: the slot of 12:00 fires: {fired:?}"
    );
    let t = get(s, slot[0].task_id).await;
    assert_eq!(
        (
            t.state,
            t.payload,
            t.key,
            t.schedule_id,
            t.slot_at,
            t.idempotency_key,
            t.created_by
        ),
        (
            TaskState::Pending,
            json!({"n": 7}),
            Some("upgrade:scheduled".into()),
            Some(1),
            Some(now()),
            Some("schedule:1:2025-01-01T12:00:00.000Z".into()),
            Some(Actor::system("scheduler"))
        ),
        "{f}: the fired task"
    );
    let schedule = s
        .schedule_get(ScheduleRef::Id(1))
        .await
        .expect("schedule_get")
        .expect("schedule 1");
    assert_eq!(
        (
            schedule.last_task_id,
            schedule.last_slot_at,
            schedule.next_run_at
        ),
        (Some(slot[0].task_id), Some(now()), Some(at("13:00:00"))),
        "{f}: the schedule's place"
    );

    // What was finished, and what waits for 2100, is as it was.
    for id in [4, 7, 8, 9] {
        assert_eq!(
            get(s, id).await,
            fixture_task(id),
            "{f}: task {id} at the end"
        );
    }
}
