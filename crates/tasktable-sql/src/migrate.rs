//! The migration runner. Migrations ship inside the library, with the same numbers and
//! names in every backend (`migrations/NNNN_name.sql`), and are recorded in tasktable's
//! own table (`tasktable_migrations`, not sqlx's), so they never clash with the host
//! application's. Serialising concurrent migrators is the backend's part: a transaction
//! under an advisory lock (PostgreSQL), a named lock (MySQL, whose DDL commits on its
//! own), the write transaction (SQLite).

use crate::{Cells, Exec, Sql};
use std::borrow::Cow;
use tasktable_store::{StoreError, StoreResult};

/// One migration: its version, its name and the SQL of one backend.
#[derive(Debug, Clone)]
pub struct Migration {
    /// Its number, from 1, the same in every backend; recorded in
    /// `tasktable_migrations` once applied.
    pub version: i64,
    /// Its name, the rest of its file name (`0001_tasks.sql` is `tasks`).
    pub name: &'static str,
    /// The statements, run as one script ([`Exec::script`]).
    pub sql: Cow<'static, str>,
}

/// The (version, name) of every migration, oldest first: each backend has the file
/// `migrations/{version:04}_{name}.sql`.
pub const MIGRATIONS: [(i64, &str); 20] = [
    (1, "tasks"),
    (2, "stats"),
    (3, "idempotency_index"),
    (4, "lease_credential"),
    (5, "schedules"),
    (6, "archive"),
    (7, "workers"),
    (8, "targets"),
    (9, "queue_policies"),
    (10, "affinity"),
    (11, "runs"),
    (12, "batches"),
    (13, "events"),
    (14, "submitters_and_logs"),
    (15, "worker_owners"),
    (16, "event_actions"),
    (17, "traceparent"),
    (18, "worker_kinds"),
    (19, "history_follows_tasks"),
    (20, "batch_released"),
];

/// The migrations of the crate this is expanded in, from its `migrations/` folder, in
/// the order of [`MIGRATIONS`] (a test in each backend checks the two agree).
#[macro_export]
macro_rules! backend_migrations {
    () => {
        [
            $crate::migrate::Migration {
                version: 1,
                name: "tasks",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0001_tasks.sql")),
            },
            $crate::migrate::Migration {
                version: 2,
                name: "stats",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0002_stats.sql")),
            },
            $crate::migrate::Migration {
                version: 3,
                name: "idempotency_index",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0003_idempotency_index.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 4,
                name: "lease_credential",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0004_lease_credential.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 5,
                name: "schedules",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0005_schedules.sql")),
            },
            $crate::migrate::Migration {
                version: 6,
                name: "archive",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0006_archive.sql")),
            },
            $crate::migrate::Migration {
                version: 7,
                name: "workers",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0007_workers.sql")),
            },
            $crate::migrate::Migration {
                version: 8,
                name: "targets",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0008_targets.sql")),
            },
            $crate::migrate::Migration {
                version: 9,
                name: "queue_policies",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0009_queue_policies.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 10,
                name: "affinity",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0010_affinity.sql")),
            },
            $crate::migrate::Migration {
                version: 11,
                name: "runs",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0011_runs.sql")),
            },
            $crate::migrate::Migration {
                version: 12,
                name: "batches",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0012_batches.sql")),
            },
            $crate::migrate::Migration {
                version: 13,
                name: "events",
                sql: ::std::borrow::Cow::Borrowed(include_str!("../migrations/0013_events.sql")),
            },
            $crate::migrate::Migration {
                version: 14,
                name: "submitters_and_logs",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0014_submitters_and_logs.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 15,
                name: "worker_owners",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0015_worker_owners.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 16,
                name: "event_actions",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0016_event_actions.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 17,
                name: "traceparent",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0017_traceparent.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 18,
                name: "worker_kinds",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0018_worker_kinds.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 19,
                name: "history_follows_tasks",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0019_history_follows_tasks.sql"
                )),
            },
            $crate::migrate::Migration {
                version: 20,
                name: "batch_released",
                sql: ::std::borrow::Cow::Borrowed(include_str!(
                    "../migrations/0020_batch_released.sql"
                )),
            },
        ]
    };
}

/// Checks that `migrations` are [`MIGRATIONS`], in order, and that `dir` holds exactly
/// their files.
pub fn check_files(migrations: &[Migration], dir: &std::path::Path) -> Result<(), String> {
    let listed: Vec<(i64, &str)> = migrations.iter().map(|m| (m.version, m.name)).collect();
    if listed != MIGRATIONS {
        return Err(format!("migrations {listed:?} are not {MIGRATIONS:?}"));
    }
    let mut files: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|f| f.ok()?.file_name().into_string().ok())
        .collect();
    files.sort();
    let want: Vec<String> = MIGRATIONS
        .iter()
        .map(|(v, n)| format!("{v:04}_{n}.sql"))
        .collect();
    if files != want {
        return Err(format!("{} holds {files:?}, not {want:?}", dir.display()));
    }
    Ok(())
}

/// Whether a migration's script holds anything but `--` comments and blank lines.
fn has_statements(sql: &str) -> bool {
    sql.lines().any(|line| {
        let line = line.trim();
        !line.is_empty() && !line.starts_with("--")
    })
}

/// Applies the migrations the database has not seen yet, on a connection the caller has
/// made the only migrator's.
pub async fn apply<E: Exec>(e: &mut E, migrations: &[Migration]) -> StoreResult<()> {
    let d = e.dialect();
    e.script(d.create_migrations_table()).await?;
    let rows = e
        .fetch(Sql::new(d, "SELECT version FROM tasktable_migrations"))
        .await?;
    let mut applied = Vec::new();
    for r in &rows {
        applied.extend(r.int("version")?);
    }
    if let Some(newest) = applied.iter().max() {
        let known = migrations.last().map_or(0, |m| m.version);
        if *newest > known {
            return Err(StoreError::Migration(format!(
                "the database is at schema version {newest}, newer than this tasktable ({known}); upgrade tasktable"
            )));
        }
    }
    for m in migrations {
        if applied.contains(&m.version) {
            continue;
        }
        // A backend that the version does not change ships a file of comments only (saying
        // why): it is recorded, and nothing is sent (MySQL refuses an empty query).
        if has_statements(&m.sql) {
            e.script(&m.sql)
                .await
                .map_err(|err| StoreError::Migration(format!("{} {}: {err}", m.version, m.name)))?;
        }
        let now = e.now(None).await?;
        let mut record = Sql::new(
            d,
            "INSERT INTO tasktable_migrations (version, name, applied_at) VALUES (",
        );
        record
            .bind(m.version)
            .push(", ")
            .bind(m.name)
            .push(", ")
            .bind(now)
            .push(")");
        e.execute(record).await?;
        tracing::info!(version = m.version, name = m.name, "applied migration");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::has_statements;

    #[test]
    fn a_script_of_comments_only_has_no_statements() {
        assert!(!has_statements("-- nothing here\n\n   -- nor here\n"));
        assert!(!has_statements(""));
        assert!(has_statements("-- why\nALTER TABLE t ADD COLUMN c INT;\n"));
        assert!(has_statements("  SELECT 1; -- trailing"));
    }
}
