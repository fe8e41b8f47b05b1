//! The `exec` handler run by a real worker on SQLite, starting real processes.

mod harness;
mod processes;

use harness::{instant_retry, Harness};
use processes::{alive, members, process_group_ends, read_pids};
use serde_json::{json, Value};
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_handlers::{ExecHandler, ExecPolicy};
use tasktable_runtime::{StopReason, WorkerEvent};
use tasktable_store::{Change, Target, UpdateParams};

/// Starts `sleep 30` in the background and in the foreground, after writing the shell's
/// pid (which is also its process group id) and the background sleep's pid to `$1`.
const SLEEPERS: &str = r#"sleep 30 & echo "$$ $!" > "$1"; sleep 30; wait"#;

async fn start(stop_grace: Duration) -> Harness {
    let policy = ExecPolicy::allow(["cat", "sh", "/nonexistent/program"]);
    Harness::start(stop_grace, |w| w.register(ExecHandler::new(policy))).await
}

/// A command that hangs times out well before the harness gives up waiting.
fn exec(payload: Value) -> NewTask {
    NewTask::new("exec", payload)
        .backoff(instant_retry())
        .timeout(Duration::from_secs(30))
}

fn sh(script: &str, args: &[&str]) -> Value {
    let mut command = vec!["sh", "-c", script, "sh"];
    command.extend_from_slice(args);
    json!(command)
}

#[tokio::test]
async fn cat_returns_its_stdin_as_the_result() {
    let mut h = start(Duration::from_secs(5)).await;
    let data = json!({"hello": "world", "n": [1, 2, 3]});
    let as_json = h
        .submit(exec(json!({"command": ["cat"], "stdin": data})))
        .await;
    let as_text = h
        .submit(exec(json!({"command": ["cat"], "stdin": "plain text\n"})))
        .await;
    // With no stdin, cat sees its input closed at once; otherwise it would wait forever.
    let no_input = h.submit(exec(json!({"command": ["cat"]}))).await;

    let want = [
        (as_json, data.clone()),
        (as_text, json!("plain text\n")),
        (no_input, json!("")),
    ];
    for (id, stdout) in want {
        let task = h.settled(id).await;
        assert_eq!(task.state, TaskState::Succeeded);
        let result = json!({"exit_code": 0, "stdout": stdout, "stderr": ""});
        assert_eq!(task.result, Some(result));
        assert_eq!(h.outcomes(id).await, [AttemptOutcome::Succeeded]);
    }
    h.shutdown().await;
}

#[tokio::test]
async fn allowed_env_and_cwd_reach_the_command() {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    let policy = ExecPolicy::allow(["sh"])
        .allow_env(["GREETING".parse().unwrap()])
        .allow_cwd([dir.path()]);
    let mut h = Harness::start(Duration::from_secs(5), |w| {
        w.register(ExecHandler::new(policy))
    })
    .await;
    let id = h
        .submit(exec(json!({
            "command": sh(r#"printf '%s:%s in %s' "${#GREETING}" "$GREETING" "$(pwd)""#, &[]),
            "env": {"GREETING": "hello"},
            "cwd": sub,
        })))
        .await;

    // The value reached the command (its length is printed); the result, which readers
    // see, hides it as it hides it in the payload.
    let task = h.settled(id).await;
    let want = format!("5:[redacted] in {}", sub.canonicalize().unwrap().display());
    assert_eq!(task.result.unwrap()["stdout"], want);
    h.shutdown().await;
}

/// What is kept of the output is cut from it: a piece of a variable's value at a cut edge
/// is hidden too, or two cuts at different places would show the whole of it.
#[tokio::test]
async fn no_piece_of_a_variable_shows_where_the_output_is_cut() {
    let policy = ExecPolicy::allow(["sh"]).allow_env(["SECRET_X".parse().unwrap()]);
    let mut h = Harness::start(Duration::from_secs(5), |w| {
        w.register(ExecHandler::new(policy))
    })
    .await;
    let secret = json!({"SECRET_X": "ENVSECRET111"});
    // The first 64 KiB of stdout are kept: the value starts 6 bytes before the cut.
    let head = h
        .submit(exec(json!({
            "command": sh(r#"head -c 65530 /dev/zero | tr '\0' a; printf %s "$SECRET_X""#, &[]),
            "env": secret,
        })))
        .await;
    // The last 4 KiB of stderr are kept: the value ends 6 bytes after the cut.
    let tail = h
        .submit(exec(json!({
            "command": sh(r#"printf %s "$SECRET_X" >&2; head -c 4090 /dev/zero | tr '\0' a >&2"#, &[]),
            "env": secret,
        })))
        .await;
    let head = h.settled(head).await.result.unwrap();
    let stdout = head["stdout"].as_str().unwrap();
    assert!(
        stdout.ends_with("a[redacted]") && !stdout.contains("ENVSEC"),
        "{}",
        &stdout[65500..]
    );
    let tail = h.settled(tail).await.result.unwrap();
    let stderr = tail["stderr"].as_str().unwrap();
    assert!(
        stderr.starts_with("[redacted]a") && !stderr.contains("RET111"),
        "{}",
        &stderr[..40]
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_non_zero_exit_is_retried_until_the_attempts_run_out() {
    let mut h = start(Duration::from_secs(5)).await;
    let script = sh("echo 'disk on fire' >&2; exit 1", &[]);
    let id = h
        .submit(exec(json!({"command": script})).max_attempts(3))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(task.attempt, 3);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::Error; 3]);
    let error = task.last_error.unwrap();
    assert_eq!(error, "exit code 1; stderr: disk on fire");
    h.shutdown().await;
}

#[tokio::test]
async fn exit_75_is_retried_and_a_later_success_stands() {
    let mut h = start(Duration::from_secs(5)).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("tried-once");
    let script = r#"if [ -e "$1" ]; then echo '{"done": true}'; else : > "$1"; exit 75; fi"#;
    let id = h
        .submit(exec(
            json!({"command": sh(script, &[marker.to_str().unwrap()])}),
        ))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Succeeded);
    assert_eq!(task.result.unwrap()["stdout"], json!({"done": true}));
    let outcomes = h.outcomes(id).await;
    assert_eq!(outcomes, [AttemptOutcome::Error, AttemptOutcome::Succeeded]);
    h.shutdown().await;
}

#[tokio::test]
async fn exit_65_fails_permanently_on_the_first_attempt() {
    let mut h = start(Duration::from_secs(5)).await;
    let script = sh("echo 'row 7 has no date' >&2; exit 65", &[]);
    let id = h
        .submit(exec(json!({"command": script})).max_attempts(5))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::Failed]);
    let error = task.last_error.unwrap();
    assert!(
        error.contains("exit code 65") && error.ends_with("row 7 has no date"),
        "{error}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn death_by_a_signal_is_retried() {
    let mut h = start(Duration::from_secs(5)).await;
    let id = h
        .submit(exec(json!({"command": sh("kill -9 $$", &[])})).max_attempts(2))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::Error; 2]);
    assert_eq!(task.last_error.unwrap(), "killed by signal SIGKILL");
    h.shutdown().await;
}

#[tokio::test]
async fn the_task_timeout_kills_the_whole_process_group() {
    let mut h = start(Duration::from_secs(5)).await;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let task = exec(json!({"command": sh(SLEEPERS, &[pids.to_str().unwrap()])}))
        .timeout(Duration::from_secs(1))
        .max_attempts(1);
    let id = h.submit(task).await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::TimedOut]);
    let [group, background] = read_pids(&pids).await[..] else {
        panic!("two pids")
    };
    process_group_ends(group).await;
    assert!(!alive(group) && !alive(background));
    h.shutdown().await;
}

#[tokio::test]
async fn cancelling_a_running_command_kills_its_process_group() {
    // The runtime would abort the handler only after a minute; the group must die sooner,
    // so it is the handler that kills it when told to stop.
    let mut h = start(Duration::from_secs(60)).await;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let id = h
        .submit(exec(
            json!({"command": sh(SLEEPERS, &[pids.to_str().unwrap()])}),
        ))
        .await;
    let [group, background] = read_pids(&pids).await[..] else {
        panic!("two pids")
    };
    assert!(
        !members(group).is_empty() && alive(background),
        "the command runs"
    );

    let changed = h
        .store
        .task_update(UpdateParams {
            actor: tasktable_core::Actor::rust(),
            target: Target::Id(id),
            change: Change::Cancel,
            now: None,
            action: None,
        })
        .await
        .unwrap();
    assert_eq!(changed, 1);
    let stopped = h
        .event(id, |e| matches!(e, WorkerEvent::Stopped { .. }))
        .await;
    assert!(matches!(
        stopped,
        WorkerEvent::Stopped {
            reason: StopReason::Cancelled,
            ..
        }
    ));
    process_group_ends(group).await;
    assert!(!alive(background));
    assert_eq!(h.task(id).await.state, TaskState::Cancelled);
    h.shutdown().await;
}

#[tokio::test]
async fn a_program_off_the_allow_list_fails_permanently_without_running() {
    let mut h = start(Duration::from_secs(5)).await;
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("created");
    let refused = h
        .submit(exec(json!({"command": ["touch", marker]})).max_attempts(5))
        .await;
    let missing = h
        .submit(exec(json!({"command": ["/nonexistent/program"]})).max_attempts(5))
        .await;

    let task = h.settled(refused).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(refused).await, [AttemptOutcome::Failed]);
    let error = task.last_error.unwrap();
    assert!(
        error.contains("\"touch\" is not on this worker's exec allow-list"),
        "{error}"
    );
    assert!(
        error.contains("ExecPolicy::allow"),
        "says how to allow it: {error}"
    );
    assert!(!marker.exists(), "touch must not have run");

    let task = h.settled(missing).await;
    assert_eq!(
        task.state,
        TaskState::Failed,
        "an allowed but missing program"
    );
    assert_eq!(h.outcomes(missing).await, [AttemptOutcome::Failed]);
    assert!(task.last_error.unwrap().contains("cannot start"));
    h.shutdown().await;
}

#[tokio::test]
async fn large_output_is_drained_without_deadlock_and_truncated() {
    let mut h = start(Duration::from_secs(5)).await;
    // 10 MiB of stderr before 10 MiB of stdout: reading one pipe to its end before the
    // other would leave the command blocked on a full stderr pipe.
    let script =
        r#"head -c 10485760 /dev/zero | tr '\0' e >&2; head -c 10485760 /dev/zero | tr '\0' o"#;
    let flood = h.submit(exec(json!({"command": sh(script, &[])}))).await;
    // 900 KB through cat: writing all of stdin before reading stdout would block both.
    let big_input = "i".repeat(900_000);
    let echo = h
        .submit(exec(json!({"command": ["cat"], "stdin": big_input})))
        .await;

    let result = h.settled(flood).await.result.expect("succeeded");
    assert_eq!(result["stdout"], "o".repeat(64 * 1024));
    assert_eq!(result["stderr"], "e".repeat(4 * 1024));
    let result = h.settled(echo).await.result.expect("succeeded");
    assert_eq!(result["stdout"], "i".repeat(64 * 1024));
    h.shutdown().await;
}
