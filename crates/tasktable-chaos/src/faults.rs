//! Injecting one fault of each kind, and keeping the run able to recover: a killed or
//! stopped worker is replaced at once, a frozen one is thawed by a timer, and at least
//! one in-process worker (a rescuer) is always left running.

use crate::check::Window;
use crate::database::Database;
use crate::fleet::Fleet;
use crate::journal::now_ms;
use crate::plan::{FaultKind, Faults};
use crate::processes::Role;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// One fault as it happened, for the summary and for explaining lost leases.
#[derive(Debug, Clone, Serialize)]
pub struct Injected {
    /// Seconds into the run.
    pub at_s: f64,
    pub kind: &'static str,
    /// The process it hit; `None` for the database.
    pub target: Option<String>,
    /// Wall-clock milliseconds from the fault's start to the end of its effect (a thaw, a
    /// replacement or a restart ready), to find it in the logs and journals.
    pub from_ms: i64,
    pub to_ms: i64,
    pub detail: String,
}

#[derive(Debug)]
pub struct Injector {
    pub fleet: Arc<Fleet>,
    pub faults: Faults,
    pub lease: Duration,
    pub rescue: Duration,
    pub started: Instant,
    /// Freeze only in-process workers (their effect writes are what a run may break).
    pub freeze_in_process_only: bool,
    pub injected: Vec<Injected>,
    /// When the database was down, for the stuck check.
    pub outages: Vec<Window>,
}

impl Injector {
    /// Injects `kind`; `Ok(false)` when nothing fitted (no target that may be hit now).
    pub async fn inject(&mut self, kind: FaultKind, db: &mut Database) -> Result<bool, String> {
        let fleet = self.fleet.clone();
        let from_ms = now_ms();
        let mut until_ms = None;
        let (target, detail) = match kind {
            FaultKind::KillWorker => {
                let Some(id) = self.pick(&fleet.procs.active(Role::InProcess)) else {
                    return Ok(false);
                };
                fleet.procs.kill(&id).await;
                let detail = format!("{id}, replaced by {}", fleet.start_worker()?);
                (Some(id), detail)
            }
            FaultKind::KillPullWorker => {
                let Some(id) = self.pick(&fleet.procs.active(Role::Pull)) else {
                    return Ok(false);
                };
                fleet.procs.kill(&id).await;
                let detail = format!("{id}, replaced by {}", fleet.start_pull_worker()?);
                (Some(id), detail)
            }
            FaultKind::StopWorker => {
                let mut ids = fleet.procs.active(Role::InProcess);
                ids.extend(fleet.procs.active(Role::Pull));
                let Some(id) = self.pick(&ids) else {
                    return Ok(false);
                };
                fleet.procs.terminate(&id, Duration::from_secs(10)).await;
                let new = if id.starts_with("pull") {
                    fleet.start_pull_worker()?
                } else {
                    fleet.start_worker()?
                };
                (
                    Some(id.clone()),
                    format!("{id} (SIGTERM), replaced by {new}"),
                )
            }
            FaultKind::FreezeWorker => {
                let in_process = fleet.procs.active(Role::InProcess);
                let mut ids = if self.freeze_in_process_only {
                    Vec::new()
                } else {
                    fleet.procs.active(Role::Pull)
                };
                // Keep one in-process worker, and its rescuer, running.
                if in_process.len() > 1 {
                    ids.extend(in_process);
                }
                let Some(id) = self.pick(&ids) else {
                    return Ok(false);
                };
                let length = self.faults.freeze_for(self.lease, self.rescue);
                if !fleet.procs.freeze(&id) {
                    return Ok(false);
                }
                let thawing = fleet.clone();
                let thawed = id.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(length).await;
                    thawing.procs.thaw(&thawed);
                });
                until_ms = Some(from_ms + length.as_millis() as i64);
                let detail = format!("{id} for {:.1} s", length.as_secs_f64());
                (Some(id), detail)
            }
            FaultKind::RestartDatabase => {
                if !db.restartable() {
                    return Ok(false);
                }
                let mode = self.faults.stop_mode();
                let down = self.faults.downtime();
                let began = Instant::now();
                db.stop(mode).await?;
                tokio::time::sleep(down).await;
                db.start_again().await?;
                self.outages.push(Window {
                    from_ms,
                    to_ms: now_ms(),
                });
                let detail = format!(
                    "{mode:?} stop, down {:.1} s in all",
                    began.elapsed().as_secs_f64()
                );
                (None, detail)
            }
            FaultKind::KillApi => {
                let Some(id) = fleet.procs.active(Role::Api).pop() else {
                    return Ok(false);
                };
                fleet.procs.kill(&id).await;
                let detail = format!("{id}, restarted as {}", fleet.start_api().await?);
                (Some(id), detail)
            }
        };
        let at_s = self.started.elapsed().as_secs_f64();
        eprintln!("[{at_s:6.1} s] {}: {detail}", kind.name());
        self.injected.push(Injected {
            at_s,
            kind: kind.name(),
            target,
            from_ms,
            to_ms: until_ms.unwrap_or_else(now_ms),
            detail,
        });
        Ok(true)
    }

    fn pick(&mut self, ids: &[String]) -> Option<String> {
        self.faults.pick(ids).cloned()
    }

    pub fn counts(&self) -> BTreeMap<&'static str, usize> {
        let mut counts = BTreeMap::new();
        for i in &self.injected {
            *counts.entry(i.kind).or_default() += 1;
        }
        counts
    }
}
