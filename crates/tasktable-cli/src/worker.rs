//! `tasktable worker`: runs the built-in handlers against a database until SIGTERM or
//! SIGINT. It is also how to run a worker of your own from Rust: open the store, register
//! handlers, run until a signal.

use crate::database::{self, DatabaseArgs};
use crate::error::CliError;
use clap::Args;
use std::sync::Arc;
use tasktable::{Store, Worker, WorkerBuilder};
use tasktable_handlers::{ExecHandler, ExecPolicy, HttpHandler};

#[derive(Args, Debug)]
pub struct WorkerArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    /// Most tasks running at once.
    #[arg(long, default_value_t = 10)]
    concurrency: usize,
    /// Apply missing migrations before starting (by default `serve` or `migrate` does).
    #[arg(long)]
    migrate: bool,
    #[command(flatten)]
    handlers: HandlerArgs,
}

/// Which built-in handlers run, and on which queues.
#[derive(Args, Debug)]
pub struct HandlerArgs {
    /// Queue to take tasks from; repeat for several.
    #[arg(long = "queue", value_name = "QUEUE", default_value = "default")]
    queues: Vec<String>,
    /// Let `exec` tasks run PROGRAM (repeatable): a bare name is looked up on this
    /// process's PATH, a path is run as it is. `exec` runs the command a task's payload
    /// names, so whoever can submit tasks could run programs on this machine: it is off
    /// unless you allow programs here or with --exec-allow-any. Allowing a program that runs
    /// its arguments (sh, python, env, xargs) allows anything.
    #[arg(long, value_name = "PROGRAM")]
    exec_allow: Vec<String>,
    /// Let `exec` tasks run any program, only where everyone who can submit tasks may
    /// already run code on this machine.
    #[arg(long, conflicts_with = "exec_allow")]
    exec_allow_any: bool,
}

impl HandlerArgs {
    /// `None` when `exec` is off.
    fn exec_policy(&self) -> Option<ExecPolicy> {
        if self.exec_allow_any {
            Some(ExecPolicy::allow_any())
        } else if !self.exec_allow.is_empty() {
            Some(ExecPolicy::allow(self.exec_allow.iter().cloned()))
        } else {
            None
        }
    }

    pub fn exec_enabled(&self) -> bool {
        self.exec_allow_any || !self.exec_allow.is_empty()
    }
}

pub async fn run(args: WorkerArgs) -> Result<(), CliError> {
    let store = database::open(&args.database).await?;
    if args.migrate {
        database::migrate(store.as_ref()).await?;
    }
    let worker = builtin(store, args.concurrency, &args.handlers).build()?;
    tracing::info!(worker = worker.id(), queues = ?args.handlers.queues, "worker started");
    worker.run(tasktable::shutdown_signal()).await;
    tracing::info!("worker stopped");
    Ok(())
}

/// A worker with the built-in handlers: `http` always, `exec` only when allowed. Without
/// `exec`, this worker never claims `exec` tasks: they wait for a worker that allows them.
pub fn builtin(store: Arc<dyn Store>, concurrency: usize, handlers: &HandlerArgs) -> WorkerBuilder {
    let mut builder = Worker::builder(store)
        .concurrency(concurrency)
        .register(HttpHandler::new());
    for queue in &handlers.queues {
        builder = builder.queue(queue, concurrency);
    }
    if let Some(policy) = handlers.exec_policy() {
        builder = builder.register(ExecHandler::new(policy));
    }
    builder
}
