//! `tasktable worker`: runs the built-in handlers against a database until SIGTERM or
//! SIGINT. It is also how to run a worker of your own from Rust: open the store, register
//! handlers, run until a signal. With `--metrics-listen` it also serves its metrics for
//! Prometheus, since it has no API of its own to serve them on.

use crate::database::{self, DatabaseArgs};
use crate::error::CliError;
use clap::Args;
use std::net::SocketAddr;
use std::sync::Arc;
use tasktable::{Store, Worker, WorkerBuilder};
use tasktable_handlers::{ExecHandler, ExecPolicy, HttpHandler, HttpPolicy};
use tokio_util::sync::CancellationToken;

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
    /// Serve this worker's metrics in the Prometheus text format at
    /// http://ADDR/metrics, for example 127.0.0.1:9187 (port 0 picks a free port; the
    /// address is printed as the first line on stdout). Off by default. The listener has
    /// no authentication: pick a loopback address, or one only your Prometheus can reach.
    /// It shows what this worker did (claims, attempts, durations); the database-wide
    /// gauges are on `tasktable serve`'s /metrics.
    #[arg(long, value_name = "ADDR")]
    metrics_listen: Option<String>,
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
    // Bound first, so a bad address fails before any work is claimed, and the recorder is
    // installed before the worker binds its metrics to it.
    let metrics = match &args.metrics_listen {
        Some(listen) => Some(metrics_listener(listen).await?),
        None => None,
    };
    let store = database::open(&args.database).await?;
    if args.migrate {
        database::migrate(store.as_ref()).await?;
    }
    let worker = builtin(store, args.concurrency, &args.handlers).build()?;
    tracing::info!(worker = worker.id(), queues = ?args.handlers.queues, "worker started");
    let stop = CancellationToken::new();
    let exporter = metrics.map(|listener| {
        let app = tasktable_server::metrics::recorded_only_router();
        let stopped = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app)
                .with_graceful_shutdown(stopped)
                .await
            {
                tracing::error!(error = %e, "the metrics listener failed");
            }
        })
    });
    worker.run(tasktable::shutdown_signal()).await;
    // Serves until the worker is done, so a last scrape can see the final counts.
    stop.cancel();
    if let Some(exporter) = exporter {
        let _ = exporter.await;
    }
    tracing::info!("worker stopped");
    Ok(())
}

/// Listens on `listen` for `--metrics-listen`, installs the exporter, and prints the
/// address.
async fn metrics_listener(listen: &str) -> Result<tokio::net::TcpListener, CliError> {
    let bad = |why: String| {
        CliError::usage(format!(
            "--metrics-listen {listen:?}: {why}; give HOST:PORT such as 127.0.0.1:9187"
        ))
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| bad(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(bad("resolves to no address".into()));
    }
    let listener = tokio::net::TcpListener::bind(&addrs[..])
        .await
        .map_err(|e| CliError::failure(format!("cannot listen on {listen}: {e}")))?;
    let address = listener.local_addr()?;
    tasktable_server::metrics::install();
    crate::output::line(format!("metrics on http://{address}/metrics"))?;
    tracing::info!(%address, "serving metrics at /metrics");
    Ok(listener)
}

/// A worker with the built-in handlers: `http` always, `exec` only when allowed. Without
/// `exec`, this worker never claims `exec` tasks: they wait for a worker that allows them.
pub fn builtin(store: Arc<dyn Store>, concurrency: usize, handlers: &HandlerArgs) -> WorkerBuilder {
    let mut builder = Worker::builder(store)
        .concurrency(concurrency)
        .register(HttpHandler::new(HttpPolicy::default()));
    for queue in &handlers.queues {
        builder = builder.queue(queue, concurrency);
    }
    if let Some(policy) = handlers.exec_policy() {
        builder = builder.register(ExecHandler::new(policy));
    }
    builder
}
