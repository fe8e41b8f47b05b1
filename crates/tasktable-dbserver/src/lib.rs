//! A run's own database: an SQLite file, or a throwaway PostgreSQL or MariaDB server
//! initialised in the run's directory on a free port, with the server's default settings,
//! which the run may stop and start again while workers and the API keep running.
//!
//! Owns: initialising, starting, stopping (cleanly, immediately or by a crash) and
//! killing such servers. Must not know: what runs against them (the fault run, the
//! benchmark). The shared servers the tests use are never touched.
//!
//! A server is killed when its value is dropped, so a run that fails or panics leaves no
//! server behind; the directory goes with the run's directory.

mod mariadb;
mod postgres;

use clap::ValueEnum;
use nix::sys::signal::{kill, Signal};
use nix::unistd::{Pid, User};
use sqlx::Connection;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::{Child, Command};
use tokio::time::Instant;

/// The name of the run's database (MariaDB) or file (SQLite).
const DATABASE: &str = "tasktable";

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// Several processes on one file.
    Sqlite,
    /// A throwaway PostgreSQL server.
    Postgres,
    /// A throwaway MariaDB server.
    #[value(alias = "mysql")]
    Mariadb,
}

/// How a restart stops the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StopMode {
    /// The server's own clean shutdown (PostgreSQL "fast", MariaDB SIGTERM).
    Clean,
    /// PostgreSQL "immediate": no checkpoint, recovery at the next start.
    Immediate,
    /// SIGKILL to the server and its children: a crash.
    Crash,
}

#[derive(Debug)]
pub struct Database {
    url: String,
    server: Option<Server>,
}

#[derive(Debug)]
struct Server {
    program: PathBuf,
    args: Vec<String>,
    /// The owner the server runs as, when this process is root.
    user: Option<User>,
    log: PathBuf,
    child: Option<Child>,
}

impl Database {
    /// Creates the database under `dir` and starts its server.
    pub async fn start(backend: Backend, dir: &Path) -> Result<Database, String> {
        let port = free_port()?;
        let (url, server) = match backend {
            Backend::Sqlite => {
                let file = dir.join(format!("{DATABASE}.db"));
                (format!("sqlite://{}", file.display()), None)
            }
            Backend::Postgres => {
                let url = format!("postgres://postgres@127.0.0.1:{port}/postgres");
                (url, Some(postgres::init(dir, port).await?))
            }
            Backend::Mariadb => {
                let url = format!("mysql://root@127.0.0.1:{port}/{DATABASE}");
                (url, Some(mariadb::init(dir, port).await?))
            }
        };
        let mut db = Database { url, server };
        db.start_again().await?;
        if backend == Backend::Mariadb {
            let root = db.url.trim_end_matches(&format!("/{DATABASE}")).to_owned();
            let mut conn = sqlx::MySqlConnection::connect(&root)
                .await
                .map_err(|e| format!("MariaDB: {e}"))?;
            sqlx::query(&format!(
                "CREATE DATABASE IF NOT EXISTS {DATABASE} CHARACTER SET utf8mb4"
            ))
            .execute(&mut conn)
            .await
            .map_err(|e| format!("MariaDB: {e}"))?;
        }
        Ok(db)
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    /// Whether there is a server to restart (SQLite has none).
    pub fn restartable(&self) -> bool {
        self.server.is_some()
    }

    /// Stops the server as `mode` says and waits until every one of its processes is gone.
    pub async fn stop(&mut self, mode: StopMode) -> Result<(), String> {
        let Some(server) = &mut self.server else {
            return Ok(());
        };
        let Some(mut child) = server.child.take() else {
            return Ok(());
        };
        let pid = Pid::from_raw(child.id().ok_or("the server already exited")? as i32);
        let children = children_of(pid);
        let signal = match (mode, server.program.ends_with("postgres")) {
            (StopMode::Clean, true) => Signal::SIGINT,
            (StopMode::Immediate, true) => Signal::SIGQUIT,
            (StopMode::Clean | StopMode::Immediate, false) => Signal::SIGTERM,
            (StopMode::Crash, _) => Signal::SIGKILL,
        };
        // The server first, so it cannot start new children once the old ones are gone.
        let _ = kill(pid, signal);
        if mode == StopMode::Crash {
            for c in &children {
                let _ = kill(*c, Signal::SIGKILL);
            }
        }
        if tokio::time::timeout(Duration::from_secs(60), child.wait())
            .await
            .is_err()
        {
            let _ = child.kill().await;
        }
        // A new PostgreSQL refuses the data directory while any old backend still holds
        // its shared memory; they give no signal when they go, so poll (bounded).
        let deadline = Instant::now() + Duration::from_secs(10);
        while children.iter().any(|c| kill(*c, None).is_ok()) {
            if Instant::now() > deadline {
                for c in &children {
                    let _ = kill(*c, Signal::SIGKILL);
                }
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }

    /// Starts the server (again) and waits until it accepts connections. A server that
    /// exits at once (PostgreSQL while a backend of the old one still lingers) is started
    /// again a few times.
    pub async fn start_again(&mut self) -> Result<(), String> {
        let Some(server) = &mut self.server else {
            return Ok(());
        };
        let mut tries = 0;
        loop {
            tries += 1;
            let child = server.spawn()?;
            match wait_ready(&self.url, child, &server.log).await {
                Ok(child) => {
                    server.child = Some(child);
                    return Ok(());
                }
                Err(Exited(why)) if tries < 5 => {
                    tracing::warn!(%why, "the database exited while starting; starting it again");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(Exited(why)) => return Err(why),
            }
        }
    }
}

impl Server {
    fn spawn(&self) -> Result<Child, String> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .map_err(|e| e.to_string())?;
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.args)
            .stdin(Stdio::null())
            .stdout(log.try_clone().map_err(|e| e.to_string())?)
            .stderr(log)
            .process_group(0);
        if let Some(user) = &self.user {
            cmd.uid(user.uid.as_raw()).gid(user.gid.as_raw());
        }
        cmd.spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.program.display()))
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(child) = &self.child {
            if let Some(pid) = child.id() {
                let pid = Pid::from_raw(pid as i32);
                let children = children_of(pid);
                let _ = kill(pid, Signal::SIGKILL);
                for c in children {
                    let _ = kill(c, Signal::SIGKILL);
                }
            }
        }
    }
}

/// Why a server did not come up.
struct Exited(String);

/// Polls until the server answers a query: a server gives no signal when it starts
/// accepting connections. Bounded; the error carries the end of the server's log.
async fn wait_ready(url: &str, mut child: Child, log: &Path) -> Result<Child, Exited> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let suffix = format!("/{DATABASE}");
    let root = url.trim_end_matches(&suffix);
    let log_tail = || {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let mut tail: Vec<&str> = text.lines().rev().take(20).collect();
        tail.reverse();
        tail.join("\n")
    };
    loop {
        let answered = if url.starts_with("postgres") {
            sqlx::PgConnection::connect(url).await.map(drop)
        } else {
            sqlx::MySqlConnection::connect(root).await.map(drop)
        };
        match answered {
            Ok(()) => return Ok(child),
            Err(e) if Instant::now() > deadline => {
                let _ = child.kill().await;
                return Err(Exited(format!(
                    "the database did not start: {e}; its log ends:\n{}",
                    log_tail()
                )));
            }
            Err(_) => {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(Exited(format!(
                        "the database exited ({status}) while starting; its log ends:\n{}",
                        log_tail()
                    )));
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

fn on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .chain([PathBuf::from("/usr/sbin")])
        .map(|dir| dir.join(program))
        .find(|p| p.is_file())
}

/// A temporary directory for a run, removed when dropped, which a server running as a
/// user of its own (PostgreSQL's, when this process is root) can reach inside.
pub fn run_dir(prefix: &str) -> Result<tempfile::TempDir, String> {
    let dir = tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|e| e.to_string())?;
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o711),
    )
    .map_err(|e| e.to_string())?;
    Ok(dir)
}

/// A port nothing listens on now.
pub fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    Ok(listener.local_addr().map_err(|e| e.to_string())?.port())
}

/// The processes whose parent is `parent` (PostgreSQL's backends put themselves in
/// process groups of their own, so the group of the server does not reach them).
fn children_of(parent: Pid) -> Vec<Pid> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| {
            let pid: i32 = e.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(e.path().join("stat")).ok()?;
            // The name is in parentheses and may hold anything; the parent follows the
            // state after the last ')'.
            let ppid: i32 = stat
                .rsplit_once(')')?
                .1
                .split_whitespace()
                .nth(1)?
                .parse()
                .ok()?;
            (ppid == parent.as_raw()).then_some(Pid::from_raw(pid))
        })
        .collect()
}
