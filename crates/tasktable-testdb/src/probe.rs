//! How many connections of a pool the database holds inside a transaction: what the
//! backends' tests ask after store calls were cut off half way.

use futures::future::BoxFuture;
use sqlx::{Database, Pool};

/// Borrows every connection `pool` may hold at once (waiting for those in use or on their
/// way back, so it sees the pool at rest), asks `inside` of each whether the database
/// holds it inside a transaction, and closes those it does; how many it found.
pub async fn in_transaction<DB: Database>(
    pool: &Pool<DB>,
    inside: for<'c> fn(&'c mut DB::Connection) -> BoxFuture<'c, bool>,
) -> usize {
    let size = pool.options().get_max_connections();
    let mut conns = Vec::new();
    for _ in 0..size {
        conns.push(pool.acquire().await.expect("every connection of the pool"));
    }
    let mut open = 0;
    for conn in &mut conns {
        if inside(conn).await {
            open += 1;
            conn.close_on_drop();
        }
    }
    open
}
