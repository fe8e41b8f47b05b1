//! Looks at the running tasks once a second for the whole run and records, on the
//! database's clock, how long ago each expired lease ran out, and whether the database
//! took a write just before (a heartbeat). The "nothing stuck" check reads these samples
//! afterwards. A sample the database cannot answer (it is restarting) is recorded as
//! unwritable with no tasks.

use crate::behaviour::QUEUE;
use crate::effects::Effects;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tasktable::store::ListParams;
use tasktable::{Store, TaskFilter, TaskState};
use tokio_util::sync::CancellationToken;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sample {
    /// When the sample was taken: the database's clock, on the same host as the run.
    pub at_ms: i64,
    /// Whether the database took the heartbeat write within a second or two. It does not
    /// while its server is down, or (SQLite) while a frozen process holds the write lock.
    pub writable: bool,
    /// Running tasks whose lease had expired.
    pub expired: Vec<Expired>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expired {
    pub task: i64,
    /// How long ago the lease ran out (database clock), in ms.
    pub ago_ms: i64,
    /// The worker whose lease it was.
    pub worker: Option<String>,
}

pub type Samples = Arc<Mutex<Vec<Sample>>>;

pub async fn run(
    store: Arc<dyn Store>,
    heartbeat: Effects,
    every: Duration,
    samples: Samples,
    stop: CancellationToken,
) {
    loop {
        let beat = tokio::time::timeout(every * 2, heartbeat.beat()).await;
        let writable = matches!(beat, Ok(Ok(())));
        // Stamped with the database's now that the ages were measured against: a call
        // may wait a while for its connection after an outage.
        let (at_ms, expired) = match tokio::time::timeout(every * 5, expired(store.as_ref())).await
        {
            Ok(Ok(measured)) => measured,
            _ => (crate::journal::now_ms(), Vec::new()),
        };
        let sample = Sample {
            at_ms,
            writable,
            expired,
        };
        samples.lock().expect("samples").push(sample);
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(every) => {}
        }
    }
}

/// The database's now (ms) and the running tasks whose lease had expired by then.
async fn expired(store: &dyn Store) -> tasktable::StoreResult<(i64, Vec<Expired>)> {
    let filter = TaskFilter::default().queue(QUEUE).state(TaskState::Running);
    let mut expired = Vec::new();
    let mut after = None;
    let now = store.db_now().await?;
    loop {
        let page = store
            .task_list(ListParams {
                filter: filter.clone(),
                after,
                limit: 1000,
                light: true,
            })
            .await?;
        for task in &page.tasks {
            if let Some(expires) = task.lease_expires_at {
                let ago = (now - expires).num_milliseconds();
                if ago > 0 {
                    expired.push(Expired {
                        task: task.id,
                        ago_ms: ago,
                        worker: task.worker_id.clone(),
                    });
                }
            }
        }
        match page.next {
            Some(next) => after = Some(next),
            None => return Ok((now.timestamp_millis(), expired)),
        }
    }
}
