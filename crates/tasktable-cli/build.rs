//! Names the source the binary was built from, for `tasktable --version` (the
//! TASKTABLE_VERSION it sets): the git
//! revision the checkout is at (its commit; changes not committed are not told), or
//! TASKTABLE_BUILD_REV when the build has no git (a container build, a published crate).

use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=TASKTABLE_BUILD_REV");
    let rev = std::env::var("TASKTABLE_BUILD_REV")
        .ok()
        .filter(|r| !r.is_empty())
        .or_else(git_rev);
    let version = std::env::var("CARGO_PKG_VERSION").unwrap_or_default();
    let version = match rev {
        Some(rev) => format!("{version} ({rev})"),
        None => version,
    };
    println!("cargo:rustc-env=TASKTABLE_VERSION={version}");
}

fn git_rev() -> Option<String> {
    let git = |args: &[&str]| {
        Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
    };
    git(&["rev-parse", "--show-toplevel"])?;
    // A new commit or checkout moves HEAD or a ref: build again then.
    for path in ["HEAD", "refs/heads", "packed-refs"] {
        if let Some(p) = git(&["rev-parse", "--path-format=absolute", "--git-path", path]) {
            println!("cargo:rerun-if-changed={p}");
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}
