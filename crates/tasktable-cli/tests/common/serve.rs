//! A `tasktable serve` child process and commands run against it, for the tests that
//! drive the binary end to end. Not every test binary uses every part.
#![allow(dead_code)]

use super::{BIN, ENV};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

pub const ADMIN: &str = "admin-token-of-the-schedule-tests";
pub const READER: &str = "reader-token-of-the-schedule-tests";

/// A finished command.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn ok(self) -> Self {
        assert_eq!(self.code, 0, "command failed: {self:?}");
        self
    }

    pub fn json(&self) -> Value {
        assert_eq!(self.code, 0, "command failed: {self:?}");
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON document ({e}): {}", self.stdout))
    }

    /// A failure with `code` whose first line on stderr contains `text`, and nothing on
    /// stdout.
    pub fn fails(&self, code: i32, text: &str) {
        assert_eq!(self.code, code, "{self:?}");
        let first = self.stderr.lines().next().unwrap_or_default();
        assert!(first.starts_with("error: "), "{self:?}");
        assert!(
            first.contains(text),
            "stderr should contain {text:?}: {self:?}"
        );
        assert_eq!(self.stdout, "", "{self:?}");
    }

    /// A failure reported by the server: one line on stderr.
    pub fn refused(&self, code: i32, text: &str) {
        self.fails(code, text);
        assert_eq!(self.stderr.trim().lines().count(), 1, "{self:?}");
    }
}

/// `tasktable ARGS` with none of the environment of the test's own process.
pub fn command(args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(args);
    for var in ENV {
        cmd.env_remove(var);
    }
    cmd
}

pub fn finish(mut cmd: Command, stdin: Option<&str>) -> Run {
    let mut child = cmd
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start tasktable");
    if let Some(input) = stdin {
        let mut pipe = child.stdin.take().expect("stdin");
        pipe.write_all(input.as_bytes()).expect("write stdin");
    }
    let out = child.wait_with_output().expect("run tasktable");
    Run {
        code: out.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(out.stdout).expect("utf-8 stdout"),
        stderr: String::from_utf8(out.stderr).expect("utf-8 stderr"),
    }
}

/// A `tasktable serve` child process (`--workers 0` unless started with other flags),
/// killed when dropped; its log is printed
/// when the test fails.
pub struct Server {
    child: Child,
    pub url: String,
    pub dir: tempfile::TempDir,
    /// For a server started watched: a signal at each line its log gets.
    watch: Option<Arc<LogWatch>>,
}

/// The lines a watched server's log has been given, and a signal at each.
#[derive(Default)]
struct LogWatch {
    lines: Mutex<u64>,
    grew: Condvar,
}

impl Server {
    pub fn start() -> Server {
        Server::start_with(&["--workers", "0"])
    }

    /// `tasktable serve` with `args` after its listen address and database (a SQLite
    /// file in the server's directory unless `args` name a `--database-url`).
    pub fn start_with(args: &[&str]) -> Server {
        Server::start_limited(args, None)
    }

    /// As [`Server::start_with`], in a process whose open files are limited to
    /// `descriptors` (soft and hard) when given.
    pub fn start_limited(args: &[&str], descriptors: Option<u64>) -> Server {
        Server::launch(args, descriptors, |_| {}, false)
    }

    /// As [`Server::start_with`], with `adjust` applied to the command before it starts:
    /// environment (which wins over the default `TASKTABLE_TOKENS`; a `DATABASE_URL`
    /// there replaces the SQLite file), the user it runs as.
    pub fn start_adjusted(args: &[&str], adjust: impl FnOnce(&mut Command)) -> Server {
        Server::launch(args, None, adjust, false)
    }

    /// As [`Server::start_adjusted`], with the server's log copied to `serve.log` line by
    /// line as it writes it, so that [`Server::wait_for_log`] is woken by each line.
    pub fn start_watched(args: &[&str], adjust: impl FnOnce(&mut Command)) -> Server {
        Server::launch(args, None, adjust, true)
    }

    /// Waits, at most `within`, until `found` finds what it looks for in the log a
    /// watched server wrote so far; woken by each line it writes. `None` when it did not
    /// come.
    pub fn wait_for_log<T>(
        &self,
        within: Duration,
        found: impl Fn(&str) -> Option<T>,
    ) -> Option<T> {
        let watch = self.watch.as_ref().expect("a server started watched");
        let deadline = Instant::now() + within;
        // Held while the log is read: a line copied meanwhile is counted, and signalled,
        // only once the wait below lets go of it.
        let mut lines = watch.lines.lock().unwrap();
        loop {
            if let Some(hit) = found(&self.log_text()) {
                return Some(hit);
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            lines = watch.grew.wait_timeout(lines, left).unwrap().0;
        }
    }

    fn launch(
        args: &[&str],
        descriptors: Option<u64>,
        adjust: impl FnOnce(&mut Command),
        watched: bool,
    ) -> Server {
        let dir = tempfile::tempdir().expect("temp dir");
        let db = format!("sqlite://{}", dir.path().join("tasktable.db").display());
        let log = std::fs::File::create(dir.path().join("serve.log")).expect("log file");
        let mut cmd = match descriptors {
            // util-linux's prlimit sets the limit and runs the server in its place.
            Some(n) => {
                let mut limited = Command::new("prlimit");
                limited.arg(format!("--nofile={n}:{n}")).arg(BIN);
                limited
            }
            None => Command::new(BIN),
        };
        for var in ENV {
            cmd.env_remove(var);
        }
        cmd.env("TASKTABLE_TOKENS", format!("admin:{ADMIN},reader:{READER}"));
        adjust(&mut cmd);
        let db_in_env = cmd
            .get_envs()
            .any(|(name, value)| name == "DATABASE_URL" && value.is_some());
        let mut all = vec!["serve"];
        if !args.contains(&"--listen") {
            all.extend(["--listen", "127.0.0.1:0"]);
        }
        if !args.contains(&"--database-url") && !db_in_env {
            all.extend(["--database-url", db.as_str()]);
        }
        all.extend_from_slice(args);
        let mut child = cmd
            .args(&all)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(if watched {
                Stdio::piped()
            } else {
                Stdio::from(log.try_clone().expect("log file"))
            })
            .spawn()
            .expect("start tasktable serve");
        let watch = watched.then(|| {
            let watch = Arc::new(LogWatch::default());
            let stderr = child.stderr.take().expect("stderr");
            let copier = watch.clone();
            let mut log = log;
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stderr);
                let mut line = Vec::new();
                while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
                    let _ = log.write_all(&line);
                    let _ = log.flush();
                    line.clear();
                    *copier.lines.lock().unwrap() += 1;
                    copier.grew.notify_all();
                }
            });
            watch
        });
        // The server prints its address once it listens: requests from then on are
        // queued until it answers them.
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut line = String::new();
            let _ = BufReader::new(stdout).read_line(&mut line);
            let _ = tx.send(line);
        });
        let line = rx.recv_timeout(Duration::from_secs(30)).unwrap_or_default();
        let mut server = Server {
            child,
            url: String::new(),
            dir,
            watch,
        };
        server.url = line
            .trim_end()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("serve printed {line:?}, not its address"))
            .to_owned();
        server
    }

    /// The server's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the server logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("serve.log")).unwrap_or_default()
    }

    /// `tasktable ARGS` against this server as admin.
    pub fn tt(&self, args: &[&str]) -> Run {
        self.tt_as(ADMIN, args, None)
    }

    /// Waits until the event stream has an `event` (of any task, from the start), as
    /// `tasktable watch` follows it: the server's own signal, at most two minutes.
    #[allow(dead_code)]
    pub fn wait_for_event(&self, event: &str) {
        self.watch_for(event, &[]);
    }

    /// Waits (two minutes at most) for one of `events` (comma-separated) of task `id`.
    #[allow(dead_code)]
    pub fn wait_for_task_event(&self, id: &str, events: &str) {
        self.watch_for(events, &["--task", id]);
    }

    fn watch_for(&self, events: &str, only: &[&str]) {
        let waited = Command::new("timeout")
            .args(["120", super::BIN, "watch", "--after", "e0.a0.t0"])
            .args(only)
            .args(["--event", events, "--count", "1", "--json"])
            .env("TASKTABLE_SERVER", &self.url)
            .env("TASKTABLE_TOKEN", ADMIN)
            .output()
            .expect("tasktable watch");
        assert!(
            waited.status.success(),
            "no {events} event {only:?}: {}",
            String::from_utf8_lossy(&waited.stderr)
        );
    }

    /// `tasktable ARGS` as admin on a terminal of its own (util-linux's `script` gives it
    /// one), typing `input`: its exit code, and what the terminal showed (the input echoed,
    /// stdout and stderr together).
    pub fn tt_on_terminal(&self, args: &[&str], input: &str) -> (i32, String) {
        let quoted: Vec<String> = std::iter::once(BIN)
            .chain(args.iter().copied())
            .map(|a| format!("'{}'", a.replace('\'', "'\\''")))
            .collect();
        let mut cmd = Command::new("script");
        cmd.args(["-qec", &quoted.join(" "), "/dev/null"]);
        for var in ENV {
            cmd.env_remove(var);
        }
        cmd.env("TASKTABLE_SERVER", &self.url)
            .env("TASKTABLE_TOKEN", ADMIN);
        let run = finish(cmd, Some(input));
        (run.code, run.stdout.replace("\r\n", "\n"))
    }

    pub fn tt_as(&self, token: &str, args: &[&str], stdin: Option<&str>) -> Run {
        let mut cmd = command(args);
        cmd.env("TASKTABLE_SERVER", &self.url)
            .env("TASKTABLE_TOKEN", token);
        finish(cmd, stdin)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        if std::thread::panicking() {
            let log = std::fs::read_to_string(self.dir.path().join("serve.log"));
            eprintln!("--- serve log ---\n{}", log.unwrap_or_default());
        }
    }
}
