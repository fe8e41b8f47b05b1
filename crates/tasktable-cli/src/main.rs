//! The `tasktable` binary: the composition root of tasktable.
//!
//! Owns: the command line (its commands, options, exit codes and output for people and
//! for scripts); wiring a store chosen by URL to the HTTP API, the dashboard, the rescuer
//! and a worker with the built-in handlers (`serve`, `worker`, `migrate`); and the HTTP client of the
//! operator commands (`submit`, `ls`, `show`, changes, queues and their policies,
//! `stats`, schedules, workers), which
//! talk to a running server and never to a database.
//!
//! Must not know: SQL or any backend's types (stores are opened with
//! `tasktable::connect`), the rules of tasks (the server and the store decide what is
//! legal; the commands report their answers), or how handlers work inside.

mod client;
mod commands;
mod database;
mod error;
mod input;
mod isolation;
mod output;
mod retention;
mod serve;
mod worker;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use client::Api;
use commands::change::{self, EditArgs, Op, TargetArgs};
use commands::list::ListArgs;
use commands::schedule::ScheduleCommand;
use commands::submit::SubmitArgs;
use commands::token::TokenCommand;
use database::DatabaseArgs;
use error::{CliError, EXIT_CODES_HELP};
use std::process::ExitCode;
use tasktable_telemetry::Telemetry;

/// `tasktable --version`: the crate's version, and the source it was built from when the
/// build knew it (build.rs).
const VERSION: &str = env!("TASKTABLE_VERSION");

/// A durable task system in which every task is a row in a SQL table.
///
/// `serve` runs the HTTP API and the dashboard (with a worker for the built-in `http` and
/// `exec` handlers); the other commands talk to it. Start with `tasktable serve`, then
/// `tasktable submit http '{"url": "https://example.com/hook"}'` and `tasktable ls`.
#[derive(Parser, Debug)]
#[command(name = "tasktable", version = VERSION, after_long_help = EXIT_CODES_HELP)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// How log lines are written to stderr: `text`, for people, or `json`, one object a
    /// line with its level, target, fields and time, for log collectors. `RUST_LOG` sets
    /// what is logged.
    #[arg(
        long,
        global = true,
        env = "TASKTABLE_LOG_FORMAT",
        value_enum,
        default_value = "text",
        value_name = "FORMAT"
    )]
    log_format: LogFormat,
    // Last: the heading of the client options would cover the options after them.
    #[command(flatten)]
    client: ClientArgs,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum LogFormat {
    Text,
    Json,
}

/// How the operator commands reach the server.
#[derive(Args, Debug)]
#[command(next_help_heading = "Client options")]
struct ClientArgs {
    /// URL of a running `tasktable serve`.
    #[arg(
        long,
        global = true,
        env = "TASKTABLE_SERVER",
        value_name = "URL",
        default_value = "http://127.0.0.1:8080"
    )]
    server: String,
    /// Bearer token (see `tasktable token new`); one that begins with '-' is given as
    /// --token=-... or in TASKTABLE_TOKEN.
    #[arg(long, global = true, env = "TASKTABLE_TOKEN", hide_env_values = true)]
    token: Option<String>,
    /// Print the server's JSON answer (one document) instead of text.
    #[arg(long, global = true)]
    json: bool,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run the HTTP API, the dashboard, the rescuer and a worker with the built-in handlers.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Serve(serve::ServeArgs),
    /// Run the built-in handlers (`http` and `http_batch`, and `exec` when allowed) against a
    /// database.
    Worker(worker::WorkerArgs),
    /// Apply the migrations a database lacks.
    Migrate(DatabaseArgs),
    /// Make bearer tokens for `serve`.
    Token {
        #[command(subcommand)]
        command: TokenCommand,
    },
    /// Submit a task, or every line of a JSON Lines file.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Submit(SubmitArgs),
    /// List tasks, newest first.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Ls(ListArgs),
    /// Show a task, its attempts and its history: who submitted, claimed, changed it.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Show { id: i64 },
    /// Cancel tasks (a running handler is told to stop).
    #[command(after_long_help = EXIT_CODES_HELP)]
    Cancel(TargetArgs),
    /// Run failed, cancelled or waiting tasks again now.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Retry(TargetArgs),
    /// Hold pending tasks: no worker claims them until they are released.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Hold(TargetArgs),
    /// Release held tasks.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Release(TargetArgs),
    /// Change the priority, attempts, payload or run time of tasks.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Edit(EditArgs),
    /// Pause a queue: workers claim none of its tasks; running tasks finish.
    Pause { queue: String },
    /// Resume a paused queue.
    Resume { queue: String },
    /// Set what a queue allows its claims, or show it: limits on what runs, rates of
    /// starts, one task per worker, fair shares.
    ///
    /// The flags replace the whole policy: a limit not given is removed, and --clear
    /// removes them all. Without a flag, shows the policy in force. Running tasks are not
    /// affected; every claim from the next on obeys the new policy.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Policy(commands::policy::PolicyArgs),
    /// Count tasks by queue and state, and show how each queue and kind did lately.
    ///
    /// The second table covers the last --window: tasks submitted per minute, attempts
    /// that succeeded, failed for good or will be retried, the success rate, and
    /// percentiles of queue wait and run time; the rows with the most failures come first.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Stats(commands::queue::StatsArgs),
    /// Delete (or archive) finished tasks older than an age, now, in batches.
    ///
    /// Needs an admin token. Tasks whose minute statistics have not yet rolled up (the
    /// last minute or two) stay for a later purge, so statistics survive. To purge on a
    /// schedule instead, give `serve` or `worker` the --retain-* flags.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Purge(commands::purge::PurgeArgs),
    /// Recurring schedules: list, show, create, edit, enable, disable, rm, fire.
    ///
    /// A schedule submits a task from its template at every slot of its recurrence: a cron
    /// expression or a daily time in a time zone, or a fixed interval. Each slot fires
    /// once, however many servers and workers run. Name a schedule by its name or its id.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Schedule {
        #[command(subcommand)]
        command: ScheduleCommand,
    },
    /// The worker registry: who runs where, what each takes and runs now; show, drain or
    /// release one.
    ///
    /// Without a subcommand, lists the live workers (--all: those gone too).
    #[command(after_long_help = EXIT_CODES_HELP)]
    Workers(commands::workers::WorkersArgs),
    /// Batches: create, start, pause, stop, resume, edit, show (--watch for a live
    /// progress bar), ls.
    ///
    /// A batch runs items 0..N (or open-ended) through its kind's batch handler at the
    /// parallelism and rate it asks for, keeping only an offset as progress
    /// (docs/batches.md). Name a batch by its task's id.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Batch {
        #[command(subcommand)]
        command: commands::batch::BatchCommand,
    },
    /// The event log, newest first: who changed what, and when.
    ///
    /// Every operator change (task edits, cancels, retries, holds, releases, new targets;
    /// queues paused, resumed or given a policy; workers drained or released; schedules
    /// and batches) and every schedule firing, with the token, dashboard user or part of
    /// tasktable that made it.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Audit(commands::audit::AuditArgs),
    /// Follow what happens, live: tasks submitted, attempts ended (succeeded, failed,
    /// retried, rescued), operators' changes. One line each; --json: one JSON object each.
    ///
    /// A dropped connection is resumed from the last item seen, so nothing is missed.
    /// Stops on Ctrl-C, or after --count items.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Watch(commands::watch::WatchArgs),
    /// Drain a worker: it finishes what it runs and claims nothing new (the same as
    /// `tasktable workers drain ID`; `tasktable workers release ID` undoes it).
    #[command(after_long_help = EXIT_CODES_HELP)]
    Drain { id: String },
}

fn main() -> ExitCode {
    let matches = command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let serves = matches!(
        cli.command,
        Command::Serve(_) | Command::Worker(_) | Command::Migrate(_)
    );
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    // Logs on stderr; the processes that run tasks (not `migrate`) also export traces
    // when the OpenTelemetry environment asks for them.
    let telemetry = match Telemetry::init(
        if serves { "info,sqlx=warn" } else { "warn" },
        match cli.log_format {
            LogFormat::Text => tasktable_telemetry::LogFormat::Text,
            LogFormat::Json => tasktable_telemetry::LogFormat::Json,
        },
        matches!(cli.command, Command::Serve(_) | Command::Worker(_)).then(|| runtime.handle()),
    ) {
        Ok(telemetry) => telemetry,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let ran = runtime.block_on(run(cli));
    telemetry.shutdown();
    match ran {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            e.exit_code()
        }
    }
}

/// The command line, with the client options (`--server`, `--token`, `--json`) left out
/// of the help of the commands that do not talk to a server: `serve`, `worker` and
/// `migrate` open a database, and `token` makes tokens (its `--json` stays).
fn command() -> clap::Command {
    fn hide_client_options(command: clap::Command, keep_json: bool) -> clap::Command {
        command
            .mut_args(|arg| match arg.get_id().as_str() {
                "server" | "token" => arg.hide(true),
                "json" if !keep_json => arg.hide(true),
                _ => arg,
            })
            .mut_subcommands(|sub| hide_client_options(sub, keep_json))
    }
    let mut command = Cli::command();
    // Global options reach the subcommands when the command is built.
    command.build();
    command.mut_subcommands(|sub| match sub.get_name() {
        "serve" | "worker" | "migrate" => hide_client_options(sub, false),
        "token" => hide_client_options(sub, true),
        _ => sub,
    })
}

async fn run(cli: Cli) -> Result<(), CliError> {
    let ClientArgs {
        server,
        token,
        json,
    } = cli.client;
    let api = || Api::new(&server, token.clone());
    let plain = |name, done| [Op::plain(name, done)];
    match cli.command {
        Command::Serve(args) => serve::run(args).await,
        Command::Worker(args) => worker::run(args).await,
        Command::Migrate(args) => database::run_migrate(&args).await,
        Command::Token { command } => commands::token::run(&command, json),
        Command::Submit(args) => commands::submit::run(&api()?, &args, json).await,
        Command::Ls(args) => commands::list::run(&api()?, &args, json).await,
        Command::Show { id } => commands::show::run(&api()?, id, json).await,
        Command::Cancel(t) => change::apply(&api()?, &t, &plain("cancel", "cancelled"), json).await,
        Command::Retry(t) => change::apply(&api()?, &t, &plain("retry", "retried"), json).await,
        Command::Hold(t) => change::apply(&api()?, &t, &plain("hold", "held"), json).await,
        Command::Release(t) => {
            change::apply(&api()?, &t, &plain("release", "released"), json).await
        }
        Command::Edit(args) => change::edit(&api()?, &args, json).await,
        Command::Pause { queue } => commands::queue::set_paused(&api()?, &queue, true, json).await,
        Command::Resume { queue } => {
            commands::queue::set_paused(&api()?, &queue, false, json).await
        }
        Command::Policy(args) => commands::policy::run(&api()?, &args, json).await,
        Command::Stats(args) => commands::queue::stats(&api()?, &args, json).await,
        Command::Purge(args) => commands::purge::run(&api()?, &args, json).await,
        Command::Schedule { command } => commands::schedule::run(&api()?, &command, json).await,
        Command::Workers(args) => commands::workers::run(&api()?, &args, json).await,
        Command::Batch { command } => commands::batch::run(&api()?, &command, json).await,
        Command::Audit(args) => commands::audit::run(&api()?, &args, json).await,
        Command::Watch(args) => commands::watch::run(&api()?, &args, json).await,
        Command::Drain { id } => commands::workers::set_draining(&api()?, &id, true, json).await,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_consistent() {
        super::command().debug_assert();
    }
}
