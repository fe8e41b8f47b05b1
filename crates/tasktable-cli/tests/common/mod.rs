//! What every test of the `tasktable` binary shares.

pub mod otlp;
pub mod serve;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tasktable");

/// Environment that would change what a command does, removed from every child.
pub const ENV: [&str; 17] = [
    "TASKTABLE_SERVER",
    "TASKTABLE_TOKEN",
    "TASKTABLE_TOKENS",
    "TASKTABLE_TOKENS_FILE",
    "TASKTABLE_LISTEN",
    "TASKTABLE_ALLOW_HOSTS",
    "TASKTABLE_SECURE_COOKIES",
    "DATABASE_URL",
    "TASKTABLE_HTTP_ALLOW_NET",
    "TASKTABLE_HTTP_ALLOW_HOST",
    "RUST_LOG",
    "OTEL_SDK_DISABLED",
    "OTEL_TRACES_EXPORTER",
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
];

/// The repository's root.
#[allow(dead_code)]
pub fn repo() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Whether `program --version` runs; outside CI a missing one skips the test (with a
/// note), in CI it fails.
#[allow(dead_code)]
pub fn present(program: &str) -> bool {
    match std::process::Command::new(program)
        .arg("--version")
        .output()
    {
        Ok(out) if out.status.success() => true,
        _ if std::env::var_os("CI").is_none() => {
            eprintln!(
                "SKIPPED: {program} cannot be run; install it or run with CI=1 to make this fail"
            );
            false
        }
        _ => panic!("{program} is required in CI"),
    }
}
