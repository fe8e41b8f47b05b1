//! Metrics from the `tasktable` binary as people run it: `serve`'s `/metrics` counts what
//! its in-process worker ran and is guarded by the API's tokens; `worker
//! --metrics-listen` serves its own counts without a token. Each process has a SQLite
//! file of its own, so the counts are exact.

mod common;

use common::{BIN, ENV};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const ADMIN: &str = "admin-token-of-the-metrics-tests";
const READER: &str = "reader-token-of-the-metrics-tests";

/// A child process that is killed when the test ends, however it ends.
struct Process {
    /// `None` once `stop` has taken it to wait for its exit.
    child: Option<Child>,
    log: std::path::PathBuf,
}

impl Process {
    /// Starts `tasktable ARGS` and returns it with the first line it printed on stdout.
    fn start(args: &[&str], env: &[(&str, &str)], log: &Path) -> (Process, String) {
        let mut cmd = Command::new(BIN);
        cmd.args(args);
        for var in ENV {
            cmd.env_remove(var);
        }
        let mut child = cmd
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).expect("log file"))
            .spawn()
            .expect("start tasktable");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let process = Process {
            child: Some(child),
            log: log.to_owned(),
        };
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(line) if !line.is_empty() => {
                let line = line.trim_end().to_owned();
                (process, line)
            }
            other => panic!(
                "tasktable {args:?} printed nothing ({other:?}); log:\n{}",
                process.log_text()
            ),
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends SIGTERM and waits for a clean exit.
    fn stop(mut self) {
        use nix::sys::signal::{kill, Signal};
        use nix::unistd::Pid;
        let mut child = self.child.take().expect("running");
        let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
        kill(pid, Signal::SIGTERM).expect("send SIGTERM");
        // Wait for the exit on a thread of its own, so the test can give up after 30 s.
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait());
        });
        match rx.recv_timeout(Duration::from_secs(30)) {
            Ok(status) => {
                let status = status.expect("wait");
                assert!(status.success(), "{status:?}\n{}", self.log_text());
            }
            Err(_) => {
                let _ = kill(pid, Signal::SIGKILL);
                panic!("no exit after SIGTERM\n{}", self.log_text());
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        if std::thread::panicking() {
            eprintln!("--- log ---\n{}", self.log_text());
        }
    }
}

/// `tasktable serve` on a free loopback port over a SQLite file in `dir`; returns its
/// base URL.
fn serve(dir: &Path, args: &[&str]) -> (Process, String) {
    let db = format!("sqlite://{}", dir.join("tasktable.db").display());
    let tokens = format!("admin:{ADMIN},reader:{READER}");
    let mut all = vec!["serve", "--listen", "127.0.0.1:0", "--database-url", &db];
    all.extend_from_slice(args);
    let (process, line) = Process::start(
        &all,
        &[("TASKTABLE_TOKENS", &tokens)],
        &dir.join("serve.log"),
    );
    let url = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    (process, url)
}

async fn submit_exec(http: &reqwest::Client, base: &str) -> i64 {
    let resp = http
        .post(format!("{base}/api/v1/tasks"))
        .bearer_auth(ADMIN)
        .json(&json!({"kind": "exec", "payload": {"command": ["cat"], "stdin": "hi"}}))
        .send()
        .await
        .expect("submit");
    assert!(resp.status().is_success(), "{}", resp.status());
    let body: Value = resp.json().await.unwrap();
    body["id"].as_i64().expect("id")
}

/// Scrapes `url` until `done` holds for the text, within a bounded time: the worker
/// counts an attempt just after the database recorded it, so the task's state alone
/// does not say the counters are up to date.
async fn scrape_until(
    http: &reqwest::Client,
    url: &str,
    token: Option<&str>,
    done: impl Fn(&str) -> bool,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let mut req = http.get(url);
        if let Some(token) = token {
            req = req.bearer_auth(token);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status(), 200);
        assert!(resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain; version=0.0.4"));
        let text = resp.text().await.unwrap();
        if done(&text) {
            return text;
        }
        assert!(Instant::now() < deadline, "metrics never got there: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

const ATTEMPTS: &str =
    r#"tasktable_attempts_total{queue="default",kind="exec",outcome="succeeded"}"#;
const RUNNING: &str = r#"tasktable_worker_running_tasks{queue="default"}"#;

fn one_attempt_done(text: &str) -> bool {
    sample(text, ATTEMPTS) == Some(1.0) && sample(text, RUNNING) == Some(0.0)
}

/// The value of the sample written exactly as `series` (name and labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().expect("a number"))
    })
}

#[tokio::test]
async fn serve_exposes_what_its_worker_ran_to_readers_only() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(dir.path(), &["--exec-allow", "cat"]);
    let http = reqwest::Client::new();
    submit_exec(&http, &base).await;
    let url = format!("{base}/metrics");
    let text = scrape_until(&http, &url, Some(READER), one_attempt_done).await;
    let claimed = r#"tasktable_tasks_claimed_total{queue="default",kind="exec"}"#;
    assert_eq!(sample(&text, claimed), Some(1.0), "{text}");
    let succeeded = r#"tasktable_tasks{queue="default",state="succeeded"}"#;
    assert_eq!(sample(&text, succeeded), Some(1.0), "{text}");

    let refused = http.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(refused.status(), 401);
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "unauthorized");
    server.stop();
}

#[tokio::test]
async fn the_worker_command_serves_its_own_metrics_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (server, base) = serve(dir.path(), &["--workers", "0"]);
    let http = reqwest::Client::new();
    submit_exec(&http, &base).await;

    let db = format!("sqlite://{}", dir.path().join("tasktable.db").display());
    let (worker, line) = Process::start(
        &[
            "worker",
            "--database-url",
            &db,
            "--exec-allow",
            "cat",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        &[],
        &dir.path().join("worker.log"),
    );
    let url = line
        .strip_prefix("metrics on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_owned();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/metrics"));

    // No token: this listener has no authentication.
    let text = scrape_until(&http, &url, None, one_attempt_done).await;
    let claimed = r#"tasktable_tasks_claimed_total{queue="default",kind="exec"}"#;
    assert_eq!(sample(&text, claimed), Some(1.0), "{text}");
    assert!(
        !text.contains("tasktable_tasks{"),
        "the database gauges belong to serve: {text}"
    );
    worker.stop();
    server.stop();
}
