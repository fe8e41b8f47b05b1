//! The `tasktable` binary, run the way people run it: `tasktable serve` as a child process
//! on a free loopback port with a SQLite database of its own (once on PostgreSQL and once
//! on MySQL), and every other command as a separate process against it.

mod common;

use common::{BIN, ENV};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const ADMIN: &str = "admin-token-of-the-cli-tests";
const READER: &str = "reader-token-of-the-cli-tests";

fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    for var in ENV {
        cmd.env_remove(var);
    }
    cmd
}

/// Waits for `child` to exit, failing the test after `limit`.
fn wait(child: &mut Child, limit: Duration) -> ExitStatus {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(status) = child.try_wait().expect("wait for child") {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "process did not exit within {limit:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn sigterm(child: &Child) {
    use nix::sys::signal::{kill, Signal};
    use nix::unistd::Pid;
    let pid = Pid::from_raw(i32::try_from(child.id()).expect("pid fits"));
    kill(pid, Signal::SIGTERM).expect("send SIGTERM");
}

/// A finished command.
#[derive(Debug)]
struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

impl Run {
    fn ok(self) -> Self {
        assert_eq!(self.code, 0, "command failed: {self:?}");
        self
    }

    fn json(&self) -> Value {
        assert_eq!(self.code, 0, "command failed: {self:?}");
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", self.stdout))
    }

    /// A failure with `code`, told in one line on stderr that contains `text`.
    fn fails(&self, code: i32, text: &str) {
        assert_eq!(self.code, code, "{self:?}");
        let stderr = self.stderr.trim();
        assert!(
            stderr.contains(text),
            "stderr should contain {text:?}: {self:?}"
        );
        assert_eq!(stderr.lines().count(), 1, "one line on stderr: {self:?}");
    }
}

fn finish(mut cmd: Command, stdin: Option<&str>) -> Run {
    cmd.stdin(if stdin.is_some() {
        Stdio::piped()
    } else {
        Stdio::null()
    });
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tasktable");
    if let Some(input) = stdin {
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(input.as_bytes())
            .expect("write stdin");
    }
    let out = child.wait_with_output().expect("run tasktable");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// A `tasktable serve` child process, killed when dropped. Its log is printed when the
/// test fails.
struct Server {
    child: Child,
    url: String,
    log: PathBuf,
    dir: tempfile::TempDir,
}

impl Server {
    /// Serves a fresh SQLite database with an admin and a reader token.
    fn start(args: &[&str]) -> Server {
        let tokens = format!("admin:{ADMIN},reader:{READER}");
        Server::start_with(args, &[("TASKTABLE_TOKENS", &tokens)])
    }

    /// Serves with exactly `args` and `env`: on a free loopback port and a SQLite file in
    /// the server's own directory unless `args` say otherwise.
    fn start_with(args: &[&str], env: &[(&str, &str)]) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = format!("sqlite://{}", dir.path().join("tasktable.db").display());
        let mut cmd = command(&["serve"]);
        if !args.contains(&"--listen") {
            cmd.args(["--listen", "127.0.0.1:0"]);
        }
        if !args.contains(&"--database-url") {
            cmd.args(["--database-url", &db]);
        }
        cmd.args(args).envs(env.iter().copied());
        let log = dir.path().join("serve.log");
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).expect("log file"))
            .spawn()
            .expect("start tasktable serve");
        let first_line = first_line(&mut child, &log);
        let url = first_line
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {first_line:?}"))
            .to_owned();
        let server = Server {
            child,
            url,
            log,
            dir,
        };
        server.wait_healthy();
        server
    }

    /// The raw HTTP/1.0 answer to `GET path`, with no client library in between.
    fn http_get(&self, path: &str) -> std::io::Result<String> {
        self.http("GET", path, &self.loopback_addr())
    }

    /// The address to connect to: a server on every interface is also on loopback.
    fn loopback_addr(&self) -> String {
        self.url
            .trim_start_matches("http://")
            .replace("0.0.0.0", "127.0.0.1")
    }

    /// The raw HTTP/1.0 answer to `METHOD path` sent with `Host: host` and, for a POST,
    /// an empty JSON object.
    fn http(&self, method: &str, path: &str, host: &str) -> std::io::Result<String> {
        let mut stream = TcpStream::connect(self.loopback_addr())?;
        let body = if method == "POST" { "{}" } else { "" };
        let request = format!(
            "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\n\r\n{body}",
            body.len()
        );
        stream.write_all(request.as_bytes())?;
        let mut text = String::new();
        stream.read_to_string(&mut text)?;
        Ok(text)
    }

    fn wait_healthy(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match self.http_get("/healthz") {
                Ok(text)
                    if text.starts_with("HTTP/1.0 200") || text.starts_with("HTTP/1.1 200") =>
                {
                    return
                }
                other => assert!(
                    Instant::now() < deadline,
                    "/healthz not ready: {other:?}\n{}",
                    self.log_text()
                ),
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    fn db_url(&self) -> String {
        format!(
            "sqlite://{}",
            self.dir.path().join("tasktable.db").display()
        )
    }

    /// `tasktable ARGS` against this server as admin.
    fn tt(&self, args: &[&str]) -> Run {
        self.tt_as(Some(ADMIN), args, None)
    }

    fn tt_as(&self, token: Option<&str>, args: &[&str], stdin: Option<&str>) -> Run {
        let mut cmd = command(args);
        cmd.env("TASKTABLE_SERVER", &self.url);
        if let Some(token) = token {
            cmd.env("TASKTABLE_TOKEN", token);
        }
        finish(cmd, stdin)
    }

    /// Submits a task and returns its id.
    fn submit(&self, args: &[&str]) -> i64 {
        let mut all = vec!["submit", "--json"];
        all.extend_from_slice(args);
        self.tt(&all).json()["id"].as_i64().expect("id")
    }

    fn task(&self, id: i64) -> Value {
        self.tt(&["show", &id.to_string(), "--json"]).json()["task"].clone()
    }

    fn state(&self, id: i64) -> String {
        self.task(id)["state"].as_str().expect("state").to_owned()
    }

    /// Polls `show --json` until the task is in `state`.
    fn wait_for_state(&self, id: i64, state: &str) -> Value {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let task = self.task(id);
            if task["state"] == state {
                return task;
            }
            assert!(
                Instant::now() < deadline,
                "task {id} never became {state}: {task}\n{}",
                self.log_text()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            eprintln!("--- serve log ---\n{}", self.log_text());
        }
    }
}

/// The first line the child prints on stdout, or a failure with its log.
fn first_line(child: &mut Child, log: &Path) -> String {
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(line) if !line.is_empty() => line.trim_end().to_owned(),
        other => {
            let _ = child.kill();
            panic!(
                "serve printed no address ({other:?}); log:\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            )
        }
    }
}

fn ids(list: &Value) -> Vec<i64> {
    list["tasks"]
        .as_array()
        .expect("tasks")
        .iter()
        .map(|t| t["id"].as_i64().expect("id"))
        .collect()
}

#[test]
fn submit_says_what_it_created_and_a_repeat_with_the_same_idempotency_key_creates_nothing() {
    let server = Server::start(&[]);
    let first = server
        .tt(&[
            "submit",
            "email",
            r#"{"to":"ada"}"#,
            "--idempotency-key",
            "welcome-ada",
            "--key",
            "order-7",
        ])
        .ok();
    assert!(first.stdout.starts_with("created task "), "{first:?}");
    assert!(first.stdout.contains("kind email"), "{first:?}");

    let again = server
        .tt(&[
            "submit",
            "email",
            r#"{"to":"bob"}"#,
            "--idempotency-key",
            "welcome-ada",
        ])
        .ok();
    assert!(again.stdout.contains("not created"), "{again:?}");
    assert!(again.stdout.contains("welcome-ada"), "{again:?}");
    let doc = server
        .tt(&[
            "submit",
            "email",
            "--idempotency-key",
            "welcome-ada",
            "--json",
        ])
        .json();
    assert_eq!(doc["created"], false);
    assert_eq!(
        doc["task"]["payload"],
        json!({"to": "ada"}),
        "the first task is kept as it was"
    );

    let held = server
        .tt(&[
            "submit",
            "report",
            "--json",
            "--queue",
            "mail",
            "--priority",
            "-3",
            "--delay",
            "10m",
            "--max-attempts",
            "2",
            "--timeout",
            "1m30s",
            "--held",
        ])
        .json();
    assert_eq!(held["created"], true);
    let task = &held["task"];
    assert_eq!(
        (
            &task["state"],
            &task["queue"],
            &task["priority"],
            &task["max_attempts"],
            &task["timeout_ms"]
        ),
        (
            &json!("held"),
            &json!("mail"),
            &json!(-3),
            &json!(2),
            &json!(90_000)
        )
    );
    let run_at: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(task["run_at"].clone()).unwrap();
    let created: chrono::DateTime<chrono::Utc> =
        serde_json::from_value(task["created_at"].clone()).unwrap();
    assert!(run_at - created >= chrono::Duration::minutes(9), "{task}");

    let from_stdin = server.tt_as(
        Some(ADMIN),
        &["submit", "email", "-", "--json"],
        Some(r#"{"from":"stdin"}"#),
    );
    assert_eq!(
        from_stdin.json()["task"]["payload"],
        json!({"from": "stdin"})
    );
}

#[test]
fn ls_filters_by_kind_state_and_key_and_follows_every_page_with_all() {
    let server = Server::start(&[]);
    let email_k1 = server.submit(&["email", "--key", "k1"]);
    for _ in 0..2 {
        server.submit(&["email"]);
    }
    for _ in 0..2 {
        server.submit(&["sms"]);
    }
    let held_sms = server.submit(&["sms", "--held"]);

    assert_eq!(
        ids(&server.tt(&["ls", "--kind", "sms", "--json"]).json()).len(),
        3
    );
    assert_eq!(
        ids(&server.tt(&["ls", "--key", "k1", "--json"]).json()),
        vec![email_k1]
    );
    assert_eq!(
        ids(&server.tt(&["ls", "--state", "held", "--json"]).json()),
        vec![held_sms]
    );
    let repeated = server.tt(&[
        "ls", "--kind", "sms", "--state", "held", "--state", "pending", "--json",
    ]);
    let commas = server.tt(&["ls", "--kind", "sms", "--state", "held,pending", "--json"]);
    assert_eq!(ids(&repeated.json()), ids(&commas.json()));
    assert_eq!(ids(&commas.json()).len(), 3);

    let page = server.tt(&["ls", "--limit", "2", "--json"]).json();
    assert_eq!(ids(&page).len(), 2);
    assert!(page["next"].is_i64(), "{page}");
    let all = server.tt(&["ls", "--all", "--limit", "2", "--json"]).json();
    assert_eq!(ids(&all).len(), 6);
    assert_eq!(all["next"], Value::Null);

    let table = server.tt(&["ls", "--limit", "2"]).ok().stdout;
    let header = table.lines().next().unwrap();
    for column in [
        "ID",
        "STATE",
        "KIND",
        "QUEUE",
        "ATTEMPT",
        "RUN AT / UPDATED",
        "LAST ERROR",
    ] {
        assert!(header.contains(column), "{table}");
    }
    assert!(
        table.contains("--after"),
        "a page that is not the last says how to go on: {table}"
    );
    let held = server.tt(&["ls", "--state", "held"]).ok().stdout;
    assert_eq!(held.lines().count(), 2, "{held}");
    let row: Vec<&str> = held.lines().nth(1).unwrap().split_whitespace().collect();
    assert_eq!(
        row[..5],
        [
            held_sms.to_string().as_str(),
            "held",
            "sms",
            "default",
            "0/5"
        ],
        "{held}"
    );
    assert_eq!(
        server.tt(&["ls", "--kind", "nothing"]).ok().stdout,
        "no tasks match\n"
    );
}

#[test]
fn cancel_retry_hold_and_release_change_each_task_named() {
    let server = Server::start(&[]);
    let a = server.submit(&["email"]);
    let b = server.submit(&["email"]);
    let (a_id, b_id) = (a.to_string(), b.to_string());
    let both = [a_id.as_str(), b_id.as_str()];

    for (op, state) in [
        ("hold", "held"),
        ("release", "pending"),
        ("cancel", "cancelled"),
        ("retry", "pending"),
    ] {
        let mut args = vec![op];
        args.extend(both);
        let out = server.tt(&args).ok().stdout;
        assert_eq!(out.lines().count(), 2, "{out}");
        let said = if state == "cancelled" {
            "it was cancelled".to_owned()
        } else {
            format!("it is {state}")
        };
        assert!(
            out.contains(&format!("task {a}: ")) && out.contains(&said),
            "{out}"
        );
        assert_eq!(
            (server.state(a), server.state(b)),
            (state.to_owned(), state.to_owned())
        );
    }
    let doc = server.tt(&["cancel", &a_id, "--json"]).json();
    assert_eq!(doc["task"]["state"], "cancelled");
    let doc = server.tt(&["retry", &a_id, &b_id, "--json"]).json();
    assert_eq!(doc["tasks"].as_array().map(Vec::len), Some(2), "{doc}");

    // Each change is in the event log, by this command line, and in the task's history.
    let log = server.tt(&["audit", "--task", &a_id, "--json"]).json();
    let events: Vec<&str> = log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(
        events,
        [
            "retried",
            "cancelled",
            "retried",
            "cancelled",
            "released",
            "held"
        ],
        "{log}"
    );
    assert_eq!(
        log["events"][0]["actor"],
        json!({"kind": "cli", "name": tasktable_server::auth::env_token_name(ADMIN), "role": "admin"})
    );
    let page = server
        .tt(&["audit", "--event", "held", "--limit", "1"])
        .ok()
        .stdout;
    assert!(
        page.contains("held")
            && page.contains(&format!(
                "{} (admin, cli)",
                tasktable_server::auth::env_token_name(ADMIN)
            )),
        "{page}"
    );
    assert!(page.contains("more events follow: add --before"), "{page}");
    let shown = server.tt(&["show", &a_id]).ok().stdout;
    let history = shown
        .split("\nhistory\n")
        .nth(1)
        .expect("a history section");
    assert!(
        history.contains("submitted") && history.contains("pending -> held"),
        "{shown}"
    );
    let run = server.tt(&["audit", "--event", "exploded"]);
    assert_eq!(run.code, 2, "{run:?}");
}

#[test]
fn watch_follows_the_event_stream_from_a_cursor() {
    let server = Server::start(&[]);
    let a = server.submit(&["email"]);
    let b = server.submit(&["report"]);
    server.tt(&["hold", &b.to_string()]).ok();
    let out = server
        .tt(&["watch", "--after", "e0.a0.t0", "--count", "3", "--json"])
        .ok()
        .stdout;
    let items: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON object a line"))
        .collect();
    let seen: Vec<(&str, i64)> = items
        .iter()
        .map(|i| (i["event"].as_str().unwrap(), i["task_id"].as_i64().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [("submitted", a), ("submitted", b), ("held", b)],
        "{out}"
    );
    let out = server
        .tt(&[
            "watch", "--after", "e0.a0.t0", "--event", "held", "--count", "1",
        ])
        .ok()
        .stdout;
    assert!(
        out.contains("held") && out.contains(&format!("task {b} (default/report)")),
        "{out}"
    );
    assert!(out.contains("pending -> held"), "{out}");
    let bad = server.tt(&["watch", "--after", "yesterday"]);
    assert_eq!(bad.code, 2, "{bad:?}");
}

#[test]
fn a_bulk_retry_changes_only_the_tasks_its_filter_matches_once_confirmed() {
    let server = Server::start(&[]);
    let emails: Vec<i64> = (0..3).map(|_| server.submit(&["email"])).collect();
    let sms = server.submit(&["sms"]);
    let mut cancel = vec!["cancel".to_owned()];
    cancel.extend(emails.iter().chain([&sms]).map(i64::to_string));
    server
        .tt(&cancel.iter().map(String::as_str).collect::<Vec<_>>())
        .ok();

    let unconfirmed = server.tt(&["retry", "--kind", "email", "--state", "cancelled"]);
    unconfirmed.fails(2, "--yes");
    assert!(
        emails.iter().all(|id| server.state(*id) == "cancelled"),
        "nothing changed"
    );

    let out = server
        .tt(&["retry", "--kind", "email", "--state", "cancelled", "--yes"])
        .ok();
    assert_eq!(out.stdout, "3 tasks: retried\n");
    assert!(emails.iter().all(|id| server.state(*id) == "pending"));
    assert_eq!(server.state(sms), "cancelled");
    let again = server.tt(&[
        "retry",
        "--kind",
        "email",
        "--state",
        "cancelled",
        "--yes",
        "--json",
    ]);
    assert_eq!(again.json(), json!({"changed": 0}));

    server
        .tt(&["retry", &sms.to_string(), "--kind", "sms"])
        .fails(2, "not both");
    server.tt(&["retry"]).fails(2, "task ids, or a filter");
}

#[test]
fn edit_applies_each_flag_as_a_change_of_its_own() {
    let server = Server::start(&[]);
    let id = server.submit(&["email", r#"{"v":1}"#]);
    let id_s = id.to_string();
    let out = server
        .tt(&[
            "edit",
            &id_s,
            "--priority",
            "7",
            "--max-attempts",
            "2",
            "--payload",
            r#"{"v":2}"#,
            "--delay",
            "1h",
        ])
        .ok()
        .stdout;
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        [
            format!("task {id}: priority set to 7; it is pending"),
            format!("task {id}: max attempts set to 2; it is pending"),
            format!("task {id}: payload replaced; it is pending"),
            format!("task {id}: rescheduled to run in 1h; it is pending"),
        ]
    );
    let task = server.task(id);
    assert_eq!(
        (&task["priority"], &task["max_attempts"], &task["payload"]),
        (&json!(7), &json!(2), &json!({"v": 2}))
    );
    let doc = server
        .tt(&["edit", &id_s, "--run-at", "2030-01-02T03:04:05Z", "--json"])
        .json();
    assert_eq!(doc["task"]["run_at"], "2030-01-02T03:04:05Z");

    let no_change = server.tt(&["edit", &id_s]);
    assert_eq!(no_change.code, 2, "{no_change:?}");
    let bad_delay = server.tt(&["edit", &id_s, "--delay", "soon"]);
    assert_eq!(bad_delay.code, 2, "{bad_delay:?}");
    assert!(
        bad_delay.stderr.contains("\"soon\" is not a duration"),
        "{bad_delay:?}"
    );
}

#[test]
fn targets_are_set_on_submit_shown_and_changed_by_edit() {
    let server = Server::start(&[]);
    let id = server.submit(&["render", "--target-group", "gpu", "--target-group", "eu"]);
    let id_s = id.to_string();
    // Stored sorted, each name once.
    assert_eq!(server.task(id)["target"], json!({"groups": ["eu", "gpu"]}));
    let shown = server.tt(&["show", &id_s]).ok().stdout;
    assert!(shown.contains("groups eu, gpu"), "{shown}");

    let out = server
        .tt(&["edit", &id_s, "--target-worker", "render-7"])
        .ok()
        .stdout;
    assert_eq!(
        out.trim(),
        format!("task {id}: target set to workers render-7; it is pending")
    );
    let doc = server.tt(&["edit", &id_s, "--any-worker", "--json"]).json();
    assert_eq!(doc["task"]["target"], json!(null));

    // Workers and groups together, or a target and --any-worker, are usage errors; a bad
    // name is the server's refusal; neither changes the task.
    for args in [
        vec!["--target-worker", "a", "--target-group", "g"],
        vec!["--target-group", "g", "--any-worker"],
    ] {
        let run = server.tt(&[&["edit", id_s.as_str()][..], &args].concat());
        assert_eq!(run.code, 2, "{run:?}");
    }
    let bad = server.tt(&["edit", &id_s, "--target-group", "a|b"]);
    assert_ne!(bad.code, 0, "{bad:?}");
    assert!(bad.stderr.contains("'|'"), "{bad:?}");
    let conflict = server.tt(&["submit", "k", "--target-worker", "a", "--target-group", "g"]);
    assert_eq!(conflict.code, 2, "{conflict:?}");
    assert_eq!(server.task(id)["target"], json!(null));
}

#[test]
fn pause_resume_and_stats_count_tasks_by_queue_and_state() {
    let server = Server::start(&[]);
    server.submit(&["email", "--queue", "mail"]);
    server.submit(&["email", "--queue", "mail"]);
    server.submit(&["sms", "--queue", "sms", "--held"]);
    let text = server.tt(&["stats"]).ok().stdout;
    let [counts, _] = stats_tables(&text);
    assert_eq!(counts.len(), 4, "header, two queues, totals: {text}");

    let paused = server.tt(&["pause", "mail"]).ok().stdout;
    assert!(paused.starts_with("queue \"mail\" paused"), "{paused}");
    let stats = server.tt(&["stats", "--json"]).json();
    assert_eq!(stats["totals"]["pending"], 2);
    assert_eq!(stats["totals"]["held"], 1);
    let mail = stats["queues"]
        .as_array()
        .unwrap()
        .iter()
        .find(|q| q["name"] == "mail")
        .unwrap();
    assert_eq!(mail["paused"], true);
    let table = server.tt(&["stats"]).ok().stdout;
    let [lines, _] = stats_tables(&table);
    assert!(
        lines[0].starts_with("QUEUE") && lines[0].ends_with("TOTAL"),
        "{table}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("mail (paused)")),
        "{table}"
    );
    assert!(
        lines.last().unwrap().starts_with("all queues") && lines.last().unwrap().ends_with(" 3"),
        "{table}"
    );

    assert_eq!(
        server.tt(&["resume", "mail", "--json"]).json(),
        json!({"name": "mail", "paused": false})
    );
    let stats = server.tt(&["stats", "--json"]).json();
    assert!(
        stats["queues"]
            .as_array()
            .unwrap()
            .iter()
            .all(|q| q["paused"] == false),
        "{stats}"
    );
}

/// The two parts of `stats` output, split at the blank line between them: the counts
/// table, and the window's title line followed by its table.
fn stats_tables(text: &str) -> [Vec<&str>; 2] {
    let (counts, window) = text
        .split_once("\n\n")
        .unwrap_or_else(|| panic!("two parts separated by a blank line:\n{text}"));
    [counts.lines().collect(), window.lines().collect()]
}

/// The cells of a table row: columns are separated by at least two spaces, and cells
/// (`50.0 %`, `4 ms / 5 ms / 5 ms`) hold single spaces only.
fn cells(line: &str) -> Vec<&str> {
    line.split("  ")
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .collect()
}

#[test]
fn stats_shows_a_window_per_kind_failures_first_and_the_servers_word_on_a_bad_window() {
    let server = Server::start(&["--exec-allow", "cat"]);
    // Sorts before "default" by name, so only ordering by failures puts exec first.
    server.submit(&["email", "--queue", "aaa"]);
    let cat = server.submit(&["exec", r#"{"command":["cat"],"stdin":1}"#]);
    let ls = server.submit(&["exec", r#"{"command":["ls"]}"#]);
    server.wait_for_state(cat, "succeeded");
    // Not on the allow-list: a permanent failure, so failed rather than retried.
    server.wait_for_state(ls, "failed");

    let text = server.tt(&["stats", "--window", "15m"]).ok().stdout;
    let [counts, window] = stats_tables(&text);
    assert!(counts.last().unwrap().starts_with("all queues"), "{text}");
    assert_eq!(window[0], "last 15m", "{text}");
    assert_eq!(
        cells(window[1]),
        [
            "QUEUE",
            "KIND",
            "PENDING",
            "RUNNING",
            "SUBMITTED/MIN",
            "SUCCEEDED",
            "FAILED",
            "RETRIED",
            "SUCCESS",
            "WAIT p50/p95/p99",
            "RUN p50/p95/p99"
        ],
        "{text}"
    );
    assert_eq!(window.len(), 4, "title, header, two kinds: {text}");
    let exec = cells(window[2]);
    assert_eq!(
        exec[..9],
        ["default", "exec", "0", "0", "0.13", "1", "1", "0", "50.0 %"],
        "2 submitted in 15 minutes; one succeeded, one failed: {text}"
    );
    assert_eq!(exec.len(), 11, "{text}");
    for latency in &exec[9..] {
        assert_eq!(latency.split(" / ").count(), 3, "{text}");
        assert!(
            latency.ends_with(" ms") || latency.ends_with(" s"),
            "{text}"
        );
    }
    assert_eq!(
        cells(window[3]),
        ["aaa", "email", "1", "0", "0.07", "0", "0", "0", "–", "–", "–"],
        "nothing ended: no success rate and no latencies: {text}"
    );

    let narrowed = server
        .tt(&["stats", "--window", "15m", "--kind", "email"])
        .ok()
        .stdout;
    let [_, window] = stats_tables(&narrowed);
    assert_eq!(window[0], "last 15m (kind \"email\")", "{narrowed}");
    assert_eq!(window.len(), 3, "{narrowed}");

    let doc = server.tt(&["stats", "--window", "15m", "--json"]).json();
    assert_eq!(doc["window"]["seconds"], 900, "{doc}");
    let groups = doc["groups"].as_array().expect("groups");
    let exec = groups.iter().find(|g| g["kind"] == "exec").expect("exec");
    assert_eq!(
        (&exec["succeeded"], &exec["failed"], &exec["success_rate"]),
        (&json!(1), &json!(1), &json!(0.5)),
        "{doc}"
    );
    assert!(
        doc["totals"].is_object() && doc["series"].is_object(),
        "{doc}"
    );

    // The server decides what a window is; a refusal is its message, one line, and the
    // exit code of every request the server refuses as invalid.
    let refused = server.tt(&["stats", "--window", "3w"]);
    refused.fails(1, "window must look like 15m, 1h, 24h or 7d; got \"3w\"");
    assert!(refused.stdout.is_empty(), "{refused:?}");
}

#[test]
fn an_exec_task_runs_in_the_servers_worker_only_when_its_program_is_allowed() {
    let server = Server::start(&["--exec-allow", "cat"]);
    let cat = server.submit(&["exec", r#"{"command":["cat"],"stdin":{"x":1}}"#]);
    let ls = server.submit(&["exec", r#"{"command":["ls"]}"#]);

    let task = server.wait_for_state(cat, "succeeded");
    assert_eq!(task["result"]["stdout"], json!({"x": 1}), "{task}");
    let refused = server.wait_for_state(ls, "failed");
    assert!(
        refused["last_error"]
            .as_str()
            .unwrap()
            .contains("allow-list"),
        "{refused}"
    );
    assert_eq!(
        ids(&server.tt(&["ls", "--error", "allow-list", "--json"]).json()),
        vec![ls]
    );

    let shown = server.tt(&["show", &cat.to_string()]).ok().stdout;
    for text in [
        format!("task {cat}"),
        "succeeded".into(),
        "\"exit_code\":0".into(),
        "attempts".into(),
    ] {
        assert!(shown.contains(&text), "{text:?} in:\n{shown}");
    }
    let doc = server.tt(&["show", &cat.to_string(), "--json"]).json();
    assert_eq!(doc["attempts"][0]["outcome"], "succeeded");
}

#[test]
fn every_error_is_one_line_with_an_exit_code_of_its_kind() {
    let server = Server::start(&[]);
    let id = server.submit(&["email"]).to_string();

    server
        .tt(&["show", "999999"])
        .fails(3, "task 999999 not found");
    server.tt(&["release", &id]).fails(4, "cannot release task");
    server
        .tt_as(None, &["ls"], None)
        .fails(5, "TASKTABLE_TOKEN");
    server
        .tt_as(Some("not-a-token-anyone-has"), &["ls"], None)
        .fails(5, "unknown or revoked token");
    server
        .tt_as(Some(READER), &["cancel", &id], None)
        .fails(5, "role reader");
    server
        .tt(&["submit", "email", "{to: ada}"])
        .fails(2, "PAYLOAD_JSON is not valid JSON");

    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let mut cmd = command(&["ls", "--server", &format!("http://{free}")]);
    cmd.env("TASKTABLE_TOKEN", ADMIN);
    finish(cmd, None).fails(1, &format!("cannot reach server at http://{free}/"));
}

/// A database that refuses the connection is told within seconds, with its cause and its URL
/// with the password hidden: `serve`, `worker` and `migrate` exit instead of waiting out a
/// pool's timeout, and the password never reaches the terminal.
#[test]
fn an_unreachable_database_is_named_with_its_cause_and_its_password_hidden() {
    for (verb, url, shown) in [
        (
            "serve",
            "postgres://app:hunter2@127.0.0.1:1/tasks",
            "postgres://app:[redacted]@127.0.0.1:1/tasks",
        ),
        (
            "worker",
            "postgres://app:hunter2@127.0.0.1:1/tasks",
            "postgres://app:[redacted]@127.0.0.1:1/tasks",
        ),
        (
            "migrate",
            "mysql://root:hunter2@127.0.0.1:1/test",
            "mysql://root:[redacted]@127.0.0.1:1/test",
        ),
        // A password as a query parameter, one the driver reads and one it only logs.
        (
            "serve",
            "postgres://app@127.0.0.1:1/tasks?password=hunter2",
            "postgres://app@127.0.0.1:1/tasks?password=%5Bredacted%5D",
        ),
        (
            "serve",
            "postgres://app@127.0.0.1:1/tasks?sslpassword=hunter2",
            "postgres://app@127.0.0.1:1/tasks?sslpassword=%5Bredacted%5D",
        ),
    ] {
        let run = finish(command(&[verb, "--database-url", url]), None);
        assert_ne!(run.code, 0, "{verb}: {run:?}");
        assert!(
            run.stderr.contains(&format!("cannot connect to {shown}")),
            "{verb}: {}",
            run.stderr
        );
        assert!(
            run.stderr.to_lowercase().contains("refused"),
            "{verb} names the cause: {}",
            run.stderr
        );
        assert!(
            !run.stderr.contains("hunter2") && !run.stdout.contains("hunter2"),
            "{verb} shows the password: {run:?}"
        );
    }
}

#[test]
fn serve_refuses_a_public_address_without_tokens_and_says_how_to_add_them() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("t.db").display());
    let refused = finish(
        command(&["serve", "--listen", "0.0.0.0:0", "--database-url", &db]),
        None,
    );
    assert_eq!(refused.code, 2, "{refused:?}");
    for how in [
        "tasktable token new --role admin",
        "--tokens-file",
        "TASKTABLE_TOKENS=admin:<token>",
        "--token",
    ] {
        assert!(
            refused.stderr.contains(how),
            "{how:?} in {}",
            refused.stderr
        );
    }
    assert!(
        !dir.path().join("t.db").exists(),
        "it stops before opening the database"
    );

    let server = Server::start_with(
        &["--listen", "0.0.0.0:0"],
        &[("TASKTABLE_TOKENS", &format!("admin:{ADMIN}"))],
    );
    assert!(
        server.url.starts_with("http://0.0.0.0:"),
        "with a token it listens: {}",
        server.url
    );
}

#[test]
fn serve_refuses_a_worker_silence_shorter_than_two_heartbeats() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("t.db").display());
    for (silence, code, why) in [("5s", 2, "at least 10s"), ("soon", 2, "soon")] {
        let refused = finish(
            command(&[
                "serve",
                "--listen",
                "127.0.0.1:0",
                "--database-url",
                &db,
                "--worker-silence",
                silence,
            ]),
            None,
        );
        assert_eq!(refused.code, code, "{silence}: {refused:?}");
        assert!(
            refused.stderr.contains(why),
            "{silence}: {}",
            refused.stderr
        );
    }
    assert!(
        !dir.path().join("t.db").exists(),
        "it stops before opening the database"
    );
}

#[test]
fn serve_without_tokens_answers_only_requests_addressed_to_this_machine() {
    let server = Server::start_with(&["--allow-host", "tasks.internal"], &[]);
    let submitted = server
        .tt_as(None, &["submit", "email", "--json"], None)
        .json();
    let id = submitted["id"].as_i64().unwrap();
    for host in ["evil.example", "evil.example:8080", "0.0.0.0:8080"] {
        for (method, path) in [
            ("POST", format!("/api/v1/tasks/{id}/cancel")),
            ("GET", "/ui/login".to_owned()),
            ("GET", "/healthz".to_owned()),
        ] {
            let answer = server.http(method, &path, host).unwrap();
            assert!(
                answer.starts_with("HTTP/1.0 421") || answer.starts_with("HTTP/1.1 421"),
                "{host} {path}: {answer}"
            );
            assert!(answer.contains("host_not_allowed"), "{answer}");
            assert!(
                !answer.to_ascii_lowercase().contains("set-cookie"),
                "{answer}"
            );
        }
    }
    let show = server
        .tt_as(None, &["show", &id.to_string(), "--json"], None)
        .json();
    assert_eq!(show["task"]["state"], "pending", "nothing cancelled");
    for host in [
        "localhost",
        "127.0.0.1:1",
        "[::1]:8080",
        "tasks.internal:8080",
    ] {
        let answer = server.http("GET", "/healthz", host).unwrap();
        assert!(
            answer.starts_with("HTTP/1.0 200") || answer.starts_with("HTTP/1.1 200"),
            "{host}: {answer}"
        );
    }

    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("t.db").display());
    finish(
        command(&["serve", "--allow-host", "*.internal", "--database-url", &db]),
        None,
    )
    .fails(2, "--allow-host: \"*.internal\" is not a host name");
}

#[test]
fn a_token_from_token_new_authenticates_with_the_line_it_prints() {
    let made = finish(
        command(&[
            "token", "new", "--role", "operator", "--name", "ci", "--json",
        ]),
        None,
    )
    .json();
    let token = made["token"].as_str().unwrap();
    let line = made["tokens_file_line"].as_str().unwrap();
    assert!(token.starts_with("tt_"), "never '-' first: {token}");
    assert!(
        token.len() >= 43
            && token
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'),
        "{token}"
    );
    assert!(line.starts_with("operator ci sha256:"), "{line}");

    let human = finish(command(&["token", "new", "--role", "reader"]), None)
        .ok()
        .stdout;
    assert!(
        human
            .lines()
            .any(|l| l.trim_start().starts_with("reader reader-")),
        "{human}"
    );

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tokens");
    std::fs::write(&file, format!("# operators\n{line}\n")).unwrap();
    let server = Server::start_with(&["--tokens-file", file.to_str().unwrap()], &[]);
    assert!(
        server.log_text().contains("operator=1"),
        "{}",
        server.log_text()
    );
    assert!(
        !server.log_text().contains(token),
        "the token never reaches the log"
    );
    let submitted = server
        .tt_as(Some(token), &["submit", "email", "--json"], None)
        .json();
    assert_eq!(submitted["created"], true);
    server
        .tt_as(Some(ADMIN), &["ls"], None)
        .fails(5, "unknown or revoked token");
}

#[test]
fn a_token_that_begins_with_a_dash_is_taken_on_the_command_line() {
    let token = "-dash-first-token-of-32-characters";
    let server = Server::start_with(
        &["--workers", "0"],
        &[("TASKTABLE_TOKENS", &format!("admin:{token}"))],
    );
    let by_flag = format!("--token={token}");
    for args in [
        vec![by_flag.as_str(), "ls", "--json"],
        vec!["ls", by_flag.as_str(), "--json"],
    ] {
        let mut cmd = command(&args);
        cmd.env("TASKTABLE_SERVER", &server.url);
        let listed = finish(cmd, None).json();
        assert_eq!(listed["tasks"], json!([]), "{args:?}");
    }
    let listed = server.tt_as(Some(token), &["ls", "--json"], None).json();
    assert_eq!(listed["tasks"], json!([]), "from TASKTABLE_TOKEN");
    // A missing value is still missing, not the next flag taken for a token.
    let mut cmd = command(&["ls", "--token", "--json"]);
    cmd.env("TASKTABLE_SERVER", &server.url);
    let run = finish(cmd, None);
    assert_eq!(run.code, 2, "{run:?}");
    assert!(
        run.stderr.contains("a value is required for '--token"),
        "{run:?}"
    );
}

#[test]
fn serve_refuses_a_token_listed_under_two_names() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("t.db").display());
    let mut cmd = command(&["serve", "--database-url", &db, "--listen", "127.0.0.1:0"]);
    cmd.env(
        "TASKTABLE_TOKENS",
        "reader:same-token-of-32-characters-long,admin:same-token-of-32-characters-long",
    );
    let name = tasktable_server::auth::env_token_name("same-token-of-32-characters-long");
    finish(cmd, None).fails(2, &format!("{name:?} is the same token as {name:?}"));
}

#[test]
fn serve_shows_readers_the_built_in_handlers_secrets_redacted() {
    let server = Server::start(&["--workers", "0"]);
    let payload = r#"{"url": "https://bot:pa55word@h.example/", "headers": {"Authorization": "Bearer sekr1t"}}"#;
    let id = server.tt(&["submit", "http", payload, "--json"]).json()["id"].to_string();
    let as_reader = server
        .tt_as(Some(READER), &["show", &id, "--json"], None)
        .json();
    let shown = &as_reader["task"]["payload"];
    assert_eq!(shown["headers"]["Authorization"], "[redacted]", "{shown}");
    assert_eq!(shown["url"], "https://bot:[redacted]@h.example/");
    let as_admin = server.tt(&["show", &id, "--json"]).json();
    assert_eq!(
        as_admin["task"]["payload"]["headers"]["Authorization"],
        "Bearer sekr1t"
    );
    // Spellings the handler sends with their password (WHATWG reads each as
    // `https://bot:pa55word@h.example/`) are hidden as well.
    for url in [
        "https:/bot:pa55word@h.example",
        "https:\\\\bot:pa55word@h.example",
        "https:bot:pa55word@h.example",
    ] {
        let payload = json!({ "url": url }).to_string();
        let id = server.tt(&["submit", "http", &payload, "--json"]).json()["id"].to_string();
        let run = server.tt_as(Some(READER), &["show", &id, "--json"], None);
        assert!(!run.stdout.contains("pa55word"), "{url:?}: {}", run.stdout);
        assert_eq!(
            run.json()["task"]["payload"]["url"],
            "https://bot:[redacted]@h.example/",
            "{url:?}"
        );
    }
}

#[test]
fn token_new_limits_a_worker_token_to_queues() {
    let made = finish(
        command(&[
            "token", "new", "--role", "worker", "--name", "mail", "--queue", "emails", "--queue",
            "reports", "--json",
        ]),
        None,
    )
    .json();
    let line = made["tokens_file_line"].as_str().unwrap();
    assert!(line.starts_with("worker mail sha256:"), "{line}");
    assert!(line.ends_with(" queues=emails,reports"), "{line}");
    assert_eq!(made["queues"], json!(["emails", "reports"]));
    let human = finish(
        command(&["token", "new", "--role", "worker", "--queue", "emails"]),
        None,
    )
    .ok()
    .stdout;
    assert!(
        human.contains("TASKTABLE_TOKENS=worker@emails:<token>"),
        "{human}"
    );
    finish(
        command(&["token", "new", "--role", "reader", "--queue", "emails"]),
        None,
    )
    .fails(2, "only worker tokens");
    finish(
        command(&["token", "new", "--role", "worker", "--queue", "a b"]),
        None,
    )
    .fails(2, "without spaces");
}

#[test]
fn submit_file_sends_every_line_in_batches() {
    let server = Server::start(&[]);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tasks.jsonl");
    let mut lines = String::new();
    for n in 0..2500 {
        if n % 500 == 0 {
            lines.push_str(&format!("{{\"kind\": \"sms\", \"payload\": {{\"n\": {n}}}, \"idempotency_key\": \"k{n}\"}}\n\n"));
        } else {
            lines.push_str(&format!(
                "{{\"payload\": {{\"n\": {n}}}, \"idempotency_key\": \"k{n}\"}}\n"
            ));
        }
    }
    std::fs::write(&file, lines).unwrap();
    let path = file.to_str().unwrap();

    let out = server
        .tt(&["submit", "email", "--file", path, "--queue", "bulk"])
        .ok()
        .stdout;
    assert_eq!(
        out,
        format!("submitted 2500 tasks from {path}: 2500 created, 0 already existed\n")
    );
    let stats = server.tt(&["stats", "--json"]).json();
    assert_eq!(stats["queues"][0]["name"], "bulk");
    assert_eq!(stats["totals"]["pending"], 2500);
    assert_eq!(
        ids(&server.tt(&["ls", "--kind", "sms", "--json"]).json()).len(),
        5
    );

    let again = server
        .tt(&[
            "submit", "email", "--file", path, "--queue", "bulk", "--json",
        ])
        .json();
    let views = again["tasks"].as_array().unwrap();
    assert_eq!(views.len(), 2500);
    assert!(
        views.iter().all(|v| v["created"] == false),
        "idempotency keys make a repeat harmless"
    );

    std::fs::write(&file, "{\"kind\": \"sms\"}\n[1, 2]\n").unwrap();
    server
        .tt(&["submit", "--file", path])
        .fails(2, "line 2: expected a JSON object");
    std::fs::write(&file, "{\"payload\": 1}\n").unwrap();
    server
        .tt(&["submit", "--file", path])
        .fails(2, "line 1: no \"kind\"");
}

#[test]
fn serve_runs_the_dashboard_and_stops_with_its_worker_on_sigterm() {
    let mut server = Server::start(&["--exec-allow", "cat"]);
    let login = server.http_get("/ui/login").unwrap();
    assert!(
        login.starts_with("HTTP/1.0 200"),
        "the dashboard is served: {login}"
    );
    sigterm(&server.child);
    let status = wait(&mut server.child, Duration::from_secs(30));
    assert!(status.success(), "{status:?}\n{}", server.log_text());
    let log = server.log_text();
    assert!(
        log.contains("worker stopped") && log.contains("stopped"),
        "{log}"
    );
}

#[test]
fn the_worker_command_runs_exec_tasks_from_the_database_and_stops_on_sigterm() {
    let server = Server::start(&["--workers", "0"]);
    let id = server.submit(&["exec", r#"{"command":["cat"],"stdin":"hello"}"#]);
    let db = server.db_url();
    let mut worker = command(&[
        "worker",
        "--database-url",
        &db,
        "--exec-allow",
        "cat",
        "--concurrency",
        "2",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .expect("start tasktable worker");
    let task = server.wait_for_state(id, "succeeded");
    assert_eq!(task["result"]["stdout"], "hello");
    sigterm(&worker);
    let status = wait(&mut worker, Duration::from_secs(30));
    let mut log = String::new();
    worker
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    assert!(status.success(), "{status:?}: {log}");
    assert!(log.contains("worker stopped"), "{log}");
}

#[test]
fn migrate_prepares_a_database_that_serve_then_uses_without_migrating() {
    let dir = tempfile::tempdir().unwrap();
    let db = format!("sqlite://{}", dir.path().join("fresh.db").display());
    let out = finish(command(&["migrate", "--database-url", &db]), None).ok();
    assert_eq!(out.stdout, "the sqlite database is up to date\n");
    let server = Server::start(&["--database-url", &db, "--no-migrate"]);
    assert!(
        !server.log_text().contains("applied migration"),
        "{}",
        server.log_text()
    );
    let id = server.submit(&["email"]);
    assert_eq!(server.state(id), "pending");
}

#[test]
fn a_server_on_postgres_runs_the_same_commands() {
    a_server_on_runs_the_same_commands("postgres");
}

#[test]
fn a_server_on_mysql_runs_the_same_commands() {
    a_server_on_runs_the_same_commands("mysql");
}

/// `tasktable serve` on a fresh database of `backend` runs what it runs on SQLite.
fn a_server_on_runs_the_same_commands(backend: &str) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let Some(db) = runtime.block_on(tasktable_testdb::TestDb::fresh(backend)) else {
        return;
    };
    let server = Server::start(&["--database-url", db.url(), "--exec-allow", "cat"]);
    assert!(
        server
            .log_text()
            .contains(&format!("backend=\"{backend}\"")),
        "{}",
        server.log_text()
    );
    let held = server.submit(&["email", r#"{"to":"ada"}"#, "--held", "--key", "db"]);
    let exec = server.submit(&["exec", r#"{"command":["cat"],"stdin":[1,2]}"#]);

    assert_eq!(
        server.wait_for_state(exec, "succeeded")["result"]["stdout"],
        json!([1, 2])
    );
    assert_eq!(
        ids(&server.tt(&["ls", "--key", "db", "--json"]).json()),
        vec![held]
    );
    server.tt(&["release", &held.to_string()]).ok();
    server
        .tt(&[
            "edit",
            &held.to_string(),
            "--priority",
            "3",
            "--delay",
            "1h",
        ])
        .ok();
    server.tt(&["cancel", &held.to_string()]).ok();
    server.tt(&["retry", "--state", "cancelled", "--yes"]).ok();
    let task = server.task(held);
    assert_eq!(
        (&task["state"], &task["priority"]),
        (&json!("pending"), &json!(3))
    );
    server
        .tt(&["hold", &exec.to_string()])
        .fails(4, "cannot hold task");
    let stats = server.tt(&["stats", "--json"]).json();
    assert_eq!(
        (&stats["totals"]["pending"], &stats["totals"]["succeeded"]),
        (&json!(1), &json!(1))
    );
    drop(server);
    drop(db);
}
