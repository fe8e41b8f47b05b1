//! Whole chaos runs on SQLite: a short one passes every check with every kind of fault
//! SQLite allows; and with a mechanism switched off on purpose, exactly the check that
//! guards it fails. The unit tests of each check build bad histories by hand; these show
//! the checks fire on evidence gathered from real processes.
//!
//! They need the `tasktable` binary beside this crate's (`cargo build -p tasktable-cli`;
//! a workspace test run builds it). The runs take turns: each starts several processes,
//! and two at once on a small machine would slow each other into false alarms.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;
use std::sync::Mutex;

const CHAOS: &str = env!("CARGO_BIN_EXE_tasktable-chaos");
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn tasktable() -> Option<PathBuf> {
    let bin = PathBuf::from(CHAOS).with_file_name("tasktable");
    if bin.is_file() {
        return Some(bin);
    }
    let why = format!(
        "{} is missing; build it with cargo build -p tasktable-cli",
        bin.display()
    );
    if std::env::var_os("CI").is_some() {
        panic!("{why}");
    }
    eprintln!("SKIPPED: {why}");
    None
}

/// Runs the chaos command on SQLite with `args`; the exit code and the JSON summary.
fn run(args: &[&str]) -> Option<(i32, Value)> {
    let tasktable = tasktable()?;
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(CHAOS)
        .args(["--backend", "sqlite", "--json", "--tasktable-bin"])
        .arg(tasktable)
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run tasktable-chaos");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}); stderr:\n{stderr}"));
    Some((out.status.code().expect("exit code"), summary))
}

fn failed_checks(summary: &Value) -> Vec<&str> {
    summary["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| !c["violations"].as_array().expect("violations").is_empty())
        .map(|c| c["name"].as_str().expect("name"))
        .collect()
}

#[test]
fn a_short_run_injects_every_fault_sqlite_allows_and_passes_every_check() {
    let Some((code, summary)) = run(&[
        "--duration",
        "15s",
        "--tasks",
        "600",
        "--seed",
        "1",
        "--fault-every",
        "2s",
    ]) else {
        return;
    };
    assert_eq!(failed_checks(&summary), Vec::<&str>::new(), "{summary:#}");
    assert_eq!(code, 0);
    assert_eq!(summary["tasks"]["submitted"], 600);
    for kind in [
        "kill_worker",
        "kill_pull_worker",
        "freeze_worker",
        "stop_worker",
        "kill_api",
    ] {
        assert!(
            summary["faults"][kind].as_u64() >= Some(1),
            "no {kind} in {:#}",
            summary["faults"]
        );
    }
    for check in summary["checks"].as_array().unwrap() {
        assert!(check["examined"].as_u64() > Some(0), "{check:#}");
    }
    for asked in ["claims", "submits"] {
        assert!(
            summary["hung_up"][asked].as_u64() >= Some(1),
            "no {asked} hung up: {:#}",
            summary["hung_up"]
        );
    }
}

#[test]
fn effects_written_without_the_fencing_test_fail_the_stale_write_check() {
    let Some((code, summary)) = run(&[
        "--duration",
        "12s",
        "--tasks",
        "1000",
        "--seed",
        "7",
        "--break",
        "unfenced-effects",
    ]) else {
        return;
    };
    assert_eq!(
        failed_checks(&summary),
        vec!["no_stale_write_accepted"],
        "{summary:#}"
    );
    assert_eq!(code, 1);
    let stale = summary["checks"][2]["violations"].to_string();
    assert!(stale.contains("effect under token"), "{stale}");
}

#[test]
fn workers_without_a_rescuer_fail_the_stuck_check() {
    let Some((code, summary)) = run(&[
        "--duration",
        "12s",
        "--tasks",
        "600",
        "--seed",
        "7",
        "--break",
        "no-rescue",
    ]) else {
        return;
    };
    assert_eq!(
        failed_checks(&summary),
        vec!["nothing_stuck"],
        "{summary:#}"
    );
    assert_eq!(code, 1);
}

#[test]
fn bad_options_are_usage_errors_that_say_what_to_change_and_start_nothing() {
    for (args, says) in [
        (&["--duration", "soon"][..], "like 500ms, 30s, 2m"),
        (
            &["--tasks", "0"][..],
            "--tasks must be between 1 and 1000000",
        ),
        (
            &["--workers", "0"][..],
            "an in-process worker always runs a rescuer",
        ),
        (
            &["--lease", "500ms"][..],
            "--lease must be between 1s and 1h",
        ),
    ] {
        let out = Command::new(CHAOS)
            .args(args)
            .output()
            .expect("run tasktable-chaos");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(says), "{args:?}: {stderr}");
        assert!(
            !stderr.contains("tasktable-chaos: "),
            "{args:?} started a run: {stderr}"
        );
    }
}

/// The cut-off run on SQLite: clients that hang up mid-request, a submitter and a
/// finisher; every write answered 2xx holds, and the run did each thing it checks.
#[test]
fn a_short_cut_off_run_keeps_every_acknowledged_write() {
    let Some(tasktable) = tasktable() else {
        return;
    };
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let out = Command::new(CHAOS)
        .args([
            "cut-off",
            "--backend",
            "sqlite",
            "--json",
            "--duration",
            "10s",
        ])
        .args(["--seed", "1", "--tasktable-bin"])
        .arg(tasktable)
        .env_remove("RUST_LOG")
        .output()
        .expect("run tasktable-chaos cut-off");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let summary: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}); stderr:\n{stderr}"));
    assert_eq!(out.status.code(), Some(0), "{summary:#}");
    assert_eq!(summary["passed"], true);
    for asked in ["claims", "submits"] {
        assert!(summary["hung_up"][asked].as_u64() > Some(0), "{summary:#}");
    }
    for done in ["submits_acknowledged", "completions_acknowledged"] {
        assert!(summary[done].as_u64() > Some(0), "{summary:#}");
    }
}
