//! A throwaway MariaDB server: `mariadb-install-db` into the run's directory, `mariadbd`
//! on a free port and socket of its own, neither reading the machine's `my.cnf`.

use super::{on_path, Server};
use std::path::Path;
use std::process::Stdio;
use tokio::process::Command;

pub(super) async fn init(dir: &Path, port: u16) -> Result<Server, String> {
    let base = dir.join("mariadb");
    let data = base.join("data");
    std::fs::create_dir_all(&base).map_err(|e| e.to_string())?;
    let install = on_path("mariadb-install-db").ok_or("mariadb-install-db not found")?;
    let server = on_path("mariadbd")
        .or_else(|| on_path("mysqld"))
        .ok_or("mariadbd not found")?;
    let root = nix::unistd::geteuid().is_root();
    // --no-defaults first, so the machine's my.cnf (the shared server's port, socket and
    // data directory) is never read.
    let mut args = vec![
        "--no-defaults".to_owned(),
        format!("--datadir={}", data.display()),
    ];
    if root {
        args.push("--user=root".into());
    }
    let out = Command::new(install)
        .args(&args)
        .args(["--auth-root-authentication-method=normal", "--skip-test-db"])
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| format!("mariadb-install-db: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "mariadb-install-db failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let log = base.join("server.log");
    args.extend([
        format!("--port={port}"),
        "--bind-address=127.0.0.1".into(),
        format!("--socket={}", base.join("sock").display()),
        format!("--pid-file={}", base.join("pid").display()),
        format!("--log-error={}", log.display()),
        "--innodb-buffer-pool-size=64M".into(),
        "--max-connections=300".into(),
    ]);
    Ok(Server {
        program: server,
        args,
        user: None,
        log,
        child: None,
    })
}
