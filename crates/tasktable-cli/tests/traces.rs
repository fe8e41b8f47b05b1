//! Traces from `tasktable serve`, read back by an OTLP receiver the test starts: a submit
//! over HTTP that carries a `traceparent` and the attempt that ran its task in-process
//! are one trace (submit span a child of the caller's, attempt span a child of the
//! submit's), over protobuf and over JSON; an attempt that failed has the error status;
//! an OTEL_ setting that is not supported stops serve before it starts; and the Python
//! package, with OpenTelemetry installed, sends its span with a submit and runs each
//! attempt in a child of the submit's span.

mod common;

use common::otlp::{Receiver, SpanSeen};
use common::serve::{command, Server, ADMIN};
use serde_json::{json, Value};
use std::process::Command;

const TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const CALLER_SPAN: &str = "b7ad6b7169203331";

/// A server exporting to `receiver` with `protocol`, whose `http` handler may call the
/// receiver's `/hook`.
fn traced_server(receiver: &Receiver, protocol: &str) -> Server {
    Server::start_adjusted(
        &["--workers", "1", "--http-allow-net", "127.0.0.1/32"],
        |cmd| {
            cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
                .env("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
                // Spans leave within 50 ms instead of 5 s.
                .env("OTEL_BSP_SCHEDULE_DELAY", "50");
        },
    )
}

/// POSTs `body` to the server's `path` as admin with `headers`; the answer's JSON.
fn post(server: &Server, path: &str, headers: &[String], body: &Value) -> Value {
    let mut curl = Command::new("curl");
    curl.args([
        "-sS",
        "-f",
        "-X",
        "POST",
        "-H",
        "content-type: application/json",
    ])
    .arg("-H")
    .arg(format!("authorization: Bearer {ADMIN}"));
    for header in headers {
        curl.arg("-H").arg(header);
    }
    let out = curl
        .args(["-d", &body.to_string()])
        .arg(format!("{}{path}", server.url))
        .output()
        .expect("curl");
    assert!(out.status.success(), "curl {path}: {out:?}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{path}: {e}: {out:?}"))
}

fn one<'a>(spans: &'a [SpanSeen], name: &str, trace: &str) -> Option<&'a SpanSeen> {
    spans.iter().find(|s| s.name == name && s.trace_id == trace)
}

#[test]
fn an_http_submit_and_its_in_process_attempt_are_one_trace() {
    let receiver = Receiver::start();
    let server = traced_server(&receiver, "http/protobuf");
    let submitted = post(
        &server,
        "/api/v1/tasks",
        &[format!("traceparent: 00-{TRACE}-{CALLER_SPAN}-01")],
        &json!({"kind": "http", "payload": {"url": format!("{}/hook", receiver.url)}}),
    );
    let id = submitted["id"].as_i64().expect("an id");
    let stored = submitted["task"]["traceparent"]
        .as_str()
        .expect("the task records a traceparent")
        .to_owned();

    let (submit, attempt) = receiver.wait_for("the submit's and the attempt's spans", |spans| {
        Some((
            one(spans, "submit http", TRACE)?.clone(),
            one(spans, "run http", TRACE)?.clone(),
        ))
    });
    // The submit continues the caller's trace; the task records the submit's span.
    assert_eq!(submit.parent_span_id, CALLER_SPAN, "{submit:?}");
    assert_eq!(stored, format!("00-{TRACE}-{}-01", submit.span_id));
    assert_eq!(submit.kind, 4, "a producer span: {submit:?}");
    assert_eq!(submit.service, "tasktable", "{submit:?}");
    assert_eq!(
        submit.attributes["tasktable.task.kind"], "http",
        "{submit:?}"
    );
    // The attempt is the submit's child and says which attempt of which task it was.
    assert_eq!(attempt.parent_span_id, submit.span_id, "{attempt:?}");
    assert_eq!(attempt.kind, 5, "a consumer span: {attempt:?}");
    let mut keys: Vec<&str> = attempt.attributes.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "messaging.destination.name",
            "messaging.operation.type",
            "messaging.system",
            "tasktable.attempt.outcome",
            "tasktable.task.attempt",
            "tasktable.task.id",
            "tasktable.task.kind",
            "tasktable.task.queue",
        ],
        "the attempt's attributes and no others"
    );
    assert_eq!(attempt.attributes["tasktable.task.id"], id, "{attempt:?}");
    assert_eq!(
        attempt.attributes["tasktable.task.kind"], "http",
        "{attempt:?}"
    );
    assert_eq!(
        attempt.attributes["tasktable.task.queue"], "default",
        "{attempt:?}"
    );
    assert_eq!(
        attempt.attributes["tasktable.task.attempt"], 1,
        "{attempt:?}"
    );
    assert_eq!(
        attempt.attributes["tasktable.attempt.outcome"], "succeeded",
        "{attempt:?}"
    );
    assert_ne!(attempt.status, 2, "not an error: {attempt:?}");
    assert!(
        attempt.content_type.starts_with("application/x-protobuf"),
        "{attempt:?}"
    );
    // `show` names the trace, as tracing tools search for it.
    let shown = server.tt(&["show", &id.to_string()]).ok();
    assert!(
        shown
            .stdout
            .lines()
            .any(|l| l.split_whitespace().collect::<Vec<_>>() == ["trace", TRACE]),
        "{}",
        shown.stdout
    );
    // The submit span names the task it made.
    assert_eq!(submit.attributes["tasktable.task.id"], id, "{submit:?}");
    // serve said where its spans go, without the URL's secrets.
    let log = server.log_text();
    assert!(
        log.contains("exporting traces") && log.contains(&format!("{}/v1/traces", receiver.url)),
        "{log}"
    );

    // A submit the store refuses is a span with the error status.
    let refused = "1f0a1b2c3d4e5f60718293a4b5c6d7e8";
    let out = Command::new("curl")
        .args(["-sS", "-o", "/dev/null", "-w", "%{http_code}", "-X", "POST"])
        .args(["-H", "content-type: application/json", "-H"])
        .arg(format!("authorization: Bearer {ADMIN}"))
        .arg("-H")
        .arg(format!("traceparent: 00-{refused}-{CALLER_SPAN}-01"))
        .args(["-d", r#"{"kind": "http", "max_attempts": 0}"#])
        .arg(format!("{}/api/v1/tasks", server.url))
        .output()
        .expect("curl");
    assert_eq!(String::from_utf8_lossy(&out.stdout), "422", "{out:?}");
    let failed = receiver.wait_for("the refused submit's span", |spans| {
        one(spans, "submit http", refused).cloned()
    });
    assert_eq!(failed.status, 2, "{failed:?}");
    // Only tasktable's spans are exported: no SQL, no HTTP internals.
    let names: Vec<String> = receiver.spans().into_iter().map(|s| s.name).collect();
    assert!(
        names
            .iter()
            .all(|n| n.starts_with("submit ") || n.starts_with("run ")),
        "{names:?}"
    );
}

#[test]
fn over_json_a_submit_without_a_caller_starts_the_trace_and_an_error_is_an_error() {
    let receiver = Receiver::start();
    let server = traced_server(&receiver, "http/json");
    // Port 9 refuses: the task's only attempt ends in an error, and the task fails.
    let submitted = post(
        &server,
        "/api/v1/tasks",
        &[],
        &json!({"kind": "http", "payload": {"url": "http://127.0.0.1:9/hook"}, "max_attempts": 1}),
    );
    let id = submitted["id"].as_i64().expect("an id");
    let attempt = receiver.wait_for("the failed attempt's span", |spans| {
        spans
            .iter()
            .find(|s| {
                s.name == "run http" && s.attributes.get("tasktable.task.id") == Some(&json!(id))
            })
            .cloned()
    });
    let submit = receiver.wait_for("the submit's span", |spans| {
        one(spans, "submit http", &attempt.trace_id).cloned()
    });
    assert_eq!(submit.parent_span_id, "", "a root span: {submit:?}");
    assert_eq!(attempt.parent_span_id, submit.span_id, "{attempt:?}");
    assert_eq!(attempt.attributes["tasktable.attempt.outcome"], "error");
    assert_eq!(attempt.status, 2, "an error: {attempt:?}");
    assert!(
        attempt.content_type.starts_with("application/json"),
        "{attempt:?}"
    );
}

#[test]
fn an_otel_setting_that_is_not_supported_stops_serve_before_it_starts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let sqlite = |file: &str| format!("sqlite://{}", dir.path().join(file).display());
    for (name, value) in [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_TRACES_EXPORTER", "zipkin"),
    ] {
        let run = |args: &[&str]| {
            command(args)
                .env("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
                .env(name, value)
                .output()
                .expect("run tasktable")
        };
        let out = run(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            &sqlite("t.db"),
        ]);
        let said = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}={value}: {said}");
        assert!(said.contains(&format!("{name}={value}")), "{said}");
        assert!(
            !dir.path().join("t.db").exists(),
            "nothing was opened: {name}={value}"
        );
        // `migrate` exports nothing, so the setting is not its business.
        let out = run(&["migrate", "--database-url", &sqlite("m.db")]);
        assert!(out.status.success(), "migrate with {name}={value}: {out:?}");
    }
}

/// The OpenTelemetry packages the Python test installs, pinned.
const PYTHON_OTEL: [&str; 2] = [
    "opentelemetry-sdk==1.45.2",
    "opentelemetry-exporter-otlp-proto-http==1.45.2",
];

/// A virtual environment with [`PYTHON_OTEL`] (made once, kept under target/), for the
/// Python package's worker to run with OpenTelemetry installed; its `python`.
fn python_with_opentelemetry() -> std::path::PathBuf {
    let venv = common::repo().join("target/otel-python");
    let python = venv.join("bin/python");
    let marker = venv.join("installed.txt");
    let want = PYTHON_OTEL.join("\n");
    if std::fs::read_to_string(&marker).ok().as_deref() == Some(want.as_str()) {
        return python;
    }
    let made = Command::new("python3")
        .args(["-m", "venv", "--clear"])
        .arg(&venv)
        .status()
        .expect("python3 -m venv");
    assert!(made.success(), "python3 -m venv: {made}");
    let installed = Command::new(&python)
        .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
        .args(PYTHON_OTEL)
        .status()
        .expect("pip install");
    assert!(
        installed.success(),
        "pip install {PYTHON_OTEL:?}: {installed}"
    );
    std::fs::write(&marker, want).expect("marker");
    python
}

#[test]
fn a_python_worker_continues_the_trace_of_a_python_submit() {
    if !common::present("python3") {
        return;
    }
    let python = python_with_opentelemetry();
    let receiver = Receiver::start();
    let server = Server::start_adjusted(&["--workers", "0"], |cmd| {
        cmd.env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
            .env("OTEL_BSP_SCHEDULE_DELAY", "50");
    });
    let out = Command::new(python)
        .arg(common::repo().join("crates/tasktable-cli/tests/otel_worker.py"))
        .env("PYTHONPATH", common::repo().join("clients/python/src"))
        .env("TASKTABLE_SERVER", &server.url)
        .env("TASKTABLE_TOKEN", ADMIN)
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &receiver.url)
        .output()
        .expect("run the Python worker");
    assert!(out.status.success(), "the Python worker: {out:?}");
    let said: Value = serde_json::from_slice(&out.stdout).expect("its JSON line");
    let trace = said["trace_id"].as_str().expect("trace id");
    let enqueue_span = said["enqueue_span"].as_str().expect("span id");

    // The application's span, serve's submit (its child), and the two attempts in the
    // Python worker (the submit's children), all in one trace.
    let (submit, attempts) = receiver.wait_for("the submit and both attempts", |spans| {
        let submit = one(spans, "submit traced", trace)?.clone();
        let attempts: Vec<SpanSeen> = spans
            .iter()
            .filter(|s| s.name == "run traced" && s.trace_id == trace)
            .cloned()
            .collect();
        (attempts.len() == 2).then_some((submit, attempts))
    });
    assert_eq!(submit.parent_span_id, enqueue_span, "{submit:?}");
    assert_eq!(submit.service, "tasktable", "{submit:?}");
    for attempt in &attempts {
        assert_eq!(attempt.parent_span_id, submit.span_id, "{attempt:?}");
        assert_eq!(attempt.service, "python-app", "{attempt:?}");
        assert_eq!(attempt.kind, 5, "a consumer span: {attempt:?}");
        assert_eq!(attempt.attributes["tasktable.task.id"], said["task"]);
        assert_eq!(attempt.attributes["tasktable.task.kind"], "traced");
    }
    let ended = |n: i64| {
        attempts
            .iter()
            .find(|a| a.attributes["tasktable.task.attempt"] == n)
            .unwrap_or_else(|| panic!("no span of attempt {n}: {attempts:?}"))
    };
    assert_eq!(ended(1).attributes["tasktable.attempt.outcome"], "error");
    assert_eq!(ended(1).status, 2, "the failed attempt is an error");
    assert_eq!(
        ended(2).attributes["tasktable.attempt.outcome"],
        "succeeded"
    );
    assert_ne!(ended(2).status, 2);
}
