//! tasktable's shared SQL layer: every query off the hot path, written once for SQLite,
//! PostgreSQL and MySQL/MariaDB.
//!
//! Owns: the [`Dialect`] (the handful of places where the three databases spell the same
//! thing differently: placeholders, id lists, a substring test, minute truncation, row
//! locks and index hints, upserts); [`Sql`], a statement with its typed arguments; the
//! queries themselves (filters, list/get/count/attempts, queues, operator changes and the
//! history rows they write, statistics aggregates, schedules and their firing, the runs
//! of multi-run tasks ([`runs`]), batches' rows, saves and actions ([`batches`]), the
//! event log written with each operator change and read by the audit ([`events`]), task
//! logs ([`logs`]), the live feed's reads ([`feed`]), the facts of why a pending task
//! waits ([`waiting`]), the migration runner) and the decoding of their rows into core
//! types ([`row`]); and the one `Store`, [`SqlStore`], over what a
//! backend provides ([`Backend`]), with the choice of lane for a claim ([`store::claim`])
//! and for a lease's writes ([`store::finish`]).
//!
//! Must not know: any database driver. A backend runs what this crate writes through
//! [`Exec`] (binding each [`Arg`] in its own column types) and reads rows through
//! [`Cells`]; it keeps its transactions, its locks and its hot path (submit, claim, renew,
//! checkpoint, finish, rescue), which stay hand-written per backend in `queries/*.sql`,
//! the same files in every backend ([`hot`]).
//! Rules come from `tasktable-core` as values: what a change does to a row is
//! [`tasktable_core::ChangeEffect`], never an SQL `CASE`. The one rule the hot path must
//! decide inside its statements, whether a retried attempt goes back to `pending` or
//! fails for good, is rendered as SQL once, in [`rules`], from core's definition.
//!
//! Who uses what: applications never call this crate; they hold a backend's store
//! (`SqliteStore`, `PgStore`, `MySqlStore`: aliases of [`SqlStore`]) as a `Store`. Its
//! public items are for the backend crates, which implement [`Backend`], [`Connect`],
//! [`Exec`], [`Commit`] and [`Cells`], and build their hot path from [`hot`], [`rules`],
//! [`row`] and [`migrate`]. The other public modules hold the queries [`SqlStore`] runs
//! for the store's calls off the hot path, one module per family of calls.

#![warn(missing_docs)]

pub mod affinity;
pub mod backend;
pub mod batches;
mod dialect;
pub mod events;
mod exec;
pub mod feed;
pub mod hot;
pub mod limits;
pub mod logs;
pub mod migrate;
pub mod query;
pub mod retention;
pub mod row;
pub mod rules;
pub mod runs;
pub mod schedules;
mod sql;
pub mod stats;
pub mod store;
pub mod update;
pub mod waiting;
pub mod workers;

pub use backend::Backend;
pub use dialect::Dialect;
pub use exec::{Cells, Commit, Connect, Exec};
pub use sql::{Arg, Sql};
pub use store::SqlStore;
