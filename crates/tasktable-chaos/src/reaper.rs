//! Ends the database sessions of `tasktable` that sit idle inside a transaction, as
//! `idle_in_transaction_session_timeout`, a proxy's idle timeout, a failover or a dropped
//! connection would. A transaction ended this way rolls back: whatever it wrote was never
//! acknowledged, unless a session was left inside a transaction nobody owned and later
//! writes ran in it; those are what this brings to light.

use sqlx::mysql::MySqlPoolOptions;
use sqlx::postgres::PgPoolOptions;
use sqlx::{MySqlPool, PgPool};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// PostgreSQL: every session of tasktable's pools (`application_name`) idle in a
/// transaction, the reaper's own excepted.
const END_POSTGRES: &str = "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))
    FROM pg_stat_activity
    WHERE application_name = 'tasktable' AND pid <> pg_backend_pid()
      AND state IN ('idle in transaction', 'idle in transaction (aborted)')";

/// MariaDB: sessions asleep between statements while InnoDB holds a transaction of theirs.
const IDLE_MARIADB: &str = "SELECT p.ID FROM information_schema.PROCESSLIST p
    JOIN information_schema.INNODB_TRX t ON t.trx_mysql_thread_id = p.ID
    WHERE p.COMMAND = 'Sleep' AND p.ID <> CONNECTION_ID() AND p.USER <> 'system user'";

#[derive(Debug, Clone)]
pub enum Reaper {
    Postgres(PgPool),
    Mariadb(MySqlPool),
}

impl Reaper {
    /// A reaper for the database at `url`; `None` for SQLite, which has no sessions.
    pub async fn connect(url: &str) -> Result<Option<Reaper>, sqlx::Error> {
        let timeout = Duration::from_secs(5);
        if url.starts_with("postgres") {
            let pool = PgPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(timeout)
                .connect(url)
                .await?;
            return Ok(Some(Reaper::Postgres(pool)));
        }
        if url.starts_with("mysql") {
            let pool = MySqlPoolOptions::new()
                .max_connections(1)
                .acquire_timeout(timeout)
                .connect(url)
                .await?;
            return Ok(Some(Reaper::Mariadb(pool)));
        }
        Ok(None)
    }

    /// Ends every such session once; how many it ended.
    pub async fn reap(&self) -> Result<u64, sqlx::Error> {
        match self {
            Reaper::Postgres(pool) => {
                let ended: i64 = sqlx::query_scalar(END_POSTGRES).fetch_one(pool).await?;
                Ok(ended.max(0) as u64)
            }
            Reaper::Mariadb(pool) => {
                let ids: Vec<u64> = sqlx::query_scalar(IDLE_MARIADB).fetch_all(pool).await?;
                let mut ended = 0;
                for id in ids {
                    // The session may have ended on its own meanwhile (error 1094).
                    if sqlx::query(&format!("KILL {id}"))
                        .execute(pool)
                        .await
                        .is_ok()
                    {
                        ended += 1;
                    }
                }
                Ok(ended)
            }
        }
    }

    /// Reaps every `every` until `stop`, counting what it ended in `ended`. A database
    /// that is down (restarted by the run) is tried again at the next turn.
    pub async fn run(self, every: Duration, ended: Arc<AtomicU64>, stop: CancellationToken) {
        let mut ticks = tokio::time::interval(every);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = ticks.tick() => {}
                () = stop.cancelled() => return,
            }
            if let Ok(n) = self.reap().await {
                ended.fetch_add(n, Ordering::Relaxed);
            }
        }
    }
}
