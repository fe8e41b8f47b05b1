//! The complete workers of docs/clients.md, run as written: each sample is taken from the
//! document, set up as the document says (the TypeScript one in a fresh ES module project
//! of its own, with the package installed from its packed tarball), pointed at a real
//! `tasktable serve` through the environment variables the CLI reads, and given a task.
//! Outside CI a missing Python or Node skips with a note; in CI it fails.

mod common;

use common::serve::{Server, ADMIN};
use common::{present, repo};
use serde_json::Value;
use std::process::{Command, Stdio};

/// The `nth` code block fenced as `lang` after the line `heading` of docs/clients.md.
fn sample(heading: &str, lang: &str, nth: usize) -> String {
    let doc = std::fs::read_to_string(repo().join("docs/clients.md")).expect("docs/clients.md");
    let after = doc
        .split_once(&format!("\n{heading}\n"))
        .unwrap_or_else(|| panic!("docs/clients.md has no {heading:?}"))
        .1;
    let opening = format!("```{lang}\n");
    let mut rest = after;
    for _ in 0..nth {
        rest = rest.split_once(&opening).expect("an earlier block").1;
    }
    let block = rest
        .split_once(&opening)
        .unwrap_or_else(|| panic!("no ```{lang} block {nth} after {heading:?}"))
        .1;
    block
        .split_once("\n```")
        .expect("a closed block")
        .0
        .to_owned()
}

fn run(what: &str, command: &mut Command) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Starts `worker` (a sample) pointed at `server` through the CLI's variables, submits the
/// task both samples take (a `resize` in queue `images`), waits for its `succeeded` event
/// (the event stream is the signal), and checks what the handler returned.
fn the_sample_resizes(server: &Server, mut worker: Command) {
    let mut worker = worker
        .env("TASKTABLE_SERVER", &server.url)
        .env("TASKTABLE_TOKEN", ADMIN)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the sample worker");
    let id = server
        .tt(&[
            "submit",
            "resize",
            r#"{"path": "a.png"}"#,
            "--queue",
            "images",
            "--json",
        ])
        .ok()
        .json()["id"]
        .as_i64()
        .expect("an id");
    server.wait_for_event("succeeded");
    let shown = server.tt(&["show", &id.to_string(), "--json"]).ok().json();
    let task = &shown["task"];
    assert_eq!(task["state"], "succeeded", "{task}");
    assert_eq!(task["result"]["resized"], "a.png", "{task}");
    assert!(task["result"]["fence"].as_i64().is_some(), "{task}");
    assert_eq!(task["progress"], serde_json::json!({"pct": 100}), "{task}");
    let _ = worker.kill();
    let _ = worker.wait();
}

#[test]
fn the_python_worker_of_the_docs_runs_as_written() {
    if !present("python3") {
        return;
    }
    let code = sample("## A complete worker in Python", "python", 0);
    let server = Server::start();
    let file = server.dir.path().join("worker.py");
    std::fs::write(&file, code).expect("write the sample");
    let mut worker = Command::new("python3");
    worker
        .arg(&file)
        .env("PYTHONPATH", repo().join("clients/python/src"));
    the_sample_resizes(&server, worker);
}

#[test]
fn the_typescript_worker_of_the_docs_runs_as_written() {
    if !present("npm") {
        return;
    }
    let heading = "## A complete worker in TypeScript";
    let server = Server::start();
    let project = server.dir.path().join("project");
    std::fs::create_dir(&project).expect("project dir");
    // The package, packed as the document says (packing builds dist/).
    let package = repo().join("clients/typescript");
    if !package.join("node_modules/typescript").exists() {
        run(
            "npm ci",
            Command::new("npm")
                .args(["ci", "--no-audit", "--no-fund", "--ignore-scripts"])
                .current_dir(&package),
        );
    }
    run(
        "npm pack",
        Command::new("npm")
            .args(["pack", "--silent", "--pack-destination"])
            .arg(&project)
            .current_dir(&package),
    );
    std::fs::write(project.join("package.json"), sample(heading, "json", 0)).expect("write");
    std::fs::write(project.join("tsconfig.json"), sample(heading, "json", 1)).expect("write");
    std::fs::write(project.join("worker.ts"), sample(heading, "ts", 0)).expect("write");
    // The compiler and Node's types at the versions the package itself builds with.
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(package.join("package.json")).expect("package.json"),
    )
    .expect("json");
    let dev = &manifest["devDependencies"];
    run(
        "npm install",
        Command::new("npm")
            .args(["install", "--no-audit", "--no-fund", "--save-dev"])
            .arg(format!(
                "typescript@{}",
                dev["typescript"].as_str().unwrap()
            ))
            .arg(format!(
                "@types/node@{}",
                dev["@types/node"].as_str().unwrap()
            ))
            .current_dir(&project),
    );
    run(
        "npx tsc",
        Command::new("npx").arg("tsc").current_dir(&project),
    );
    let mut worker = Command::new("node");
    worker.arg("worker.js").current_dir(&project);
    the_sample_resizes(&server, worker);
}
