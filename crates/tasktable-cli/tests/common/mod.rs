//! What every test of the `tasktable` binary shares.

pub mod serve;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_tasktable");

/// Environment that would change what a command does, removed from every child.
pub const ENV: [&str; 11] = [
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
];
