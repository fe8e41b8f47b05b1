//! What a backend provides so that this crate's queries run on it.

use crate::{Dialect, Sql};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use tasktable_store::{StoreError, StoreResult};

/// A connection (or a transaction on one) that runs [`Sql`], binding each argument in the
/// backend's own column types.
#[async_trait]
pub trait Exec: Send {
    /// A row of an answer, read by column name.
    type Row: Cells + Send;

    /// The dialect to build statements in for this connection.
    fn dialect(&self) -> Dialect;

    /// Runs a statement and returns the rows it answers (none for most writes).
    async fn fetch(&mut self, sql: Sql) -> StoreResult<Vec<Self::Row>>;

    /// Runs a statement that answers no rows. (How many rows a write changed is never
    /// read: MySQL leaves out rows a change left as they were.)
    async fn execute(&mut self, sql: Sql) -> StoreResult<()> {
        self.fetch(sql).await.map(|_| ())
    }

    /// Runs a file of several statements without arguments (a migration).
    async fn script(&mut self, sql: &str) -> StoreResult<()>;

    /// `pinned`, cut to what the database keeps, or the database's current time: the one
    /// clock of a transaction.
    async fn now(&mut self, pinned: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>>;
}

/// A row's cells by column name, decoded the backend's way: a time is text on SQLite, a
/// JSON document is text on SQLite and a value elsewhere, an integer column has the width
/// the schema gave it. `None` is SQL NULL.
pub trait Cells {
    /// Any integer column, whatever its width.
    fn int(&self, column: &str) -> StoreResult<Option<i64>>;
    /// A floating-point column (`REAL` on SQLite, `DOUBLE PRECISION` elsewhere), or an
    /// aggregate the database computed as one.
    fn float(&self, column: &str) -> StoreResult<Option<f64>>;
    /// A text column.
    fn text(&self, column: &str) -> StoreResult<Option<String>>;
    /// A boolean column (an integer on SQLite and MySQL).
    fn boolean(&self, column: &str) -> StoreResult<Option<bool>>;
    /// A time column, as UTC (fixed-format text on SQLite).
    fn time(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>>;
    /// A JSON column, parsed (text on SQLite).
    fn json(&self, column: &str) -> StoreResult<Option<Value>>;
}

/// A cell that must not be NULL.
pub(crate) fn required<T>(value: StoreResult<Option<T>>, column: &str) -> StoreResult<T> {
    value?.ok_or_else(|| StoreError::Database(format!("column {column} is NULL").into()))
}

/// A count, never negative.
pub(crate) fn count(row: &impl Cells, column: &str) -> StoreResult<u64> {
    Ok(required(row.int(column), column)?.max(0) as u64)
}

/// Where a backend's connections come from: one for reads, and write transactions.
#[async_trait]
pub trait Connect: Send + Sync {
    /// A connection for reads, given back to its pool when dropped.
    type Read: Exec;
    /// A write transaction: committed with [`Commit::commit`], rolled back when dropped
    /// without it.
    type Write: Exec + Commit;

    /// A connection for reads (on SQLite, one of the readers: never the writer).
    async fn read(&self) -> StoreResult<Self::Read>;

    /// A write transaction (on SQLite, `BEGIN IMMEDIATE` on the writer).
    async fn write(&self) -> StoreResult<Self::Write>;
}

/// A transaction that ends by committing; dropped without it, it rolls back.
#[async_trait]
pub trait Commit: Send + Sized {
    /// Commits; an error means the work may not have been kept.
    async fn commit(self) -> StoreResult<()>;
}
