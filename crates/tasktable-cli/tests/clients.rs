//! The client packages' own tests (`clients/python`, `clients/typescript`), run against this
//! build of `tasktable serve`: each of their tests starts the binary on a database of its
//! own. Outside CI a missing Python or Node skips with a note; in CI it fails.

mod common;

use common::{present, repo, BIN};
use std::path::PathBuf;
use std::process::Command;

fn clients() -> PathBuf {
    repo().join("clients")
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
