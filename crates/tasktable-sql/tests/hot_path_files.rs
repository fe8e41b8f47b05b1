//! The hot path's files (`queries/*.sql`) of the three backends, read from the workspace:
//! the same names in every backend, each file opening with a comment, every file with SQL
//! compiled into its backend, and no backend writing the retry rule itself.

use std::collections::BTreeSet;
use std::fs;
use std::path::{Path, PathBuf};

const BACKENDS: [&str; 3] = ["tasktable-sqlite", "tasktable-postgres", "tasktable-mysql"];

fn crate_dir(backend: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("crates/")
        .join(backend)
}

/// The `.sql` files of a backend's `queries/`, by name.
fn query_files(backend: &str) -> BTreeSet<String> {
    let dir = crate_dir(backend).join("queries");
    fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").file_name())
        .map(|name| name.into_string().expect("a UTF-8 file name"))
        .filter(|name| name.ends_with(".sql"))
        .collect()
}

fn read(backend: &str, relative: &str) -> String {
    let path = crate_dir(backend).join(relative);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines of a file that are SQL: neither blank nor a whole-line comment.
fn sql_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with("--"))
}

/// The text of every `.rs` file under a backend's `src/`.
fn sources(backend: &str) -> String {
    let dir = crate_dir(backend).join("src");
    let mut text = String::new();
    for entry in fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.extension().is_some_and(|ext| ext == "rs") {
            text.push_str(&fs::read_to_string(&path).expect("a source file"));
        }
    }
    text
}

/// What `files` (backend name, its file names) lack of one another, one line each.
fn missing(files: &[(&str, BTreeSet<String>)]) -> Vec<String> {
    let every: BTreeSet<&String> = files.iter().flat_map(|(_, names)| names).collect();
    let mut out = Vec::new();
    for (backend, names) in files {
        for name in every.iter().filter(|name| !names.contains(**name)) {
            let holders: Vec<&str> = files
                .iter()
                .filter(|(_, names)| names.contains(*name))
                .map(|(backend, _)| *backend)
                .collect();
            let verb = if holders.len() == 1 { "has" } else { "have" };
            out.push(format!(
                "{backend} has no queries/{name} (which {} {verb})",
                holders.join(" and ")
            ));
        }
    }
    out
}

#[test]
fn every_backend_has_the_same_hot_path_files() {
    let files: Vec<(&str, BTreeSet<String>)> =
        BACKENDS.iter().map(|b| (*b, query_files(b))).collect();
    let missing = missing(&files);
    assert!(
        missing.is_empty(),
        "every backend must have the same queries/*.sql files (see tasktable_sql::hot); \
         where a database needs no statement for a step, its file says why:\n{}",
        missing.join("\n")
    );
}

#[test]
fn a_file_one_backend_lacks_is_named_with_the_backend() {
    let names = |list: &[&str]| list.iter().map(|n| n.to_string()).collect();
    let files = [
        ("tasktable-sqlite", names(&["a.sql", "b.sql"])),
        ("tasktable-postgres", names(&["a.sql"])),
        ("tasktable-mysql", names(&["a.sql", "b.sql", "c.sql"])),
    ];
    assert_eq!(
        missing(&files),
        [
            "tasktable-sqlite has no queries/c.sql (which tasktable-mysql has)",
            "tasktable-postgres has no queries/b.sql (which tasktable-sqlite and tasktable-mysql have)",
            "tasktable-postgres has no queries/c.sql (which tasktable-mysql has)",
        ]
    );
}

#[test]
fn every_hot_path_file_opens_with_a_comment() {
    for backend in BACKENDS {
        for name in query_files(backend) {
            let text = read(backend, &format!("queries/{name}"));
            assert!(
                text.starts_with("--"),
                "{backend}/queries/{name} should open with a comment saying what it does"
            );
        }
    }
}

/// A file with SQL in it is compiled into its backend, whole or as part of another
/// statement; a file with only a comment (a step this database needs no statement for)
/// is not.
#[test]
fn every_hot_path_file_with_sql_is_used_by_its_backend() {
    for backend in BACKENDS {
        let sources = sources(backend);
        for name in query_files(backend) {
            let has_sql = sql_lines(&read(backend, &format!("queries/{name}")))
                .next()
                .is_some();
            let used = sources.contains(&format!("\"../queries/{name}\""));
            assert_eq!(
                has_sql,
                used,
                "{backend}/queries/{name}: {}",
                if has_sql {
                    "holds SQL that the backend never includes"
                } else {
                    "holds no SQL, yet the backend includes it"
                }
            );
        }
    }
}

/// Whether a failed attempt retries is core's rule (`tasktable_core::outcome::
/// attempts_left`), rendered as SQL once in `tasktable_sql::rules`; the hot path names it
/// by its marker.
#[test]
fn no_backend_writes_the_retry_rule_itself() {
    let compares_attempts =
        |line: &str| line.contains("max_attempts") && (line.contains('<') || line.contains('>'));
    for backend in BACKENDS {
        for name in query_files(backend) {
            let text = read(backend, &format!("queries/{name}"));
            let rule = sql_lines(&text).find(|l| compares_attempts(l));
            assert!(
                rule.is_none(),
                "{backend}/queries/{name} decides on max_attempts itself: {rule:?}"
            );
        }
        let sources = sources(backend);
        let rule = sources.lines().find(|l| compares_attempts(l));
        assert!(
            rule.is_none(),
            "{backend}/src decides on max_attempts itself: {rule:?}"
        );
    }
}

/// Where a line of SQL spells the claim's transition or a lease's fence, which
/// `tasktable_sql::rules` renders once (`claim_write`, `fence`) for every statement that
/// makes them: the token grown or compared, the credential compared.
fn spells_claim_or_fence(line: &str) -> Option<&'static str> {
    let compares_token = line.match_indices("lease_token").any(|(at, name)| {
        let rest = line[at + name.len()..].trim_start();
        rest.starts_with('=') && !rest.starts_with("==")
    });
    if line.contains("lease_token + 1") {
        Some("grows the fencing token (the claim's write)")
    } else if compares_token {
        Some("compares or sets the fencing token (the fence)")
    } else if ["lease_credential IS", "lease_credential <=>"]
        .iter()
        .any(|p| line.contains(p))
    {
        Some("compares the credential (the fence)")
    } else {
        None
    }
}

/// The lines of Rust sources under `dir` (recursively) that hold a string literal.
fn literal_lines(dir: &Path) -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            out.extend(literal_lines(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            let text = fs::read_to_string(&path).expect("a source file");
            out.extend(
                text.lines()
                    .filter(|l| l.contains('"'))
                    .map(|l| (path.clone(), l.to_owned())),
            );
        }
    }
    out
}

/// The claim's write and the fence are rendered once, in `tasktable_sql::rules`; the
/// backends' hot-path files name them by their markers (`{claim_write}`, `{fence}`) and
/// the shared lanes call `push_claim_write`, `push_claim_counters` and `push_fence`.
#[test]
fn no_statement_spells_the_claim_write_or_the_fence_by_hand() {
    for backend in BACKENDS {
        for name in query_files(backend) {
            let text = read(backend, &format!("queries/{name}"));
            for line in sql_lines(&text) {
                if let Some(what) = spells_claim_or_fence(line) {
                    panic!("{backend}/queries/{name} {what} by hand: {line}");
                }
            }
        }
    }
    let mut dirs: Vec<PathBuf> = BACKENDS.iter().map(|b| crate_dir(b).join("src")).collect();
    dirs.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("src"));
    for dir in dirs {
        for (path, line) in literal_lines(&dir) {
            if path.ends_with("rules.rs") {
                continue;
            }
            if let Some(what) = spells_claim_or_fence(&line) {
                panic!("{} {what} by hand: {}", path.display(), line.trim());
            }
        }
    }
}

#[test]
fn a_hand_spelled_claim_write_or_fence_is_found() {
    for line in [
        "lease_token = lease_token + 1,",
        "WHERE id = ? AND lease_token = ? AND state = 'running'",
        "AND t.lease_token=input.token",
        "AND lease_credential IS ?5",
        "AND lease_credential <=> ?",
    ] {
        assert!(spells_claim_or_fence(line).is_some(), "{line}");
    }
    for line in [
        "SELECT t.id, t.state, t.lease_token, t.lease_credential,",
        "row.lease_token == lease.token",
        "WHERE id = ?2 AND {fence}",
    ] {
        assert!(spells_claim_or_fence(line).is_none(), "{line}");
    }
}
