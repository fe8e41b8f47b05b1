//! Commands that try to outlive their attempt: descendants that leave the process group and
//! keep the output pipes open, and groups that ignore SIGTERM. None may keep an attempt
//! running past the command's exit or its timeout. Real processes under a real worker.
//!
//! Every command here would run for 300 s if left alone, and the harness gives up after
//! 60 s, so a test that finishes shows the attempt was not held up; no test measures time.

mod harness;
mod processes;

use harness::{instant_retry, Harness};
use nix::sys::signal::{kill, Signal};
use nix::unistd::Pid;
use processes::{alive, process_group_ends, read_pids};
use serde_json::{json, Value};
use std::path::Path;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_handlers::{ExecHandler, ExecPolicy};

async fn start(kill_grace: Duration) -> Harness {
    let handler = ExecHandler::new(ExecPolicy::allow(["sh"])).kill_grace(kill_grace);
    Harness::start(Duration::from_secs(5), |w| w.register(handler)).await
}

fn sh(script: &str, pids: &Path) -> Value {
    json!(["sh", "-c", script, "sh", pids])
}

fn exec(payload: Value) -> NewTask {
    NewTask::new("exec", payload)
        .backoff(instant_retry())
        .max_attempts(1)
}

/// Starts a process in a session of its own that holds the command's stdin, stdout and
/// stderr open for 300 s without touching them, and waits until it is out of the group (it
/// has written its pid to `$1`), lest the command's exit kill it while still inside.
const ESCAPE: &str = r#"setsid sh -c 'echo $$ > "$1"; exec sleep 300' sh "$1" &
while [ ! -s "$1" ]; do sleep 0.01; done"#;

/// Kills the process that escaped the test's command, so no test leaves one behind.
struct Escaped(i32);

impl Drop for Escaped {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(self.0), Signal::SIGKILL);
    }
}

#[tokio::test]
async fn a_descendant_outside_the_group_holding_the_pipes_does_not_hold_the_attempt() {
    let mut h = start(Duration::from_secs(5)).await;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // The command exits without reading its input either.
    let script = format!("{ESCAPE}\necho done");
    let input = "x".repeat(256 * 1024); // more than a pipe holds, so feeding it would block
    let id = h
        .submit(
            exec(json!({"command": sh(&script, &pids), "stdin": input}))
                .timeout(Duration::from_secs(300)),
        )
        .await;
    let escaped = Escaped(read_pids(&pids).await[0]);

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Succeeded, "{:?}", task.last_error);
    let result = task.result.unwrap();
    assert_eq!(result["stdout"], "done\n");
    let stderr = result["stderr"].as_str().unwrap();
    assert!(
        stderr.contains("a process outside its process group kept the pipes open"),
        "{stderr}"
    );
    assert!(
        alive(escaped.0),
        "it escaped the group kill, yet the attempt ended"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_descendant_outside_the_group_cannot_hold_an_attempt_past_its_timeout() {
    let mut h = start(Duration::from_secs(5)).await;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let script = format!("{ESCAPE}\nsleep 300");
    let id = h
        .submit(exec(json!({"command": sh(&script, &pids)})).timeout(Duration::from_secs(1)))
        .await;
    let _escaped = Escaped(read_pids(&pids).await[0]);

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::TimedOut]);
    h.shutdown().await;
}

#[tokio::test]
async fn a_timed_out_command_gets_sigterm_first_so_it_can_clean_up() {
    let mut h = start(Duration::from_secs(30)).await;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let cleaned = dir.path().join("cleaned");
    let script = r#"trap 'echo bye > "$2"; exit 0' TERM; echo $$ > "$1"; sleep 300 & wait"#;
    let command = json!(["sh", "-c", script, "sh", pids, cleaned]);
    let id = h
        .submit(exec(json!({"command": command})).timeout(Duration::from_secs(1)))
        .await;
    let group = read_pids(&pids).await[0];

    assert_eq!(h.settled(id).await.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::TimedOut]);
    // Well within the 30 s grace, so it was SIGTERM that ended the group, not SIGKILL.
    process_group_ends(group).await;
    assert_eq!(std::fs::read_to_string(&cleaned).unwrap(), "bye\n");
    h.shutdown().await;
}

#[tokio::test]
async fn a_group_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let mut h = start(Duration::from_secs(1)).await;
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    // Ignored signals stay ignored across exec, so the sleeps ignore SIGTERM too.
    let script = r#"trap '' TERM; sleep 300 & echo "$$ $!" > "$1"; sleep 300; wait"#;
    let id = h
        .submit(exec(json!({"command": sh(script, &pids)})).timeout(Duration::from_secs(1)))
        .await;
    let [group, background] = read_pids(&pids).await[..] else {
        panic!("two pids")
    };

    assert_eq!(h.settled(id).await.state, TaskState::Failed);
    assert_eq!(h.outcomes(id).await, [AttemptOutcome::TimedOut]);
    process_group_ends(group).await;
    assert!(!alive(background));
    h.shutdown().await;
}

/// A worker process ends its runtime as it exits; the SIGKILL must not be lost with it.
#[test]
fn the_group_is_killed_when_the_runtime_ends_before_the_grace_period() {
    let dir = tempfile::tempdir().unwrap();
    let pids = dir.path().join("pids");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let group = runtime.block_on(async {
        // A grace far longer than the test: only the runtime's end can kill the group.
        let mut h = start(Duration::from_secs(3600)).await;
        let script = r#"trap '' TERM; echo $$ > "$1"; sleep 300"#;
        let id = h
            .submit(exec(json!({"command": sh(script, &pids)})).timeout(Duration::from_secs(1)))
            .await;
        let group = read_pids(&pids).await[0];
        assert_eq!(h.settled(id).await.state, TaskState::Failed);
        h.shutdown().await;
        group
    });
    drop(runtime);

    let check = tokio::runtime::Runtime::new().unwrap();
    check.block_on(process_group_ends(group));
}
