//! The worker and API processes of a run: started in process groups of their own, with
//! their output in a log file each, and signalled by id. Whatever is still running when
//! the table is dropped is killed, so a failed run leaves nothing behind.
//!
//! A process is signalled through its group while its entry is in the table, and reaped
//! only when the entry is removed, so its pid cannot have been reused by then.

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;
use tokio::process::{Child, ChildStdout, Command};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// `tasktable-chaos worker`: tasktable's runtime in its own process.
    InProcess,
    /// `tasktable-chaos pull-worker`: the HTTP pull protocol.
    Pull,
    /// `tasktable serve`.
    Api,
}

#[derive(Debug)]
struct Managed {
    id: String,
    role: Role,
    child: Child,
    pgid: Pid,
    frozen: bool,
}

#[derive(Debug)]
pub struct Processes {
    running: Mutex<Vec<Managed>>,
    logs: PathBuf,
}

impl Processes {
    pub fn new(logs: &Path) -> Processes {
        Processes {
            running: Mutex::new(Vec::new()),
            logs: logs.to_path_buf(),
        }
    }

    pub fn log_path(&self, id: &str) -> PathBuf {
        self.logs.join(format!("{id}.log"))
    }

    pub fn spawn(&self, id: &str, role: Role, mut cmd: Command) -> Result<(), String> {
        let log = self.open_log(id)?;
        cmd.stdout(log.try_clone().map_err(|e| e.to_string())?);
        self.start(id, role, cmd, log).map(drop)
    }

    /// Like [`spawn`](Self::spawn), with standard output handed to the caller (for a
    /// process that says on it when it is ready).
    pub fn spawn_reporting(
        &self,
        id: &str,
        role: Role,
        mut cmd: Command,
    ) -> Result<ChildStdout, String> {
        let log = self.open_log(id)?;
        cmd.stdout(Stdio::piped());
        self.start(id, role, cmd, log)?
            .ok_or_else(|| format!("{id} has no standard output"))
    }

    fn open_log(&self, id: &str) -> Result<std::fs::File, String> {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log_path(id))
            .map_err(|e| e.to_string())
    }

    fn start(
        &self,
        id: &str,
        role: Role,
        mut cmd: Command,
        log: std::fs::File,
    ) -> Result<Option<ChildStdout>, String> {
        cmd.stdin(Stdio::null())
            .stderr(log)
            .process_group(0)
            .kill_on_drop(true);
        let mut child = cmd.spawn().map_err(|e| format!("cannot start {id}: {e}"))?;
        let pgid = Pid::from_raw(child.id().ok_or("the child has no pid")? as i32);
        let stdout = child.stdout.take();
        self.lock().push(Managed {
            id: id.to_owned(),
            role,
            child,
            pgid,
            frozen: false,
        });
        Ok(stdout)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Managed>> {
        self.running.lock().expect("process table")
    }

    /// Ids of the processes of `role` that are running and not frozen.
    pub fn active(&self, role: Role) -> Vec<String> {
        self.lock()
            .iter()
            .filter(|m| m.role == role && !m.frozen)
            .map(|m| m.id.clone())
            .collect()
    }

    pub fn any_frozen(&self) -> bool {
        self.lock().iter().any(|m| m.frozen)
    }

    /// SIGSTOP: the process stops mid-step, holding whatever it holds.
    pub fn freeze(&self, id: &str) -> bool {
        self.with(id, |m| {
            m.frozen = true;
            killpg(m.pgid, Signal::SIGSTOP).is_ok()
        })
        .unwrap_or(false)
    }

    pub fn thaw(&self, id: &str) {
        self.with(id, |m| {
            m.frozen = false;
            let _ = killpg(m.pgid, Signal::SIGCONT);
        });
    }

    pub fn thaw_all(&self) {
        for m in self.lock().iter_mut().filter(|m| m.frozen) {
            m.frozen = false;
            let _ = killpg(m.pgid, Signal::SIGCONT);
        }
    }

    fn with<T>(&self, id: &str, f: impl FnOnce(&mut Managed) -> T) -> Option<T> {
        self.lock().iter_mut().find(|m| m.id == id).map(f)
    }

    fn take(&self, id: &str) -> Option<Managed> {
        let mut running = self.lock();
        let i = running.iter().position(|m| m.id == id)?;
        Some(running.remove(i))
    }

    /// SIGKILL to the process's group, then waits for it.
    pub async fn kill(&self, id: &str) {
        if let Some(mut m) = self.take(id) {
            let _ = killpg(m.pgid, Signal::SIGKILL);
            let _ = m.child.wait().await;
        }
    }

    /// SIGTERM (and SIGCONT, should it be frozen), then SIGKILL after `grace`.
    pub async fn terminate(&self, id: &str, grace: Duration) {
        if let Some(mut m) = self.take(id) {
            let _ = killpg(m.pgid, Signal::SIGTERM);
            let _ = killpg(m.pgid, Signal::SIGCONT);
            if tokio::time::timeout(grace, m.child.wait()).await.is_err() {
                let _ = killpg(m.pgid, Signal::SIGKILL);
                let _ = m.child.wait().await;
            }
        }
    }

    /// Stops every process of `role` gracefully, all at once.
    pub async fn terminate_role(&self, role: Role, grace: Duration) {
        let ids: Vec<String> = self
            .lock()
            .iter()
            .filter(|m| m.role == role)
            .map(|m| m.id.clone())
            .collect();
        futures::future::join_all(ids.iter().map(|id| self.terminate(id, grace))).await;
    }

    /// Processes that exited without being told to, with how they ended. They leave the
    /// table, since their pids may be reused once reaped.
    pub fn exited_on_their_own(&self) -> Vec<String> {
        let mut running = self.lock();
        let mut exited = Vec::new();
        running.retain_mut(|m| match m.child.try_wait() {
            Ok(Some(status)) => {
                exited.push(format!("{} ({status})", m.id));
                false
            }
            _ => true,
        });
        exited
    }
}

impl Drop for Processes {
    fn drop(&mut self) {
        for m in self.lock().iter() {
            let _ = killpg(m.pgid, Signal::SIGKILL);
        }
    }
}
