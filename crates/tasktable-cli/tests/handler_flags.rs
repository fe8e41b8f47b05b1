//! The built-in handlers' flags as an operator uses them, on `tasktable worker` (`serve`
//! takes the same ones): bad values refused before anything starts, and a real worker
//! process applying them to real commands and real HTTP requests. Tasks go into the
//! worker's SQLite file through the library, which is also where their ends are read.

mod common;

use common::{BIN, ENV};
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tasktable::{Client, NewTask, Store, TaskState};

/// Values the worker holds in its environment that no command may see.
const WORKER_SECRET: &str = "worker-secret-token-of-the-flag-tests";

fn worker(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("worker").args(args);
    for var in ENV {
        cmd.env_remove(var);
    }
    cmd
}

#[test]
fn malformed_or_contradictory_handler_flags_are_usage_errors_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let db_file = dir.path().join("never.db");
    let db = format!("sqlite://{}", db_file.display());
    let refused = |args: &[&str], env: Option<(&str, &str)>, text: &str| {
        let out = worker(&["--database-url", &db])
            .args(args)
            .envs(env)
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?} {env:?}: {stderr}");
        assert!(stderr.contains(text), "{args:?}: {text:?} in {stderr}");
    };
    let cases: &[(&[&str], &str)] = &[
        (
            &["--http-allow-net", "10.0.0.1/8"],
            "did you mean 10.0.0.0/8",
        ),
        (&["--http-allow-net", "ten/8"], "is not a network"),
        (
            &["--http-allow-host", "127.0.0.1"],
            "is an address, not a host name",
        ),
        (
            &["--http-allow-host", "*.internal"],
            "wildcards are not supported",
        ),
        (&["--exec-allow-env", "GREETING"], "--exec-allow <PROGRAM>"),
        (
            &["--exec-allow-any", "--exec-allow-env", "X"],
            "cannot be used with",
        ),
        (
            &["--exec-allow-any", "--exec-allow-cwd", "/tmp"],
            "cannot be used with",
        ),
        (
            &["--exec-allow", "cat", "--exec-allow-env", "LD_PRELOAD"],
            "--exec-inherit-env LD_PRELOAD",
        ),
        (
            &["--exec-allow", "cat", "--exec-allow-env", "9LIVES"],
            "not an environment variable name",
        ),
        (
            &[
                "--exec-allow",
                "cat",
                "--exec-allow-cwd",
                "/nonexistent/dir",
            ],
            "/nonexistent/dir",
        ),
        (&["--exec-inherit-env", "HOME"], "--exec-allow-any"),
        (
            &["--exec-allow", "cat", "--exec-kill-grace", "soon"],
            "is not a duration",
        ),
    ];
    for (args, text) in cases {
        refused(args, None, text);
    }
    let env = ("TASKTABLE_HTTP_ALLOW_NET", "10.0.0.0/8,bogus");
    refused(&[], Some(env), "\"bogus\" is not a network");
    assert!(!db_file.exists(), "no database was opened");
}

/// A `tasktable worker` child process, killed when dropped; its log is printed when the
/// test fails.
struct WorkerProcess {
    child: Child,
    log: std::path::PathBuf,
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(&self.log).unwrap_or_default();
            eprintln!("--- worker log ---\n{log}");
        }
    }
}

/// An HTTP server on 127.0.0.1 that answers `ok`; returns its port.
async fn loopback_server() -> u16 {
    let app = axum::Router::new().route("/hook", axum::routing::get(|| async { "ok" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    port
}

/// Waits until every task in `ids` is finished. The worker is another process that tells
/// no one, so this polls the database, within a deadline.
async fn finished(store: &Arc<dyn Store>, ids: &[i64]) -> Vec<tasktable::Task> {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mut tasks = Vec::new();
        for id in ids {
            tasks.push(store.task_get(*id).await.unwrap().unwrap());
        }
        if tasks.iter().all(|t| t.state.is_finished()) {
            return tasks;
        }
        assert!(Instant::now() < deadline, "tasks not finished: {tasks:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn error_of(task: &tasktable::Task) -> &str {
    assert_eq!(task.state, TaskState::Failed, "{task:?}");
    task.last_error.as_deref().unwrap()
}

#[tokio::test]
async fn a_worker_applies_its_handler_flags_to_exec_and_http_tasks() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("tasks.db").display());
    let store = tasktable::connect(&db).await.unwrap();
    store.migrate().await.unwrap();
    let jobs = dir.path().join("jobs");
    std::fs::create_dir_all(jobs.join("sub")).unwrap();
    let port = loopback_server().await;

    let client = Client::new(store.clone());
    let exec = |payload: Value| NewTask::new("exec", payload).max_attempts(3);
    let http =
        |url: String| NewTask::new("http", json!({"url": url, "method": "GET"})).max_attempts(3);
    let tasks = [
        exec(json!({"command": ["env"], "env": {"GREETING": "hello"}, "cwd": jobs.join("sub")})),
        exec(json!({"command": ["env"], "env": {"BASH_ENV": "/tmp/evil.sh"}})),
        exec(json!({"command": ["env"], "cwd": dir.path()})),
        exec(json!({"command": ["cat"]})),
        http(format!("http://127.0.0.1:{port}/hook")),
        http(format!("http://127.0.0.2:{port}/hook")),
    ];
    let mut ids = Vec::new();
    for task in tasks {
        ids.push(client.submit(task).await.unwrap().id);
    }

    let log = dir.path().join("worker.log");
    let jobs_arg = jobs.to_str().unwrap();
    let args = [
        "--exec-allow",
        "env",
        "--exec-allow-env",
        "GREETING",
        "--exec-allow-cwd",
        jobs_arg,
        "--exec-inherit-env",
        "KEEP_ME",
        "--http-allow-net",
        "127.0.0.1",
    ];
    let child = worker(&args)
        .envs([
            ("DATABASE_URL", db.as_str()),
            ("TASKTABLE_TOKEN", WORKER_SECRET),
            ("KEEP_ME", "kept"),
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let _worker = WorkerProcess {
        child,
        log: log.clone(),
    };

    let [env_ok, bash_env, cwd_out, cat, http_ok, http_refused] = &finished(&store, &ids).await[..]
    else {
        panic!("six tasks")
    };
    assert_eq!(env_ok.state, TaskState::Succeeded, "{env_ok:?}");
    let seen = env_ok.result.as_ref().unwrap()["stdout"].as_str().unwrap();
    assert!(
        seen.contains("GREETING=[redacted]\n") && seen.contains("KEEP_ME=kept\n"),
        "{seen}"
    );
    for secret in [WORKER_SECRET, "DATABASE_URL", "TASKTABLE_TOKEN"] {
        assert!(
            !seen.contains(secret),
            "{secret} reached the command: {seen}"
        );
    }
    assert!(error_of(bash_env).contains("--exec-allow-env BASH_ENV"));
    assert!(error_of(cwd_out).contains("--exec-allow-cwd DIR"));
    assert!(error_of(cat).contains("--exec-allow cat"));
    assert_eq!(http_ok.result, Some(json!({"status": 200, "body": "ok"})));
    let error = error_of(http_refused);
    assert!(error.contains("refused to connect to 127.0.0.2"), "{error}");
    assert!(error.contains("--http-allow-net 127.0.0.2/32"), "{error}");
    for task in [bash_env, cwd_out, cat, http_refused] {
        assert_eq!(task.attempt, 1, "refusals are not retried: {task:?}");
    }
}
