//! How the shared SQL layer (`tasktable-sql`) runs on PostgreSQL: arguments bound in this
//! schema's types (lists as arrays, JSON as `jsonb`), cells decoded back.

use crate::{db, PgBackend};
use async_trait::async_trait;
use chrono::{DateTime, Utc};
use serde_json::Value;
use sqlx::pool::PoolConnection;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::{Decode, Executor, PgConnection, Postgres, Row as _, TypeInfo, ValueRef};
use std::ops::DerefMut;
use tasktable_sql::{Arg, Cells, Commit, Connect, Dialect, Exec, Sql};
use tasktable_sqlx::Tx;
use tasktable_store::{StoreError, StoreResult};

/// A connection, or a transaction on one, that runs the shared layer's statements.
#[derive(Debug)]
pub struct Db<C>(pub C);

/// A row the shared layer decodes.
pub struct Row(pub PgRow);

impl std::fmt::Debug for Row {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Row")
    }
}

type Query<'q> = sqlx::query::Query<'q, Postgres, PgArguments>;

fn query(text: &str, args: Vec<Arg>) -> Query<'_> {
    args.into_iter()
        .fold(sqlx::query(text), |q, arg| match arg {
            Arg::Int(v) => q.bind(v),
            Arg::Int32(v) => q.bind(v),
            Arg::Float(v) => q.bind(v),
            Arg::MaybeInt(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
            Arg::Bool(v) => q.bind(v),
            Arg::Time(v) => q.bind(v),
            Arg::Json(v) => q.bind(v),
            Arg::Ints(v) => q.bind(v),
            Arg::Texts(v) => q.bind(v),
        })
}

#[async_trait]
impl<C: DerefMut<Target = PgConnection> + Send> Exec for Db<C> {
    type Row = Row;

    fn dialect(&self) -> Dialect {
        Dialect::Postgres
    }

    async fn fetch(&mut self, sql: Sql) -> StoreResult<Vec<Row>> {
        let (text, args) = sql.into_parts();
        let rows = query(&text, args).fetch_all(&mut *self.0).await;
        Ok(rows.map_err(db)?.into_iter().map(Row).collect())
    }

    /// A query without arguments goes over the simple query protocol, which runs a file
    /// of several statements.
    async fn script(&mut self, sql: &str) -> StoreResult<()> {
        self.0.execute(sql).await.map(|_| ()).map_err(db)
    }

    /// The time of the reading (`clock_timestamp()`, not `now()`, the transaction's
    /// start): a transaction that waited for a lock works at the time it got it, so the
    /// times of transactions serialised by one lock never run backwards.
    async fn now(&mut self, pinned: Option<DateTime<Utc>>) -> StoreResult<DateTime<Utc>> {
        sqlx::query_scalar("SELECT coalesce($1::timestamptz, clock_timestamp())")
            .bind(pinned)
            .fetch_one(&mut *self.0)
            .await
            .map_err(db)
    }
}

#[async_trait]
impl Commit for Db<Tx<Postgres>> {
    async fn commit(self) -> StoreResult<()> {
        self.0.commit().await.map_err(db)
    }
}

#[async_trait]
impl Connect for PgBackend {
    type Read = Db<PoolConnection<Postgres>>;
    type Write = Db<Tx<Postgres>>;

    async fn read(&self) -> StoreResult<Self::Read> {
        self.pool.acquire().await.map(Db).map_err(db)
    }

    async fn write(&self) -> StoreResult<Self::Write> {
        Tx::begin(&self.pool, None).await.map(Db).map_err(db)
    }
}

impl Cells for Row {
    /// PostgreSQL decodes an integer only at its own width: one lookup of the column,
    /// then the decoder its type names (this runs for every cell of every claimed task).
    fn int(&self, column: &str) -> StoreResult<Option<i64>> {
        let raw = self.0.try_get_raw(column).map_err(db)?;
        if raw.is_null() {
            return Ok(None);
        }
        let value = match raw.type_info().name() {
            "INT2" => <i16 as Decode<'_, Postgres>>::decode(raw).map(i64::from),
            "INT4" => <i32 as Decode<'_, Postgres>>::decode(raw).map(i64::from),
            _ => <i64 as Decode<'_, Postgres>>::decode(raw),
        };
        value.map(Some).map_err(StoreError::Database)
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
        self.0.try_get(column).map_err(db)
    }
    fn json(&self, column: &str) -> StoreResult<Option<Value>> {
        self.0.try_get(column).map_err(db)
    }
}
