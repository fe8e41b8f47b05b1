//! What tasktable's sqlx-driven stores (SQLite, PostgreSQL, MySQL) share about their
//! connection pools.
//!
//! Owns: [`Tx`], the write transaction every store opens, which never goes back to its
//! pool inside a transaction; [`released_clean`], the check a pool makes of every
//! connection handed back to it; [`first_connection`], made before the pool so that an
//! unreachable database is told at once with its cause; and which of sqlx's errors mean
//! that the database could not be reached ([`store_error`], [`is_unreachable`]). Must not
//! know: any particular database, tasktable's tables or rules.
//!
//! Why [`Tx`] and not `sqlx::Transaction`: sqlx (0.8.6 and 0.9.0) counts a transaction
//! as open only once the answer to its `BEGIN` has arrived. A future dropped while that
//! answer is on its way (a client that hung up, a timeout) leaves the session inside a
//! transaction that sqlx does not know about, and hands the connection to the next
//! borrower, whose statements then run inside it, are answered as done, and are rolled
//! back when that session ends (sqlx issues 4385 and 4393; the fix, pull request 4394, is
//! not in a release yet). [`Tx`] closes a connection whose `BEGIN` was not confirmed
//! instead of returning it, and rolls back the rest as `sqlx::Transaction` does.

#![warn(missing_docs)]

mod first;
mod unreachable;

pub use first::{first_connection, FIRST_CONNECTION_WAIT};
pub use unreachable::{is_unreachable, store_error};

use sqlx::pool::PoolConnection;
use sqlx::{Connection, Database, Pool, TransactionManager};
use std::borrow::Cow;
use std::ops::{Deref, DerefMut};

/// Where a [`Tx`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// `BEGIN` is sent or about to be, and its answer is not in: the session may or may
    /// not be inside a transaction, so the connection is closed if the `Tx` is dropped.
    Beginning,
    /// Inside a transaction sqlx counts: dropped, it queues a `ROLLBACK`, which goes out
    /// before the connection can be borrowed again.
    Open,
    /// Committed or rolled back.
    Ended,
}

/// A write transaction on a pooled connection that never goes back to the pool open,
/// wherever the future that holds it is dropped ([crate docs](crate)). Derefs to the
/// connection, so statements run on `&mut *tx`.
pub struct Tx<DB: Database> {
    conn: PoolConnection<DB>,
    state: State,
}

impl<DB: Database> std::fmt::Debug for Tx<DB> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tx").field("state", &self.state).finish()
    }
}

impl<DB: Database> Tx<DB> {
    /// Takes a connection from `pool` and begins a transaction on it, with `statement`
    /// (`BEGIN IMMEDIATE`, say) or the database's plain `BEGIN`.
    pub async fn begin(pool: &Pool<DB>, statement: Option<&'static str>) -> sqlx::Result<Self> {
        let conn = pool.acquire().await?;
        let mut tx = Tx {
            conn,
            state: State::Beginning,
        };
        match DB::TransactionManager::begin(&mut tx.conn, statement.map(Cow::Borrowed)).await {
            Ok(()) => {
                tx.state = State::Open;
                Ok(tx)
            }
            // A `BEGIN` that answered with an error began nothing (or broke the
            // connection, which the pool's test on release then finds): only one cut off
            // before its answer leaves the session in doubt.
            Err(e) => {
                tx.state = State::Ended;
                Err(e)
            }
        }
    }

    /// Commits the transaction. A commit that fails or is cut off leaves the `Tx` to its
    /// drop, which rolls back what the server has not committed.
    pub async fn commit(mut self) -> sqlx::Result<()> {
        DB::TransactionManager::commit(&mut self.conn).await?;
        self.state = State::Ended;
        Ok(())
    }

    /// Rolls the transaction back now and waits for it, rather than leaving the
    /// `ROLLBACK` to the drop.
    pub async fn rollback(mut self) -> sqlx::Result<()> {
        DB::TransactionManager::rollback(&mut self.conn).await?;
        self.state = State::Ended;
        Ok(())
    }
}

impl<DB: Database> Drop for Tx<DB> {
    fn drop(&mut self) {
        match self.state {
            State::Beginning => self.conn.close_on_drop(),
            State::Open => DB::TransactionManager::start_rollback(&mut self.conn),
            State::Ended => {}
        }
    }
}

impl<DB: Database> Deref for Tx<DB> {
    type Target = DB::Connection;

    fn deref(&self) -> &DB::Connection {
        &self.conn
    }
}

impl<DB: Database> DerefMut for Tx<DB> {
    fn deref_mut(&mut self) -> &mut DB::Connection {
        &mut self.conn
    }
}

/// Whether a connection handed back to its pool may be lent again: not while sqlx still
/// counts it inside a transaction (one whose `Transaction` was leaked rather than dropped).
/// Costs no round trip; for `PoolOptions::after_release`, which closes the connection when
/// this is `false`. It cannot see a transaction sqlx does not count, such as one whose
/// `BEGIN` was cut off: that is [`Tx`]'s to prevent, so code that shares a store's pool
/// begins its transactions with [`Tx::begin`] too.
pub fn released_clean<C: Connection>(conn: &C) -> bool {
    !conn.is_in_transaction()
}
