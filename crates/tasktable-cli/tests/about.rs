//! What the binary says about itself: `--version` names the commit it was built from,
//! and each command's `--help` lists the options it takes.

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

fn help(args: &[&str]) -> String {
    let out = Command::new(BIN)
        .args(args)
        .arg("--help")
        .output()
        .expect("run");
    assert!(out.status.success(), "{args:?} --help");
    String::from_utf8(out.stdout).expect("utf-8")
}

#[test]
fn commands_that_open_a_database_do_not_offer_the_client_options() {
    for command in [&["serve"][..], &["worker"], &["migrate"]] {
        let said = help(command);
        assert!(said.contains("--database-url"), "{command:?}: {said}");
        for client in ["--server ", "--token ", "--json", "Client options"] {
            assert!(
                !said.contains(client),
                "{command:?} offers {client}: {said}"
            );
        }
        assert!(said.contains("--log-format"), "{command:?}: {said}");
    }
    // Making a token talks to no server, but prints JSON when asked.
    let said = help(&["token", "new"]);
    assert!(
        said.contains("--json") && !said.contains("--server"),
        "{said}"
    );
    // Commands that talk to a server offer them, after the subcommand or before it.
    for command in [&["ls"][..], &["workers"], &["schedule", "ls"]] {
        let said = help(command);
        for client in ["--server ", "--token ", "--json"] {
            assert!(said.contains(client), "{command:?} lacks {client}: {said}");
        }
    }
    let before = Command::new(BIN)
        .args(["--server", "http://127.0.0.1:1", "ls"])
        .output()
        .expect("run");
    let said = String::from_utf8_lossy(&before.stderr);
    assert!(said.contains("127.0.0.1:1"), "{said}");
}
