//! The `exec` allow-list against the ways a payload could make an allowed program run code
//! of its choosing (environment variables that programs load code from, working
//! directories out of bounds) and against the worker's own environment leaking into
//! commands. Real processes under a real worker on SQLite.

mod harness;

use harness::{instant_retry, Harness};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;
use tasktable_core::{AttemptOutcome, NewTask, TaskState};
use tasktable_handlers::{EnvName, ExecHandler, ExecPolicy, INHERITED_ENV};

fn exec(payload: Value) -> NewTask {
    NewTask::new("exec", payload)
        .backoff(instant_retry())
        .timeout(Duration::from_secs(30))
        .max_attempts(5)
}

async fn start(policy: ExecPolicy) -> Harness {
    Harness::start(Duration::from_secs(5), |w| {
        w.register(ExecHandler::new(policy))
    })
    .await
}

fn names(names: &[&str]) -> Vec<EnvName> {
    names.iter().map(|n| n.parse().unwrap()).collect()
}

/// A directory with an allowed script (`job.sh`, run by bash, which calls `uname`) and,
/// under `evil/`, code that each escape would run: every piece of it creates
/// `ran-<VARIABLE>` beside `job.sh`, so a test can see whether it ran.
struct Scene {
    dir: tempfile::TempDir,
}

impl Scene {
    fn new() -> Scene {
        let dir = tempfile::tempdir().unwrap();
        let scene = Scene { dir };
        let evil = scene.path("evil");
        std::fs::create_dir(&evil).unwrap();
        let ran = |name: &str| scene.path(&format!("ran-{name}"));
        scene.script("job.sh", "#!/bin/bash\nuname > /dev/null\necho job\n");
        scene.script(
            "evil/evil.sh",
            &format!(": > '{}'\n", ran("BASH_ENV").display()),
        );
        scene.script(
            "evil/uname",
            &format!("#!/bin/sh\n: > '{}'\n", ran("PATH").display()),
        );
        let js = format!(
            "require('fs').writeFileSync('{}', '')\n",
            ran("NODE_OPTIONS").display()
        );
        std::fs::write(evil.join("evil.js"), js).unwrap();
        let pm = format!(
            "package Evil; open(my $f, '>', '{}'); 1;\n",
            ran("PERL5OPT").display()
        );
        std::fs::write(evil.join("Evil.pm"), pm).unwrap();
        scene
    }

    fn path(&self, relative: &str) -> PathBuf {
        self.dir.path().join(relative)
    }

    fn script(&self, relative: &str, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.path(relative);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    fn job(&self) -> String {
        self.path("job.sh").to_str().unwrap().to_owned()
    }

    /// Each escape: the variable, its value, and a command of an allowed program that the
    /// value would subvert.
    fn escapes(&self) -> Vec<(&'static str, String, Vec<String>)> {
        let evil = self.path("evil");
        let at = |file: &str| evil.join(file).to_str().unwrap().to_owned();
        let job = vec![self.job()];
        let node = vec!["node".to_owned(), "-e".into(), "0".into()];
        let perl = vec!["perl".to_owned(), "-e".into(), "1".into()];
        let python = vec!["python3".to_owned(), "-c".into(), "0".into()];
        vec![
            ("BASH_ENV", at("evil.sh"), job.clone()),
            ("ENV", at("evil.sh"), job.clone()),
            ("PATH", at(""), job.clone()),
            ("LD_PRELOAD", at("evil.so"), job.clone()),
            ("LD_LIBRARY_PATH", at(""), job.clone()),
            ("NODE_OPTIONS", format!("--require {}", at("evil.js")), node),
            ("PERL5OPT", format!("-I{} -MEvil", at("")), perl.clone()),
            ("PERL5LIB", at(""), perl),
            ("PYTHONSTARTUP", at("evil.py"), python.clone()),
            ("PYTHONPATH", at(""), python),
            ("RUBYOPT", format!("-r{}", at("evil.rb")), job.clone()),
            (
                "JAVA_TOOL_OPTIONS",
                format!("-javaagent:{}", at("evil.jar")),
                job,
            ),
        ]
    }

    fn ran(&self) -> Vec<String> {
        let mut ran: Vec<String> = std::fs::read_dir(self.dir.path())
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .filter(|name| name.starts_with("ran-"))
            .collect();
        ran.sort();
        ran
    }
}

fn program_exists(name: &str) -> bool {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path).any(|dir| dir.join(name).is_file())
}

#[tokio::test]
async fn every_known_escape_through_env_is_refused_permanently_before_anything_runs() {
    let scene = Scene::new();
    let policy = ExecPolicy::allow([scene.job(), "node".into(), "perl".into(), "python3".into()]);
    let mut h = start(policy).await;
    let mut submitted = Vec::new();
    for (name, value, command) in scene.escapes() {
        let id = h
            .submit(exec(json!({"command": command, "env": {name: value}})))
            .await;
        submitted.push((name, id));
    }

    for (name, id) in submitted {
        let task = h.settled(id).await;
        assert_eq!(task.state, TaskState::Failed, "{name}");
        assert_eq!(
            h.outcomes(id).await,
            [AttemptOutcome::Failed],
            "{name}: not retried"
        );
        let error = task.last_error.unwrap();
        assert!(
            error.contains(&format!("env {name:?} is not allowed")),
            "{error}"
        );
        if !name.starts_with("LD_") {
            let how = format!("--exec-allow-env {name} (ExecPolicy::allow_env)");
            assert!(error.contains(&how), "{error}");
        }
    }
    assert_eq!(scene.ran(), Vec::<String>::new(), "nothing may have run");
    h.shutdown().await;
}

/// Shows the payloads above are real escapes, so the test above would fail without the
/// check: allowed by the operator, each variable runs the scene's evil code.
#[tokio::test]
async fn the_refused_variables_run_foreign_code_once_the_operator_allows_them() {
    let scene = Scene::new();
    let demonstrated = ["BASH_ENV", "PATH", "NODE_OPTIONS", "PERL5OPT"];
    let policy = ExecPolicy::allow([scene.job(), "node".into(), "perl".into()])
        .allow_env(names(&demonstrated));
    let mut h = start(policy).await;
    let mut want = Vec::new();
    for (name, value, command) in scene.escapes() {
        if !demonstrated.contains(&name) {
            continue;
        }
        if command[0] != scene.job() && !program_exists(&command[0]) {
            eprintln!("SKIPPED {name}: {} is not installed", command[0]);
            continue;
        }
        let id = h
            .submit(exec(json!({"command": command, "env": {name: value}})))
            .await;
        assert_eq!(h.settled(id).await.state, TaskState::Succeeded, "{name}");
        want.push(format!("ran-{name}"));
    }
    want.sort();
    assert_eq!(scene.ran(), want);
    h.shutdown().await;
}

#[tokio::test]
async fn commands_get_allowed_variables_and_a_minimal_environment_not_the_workers() {
    // Cargo gives test processes CARGO_* variables: one is passed on by request, the rest
    // stand for the worker's secrets (DATABASE_URL, TASKTABLE_TOKEN) that must stay behind.
    let inherited = "CARGO_MANIFEST_DIR";
    let policy = ExecPolicy::allow(["env"])
        .allow_env(names(&["GREETING"]))
        .inherit_env(names(&[inherited]));
    let mut h = start(policy).await;
    let id = h
        .submit(exec(
            json!({"command": ["env"], "env": {"GREETING": "hello"}}),
        ))
        .await;

    let task = h.settled(id).await;
    assert_eq!(task.state, TaskState::Succeeded, "{:?}", task.last_error);
    let stdout = task.result.unwrap()["stdout"].as_str().unwrap().to_owned();
    let seen: BTreeSet<&str> = stdout
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    // The payload's value is there, hidden in the result as readers see it.
    assert!(stdout.contains("GREETING=[redacted]\n"), "{stdout}");
    let manifest_dir = std::env::var(inherited).unwrap();
    assert!(
        stdout.contains(&format!("{inherited}={manifest_dir}\n")),
        "{stdout}"
    );
    let by_default = |name: &str| name.starts_with("LC_") || INHERITED_ENV.contains(&name);
    for name in &seen {
        assert!(
            by_default(name) || [inherited, "GREETING"].contains(name),
            "{name} reached the command: {stdout}"
        );
    }
    let left_behind: Vec<String> = std::env::vars()
        .map(|(k, _)| k)
        .filter(|k| !by_default(k) && k != inherited)
        .collect();
    assert!(
        left_behind.iter().any(|k| k.starts_with("CARGO_")),
        "{left_behind:?}"
    );
    h.shutdown().await;
}

#[tokio::test]
async fn a_cwd_outside_the_allowed_directories_is_refused_however_it_is_written() {
    let scene = Scene::new();
    let allowed = scene.path("allowed");
    let outside = scene.path("outside");
    std::fs::create_dir_all(allowed.join("sub")).unwrap();
    std::fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, allowed.join("link-out")).unwrap();
    let policy = ExecPolicy::allow(["sh"]).allow_cwd([&allowed]);
    let mut h = start(policy).await;
    // Leaves a mark in the directory it runs in.
    let touch = json!(["sh", "-c", ": > ran-here"]);
    let escapes = [
        allowed.join(".."),
        allowed.join("sub/../../outside"),
        allowed.join("link-out"),
        outside.clone(),
        PathBuf::from("/"),
    ];
    let mut refused = Vec::new();
    for cwd in &escapes {
        refused.push(h.submit(exec(json!({"command": touch, "cwd": cwd}))).await);
    }
    let inside = h
        .submit(exec(
            json!({"command": touch, "cwd": allowed.join("sub/../sub")}),
        ))
        .await;

    for (id, cwd) in refused.into_iter().zip(&escapes) {
        let task = h.settled(id).await;
        assert_eq!(h.outcomes(id).await, [AttemptOutcome::Failed], "{cwd:?}");
        let error = task.last_error.unwrap();
        assert!(
            error.contains(&format!("cwd {:?}", cwd.to_str().unwrap())),
            "{error}"
        );
        assert!(error.contains("is not allowed"), "{error}");
        assert!(
            error.contains("--exec-allow-cwd DIR (ExecPolicy::allow_cwd)"),
            "{error}"
        );
    }
    assert_eq!(h.settled(inside).await.state, TaskState::Succeeded);
    assert!(allowed.join("sub/ran-here").exists());
    for dir in [scene.dir.path(), &outside, Path::new("/")] {
        assert!(!dir.join("ran-here").exists(), "ran in {dir:?}");
    }
    h.shutdown().await;
}

#[tokio::test]
async fn allow_any_lets_payloads_set_any_variable_and_directory() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = start(ExecPolicy::allow_any()).await;
    let id = h
        .submit(exec(json!({
            "command": ["sh", "-c", "printf '%s %s' \"${#BASH_ENV}\" \"$(pwd)\""],
            "env": {"BASH_ENV": "/etc/profile"},
            "cwd": dir.path(),
        })))
        .await;

    let task = h.settled(id).await;
    // The variable's length: its value is hidden in the result.
    let want = format!(
        "{} {}",
        "/etc/profile".len(),
        dir.path().canonicalize().unwrap().display()
    );
    assert_eq!(task.result.unwrap()["stdout"], want);
    h.shutdown().await;
}
