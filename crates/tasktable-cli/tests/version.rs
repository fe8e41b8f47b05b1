//! `tasktable --version` names the commit the binary was built from.

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_tasktable");

#[test]
fn the_version_names_the_commit_it_was_built_from() {
    let out = Command::new(BIN).arg("--version").output().expect("run");
    assert!(out.status.success());
    let said = String::from_utf8(out.stdout).expect("utf-8");
    assert!(
        said.starts_with(&format!("tasktable {} ", env!("CARGO_PKG_VERSION"))),
        "{said}"
    );
    let head = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("git");
    assert!(head.status.success(), "the tests run in a git checkout");
    let head = String::from_utf8(head.stdout).expect("utf-8");
    assert_eq!(
        said.trim_end(),
        format!("tasktable {} ({})", env!("CARGO_PKG_VERSION"), head.trim())
    );
}
