//! `exec` commands against the secrets of the process that runs them, as an operator who
//! may submit `exec` tasks with `cat` allowed would try: `tasktable serve` started as root
//! with tokens in its environment, its commands reading `/proc/<pid>/environ` and
//! `cmdline`, the SQLite database and the tokens file. Also what serve refuses at start:
//! a password on its command line, an `--exec-user` that does not exist or that it cannot
//! switch to. Most of it needs root (CI runs as root); without root those tests skip with
//! a note, or fail when `CI` is set.

mod common;

use common::serve::{command, finish, Server, ADMIN};
use serde_json::Value;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use tasktable_handlers::ExecUser;
use tasktable_testdb::TestDb;

const OPERATOR: &str = "operator-token-of-the-exec-isolation-tests";
/// A made-up password: the test PostgreSQL server trusts its clients and ignores it.
const PASSWORD: &str = "pg-password-of-the-exec-isolation-tests";

/// `TASKTABLE_TOKENS` of every server here: the admin token of the helpers, and ours.
fn tokens() -> String {
    format!("admin:{ADMIN},operator:{OPERATOR}")
}

/// Whether this test process is root, as these tests need: outside CI a test skips with
/// a note, in CI it fails.
fn root(test: &str) -> bool {
    tasktable_testdb::root(test, "to start serve as root, or as nobody")
}

fn nobody() -> ExecUser {
    ExecUser::lookup("nobody").expect("a user nobody")
}

/// Submits an `exec` task as the operator, one attempt only, and returns its id.
fn submit_exec(server: &Server, command: &[&str]) -> i64 {
    let payload = serde_json::json!({ "command": command }).to_string();
    let args = ["submit", "exec", &payload, "--max-attempts", "1", "--json"];
    let submitted = server.tt_as(OPERATOR, &args, None).json();
    submitted["id"].as_i64().expect("id")
}

/// The task once its one attempt ended (`succeeded`, or `error` or `failed`: final with one
/// attempt), as `show --json` has it; waits on the server's event stream, at most two
/// minutes.
fn settled(server: &Server, id: i64) -> Value {
    let id = id.to_string();
    server.wait_for_task_event(&id, "succeeded,error,failed");
    server.tt(&["show", &id, "--json"]).json()
}

/// The task's last error, which must be `cat`'s refusal to read what it was given.
fn denied(task: &Value) -> String {
    assert_eq!(task["task"]["state"], "failed", "{task}");
    let error = task["task"]["last_error"].as_str().expect("an error");
    assert!(
        error.starts_with("exit code 1; stderr: ") && error.ends_with(": Permission denied"),
        "{task}"
    );
    error.to_owned()
}

/// Fails if any of `secrets` is in `text`, naming `what` it was found in.
fn holds_none(what: &str, text: &str, secrets: &[&str]) {
    for secret in secrets {
        assert!(!text.contains(secret), "{secret:?} is in {what}: {text}");
    }
}

fn set_mode(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn exec_commands_cannot_read_the_environment_database_or_tokens_file_of_serve() {
    if !root("exec_commands_cannot_read_the_environment_database_or_tokens_file_of_serve") {
        return;
    }
    let made = finish(
        command(&[
            "token", "new", "--role", "reader", "--name", "file", "--json",
        ]),
        None,
    )
    .json();
    let line = made["tokens_file_line"].as_str().unwrap();
    let file_token = made["token"].as_str().unwrap().to_owned();
    let secrets_dir = tempfile::tempdir().unwrap();
    let tokens_file = secrets_dir.path().join("tokens");
    std::fs::write(&tokens_file, format!("{line}\n")).unwrap();
    set_mode(&tokens_file, 0o600);
    let tokens_path = tokens_file.to_str().unwrap();

    let server = Server::start_adjusted(
        &["--exec-allow", "cat", "--tokens-file", tokens_path],
        |cmd| {
            cmd.env("TASKTABLE_TOKENS", tokens());
        },
    );
    // Only the files' own modes stand between the commands and them, not their
    // directories'.
    set_mode(server.dir.path(), 0o755);
    set_mode(secrets_dir.path(), 0o755);
    let db = server.dir.path().join("tasktable.db");
    let mut db_files = vec![db.clone()];
    for suffix in ["-wal", "-shm"] {
        let file = server.dir.path().join(format!("tasktable.db{suffix}"));
        if file.exists() {
            db_files.push(file);
        }
    }
    for file in &db_files {
        let mode = std::fs::metadata(file).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{file:?} was created under umask 077");
    }

    let pid = server.pid();
    let environ = submit_exec(&server, &["cat", &format!("/proc/{pid}/environ")]);
    let cmdline = submit_exec(&server, &["cat", &format!("/proc/{pid}/cmdline")]);
    let tokens = submit_exec(&server, &["cat", tokens_path]);
    let mut reads = vec![environ, tokens];
    for file in &db_files {
        reads.push(submit_exec(&server, &["cat", file.to_str().unwrap()]));
    }

    let secrets = [ADMIN, OPERATOR, &file_token[..], line];
    for id in &reads {
        denied(&settled(&server, *id));
    }
    // World-readable, as every process's is: it shows the arguments, none of them secret.
    let shown = settled(&server, cmdline);
    assert_eq!(shown["task"]["state"], "succeeded", "{shown}");
    let args = shown["task"]["result"]["stdout"].as_str().unwrap();
    assert!(
        args.contains("serve") && args.contains("--tokens-file"),
        "{args:?}"
    );
    holds_none("the command line", args, &secrets);

    for id in reads.iter().chain([&cmdline]) {
        let task = server.tt(&["show", &id.to_string(), "--json"]).ok().stdout;
        holds_none(&format!("task {id}"), &task, &secrets);
    }
    holds_none("the serve log", &server.log_text(), &secrets);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_postgres_a_password_given_in_the_environment_stays_out_of_reach_of_exec() {
    if !root("on_postgres_a_password_given_in_the_environment_stays_out_of_reach_of_exec") {
        return;
    }
    let Some(db) = TestDb::fresh("postgres").await else {
        return;
    };
    let url = with_password(db.url(), PASSWORD);
    let server = Server::start_adjusted(&["--exec-allow", "cat"], |cmd| {
        cmd.env("TASKTABLE_TOKENS", tokens())
            .env("DATABASE_URL", &url);
    });
    assert!(
        server.log_text().contains("backend=\"postgres\"")
            || server.log_text().contains("backend=postgres"),
        "{}",
        server.log_text()
    );
    let pid = server.pid();
    let environ = submit_exec(&server, &["cat", &format!("/proc/{pid}/environ")]);
    let cmdline = submit_exec(&server, &["cat", &format!("/proc/{pid}/cmdline")]);
    denied(&settled(&server, environ));
    let shown = settled(&server, cmdline);
    assert_eq!(shown["task"]["state"], "succeeded", "{shown}");

    let secrets = [PASSWORD, ADMIN, OPERATOR];
    for id in [environ, cmdline] {
        let task = server.tt(&["show", &id.to_string(), "--json"]).ok().stdout;
        holds_none(&format!("task {id}"), &task, &secrets);
    }
    holds_none("the serve log", &server.log_text(), &secrets);
}

/// `url` with `password` for its user.
fn with_password(url: &str, password: &str) -> String {
    let (scheme, rest) = url.split_once("://").expect("a URL");
    let (user, host) = rest
        .split_once('@')
        .expect("a user in TASKTABLE_TEST_POSTGRES_URL");
    let user = user.split(':').next().unwrap();
    format!("{scheme}://{user}:{password}@{host}")
}

#[test]
fn a_password_on_the_command_line_is_refused_when_exec_is_on() {
    let dir = tempfile::tempdir().unwrap();
    let url = "postgres://app:hunter2@127.0.0.1:1/tasks";
    for verb in ["serve", "worker"] {
        let run = finish(
            command(&[verb, "--database-url", url, "--exec-allow", "cat"]),
            None,
        );
        assert_eq!(run.code, 2, "{verb}: {run:?}");
        for text in [
            "--database-url holds a password",
            "/cmdline",
            "DATABASE_URL",
        ] {
            assert!(run.stderr.contains(text), "{verb}: {text:?} in {run:?}");
        }
        assert!(!run.stderr.contains("hunter2"), "{verb}: {run:?}");
    }
    // In the environment it is not refused: the database is then opened (here it cannot
    // be reached, which is a failure, exit code 1).
    let mut env_given = command(&["worker", "--exec-allow", "cat"]);
    env_given.env("DATABASE_URL", url).current_dir(dir.path());
    let run = finish(env_given, None);
    assert_eq!(run.code, 1, "{run:?}");
    assert!(run.stderr.contains("cannot connect"), "{run:?}");
    assert!(!run.stderr.contains("hunter2"), "{run:?}");
}

#[test]
fn an_exec_user_that_does_not_exist_or_without_exec_is_refused_before_anything_opens() {
    let dir = tempfile::tempdir().unwrap();
    let db_file = dir.path().join("never.db");
    let db = format!("sqlite://{}", db_file.display());
    let unknown = "no-such-user-of-tasktable";
    for verb in ["serve", "worker"] {
        let args = [verb, "--database-url", &db, "--exec-allow", "cat"];
        let run = finish(
            command(&[&args[..], &["--exec-user", unknown]].concat()),
            None,
        );
        run.fails(2, &format!("--exec-user {unknown}: no user \"{unknown}\""));
        let run = finish(
            command(&[verb, "--database-url", &db, "--exec-user", "nobody"]),
            None,
        );
        assert_eq!(run.code, 2, "{run:?}");
        assert!(run.stderr.contains("--exec-allow"), "{run:?}");
    }
    assert!(!db_file.exists(), "no database was opened");
}

/// A directory that `user` owns, for a server running as it.
fn owned_dir(user: &ExecUser) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::os::unix::fs::chown(dir.path(), Some(user.uid()), Some(user.gid())).unwrap();
    dir
}

#[test]
fn a_server_that_cannot_switch_users_refuses_another_and_warns_it_runs_commands_as_itself() {
    if !root(
        "a_server_that_cannot_switch_users_refuses_another_and_warns_it_runs_commands_as_itself",
    ) {
        return;
    }
    let nobody = nobody();
    let data = owned_dir(&nobody);
    let db = format!("sqlite://{}", data.path().join("tasktable.db").display());
    let mut as_nobody = command(&["serve", "--listen", "127.0.0.1:0", "--database-url", &db]);
    as_nobody
        .args(["--exec-allow", "cat", "--exec-user", "root"])
        .uid(nobody.uid())
        .gid(nobody.gid());
    finish(as_nobody, None).fails(2, "--exec-user root: this process runs as nobody");

    let server = Server::start_adjusted(&["--exec-allow", "cat", "--database-url", &db], |cmd| {
        cmd.env("TASKTABLE_TOKENS", tokens())
            .uid(nobody.uid())
            .gid(nobody.gid());
    });
    let log = server.log_text();
    let warning = "exec commands run as this process's own user, so they can read whatever it can";
    assert_eq!(log.matches(warning).count(), 1, "{log}");
    assert!(log.contains("WARN"), "{log}");
    // Same user, yet the server is not dumpable: its environment is not the command's.
    let pid = server.pid();
    let environ = submit_exec(&server, &["cat", &format!("/proc/{pid}/environ")]);
    denied(&settled(&server, environ));
    let task = server
        .tt(&["show", &environ.to_string(), "--json"])
        .ok()
        .stdout;
    holds_none("the task", &task, &[ADMIN, OPERATOR]);
}

#[test]
fn exec_commands_of_a_root_server_run_as_nobody_with_no_groups_or_privileges() {
    if !root("exec_commands_of_a_root_server_run_as_nobody_with_no_groups_or_privileges") {
        return;
    }
    let server = Server::start_adjusted(&["--exec-allow", "id", "--exec-allow", "cat"], |cmd| {
        cmd.env("TASKTABLE_TOKENS", tokens());
    });
    let nobody = nobody();
    assert!(
        server.log_text().contains(&format!("user={nobody}"))
            || server.log_text().contains(&format!("user=\"{nobody}\"")),
        "{}",
        server.log_text()
    );
    let uid = submit_exec(&server, &["id", "-u"]);
    let status = submit_exec(&server, &["cat", "/proc/self/status"]);

    let uid = settled(&server, uid);
    // The whole output is JSON, so the result holds it as a number.
    assert_eq!(
        uid["task"]["result"]["stdout"],
        serde_json::json!(nobody.uid()),
        "{uid}"
    );
    let status = settled(&server, status);
    let status = status["task"]["result"]["stdout"].as_str().unwrap();
    let line = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .unwrap_or_else(|| panic!("{name} in {status}"))
            .trim()
            .to_owned()
    };
    let gid = nobody.gid().to_string();
    assert_eq!(line("Gid"), [&gid[..]; 4].join("\t"), "{status}");
    assert_eq!(line("Groups"), "", "{status}");
    assert_eq!(line("NoNewPrivs"), "1", "{status}");
    assert_eq!(line("CapEff"), "0000000000000000", "{status}");
    assert!(
        !server
            .log_text()
            .contains("exec commands run as this process's own user"),
        "no warning as root: {}",
        server.log_text()
    );
}
