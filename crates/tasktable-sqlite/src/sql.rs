//! How the shared SQL layer (`tasktable-sql`) runs on SQLite: arguments bound in this
//! schema's types (times as fixed-format text, JSON as text), cells decoded back.

use crate::time::{from_text, to_text};
use crate::{db, now_or_db, SqliteBackend};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{SqliteArguments, SqliteRow};
use sqlx::{Executor, Row as _, Sqlite, SqliteConnection};
use std::ops::DerefMut;
use tasktable_sql::{Arg, Cells, Commit, Connect, Dialect, Exec, Sql};
use tasktable_sqlx::Tx;
use tasktable_store::{StoreError, StoreResult};

/// A connection, or a transaction on one, that runs the shared layer's statements.
#[derive(Debug)]
pub struct Db<C>(pub C);

/// A row the shared layer decodes.
pub struct Row(pub SqliteRow);

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Row")
    }
}

type Query<'q> = sqlx::query::Query<'q, Sqlite, SqliteArguments<'q>>;

fn query(text: &str, args: Vec<Arg>) -> Query<'_> {
    args.into_iter()
        .fold(sqlx::query(text), |q, arg| match arg {
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::MaybeInt(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(v.map(to_text)),
            Arg::Json(v) => q.bind(v.to_string()),
            // Lists are written as JSON text for `json_each` on SQLite; should an array reach
            // here it goes the same way.
            Arg::Ints(v) => q.bind(Value::from(v).to_string()),
            Arg::Texts(v) => q.bind(Value::from(v).to_string()),
        })
}

#[async_trait]
impl<C: DerefMut<Target = SqliteConnection> + Send> Exec for Db<C> {
    type Row = Row;

    fn dialect(&self) -> Dialect {
        Dialect::Sqlite
    }

    async fn fetch(&mut self, sql: Sql) -> StoreResult<Vec<Row>> {
        let (text, args) = sql.into_parts();
        let rows = query(&text, args).fetch_all(&mut *self.0).await;
        Ok(rows.map_err(db)?.into_iter().map(Row).collect())
    }

    async fn script(&mut self, sql: &str) -> StoreResult<()> {
        self.0.execute(sql).await.map(|_| ()).map_err(db)
    }

    async fn now(&mut self, pinned: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
        now_or_db(&mut self.0, pinned).await
    }
}

#[async_trait]
impl Commit for Db<Tx<Sqlite>> {
    async fn commit(self) -> StoreResult<()> {
        self.0.commit().await.map_err(db)
    }
}

#[async_trait]
impl Connect for SqliteBackend {
    type Read = Db<PoolConnection<Sqlite>>;
    type Write = Db<Tx<Sqlite>>;

    async fn read(&self) -> StoreResult<Self::Read> {
        self.pools.reader.acquire().await.map(Db).map_err(db)
    }

    async fn write(&self) -> StoreResult<Self::Write> {
        self.begin_write().await.map(Db)
    }
}

fn bad_json(e: serde_json::Error) -> StoreError {
    StoreError::Database(format!("bad JSON in database: {e}").into())
}

impl Cells for Row {
    fn int(&self, column: &str) -> StoreResult<Option<i64>> {
        self.0.try_get(column).map_err(db)
    }
    fn float(&self, column: &str) -> StoreResult<Option<f64>> {
        self.0.try_get(column).map_err(db)
    }
    fn text(&self, column: &str) -> StoreResult<Option<String>> {
        self.0.try_get(column).map_err(db)
    }
    fn boolean(&self, column: &str) -> StoreResult<Option<bool>> {
        self.0.try_get(column).map_err(db)
    }
    fn time(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        let text: Option<&str> = self.0.try_get(column).map_err(db)?;
        text.map(from_text).transpose()
    }
    fn json(&self, column: &str) -> StoreResult<Option<Value>> {
        let text: Option<&str> = self.0.try_get(column).map_err(db)?;
        text.map(serde_json::from_str).transpose().map_err(bad_json)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_migration_files_are_the_shared_list() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("migrations");
        let shipped = tasktable_sql::backend_migrations!();
        tasktable_sql::migrate::check_files(&shipped, &dir).unwrap();
    }
}
