//! How the shared SQL layer (`tasktable-sql`) runs on MySQL and MariaDB: arguments bound
//! in this schema's types (times as `DATETIME`, see `clock`), cells decoded back.

use crate::{clock, db, MySqlBackend};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::mysql::{MySqlArguments, MySqlRow};
use sqlx::pool::PoolConnection;
use sqlx::{Decode, Executor, MySql, MySqlConnection, Row as _};
use std::ops::DerefMut;
use tasktable_core::{Task, TaskId};
use tasktable_sql::{Arg, Cells, Commit, Connect, Dialect, Exec, Sql};
use tasktable_sqlx::Tx;
use tasktable_store::StoreResult;

/// Most values in one `IN (...)` list: MySQL has no arrays to bind, so a list is one
/// placeholder each (see [`Sql::MAX_IN_LIST`]).
pub const MAX_IN_LIST: usize = Sql::MAX_IN_LIST;

/// `?, ?, ?`: one placeholder per value of an `IN (...)` list.
pub fn marks(n: usize) -> String {
    vec!["?"; n].join(", ")
}

/// A text column (`String`, `Option<String>`, `&str`). tasktable's text columns use a
/// binary collation; MySQL flags such columns BINARY, and sqlx then takes them for
/// VARBINARY and will not decode them as strings. They hold utf8mb4 text all the same,
/// so this skips sqlx's type check (decoding still checks the UTF-8).
pub fn text<'r, T: Decode<'r, MySql>>(row: &'r MySqlRow, column: &str) -> StoreResult<T> {
    row.try_get_unchecked(column).map_err(db)
}

/// A connection, or a transaction on one, that runs the shared layer's statements.
#[derive(Debug)]
pub struct Db<C>(pub C);

/// A row the shared layer decodes.
pub struct Row(pub MySqlRow);

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Row")
    }
}

type Query<'q> = sqlx::query::Query<'q, MySql, MySqlArguments>;

fn query(text: &str, args: Vec<Arg>) -> Query<'_> {
    args.into_iter()
        .fold(sqlx::query(text), |q, arg| match arg {
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::MaybeInt(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(v.map(|t| clock::at(clock::truncate(t)))),
            Arg::Json(v) => q.bind(v),
            // The shared layer writes lists as placeholders on MySQL; should an array reach
            // here it goes as JSON.
            Arg::Ints(v) => q.bind(Value::from(v)),
            Arg::Texts(v) => q.bind(Value::from(v)),
        })
}

#[async_trait]
impl<C: DerefMut<Target = MySqlConnection> + Send> Exec for Db<C> {
    type Row = Row;

    fn dialect(&self) -> Dialect {
        Dialect::MySql
    }

    async fn fetch(&mut self, sql: Sql) -> StoreResult<Vec<Row>> {
        let (text, args) = sql.into_parts();
        let rows = query(&text, args).fetch_all(&mut *self.0).await;
        Ok(rows.map_err(db)?.into_iter().map(Row).collect())
    }

    /// A query without arguments goes over the text protocol, which runs a file of
    /// several statements (sqlx enables multi-statement queries).
    async fn script(&mut self, sql: &str) -> StoreResult<()> {
        self.0.execute(sql).await.map(|_| ()).map_err(db)
    }

    async fn now(&mut self, pinned: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
        clock::now(&mut self.0, pinned).await
    }
}

#[async_trait]
impl Commit for Db<Tx<MySql>> {
    async fn commit(self) -> StoreResult<()> {
        self.0.commit().await.map_err(db)
    }
}

#[async_trait]
impl Connect for MySqlBackend {
    type Read = Db<PoolConnection<MySql>>;
    type Write = Db<Tx<MySql>>;

    async fn read(&self) -> StoreResult<Self::Read> {
        self.pool.acquire().await.map(Db).map_err(db)
    }

    async fn write(&self) -> StoreResult<Self::Write> {
        Tx::begin(&self.pool, None).await.map(Db).map_err(db)
    }
}

/// Tasks by id, read on `conn` (inside the caller's transaction), in no particular order.
pub async fn get_many(conn: &mut MySqlConnection, ids: &[TaskId]) -> StoreResult<Vec<Task>> {
    let mut tasks = Vec::with_capacity(ids.len());
    for chunk in ids.chunks(MAX_IN_LIST) {
        tasks.extend(tasktable_sql::query::get_many(&mut Db(&mut *conn), chunk).await?);
    }
    Ok(tasks)
}

impl Cells for Row {
    fn int(&self, column: &str) -> StoreResult<Option<i64>> {
        self.0.try_get(column).map_err(db)
    }
    fn float(&self, column: &str) -> StoreResult<Option<f64>> {
        self.0.try_get(column).map_err(db)
    }
    fn text(&self, column: &str) -> StoreResult<Option<String>> {
        text(&self.0, column)
    }
    fn boolean(&self, column: &str) -> StoreResult<Option<bool>> {
        self.0.try_get(column).map_err(db)
    }
    fn time(&self, column: &str) -> StoreResult<Option<DateTime<Utc>>> {
        self.0.try_get(column).map_err(db)
    }
    fn json(&self, column: &str) -> StoreResult<Option<Value>> {
        self.0.try_get(column).map_err(db)
    }
}
