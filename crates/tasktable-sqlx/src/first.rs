//! A store's first connection, made before its pool, so that a database that refuses or
//! cannot be reached is told at once with its cause. A pool that cannot connect retries
//! until its acquire timeout (30 s) and then says only that it timed out.

use sqlx::{ConnectOptions, Connection};
use std::time::Duration;
use tokio::time::Instant;

/// How long a store's first connection may take before the store gives up on the
/// database.
pub const FIRST_CONNECTION_WAIT: Duration = Duration::from_secs(5);

/// Opens one connection with `options` and closes it: `Err` names the database by `url`
/// (its password, if any, hidden by [`tasktable_core::url::redact_password`]) and says
/// why it could not be reached, within [`FIRST_CONNECTION_WAIT`]. A refusal is tried again
/// until then, so a database that is just starting (a restart, a failover) is waited for,
/// not reported.
pub async fn first_connection<O>(options: &O, url: &str) -> Result<(), String>
where
    O: ConnectOptions,
    O::Connection: Sized,
{
    let shown = tasktable_core::url::redact_password(url);
    let deadline = Instant::now() + FIRST_CONNECTION_WAIT;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let error = match tokio::time::timeout(left, options.connect()).await {
            Ok(Ok(conn)) => {
                let _ = conn.close().await;
                return Ok(());
            }
            Ok(Err(e)) => format!("cannot connect to {shown}: {e}"),
            Err(_) => format!(
                "cannot connect to {shown}: no answer within {} s (is the host reachable, and the port right?)",
                FIRST_CONNECTION_WAIT.as_secs()
            ),
        };
        if Instant::now() + AGAIN_AFTER >= deadline {
            return Err(error);
        }
        tokio::time::sleep(AGAIN_AFTER).await;
    }
}

/// The pause between tries of a first connection.
const AGAIN_AFTER: Duration = Duration::from_millis(250);

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_refused_connection_says_so_and_names_the_url_with_its_password_hidden() {
        // A port nothing listens on: refused at every try.
        let url = "postgres://app:hunter2@127.0.0.1:1/tasks";
        let options: sqlx::postgres::PgConnectOptions = url.parse().expect("a URL");
        let e = first_connection(&options, url).await.unwrap_err();
        assert!(
            e.starts_with("cannot connect to postgres://app:[redacted]@127.0.0.1:1/tasks: "),
            "{e}"
        );
        assert!(e.to_lowercase().contains("refused"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
    }
}
