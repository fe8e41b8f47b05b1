//! The client packages' own tests (`clients/python`, `clients/typescript`), run against this
//! build of `tasktable serve`: each of their tests starts the binary on a database of its
//! own. Outside CI a missing Python or Node skips with a note; in CI it fails.

use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tasktable");

fn clients() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients")
}

/// Whether `program --version` runs; outside CI a missing one skips the test.
fn present(program: &str) -> bool {
    match Command::new(program).arg("--version").output() {
        Ok(out) if out.status.success() => true,
        _ if std::env::var_os("CI").is_none() => {
            eprintln!(
                "SKIPPED: {program} cannot be run; install it or run with CI=1 to make this fail"
            );
            false
        }
        _ => panic!("{program} is required in CI"),
    }
}

fn run(what: &str, command: &mut Command) {
    let status = command
        .env("TASKTABLE_BIN", BIN)
        .status()
        .unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(status.success(), "{what} failed: {status}");
}

#[test]
fn the_python_package_passes_its_tests_against_serve() {
    if !present("python3") {
        return;
    }
    let package = clients().join("python");
    run(
        "python -m unittest",
        Command::new("python3")
            .args(["-m", "unittest", "-v"])
            .current_dir(package.join("tests"))
            .env("PYTHONPATH", package.join("src")),
    );
}

#[test]
fn the_typescript_package_passes_its_tests_against_serve() {
    if !present("npm") {
        return;
    }
    let package = clients().join("typescript");
    if !package.join("node_modules/typescript").exists() {
        // Its one dependency is the compiler, pinned by package-lock.json.
        run(
            "npm ci",
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
                .current_dir(&package),
        );
    }
    run(
        "npm test",
        Command::new("npm").arg("test").current_dir(&package),
    );
}
