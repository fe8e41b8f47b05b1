//! Which of sqlx's errors mean that the database could not be reached, the one rule the
//! three sqlx-driven stores apply when they turn a driver's error into a
//! [`StoreError`]: such an error is marked
//! [`Unreachable`](tasktable_store::Unreachable), and a shielded store logs the outage
//! once instead of each part logging each call it fails.

use tasktable_store::StoreError;

/// SQLSTATE class 08, connection exception: the connection failed or was refused
/// (MySQL's 1053, the server shutting down, is `08S01`).
const CONNECTION_EXCEPTION: &str = "08";

/// PostgreSQL's `admin_shutdown`, `crash_shutdown` and `cannot_connect_now`: the server
/// ended the session because it is stopping or restarting, or is not yet up.
const SERVER_GOING_OR_COMING: [&str; 3] = ["57P01", "57P02", "57P03"];

/// The [`StoreError`] of a driver's error: [`StoreError::unreachable`] when
/// [`is_unreachable`] says so, else [`StoreError::database`].
pub fn store_error(e: sqlx::Error) -> StoreError {
    if is_unreachable(&e) {
        StoreError::unreachable(e)
    } else {
        StoreError::database(e)
    }
}

/// Whether `e` says that the database could not be reached: an I/O error on the
/// connection (refused, reset, cut), no connection within the pool's wait, or the server
/// ending the session as it shuts down, or refusing it while it starts. A statement the
/// database refused, a row that could not be read, TLS that failed, a closed pool: the
/// database answered, or the store is closing, so they are ordinary errors.
pub fn is_unreachable(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => db.code().is_some_and(|code| lost_session(&code)),
        _ => false,
    }
}

/// Whether a database error's code says its session was lost to the server's going or
/// coming. SQLSTATEs are five characters; SQLite's codes are numbers, which never match.
fn lost_session(code: &str) -> bool {
    code.len() == 5
        && (code.starts_with(CONNECTION_EXCEPTION) || SERVER_GOING_OR_COMING.contains(&code))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sqlx::Connection;

    #[test]
    fn a_lost_connection_and_an_empty_pool_are_unreachable_a_refused_statement_is_not() {
        let reset = sqlx::Error::Io(std::io::ErrorKind::ConnectionReset.into());
        assert!(store_error(reset).is_unreachable());
        assert!(store_error(sqlx::Error::PoolTimedOut).is_unreachable());
        for answered in [
            sqlx::Error::RowNotFound,
            sqlx::Error::PoolClosed,
            sqlx::Error::ColumnNotFound("id".into()),
        ] {
            assert!(!store_error(answered).is_unreachable());
        }
    }

    #[test]
    fn session_codes_of_a_server_going_or_coming_are_unreachable() {
        for code in ["08006", "08001", "08S01", "57P01", "57P02", "57P03"] {
            assert!(lost_session(code), "{code}");
        }
        // A unique violation, a deadlock, a query cancelled, SQLite's busy and I/O codes.
        for code in ["23505", "40P01", "57014", "5", "10", "1032"] {
            assert!(!lost_session(code), "{code}");
        }
    }

    #[tokio::test]
    async fn a_refused_connection_is_unreachable() {
        // A port nothing listens on.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let url = format!("postgres://app@127.0.0.1:{port}/tasks");
        let e = sqlx::PgConnection::connect(&url).await.unwrap_err();
        assert!(is_unreachable(&e), "{e:?}");
    }

    #[tokio::test]
    async fn an_error_sqlite_answers_is_not_unreachable() {
        let mut conn = sqlx::SqliteConnection::connect("sqlite::memory:")
            .await
            .expect("an in-memory database");
        let e = sqlx::query("SELECT * FROM no_such_table")
            .execute(&mut conn)
            .await
            .unwrap_err();
        assert!(!is_unreachable(&e), "{e:?}");
    }
}
