//! Wakes idle workers: one background task per store LISTENs on [`WAKE_CHANNEL`] and
//! forwards every notification into a broadcast channel that `subscribe` hands out.
//! A wake is sent only if, and only when, the write that made a task due has committed:
//! writes inside a transaction (the caller's, or a change's) call `pg_notify` in it, and
//! PostgreSQL delivers at commit; the store's own autocommitted submit hands its queues to
//! [`Notifier`] once the statement has returned. Delivery is best effort: workers poll as
//! well.

use crate::WAKE_CHANNEL;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable_store::Wake;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;

/// How long `subscribe` waits for LISTEN to be in place before returning anyway.
const LISTEN_WAIT: Duration = Duration::from_secs(2);
const RETRY_MIN: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(5);

pub struct Waker {
    sender: broadcast::Sender<Wake>,
    options: PgConnectOptions,
    listener: Mutex<Option<Listener>>,
}

#[derive(Debug)]
struct Listener {
    task: JoinHandle<()>,
    /// `true` while LISTEN is in place.
    ready: watch::Receiver<bool>,
}

impl std::fmt::Debug for Waker {
    /// Leaves out the connect options: their Debug shows the password.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Waker")
            .field("receivers", &self.sender.receiver_count())
            .field("listener", &self.listener)
            .finish_non_exhaustive()
    }
}

impl Waker {
    pub fn new(options: PgConnectOptions) -> Self {
        let (sender, _) = broadcast::channel(1024);
        Waker {
            sender,
            options,
            listener: Mutex::new(None),
        }
    }

    pub fn send_local(&self, queue: &str) {
        // No receivers is fine: nobody is idle in this process.
        let _ = self.sender.send(Wake {
            queue: queue.to_owned(),
        });
    }

    /// A new receiver; starts the listener on first use (and again if it was stopped).
    pub async fn subscribe(&self) -> broadcast::Receiver<Wake> {
        let rx = self.sender.subscribe();
        let mut ready = {
            let mut guard = self.listener.lock().unwrap_or_else(|e| e.into_inner());
            match guard.as_ref() {
                Some(l) if !l.task.is_finished() => l.ready.clone(),
                _ => {
                    let (ready_tx, ready_rx) = watch::channel(false);
                    let task =
                        tokio::spawn(listen(self.options.clone(), self.sender.clone(), ready_tx));
                    *guard = Some(Listener {
                        task,
                        ready: ready_rx.clone(),
                    });
                    ready_rx
                }
            }
        };
        // Wait (briefly) until LISTEN is in place, so a write committed after subscribe
        // returns is heard. If the server is unreachable, polling still finds the work.
        let _ = tokio::time::timeout(LISTEN_WAIT, ready.wait_for(|listening| *listening)).await;
        rx
    }

    pub fn stop(&self) {
        if let Some(l) = self
            .listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            l.task.abort();
        }
    }
}

impl Drop for Waker {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Runs until aborted: listens, and after any failure reconnects with a growing pause.
/// Losing a connection it listened on is a WARN line, and listening again after that an
/// INFO line; the tries between are DEBUG, so a database that stays away for an hour
/// costs two lines here, not one every few seconds.
async fn listen(
    options: PgConnectOptions,
    sender: broadcast::Sender<Wake>,
    ready: watch::Sender<bool>,
) {
    let mut pause = RETRY_MIN;
    let mut lost = false;
    loop {
        let err = listen_once(&options, &sender, &ready, &mut pause, &mut lost).await;
        if ready.send_replace(false) {
            lost = true;
            tracing::warn!(error = %err, "tasktable: wake listener lost its connection; workers poll until it is back");
        } else {
            tracing::debug!(error = %err, retry_in = ?pause, "tasktable: wake listener cannot connect");
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY_MAX);
    }
}

/// Listens until an error the listener cannot recover from by itself.
async fn listen_once(
    options: &PgConnectOptions,
    sender: &broadcast::Sender<Wake>,
    ready: &watch::Sender<bool>,
    pause: &mut Duration,
    lost: &mut bool,
) -> sqlx::Error {
    // A pool of one, used only so PgListener can reconnect (and re-LISTEN) by itself when
    // the connection drops; notifications sent while it is down are lost, which polling
    // covers.
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .max_lifetime(None)
        .idle_timeout(None)
        .connect_lazy_with(options.clone());
    let mut listener = match PgListener::connect_with(&pool).await {
        Ok(l) => l,
        Err(e) => return e,
    };
    if let Err(e) = listener.listen(WAKE_CHANNEL).await {
        return e;
    }
    if std::mem::take(lost) {
        tracing::info!("tasktable: wake listener listening again");
    }
    ready.send_replace(true);
    *pause = RETRY_MIN;
    loop {
        match listener.recv().await {
            Ok(n) => {
                let _ = sender.send(Wake {
                    queue: n.payload().to_owned(),
                });
            }
            Err(e) => return e,
        }
    }
}

/// One statement, one transaction: PostgreSQL gives a notifying transaction an id and a
/// commit record, and a wake-up needs no durability, so this commit does not wait for the
/// WAL flush (`synchronous_commit` off for this transaction only).
const SEND: &str = "SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, q) \
                    FROM unnest($2::text[]) AS q";

/// Sends the wake-ups of committed submits, outside their transactions.
///
/// PostgreSQL commits transactions that notify one at a time: `NOTIFY` takes a lock at
/// commit that is held until the commit record is flushed, so submits that each notified
/// in their own statement could not share a WAL flush, and concurrent submitters queued
/// behind one another (docs/benchmarks.md, section 23). Here a committed submit only adds
/// its queues to a set; one flush at a time sends the whole set in one statement, whose
/// transaction writes only its commit record and does not wait for it to reach the disk.
/// Submits that commit while a flush is on its way are sent by the next, so under load
/// many submits share one notification, and a lone submit's goes out at once. A flush
/// task exists only while there is something to send, and holds the pool only meanwhile;
/// `SqlStore::close` waits for it ([`Notifier::settle`]).
#[derive(Debug, Default)]
pub struct Notifier {
    state: Mutex<Pending>,
    /// Signalled whenever a flush ends.
    idle: tokio::sync::Notify,
}

#[derive(Debug, Default)]
struct Pending {
    queues: BTreeSet<String>,
    flushing: bool,
}

/// While a flush runs. Should the flush task end without emptying the set (its runtime
/// shut down, or it panicked), dropping this clears the flag, so the next committed
/// submit starts a flush again instead of finding one forever running.
struct Flushing<'a> {
    notifier: &'a Notifier,
    armed: bool,
}

impl Drop for Flushing<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.notifier.lock().flushing = false;
        }
        self.notifier.idle.notify_waiters();
    }
}

impl Notifier {
    fn lock(&self) -> std::sync::MutexGuard<'_, Pending> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Queues wake-ups for `queues`, whose tasks have committed, and starts a flush unless
    /// one is running (it takes these along before it ends).
    pub fn committed(self: &Arc<Self>, pool: &PgPool, queues: &[String]) {
        if queues.is_empty() {
            return;
        }
        {
            let mut s = self.lock();
            s.queues.extend(queues.iter().cloned());
            if s.flushing {
                return;
            }
            s.flushing = true;
        }
        let me = self.clone();
        let pool = pool.clone();
        tokio::spawn(async move { me.flush(pool).await });
    }

    /// Sends what is pending until nothing is; the flag is cleared under the same lock
    /// that finds the set empty, so no queue is left behind without a flush to send it.
    async fn flush(&self, pool: PgPool) {
        let mut guard = Flushing {
            notifier: self,
            armed: true,
        };
        loop {
            let queues: Vec<String> = {
                let mut s = self.lock();
                if s.queues.is_empty() {
                    s.flushing = false;
                    guard.armed = false;
                    return;
                }
                std::mem::take(&mut s.queues).into_iter().collect()
            };
            let sent = sqlx::query(SEND)
                .bind(WAKE_CHANNEL)
                .bind(&queues)
                .execute(&pool)
                .await;
            // Best effort: the workers of these queues find the tasks when they poll. An
            // unreachable database is told by the store's calls, once.
            match sent {
                Err(e) if !tasktable_sqlx::is_unreachable(&e) => {
                    tracing::warn!(error = %e, "tasktable: could not send wake-ups");
                }
                _ => {}
            }
        }
    }

    /// Waits until no flush is running, so the wake-ups of every submit that has
    /// returned have been sent.
    pub async fn settle(&self) {
        loop {
            let mut ended = std::pin::pin!(self.idle.notified());
            ended.as_mut().enable();
            if !self.lock().flushing {
                return;
            }
            ended.await;
        }
    }
}
