//! A case written is a case run: this reads the crate's sources, finds every case (an
//! `async fn` whose one parameter is the backend) and checks that [`conformance_suite!`]
//! lists it by its path, in the arm every backend expands or, for a case that needs
//! [`RowLocks`](crate::RowLocks), in the `row_locks` arm. A case left out would compile,
//! pass and never run.
//!
//! [`conformance_suite!`]: crate::conformance_suite

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// What a case's one parameter asks of the backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Needs {
    Backend,
    RowLocks,
}

/// A case found in the sources.
#[derive(Debug)]
struct Case {
    /// From the crate root, as the macro lists it: `area::file::case`.
    path: String,
    /// From the crate's directory: `src/area/file.rs`.
    file: PathBuf,
    needs: Needs,
}

/// The crate's source files, in a stable order.
fn sources(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("read {}: {e}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            files.extend(sources(&path));
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            files.push(path);
        }
    }
    files
}

/// The module path of `file` under `src`: `claim/order.rs` is `claim::order`.
fn module_of(src: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(src).expect("a file under src");
    relative
        .with_extension("")
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .filter(|part| *part != "mod" && *part != "lib")
        .collect::<Vec<_>>()
        .join("::")
}

/// The cases in one file's text, by name: every `async fn` whose only parameter is
/// `&impl Backend` or `&impl RowLocks`. Helpers that take the backend take more beside it.
fn cases_in(text: &str) -> Vec<(String, Needs)> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("async fn ") {
        rest = &rest[at + "async fn ".len()..];
        let name_len = rest
            .find(|c: char| !(c.is_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let (name, after) = rest.split_at(name_len);
        let Some(params) = after.strip_prefix('(') else {
            continue;
        };
        let Some(close) = params.find(')') else {
            continue;
        };
        let params: String = params[..close]
            .chars()
            .filter(|c| !c.is_whitespace())
            .collect();
        let Some((_, ty)) = params.trim_end_matches(',').split_once(':') else {
            continue;
        };
        let needs = match ty
            .strip_prefix("&impl")
            .map(|t| t.trim_start_matches("crate::"))
        {
            Some("Backend") => Needs::Backend,
            Some("RowLocks") => Needs::RowLocks,
            _ => continue,
        };
        if !name.is_empty() {
            found.push((name.to_owned(), needs));
        }
    }
    found
}

/// The body of the macro arm that `head` opens, braces balanced.
fn arm<'a>(lib: &'a str, head: &str) -> &'a str {
    let macro_at = lib
        .find("macro_rules! conformance_suite")
        .expect("lib.rs defines conformance_suite!");
    let head_at = macro_at
        + lib[macro_at..]
            .find(head)
            .unwrap_or_else(|| panic!("conformance_suite! has no arm {head}"));
    let open = head_at + head.len() - 1;
    let mut depth = 0;
    for (i, c) in lib[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &lib[open + 1..open + i];
                }
            }
            _ => {}
        }
    }
    panic!("the arm {head} of conformance_suite! never closes")
}

/// The case paths an arm lists: words of three segments, `area::file::case`.
fn listed(arm: &str) -> BTreeSet<String> {
    arm.split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':' || c == '$'))
        .filter(|word| !word.contains('$') && word.split("::").count() == 3)
        .map(str::to_owned)
        .collect()
}

/// The cases under `src`; this file's examples of what a case looks like are not cases.
fn all_cases(src: &Path) -> Vec<Case> {
    let mut cases = Vec::new();
    for file in sources(src) {
        if file == src.join("registration.rs") {
            continue;
        }
        let text = std::fs::read_to_string(&file)
            .unwrap_or_else(|e| panic!("read {}: {e}", file.display()));
        let module = module_of(src, &file);
        for (name, needs) in cases_in(&text) {
            cases.push(Case {
                path: format!("{module}::{name}"),
                file: file.strip_prefix(src.parent().unwrap()).unwrap().to_owned(),
                needs,
            });
        }
    }
    cases
}

#[test]
fn every_case_is_listed_in_conformance_suite() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let lib = std::fs::read_to_string(src.join("lib.rs")).expect("read lib.rs");
    let everywhere = listed(arm(&lib, "($backend:ty) => {"));
    let row_locks = listed(arm(&lib, "($backend:ty, row_locks) => {"));
    let cases = all_cases(&src);

    let mut problems = Vec::new();
    for case in &cases {
        let (list, which) = match case.needs {
            Needs::Backend => (&everywhere, "`($backend:ty)`"),
            Needs::RowLocks => (&row_locks, "`($backend:ty, row_locks)`"),
        };
        if !list.contains(&case.path) {
            problems.push(format!(
                "case `{}` ({}) is not listed in the {which} arm of conformance_suite! in src/lib.rs",
                case.path,
                case.file.display()
            ));
        }
    }
    let found: BTreeSet<&str> = cases.iter().map(|c| c.path.as_str()).collect();
    for path in everywhere.iter().chain(&row_locks) {
        if !found.contains(path.as_str()) {
            problems.push(format!(
                "conformance_suite! lists `{path}`, but no case of that path was found: a case \
                 is an `async fn` whose one parameter is `db: &impl Backend` or `&impl RowLocks`"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(cases.len() > 40, "too few cases found: {cases:?}");
}

#[test]
fn a_case_is_an_async_fn_whose_one_parameter_is_the_backend() {
    let text = "
        pub async fn plain(db: &impl Backend) {}
        pub async fn wrapped(
            db: &impl RowLocks,
        ) {}
        async fn qualified(db: &impl crate::Backend) {}
        async fn helper(db: &impl Backend, tasks: Vec<NewTask>) {}
        pub async fn store_call(s: &dyn Store) {}
        fn not_async(db: &impl Backend) {}
    ";
    assert_eq!(
        cases_in(text),
        vec![
            ("plain".to_owned(), Needs::Backend),
            ("wrapped".to_owned(), Needs::RowLocks),
            ("qualified".to_owned(), Needs::Backend),
        ]
    );
}

#[test]
fn the_macro_lists_cases_by_area_file_and_name() {
    let lib = "macro_rules! conformance_suite {
        ($backend:ty, row_locks) => {
            $crate::conformance_suite!(@area $backend, row_locks, 2; a::b::locked,);
        };
        ($backend:ty) => {
            $crate::conformance_suite!(@area $backend, a, 2; a::b::c, a::b::d);
        };
    }";
    let everywhere = listed(arm(lib, "($backend:ty) => {"));
    assert_eq!(
        everywhere.into_iter().collect::<Vec<_>>(),
        vec!["a::b::c", "a::b::d"]
    );
    let row_locks = listed(arm(lib, "($backend:ty, row_locks) => {"));
    assert_eq!(
        row_locks.into_iter().collect::<Vec<_>>(),
        vec!["a::b::locked"]
    );
    assert_eq!(
        module_of(Path::new("/s"), Path::new("/s/claim/order.rs")),
        "claim::order"
    );
    assert_eq!(
        module_of(Path::new("/s"), Path::new("/s/claim/mod.rs")),
        "claim"
    );
}
