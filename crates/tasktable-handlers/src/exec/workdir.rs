//! The directory a command starts in: the payload's `cwd`, which under an allow-list must
//! be one of the directories the operator allows or lie beneath one.
//!
//! Both sides are compared as canonical paths (absolute, `..` and symlinks resolved), so
//! `/srv/jobs/../../etc` and a symlink inside an allowed directory that points out of it
//! are judged by where they really lead. The command is then started in that canonical
//! path, not in the one the payload wrote, so what was checked is what is used.

use std::path::{Path, PathBuf};

/// The directory to start the command in (`None`: the worker's own), or why `cwd` may not
/// be used. `allowed`: the directories an allow-list allows; `None` allows any.
pub(super) fn workdir(
    cwd: Option<&str>,
    allowed: Option<&[PathBuf]>,
) -> Result<Option<PathBuf>, String> {
    let Some(cwd) = cwd else { return Ok(None) };
    let real = Path::new(cwd)
        .canonicalize()
        .map_err(|e| format!("cwd {cwd:?} cannot be used: {e}"))?;
    if !real.is_dir() {
        return Err(format!("cwd {cwd:?} is not a directory"));
    }
    let Some(allowed) = allowed else {
        return Ok(Some(real));
    };
    let inside = allowed
        .iter()
        .filter_map(|dir| dir.canonicalize().ok())
        .any(|dir| real.starts_with(dir));
    if inside {
        return Ok(Some(real));
    }
    let really = if real == Path::new(cwd) {
        String::new()
    } else {
        format!(" (which is {})", real.display())
    };
    let listed = if allowed.is_empty() {
        "none".to_owned()
    } else {
        let dirs: Vec<String> = allowed.iter().map(|d| d.display().to_string()).collect();
        dirs.join(", ")
    };
    Err(format!(
        "cwd {cwd:?}{really} is not allowed: commands may start only in the directories this \
         worker allows and beneath them ({listed}); to allow it, start the worker with \
         --exec-allow-cwd DIR (ExecPolicy::allow_cwd)"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Tree {
        _root: tempfile::TempDir,
        allowed: PathBuf,
        outside: PathBuf,
    }

    /// `allowed/sub`, `allowed/out -> ../outside`, and `outside`.
    fn tree() -> Tree {
        let root = tempfile::tempdir().unwrap();
        let allowed = root.path().join("allowed");
        let outside = root.path().join("outside");
        std::fs::create_dir_all(allowed.join("sub")).unwrap();
        std::fs::create_dir(&outside).unwrap();
        std::os::unix::fs::symlink(&outside, allowed.join("out")).unwrap();
        std::fs::write(allowed.join("file"), "").unwrap();
        Tree {
            _root: root,
            allowed,
            outside,
        }
    }

    fn run(cwd: &Path, allowed: &[PathBuf]) -> Result<Option<PathBuf>, String> {
        workdir(Some(cwd.to_str().unwrap()), Some(allowed))
    }

    #[test]
    fn the_allowed_directory_and_those_beneath_it_may_be_used() {
        let t = tree();
        let allowed = [t.allowed.clone()];
        let real = t.allowed.canonicalize().unwrap();
        assert_eq!(run(&t.allowed, &allowed), Ok(Some(real.clone())));
        assert_eq!(
            run(&t.allowed.join("sub"), &allowed),
            Ok(Some(real.join("sub")))
        );
        assert_eq!(run(&t.allowed.join("sub/.."), &allowed), Ok(Some(real)));
        assert_eq!(workdir(None, Some(&allowed)), Ok(None));
    }

    #[test]
    fn dot_dot_and_symlinks_cannot_lead_out_of_an_allowed_directory() {
        let t = tree();
        let allowed = [t.allowed.clone()];
        for escape in [
            t.allowed.join(".."),
            t.allowed.join("sub/../../outside"),
            t.allowed.join("out"),
        ] {
            let err = run(&escape, &allowed).unwrap_err();
            assert!(err.contains("is not allowed"), "{escape:?}: {err}");
            assert!(err.contains("--exec-allow-cwd DIR"), "{err}");
        }
        let err = run(&t.allowed.join("out"), &allowed).unwrap_err();
        let outside = t.outside.canonicalize().unwrap();
        assert!(
            err.contains(&format!("(which is {})", outside.display())),
            "{err}"
        );
    }

    #[test]
    fn a_sibling_with_the_same_prefix_is_not_beneath() {
        let t = tree();
        let sibling = t.allowed.with_file_name("allowed-not");
        std::fs::create_dir(&sibling).unwrap();
        assert!(run(&sibling, std::slice::from_ref(&t.allowed)).is_err());
    }

    #[test]
    fn with_no_directory_allowed_every_cwd_is_refused_but_any_allows_any() {
        let t = tree();
        let err = run(&t.allowed, &[]).unwrap_err();
        assert!(err.contains("(none)"), "{err}");
        let any = workdir(Some(t.outside.to_str().unwrap()), None);
        assert_eq!(any, Ok(Some(t.outside.canonicalize().unwrap())));
    }

    #[test]
    fn a_missing_directory_or_a_file_is_refused_in_any_mode() {
        let t = tree();
        let missing = t.allowed.join("missing");
        let err = workdir(Some(missing.to_str().unwrap()), None).unwrap_err();
        assert!(err.contains("cannot be used"), "{err}");
        let file = t.allowed.join("file");
        let err = workdir(Some(file.to_str().unwrap()), None).unwrap_err();
        assert!(err.contains("not a directory"), "{err}");
    }
}
