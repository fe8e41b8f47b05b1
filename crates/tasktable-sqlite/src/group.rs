//! Group commit: the writes of one process that are waiting at the same moment share one
//! transaction, so one `COMMIT` (one sync of the WAL) makes all of them durable.
//!
//! SQLite writes one transaction at a time, and a commit costs a sync whatever it holds.
//! The hot writes (submit, claim, renew, checkpoint, finish) go to the group writer, a
//! task that takes its turn at the writer connection for every write queued at that
//! moment: each runs inside a `SAVEPOINT`, and one `COMMIT` ends them all. A write that
//! fails is rolled back to its savepoint and answered with its own error; the others
//! still commit. No caller hears of success before the `COMMIT` that holds its write has
//! returned, so a grouped write is exactly as durable as one committed alone. A lone
//! write is not delayed: the writer never waits for company, it only takes what queued
//! while the previous group was being written.

use crate::db;
use futures::future::BoxFuture;
use futures::FutureExt;
use sqlx::{Executor, SqliteConnection, SqlitePool};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};
use tasktable_store::{StoreError, StoreResult};
use tokio::sync::{mpsc, oneshot};

/// Most writes in one transaction: bounds how long the first of them waits for the rest.
pub(crate) const MAX_GROUP: usize = 64;

type Reply<T> = Arc<Mutex<Option<oneshot::Sender<StoreResult<T>>>>>;

type Run = Box<dyn for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, Ran> + Send>;

/// A queued write.
pub(crate) struct Job {
    /// Runs the write on the writer connection, inside the group's transaction.
    run: Run,
    /// Answers the caller of a write that never ran.
    refuse: Box<dyn FnOnce(String) + Send>,
}

/// A write that ran: whether its changes are to be kept, and how to answer its caller once
/// the group's end is known (`Some(why)`: the transaction did not commit).
struct Ran {
    ok: bool,
    answer: Box<dyn FnOnce(Option<String>) + Send>,
}

impl Job {
    /// Wraps a write; the receiver yields its result once the transaction holding it has
    /// committed, or the error that kept it from committing.
    pub(crate) fn new<T, F>(write: F) -> (Job, oneshot::Receiver<StoreResult<T>>)
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> BoxFuture<'c, StoreResult<T>>
            + Send
            + 'static,
    {
        let (tx, rx) = oneshot::channel();
        let reply: Reply<T> = Arc::new(Mutex::new(Some(tx)));
        let refused = reply.clone();
        let run: Run = Box::new(move |conn| {
            Box::pin(async move {
                let result = write(conn).await;
                Ran {
                    ok: result.is_ok(),
                    answer: Box::new(move |failed| {
                        let answer = match (failed, result) {
                            (Some(why), Ok(_)) => Err(StoreError::Database(why.into())),
                            (_, result) => result,
                        };
                        send(&reply, answer);
                    }),
                }
            })
        });
        let refuse = Box::new(move |why: String| {
            send(&refused, Err(StoreError::Database(why.into())));
        });
        (Job { run, refuse }, rx)
    }
}

fn send<T>(reply: &Reply<T>, answer: StoreResult<T>) {
    let sender = reply.lock().map(|mut s| s.take()).unwrap_or_default();
    if let Some(sender) = sender {
        // A caller that stopped waiting does not undo a committed write.
        let _ = sender.send(answer);
    }
}

/// Starts the group writer on `pool` (the one-connection writer pool). It stops once every
/// sender is gone.
pub(crate) fn start(pool: SqlitePool) -> mpsc::UnboundedSender<Job> {
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(run(pool, rx));
    tx
}

async fn run(pool: SqlitePool, mut rx: mpsc::UnboundedReceiver<Job>) {
    while let Some(first) = rx.recv().await {
        let mut jobs = vec![first];
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(job) => jobs.push(job),
                Err(_) => break,
            }
        }
        write_group(&pool, jobs).await;
    }
}

async fn write_group(pool: &SqlitePool, jobs: Vec<Job>) {
    let mut conn = match pool.acquire().await {
        Ok(conn) => conn,
        Err(e) => return refuse_all(jobs, db(e).to_string()),
    };
    if let Err(e) = conn.execute("BEGIN IMMEDIATE").await {
        return refuse_all(jobs, db(e).to_string());
    }
    // A lone write needs no savepoint: its failure rolls the whole transaction back.
    let alone = jobs.len() == 1;
    let mut ran: Vec<Ran> = Vec::with_capacity(jobs.len());
    let mut broken: Option<String> = None;
    let mut jobs = jobs.into_iter();
    for job in jobs.by_ref() {
        if !alone {
            if let Err(e) = conn.execute("SAVEPOINT tasktable_group").await {
                let why = db(e).to_string();
                (job.refuse)(why.clone());
                broken = Some(why);
                break;
            }
        }
        // A write that panics fails alone, as one that errs does: the writer goes on, and
        // its transaction is ended below rather than left open on the pool's connection.
        let Job { run, refuse } = job;
        let r = match AssertUnwindSafe(run(&mut conn)).catch_unwind().await {
            Ok(r) => r,
            Err(_) => {
                refuse("the write panicked".to_owned());
                Ran {
                    ok: false,
                    answer: Box::new(|_| {}),
                }
            }
        };
        let end = if r.ok {
            "RELEASE tasktable_group"
        } else {
            "ROLLBACK TO tasktable_group; RELEASE tasktable_group"
        };
        ran.push(r);
        if !alone {
            if let Err(e) = conn.execute(end).await {
                // SQLite can have rolled the whole transaction back (a full disk, say):
                // then nothing this group wrote survives.
                broken = Some(db(e).to_string());
                break;
            }
        }
    }
    let keep = broken.is_none() && ran.iter().any(|r| r.ok);
    let failed = if keep {
        match conn.execute("COMMIT").await {
            Ok(_) => None,
            Err(e) => {
                let _ = conn.execute("ROLLBACK").await;
                Some(db(e).to_string())
            }
        }
    } else {
        let _ = conn.execute("ROLLBACK").await;
        broken
    };
    drop(conn);
    for r in ran {
        // A write that failed answers with its own error whatever became of the group.
        let why = if r.ok { failed.clone() } else { None };
        (r.answer)(why);
    }
    for job in jobs {
        let why = failed
            .clone()
            .unwrap_or_else(|| "the write transaction ended early".to_owned());
        (job.refuse)(why);
    }
}

fn refuse_all(jobs: Vec<Job>, why: String) {
    for job in jobs {
        (job.refuse)(why.clone());
    }
}

#[cfg(test)]
mod tests {
    use crate::SqliteStore;
    use futures::future::join_all;
    use serde_json::json;
    use sqlx::Executor;
    use tasktable_core::NewTask;
    use tasktable_store::{ListParams, Store, StoreError, SubmitParams};

    async fn store(dir: &tempfile::TempDir) -> SqliteStore {
        let path = dir.path().join("group.db");
        let store = SqliteStore::open(path.to_str().unwrap()).await.unwrap();
        store.migrate().await.unwrap();
        store
    }

    fn submit(n: i64) -> SubmitParams {
        SubmitParams {
            tasks: vec![NewTask::new("a", json!(n))],
            now: None,
        }
    }

    async fn payloads(store: &SqliteStore) -> Vec<i64> {
        let params = ListParams {
            limit: 100,
            ..ListParams::default()
        };
        let page = store.task_list(params).await.unwrap();
        let mut seen: Vec<i64> = page
            .tasks
            .iter()
            .map(|t| t.payload.as_i64().unwrap())
            .collect();
        seen.sort_unstable();
        seen
    }

    /// A write that inserts a task (payload 99) and then fails: none of it may survive.
    async fn half_write_then_fail(store: &SqliteStore) -> Result<(), StoreError> {
        store
            .db()
            .write(|conn| {
                Box::pin(async move {
                    crate::submit::insert(conn, &[NewTask::new("a", json!(99))], None).await?;
                    conn.execute("INSERT INTO no_such_table VALUES (1)")
                        .await
                        .map_err(crate::db)?;
                    Ok(())
                })
            })
            .await
    }

    // One runtime thread: the group writer cannot run until every write below is queued,
    // so they share one transaction.
    #[tokio::test(flavor = "current_thread")]
    async fn a_failed_write_in_a_group_is_undone_alone() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let submits = join_all((1..=5).map(|n| store.task_submit(submit(n))));
        let (submitted, failed) = tokio::join!(submits, half_write_then_fail(&store));
        assert!(
            matches!(&failed, Err(StoreError::Database(e)) if e.to_string().contains("no_such_table")),
            "{failed:?}"
        );
        for s in &submitted {
            assert_eq!(s.as_ref().unwrap().len(), 1);
        }
        assert_eq!(payloads(&store).await, vec![1, 2, 3, 4, 5]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn a_lone_failed_write_leaves_nothing_and_the_next_write_commits() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        assert!(half_write_then_fail(&store).await.is_err());
        store.task_submit(submit(7)).await.unwrap();
        assert_eq!(payloads(&store).await, vec![7]);
    }

    #[tokio::test(flavor = "current_thread")]
    async fn grouped_writes_are_committed_before_they_are_answered() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let submitted = join_all((1..=20).map(|n| store.task_submit(submit(n)))).await;
        assert!(submitted.iter().all(|s| s.is_ok()));
        // A second store on the same file sees every answered write.
        let other = SqliteStore::open(dir.path().join("group.db").to_str().unwrap())
            .await
            .unwrap();
        assert_eq!(payloads(&other).await, (1..=20).collect::<Vec<_>>());
    }

    /// A write that inserts a task (payload 98) and then panics.
    async fn half_write_then_panic(store: &SqliteStore) -> Result<(), StoreError> {
        store
            .db()
            .write(|conn| {
                Box::pin(async move {
                    crate::submit::insert(conn, &[NewTask::new("a", json!(98))], None).await?;
                    panic!("a write that panics half way");
                })
            })
            .await
    }

    // A write that panics fails alone and is undone, the writes grouped with it commit,
    // and the writer goes on: its transaction was ended, not left open on the writer.
    #[tokio::test(flavor = "current_thread")]
    async fn a_write_that_panics_fails_alone_and_the_writer_goes_on() {
        let dir = tempfile::tempdir().unwrap();
        let store = store(&dir).await;
        let submits = join_all((1..=3).map(|n| store.task_submit(submit(n))));
        let (submitted, panicked) = tokio::join!(submits, half_write_then_panic(&store));
        assert!(
            matches!(&panicked, Err(StoreError::Database(e)) if e.to_string().contains("panicked")),
            "{panicked:?}"
        );
        assert!(submitted.iter().all(|s| s.is_ok()));
        assert!(half_write_then_panic(&store).await.is_err(), "alone too");
        store.task_submit(submit(4)).await.unwrap();
        assert_eq!(payloads(&store).await, vec![1, 2, 3, 4]);
    }
}
