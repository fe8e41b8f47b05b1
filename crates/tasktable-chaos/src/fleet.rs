//! Starting the run's processes: `tasktable serve` (the API, no workers of its own) on a
//! fixed port so pull workers find it again after a restart, in-process workers and pull
//! workers (this same binary in its worker roles), each with a fresh id and journal.

use crate::processes::{Processes, Role};
use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::Command;

#[derive(Debug, Clone)]
pub struct FleetConfig {
    /// The `tasktable` binary, for `serve`.
    pub tasktable: PathBuf,
    pub url: String,
    pub api_port: u16,
    pub journals: PathBuf,
    pub lease: Duration,
    /// `None`: in-process workers run no rescuer (only the API's, every 5 s).
    pub rescue: Option<Duration>,
    pub concurrency: usize,
    pub unfenced_effects: bool,
}

#[derive(Debug)]
pub struct Fleet {
    pub procs: Processes,
    config: FleetConfig,
    next: AtomicUsize,
}

impl Fleet {
    pub fn new(config: FleetConfig, procs: Processes) -> Fleet {
        Fleet {
            procs,
            config,
            next: AtomicUsize::new(1),
        }
    }

    pub fn base(&self) -> String {
        format!("http://127.0.0.1:{}", self.config.api_port)
    }

    fn new_id(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.next.fetch_add(1, Ordering::Relaxed))
    }

    fn own(&self, role: &str, id: &str) -> Result<Command, String> {
        let me = std::env::current_exe().map_err(|e| e.to_string())?;
        let mut cmd = Command::new(me);
        cmd.arg(role)
            .arg("--id")
            .arg(id)
            .arg("--journal")
            .arg(self.config.journals.join(format!("{id}.jsonl")))
            .arg("--lease-ms")
            .arg(self.config.lease.as_millis().to_string())
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1");
        Ok(cmd)
    }

    /// A new in-process worker; returns its id.
    pub fn start_worker(&self) -> Result<String, String> {
        let id = self.new_id("worker");
        let mut cmd = self.own("worker", &id)?;
        cmd.arg("--database-url")
            .arg(&self.config.url)
            .arg("--concurrency")
            .arg(self.config.concurrency.to_string())
            .arg("--rescue-ms")
            .arg(self.config.rescue.map_or(0, |d| d.as_millis()).to_string());
        if self.config.unfenced_effects {
            cmd.arg("--unfenced-effects");
        }
        self.procs.spawn(&id, Role::InProcess, cmd)?;
        Ok(id)
    }

    /// A new pull worker; returns its id.
    pub fn start_pull_worker(&self) -> Result<String, String> {
        let id = self.new_id("pull");
        let mut cmd = self.own("pull-worker", &id)?;
        cmd.arg("--server")
            .arg(self.base())
            .arg("--concurrency")
            .arg((self.config.concurrency / 2).max(1).to_string());
        self.procs.spawn(&id, Role::Pull, cmd)?;
        Ok(id)
    }

    /// Starts `tasktable serve` and waits for the line that says it listens. A port still
    /// held by the server just killed makes it exit; it is started again a few times.
    pub async fn start_api(&self) -> Result<String, String> {
        let mut tries = 0;
        loop {
            tries += 1;
            let id = self.new_id("api");
            let mut cmd = Command::new(&self.config.tasktable);
            cmd.args(["serve", "--no-migrate", "--workers", "0", "--database-url"])
                .arg(&self.config.url)
                .arg("--listen")
                .arg(format!("127.0.0.1:{}", self.config.api_port))
                .env("RUST_LOG", "info")
                .env("NO_COLOR", "1")
                .env_remove("TASKTABLE_TOKENS")
                .env_remove("TASKTABLE_TOKENS_FILE");
            let stdout = self.procs.spawn_reporting(&id, Role::Api, cmd)?;
            let mut lines = BufReader::new(stdout).lines();
            let first = tokio::time::timeout(Duration::from_secs(60), lines.next_line()).await;
            if let Ok(Ok(Some(line))) = &first {
                if line.starts_with("listening on") {
                    // Keep the pipe drained into the log for whatever else it prints.
                    let log = self.procs.log_path(&id);
                    tokio::spawn(async move {
                        let Ok(mut file) =
                            tokio::fs::OpenOptions::new().append(true).open(log).await
                        else {
                            return;
                        };
                        while let Ok(Some(line)) = lines.next_line().await {
                            let _ = file.write_all(format!("{line}\n").as_bytes()).await;
                        }
                    });
                    return Ok(id);
                }
            }
            self.procs.kill(&id).await;
            if tries >= 5 {
                let log = std::fs::read_to_string(self.procs.log_path(&id)).unwrap_or_default();
                return Err(format!(
                    "tasktable serve did not start ({first:?}); its log:\n{log}"
                ));
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }
}
