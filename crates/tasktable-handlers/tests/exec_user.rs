//! Who an `exec` command runs as and what it may do, read by the command itself from
//! `/proc/self/status`: no capability and `no_new_privs` always; another user, its group
//! and no supplementary group with [`ExecHandler::run_as`]; and a working directory or a
//! program that user may not reach failing the attempt, saying why.

mod harness;

use harness::{instant_retry, Harness};
use serde_json::{json, Value};
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_handlers::{ExecHandler, ExecPolicy, ExecUser};

fn exec(payload: Value) -> NewTask {
    NewTask::new("exec", payload)
        .backoff(instant_retry())
        .timeout(Duration::from_secs(30))
        .max_attempts(1)
}

/// The value of `field` in a `/proc/<pid>/status` text, tabs between columns.
fn field<'a>(status: &'a str, field: &str) -> &'a str {
    status
        .lines()
        .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
        .unwrap_or_else(|| panic!("no {field} in {status}"))
        .trim()
}

/// Whether this test process is root, as these tests need: outside CI a test skips with
/// a note, in CI it fails.
fn root(test: &str) -> bool {
    tasktable_testdb::root(test, "to switch users")
}

async fn status_of_a_command(handler: ExecHandler) -> String {
    let mut h = Harness::start(Duration::from_secs(5), |w| w.register(handler)).await;
    let id = h
        .submit(exec(json!({"command": ["cat", "/proc/self/status"]})))
        .await;
    let task = h.settled(id).await;
    h.shutdown().await;
    assert_eq!(task.state, TaskState::Succeeded, "{task:?}");
    task.result.unwrap()["stdout"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_command_has_no_capability_and_no_new_privileges_whoever_it_runs_as() {
    let status = status_of_a_command(ExecHandler::new(ExecPolicy::allow(["cat"]))).await;
    assert_eq!(field(&status, "NoNewPrivs"), "1", "{status}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(field(&status, set), "0000000000000000", "{set}: {status}");
    }
    let me = ExecUser::current();
    let uid = me.uid().to_string();
    assert_eq!(field(&status, "Uid").split('\t').next(), Some(uid.as_str()));
    if me.uid() == 0 {
        // Still root, so still able to empty its bounding set, which it did.
        assert_eq!(field(&status, "CapBnd"), "0000000000000000", "{status}");
    }
}

#[tokio::test]
async fn run_as_switches_to_the_user_and_its_group_alone() {
    if !root("run_as_switches_to_the_user_and_its_group_alone") {
        return;
    }
    let nobody = ExecUser::lookup("nobody").expect("a nobody user");
    let handler = ExecHandler::new(ExecPolicy::allow(["cat"])).run_as(nobody.clone());
    let status = status_of_a_command(handler).await;
    let uid = nobody.uid().to_string();
    let gid = nobody.gid().to_string();
    assert_eq!(field(&status, "Uid"), [&uid[..]; 4].join("\t"), "{status}");
    assert_eq!(field(&status, "Gid"), [&gid[..]; 4].join("\t"), "{status}");
    assert_eq!(field(&status, "Groups"), "", "{status}");
    assert_eq!(field(&status, "NoNewPrivs"), "1", "{status}");
    for set in ["CapInh", "CapPrm", "CapEff", "CapAmb"] {
        assert_eq!(field(&status, set), "0000000000000000", "{set}: {status}");
    }
}

#[tokio::test]
async fn a_directory_or_program_the_user_cannot_reach_fails_the_attempt_saying_so() {
    if !root("a_directory_or_program_the_user_cannot_reach_fails_the_attempt_saying_so") {
        return;
    }
    // Root's alone: nobody may neither enter it nor run what is inside.
    let private = tempfile::tempdir().unwrap();
    std::fs::set_permissions(private.path(), std::fs::Permissions::from_mode(0o700)).unwrap();
    let script = private.path().join("job.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let script = script.to_str().unwrap();

    let nobody = ExecUser::lookup("nobody").expect("a nobody user");
    let policy = ExecPolicy::allow(["cat", script]).allow_cwd([private.path()]);
    let handler = ExecHandler::new(policy).run_as(nobody);
    let mut h = Harness::start(Duration::from_secs(5), |w| w.register(handler)).await;
    let in_private = h
        .submit(exec(json!({"command": ["cat"], "cwd": private.path()})))
        .await;
    let private_program = h.submit(exec(json!({"command": [script]}))).await;
    for id in [in_private, private_program] {
        let task = h.settled(id).await;
        assert_eq!(task.state, TaskState::Failed, "{task:?}");
        // Permanent: the same user meets the same permissions on every attempt.
        assert_eq!(h.outcomes(id).await, [AttemptOutcome::Failed]);
        let attempts = h.attempts(id).await;
        assert_eq!(attempts.len(), 1, "{attempts:?}");
        let error = task.last_error.unwrap();
        assert!(error.contains("Permission denied"), "{error}");
        assert!(
            error.contains("commands run as user nobody")
                && error.contains("must be allowed to execute the program and to enter"),
            "{error}"
        );
    }
    h.shutdown().await;
}
