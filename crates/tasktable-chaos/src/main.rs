//! `tasktable-chaos`: tasktable's fault-injection run.
//!
//! ```sh
//! cargo build -p tasktable-cli -p tasktable-chaos
//! target/debug/tasktable-chaos --backend postgres --duration 60s --seed 7 --tasks 3000
//! ```
//!
//! Owns: running thousands of tasks through several worker processes (tasktable's
//! in-process runtime and HTTP pull workers) on a database of its own (an SQLite file, or
//! a throwaway PostgreSQL or MariaDB server it may restart), injecting faults on a seeded
//! schedule (SIGKILL and SIGTERM of workers, SIGSTOP past the lease then SIGCONT,
//! database restarts, SIGKILL of the API), and checking afterwards that no task was lost
//! or completed twice, no stale write was accepted, attempts recorded equal attempts
//! counted, and nothing stayed stuck. The same binary is the run's worker processes
//! (`worker`, `pull-worker`, hidden subcommands).
//!
//! Must not know: tasktable's internals. It sees tasktable as users do: the `tasktable`
//! binary for the API, the library's `Worker` and `Store` read calls, the HTTP protocol,
//! and the documented tables. It never touches the shared test databases.
//!
//! Exit codes: 0 every check passed, 1 a check failed, 2 usage, 3 the run itself failed
//! (a database or process would not start, a worker died on its own).

mod behaviour;
mod check;
mod collect;
mod cutoff;
mod effects;
mod faults;
mod fleet;
mod hangup;
mod inproc;
mod journal;
mod options;
mod orchestrate;
mod plan;
mod processes;
mod pull;
mod reaper;
mod report;
mod sampler;
mod submit;

use clap::{Parser, Subcommand};
use std::process::ExitCode;
use std::time::Duration;
use tasktable_dbserver as database;

#[derive(Parser, Debug)]
#[command(
    name = "tasktable-chaos",
    about = "Runs tasks through worker processes while killing, freezing and restarting them, then checks every invariant",
    args_conflicts_with_subcommands = true
)]
struct Cli {
    #[command(subcommand)]
    role: Option<Role>,
    #[command(flatten)]
    run: options::RunArgs,
}

#[derive(Subcommand, Debug)]
enum Role {
    /// An in-process worker of a run (started by the run).
    #[command(hide = true)]
    Worker(inproc::WorkerArgs),
    /// A pull-protocol worker of a run (started by the run).
    #[command(hide = true)]
    PullWorker(pull::PullArgs),
    /// Checks that a 2xx means committed while clients hang up mid-request and the
    /// database ends sessions idle in a transaction (exit codes as for a run).
    CutOff(cutoff::CutoffArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| "warn,sqlx=error".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the runtime: {e}");
            return ExitCode::from(3);
        }
    };
    // The runtime is dropped before the exit code is returned, so every guard (processes,
    // database servers, the run's directory) runs its destructor first.
    let code = runtime.block_on(async {
        match cli.role {
            Some(Role::Worker(args)) => role(inproc::run(args, stopped())).await,
            Some(Role::PullWorker(args)) => role(pull::run(args, stopped())).await,
            Some(Role::CutOff(args)) => cut_off(args).await,
            None => orchestrate(cli.run).await,
        }
    });
    drop(runtime);
    code
}

async fn role(run: impl std::future::Future<Output = Result<(), String>>) -> ExitCode {
    match run.await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(3)
        }
    }
}

async fn orchestrate(args: options::RunArgs) -> ExitCode {
    if let Err(e) = args.validate() {
        eprintln!("error: {e}");
        return ExitCode::from(2);
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let outcome = tokio::select! {
        outcome = orchestrate::run(&args, seed) => outcome,
        () = tasktable::shutdown_signal() => Err("interrupted".into()),
    };
    let summary = outcome.map(|r| Summary {
        passed: r.passed,
        text: r.text(),
        json: serde_json::to_value(&r),
    });
    conclude("run", seed, args.json, summary)
}

async fn cut_off(args: cutoff::CutoffArgs) -> ExitCode {
    let seed = args.seed.unwrap_or_else(rand::random);
    let outcome = tokio::select! {
        outcome = cutoff::run(&args, seed) => outcome,
        () = tasktable::shutdown_signal() => Err("interrupted".into()),
    };
    let summary = outcome.map(|r| Summary {
        passed: r.passed,
        text: r.text(),
        json: serde_json::to_value(&r),
    });
    conclude("cut-off run", seed, args.json, summary)
}

/// What a run came to, ready to print.
struct Summary {
    passed: bool,
    text: String,
    json: serde_json::Result<serde_json::Value>,
}

/// Prints the summary of a run (as JSON when asked) and gives the exit code: 0 passed,
/// 1 a check failed, 3 the run itself failed or its summary could not be printed.
fn conclude(what: &str, seed: u64, json: bool, summary: Result<Summary, String>) -> ExitCode {
    let summary = match summary {
        Ok(s) => s,
        Err(e) => {
            eprintln!("error: the {what} failed (seed {seed}): {e}");
            return ExitCode::from(3);
        }
    };
    let printed = if json {
        summary
            .json
            .and_then(|v| serde_json::to_string_pretty(&v))
            .map_err(|e| e.to_string())
    } else {
        Ok(summary.text)
    };
    let written = printed.and_then(|text| {
        use std::io::Write;
        writeln!(std::io::stdout(), "{text}").map_err(|e| e.to_string())
    });
    match (written, summary.passed) {
        (Err(e), _) => {
            eprintln!("error: cannot print the summary: {e}");
            ExitCode::from(3)
        }
        (Ok(()), true) => ExitCode::SUCCESS,
        (Ok(()), false) => ExitCode::FAILURE,
    }
}

/// Resolves on SIGTERM or SIGINT, or when the run that started this process is gone (so
/// a run killed outright leaves no workers behind). A vanished parent sends no signal;
/// its pid is checked once a second.
async fn stopped() {
    let parent = nix::unistd::getppid();
    let orphaned = async {
        while nix::unistd::getppid() == parent {
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
    };
    tokio::select! {
        () = tasktable::shutdown_signal() => {}
        () = orphaned => {}
    }
}
