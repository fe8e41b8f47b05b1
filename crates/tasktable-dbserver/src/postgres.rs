//! A throwaway PostgreSQL server: `initdb` into the run's directory, `postgres` on a
//! free port with a socket directory of its own.

use super::{on_path, Server};
use nix::unistd::User;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::process::Command;

pub(super) async fn init(dir: &Path, port: u16) -> Result<Server, String> {
    let bin = postgres_bin_dir()?;
    let user = server_user("postgres")?;
    let base = dir.join("postgres");
    let (data, sock) = (base.join("data"), base.join("sock"));
    std::fs::create_dir_all(&sock).map_err(|e| e.to_string())?;
    if let Some(user) = &user {
        for path in [&base, &sock] {
            std::os::unix::fs::chown(path, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
                .map_err(|e| e.to_string())?;
        }
    }
    let mut initdb = Command::new(bin.join("initdb"));
    initdb
        .args([
            "-U",
            "postgres",
            "-A",
            "trust",
            "-E",
            "UTF8",
            "--no-sync",
            "-D",
        ])
        .arg(&data)
        .current_dir(&base)
        .stdin(Stdio::null());
    if let Some(user) = &user {
        initdb.uid(user.uid.as_raw()).gid(user.gid.as_raw());
    }
    let out = initdb.output().await.map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let args = [
        "-D".into(),
        data.display().to_string(),
        "-p".into(),
        port.to_string(),
        "-k".into(),
        sock.display().to_string(),
        "-c".into(),
        "listen_addresses=127.0.0.1".into(),
        "-c".into(),
        "max_connections=300".into(),
    ];
    Ok(Server {
        program: bin.join("postgres"),
        args: args.to_vec(),
        user,
        log: base.join("server.log"),
        child: None,
    })
}

/// The newest `/usr/lib/postgresql/*/bin` with `initdb`, or the directory of `initdb` on
/// the PATH.
fn postgres_bin_dir() -> Result<PathBuf, String> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((version, bin))
        })
        .collect();
    versions.sort();
    if let Some((_, bin)) = versions.pop() {
        return Ok(bin);
    }
    on_path("initdb")
        .and_then(|p| p.parent().map(Path::to_path_buf))
        .ok_or_else(|| "no PostgreSQL server binaries (initdb, postgres) found".into())
}

/// The user a server must run as: PostgreSQL's `initdb` refuses root, so as root the
/// server runs as `postgres`.
fn server_user(name: &str) -> Result<Option<User>, String> {
    if !nix::unistd::geteuid().is_root() {
        return Ok(None);
    }
    User::from_name(name)
        .map_err(|e| e.to_string())?
        .map(Some)
        .ok_or_else(|| format!("running as root needs a user {name:?} to run the server as"))
}
