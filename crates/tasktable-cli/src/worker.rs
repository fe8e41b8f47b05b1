//! `tasktable worker`: runs the built-in handlers against a database until SIGTERM or
//! SIGINT. It is also how to run a worker of your own from Rust: open the store, register
//! handlers, run until a signal. With `--metrics-listen` it also serves its metrics for
//! Prometheus, since it has no API of its own to serve them on.

use crate::database::{self, DatabaseArgs};
use crate::error::CliError;
use crate::input;
use clap::{ArgGroup, Args};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;
use tasktable::{Store, Worker, WorkerBuilder};
use tasktable_handlers::{
    EnvName, ExecHandler, ExecPolicy, ExecUser, HostName, HttpHandler, HttpPolicy, Network,
};
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
    #[command(flatten)]
    retention: crate::retention::RetentionArgs,
}

/// Which built-in handlers run, on which queues, and what their tasks may reach or run.
/// Every limit is on by default: each flag below opens one thing.
#[derive(Args, Debug)]
#[command(group(ArgGroup::new("exec_on").args(["exec_allow", "exec_allow_any"]).multiple(true)))]
pub struct HandlerArgs {
    /// Queue to take tasks from; repeat for several. By default, or with `*`, every
    /// queue that has tasks of a kind this worker runs.
    #[arg(long = "queue", value_name = "QUEUE")]
    queues: Vec<String>,
    /// This worker's id in the registry (default: host name, pid and a random suffix).
    /// Give a stable one where an operator's drain should outlive a restart.
    #[arg(long, value_name = "ID", env = "TASKTABLE_WORKER_ID")]
    worker_id: Option<String>,
    /// A group this worker belongs to, shown in the registry (repeatable, or
    /// comma-separated).
    #[arg(long = "group", value_name = "NAME", value_delimiter = ',')]
    groups: Vec<String>,
    /// How long a worker (in-process or remote) may go without a heartbeat before this
    /// process marks it gone in the registry, so broadcasts, affinities and fair shares stop
    /// counting it. At least 10s (twice a worker's heartbeat). Every server and worker on a
    /// database marks silent workers gone, so the shortest silence among them holds: give
    /// them all the same.
    #[arg(long, value_name = "AGE", value_parser = crate::input::duration, default_value = "30s")]
    pub worker_silence: std::time::Duration,
    /// Let `http` tasks connect to addresses in NET, a network such as 10.0.0.0/8 or
    /// fd00::/8, or one address such as 127.0.0.1 (repeatable, or comma-separated). By
    /// default `http` tasks connect only to public addresses: loopback, private,
    /// link-local (cloud metadata) and other special addresses are refused, checked on the
    /// address actually dialled, redirects included.
    #[arg(
        long,
        value_name = "NET",
        env = "TASKTABLE_HTTP_ALLOW_NET",
        value_delimiter = ','
    )]
    http_allow_net: Vec<Network>,
    /// Let `http` tasks connect to whatever HOST resolves to, for this exact name
    /// (repeatable, or comma-separated; no wildcards). Whoever controls HOST's DNS then
    /// decides where those requests go; prefer --http-allow-net for known addresses.
    #[arg(
        long,
        value_name = "HOST",
        env = "TASKTABLE_HTTP_ALLOW_HOST",
        value_delimiter = ','
    )]
    http_allow_host: Vec<HostName>,
    /// Let `exec` tasks run PROGRAM (repeatable): a bare name is looked up on this
    /// process's PATH, a path is run as it is. `exec` runs the command a task's payload
    /// names, so whoever can submit tasks could run programs on this machine: it is off
    /// unless you allow programs here or with --exec-allow-any. Allowing a program that runs
    /// its arguments (sh, python, env, xargs) allows anything. Commands run as --exec-user.
    #[arg(long, value_name = "PROGRAM")]
    exec_allow: Vec<String>,
    /// Let `exec` tasks run any program, with any environment variables and working
    /// directory, only where everyone who can submit tasks may already run code on this
    /// machine.
    #[arg(long, conflicts_with = "exec_allow")]
    exec_allow_any: bool,
    /// Let `exec` payloads set the environment variable NAME (repeatable; with
    /// --exec-allow, which allows none by default). A variable that changes what a program
    /// loads or runs (PATH, BASH_ENV, NODE_OPTIONS, PERL5OPT, PYTHONPATH, ...) lets a
    /// payload run anything through an allowed program; LD_* and DYLD_* are refused.
    #[arg(
        long,
        value_name = "NAME",
        requires = "exec_allow",
        conflicts_with = "exec_allow_any",
        value_parser = settable_env
    )]
    exec_allow_env: Vec<EnvName>,
    /// Let `exec` payloads start commands in DIR or a directory beneath it (repeatable;
    /// with --exec-allow, which allows none by default). Paths are compared after
    /// resolving `..` and symlinks.
    #[arg(
        long,
        value_name = "DIR",
        requires = "exec_allow",
        conflicts_with = "exec_allow_any",
        value_parser = existing_dir
    )]
    exec_allow_cwd: Vec<PathBuf>,
    /// Pass this process's environment variable NAME on to `exec` commands (repeatable).
    /// Commands get only PATH, HOME, USER, LOGNAME, LANG, LC_*, TZ and TMPDIR otherwise,
    /// never this process's database URL or tokens.
    #[arg(long, value_name = "NAME", requires = "exec_on")]
    exec_inherit_env: Vec<EnvName>,
    /// How long a stopped `exec` command (timed out, cancelled, shutting down) has between
    /// SIGTERM and SIGKILL to its process group, such as 5s or 500ms.
    #[arg(long, value_name = "DURATION", value_parser = input::duration, requires = "exec_on")]
    exec_kill_grace: Option<Duration>,
    /// Run `exec` commands as USER (a name or a numeric uid), with its primary group, no
    /// supplementary groups, no_new_privs and no capabilities, so they cannot read this
    /// process's environment (its tokens), memory, database file or tokens file. Default:
    /// nobody when this process can switch users (root, or CAP_SETUID and CAP_SETGID);
    /// otherwise its own user, with a warning, as commands can then read whatever it can.
    /// A USER that does not exist, or that this process cannot switch to, is refused. With
    /// `exec` on, this process also makes itself non-dumpable (no core dumps, no debugger
    /// of its own user), creates its files readable by its user only (umask 077, the SQLite
    /// database too), and refuses a --database-url that holds a password, which every
    /// local user could read in /proc/PID/cmdline: give that URL in DATABASE_URL.
    #[arg(long, value_name = "USER", requires = "exec_on")]
    exec_user: Option<String>,
}

impl HandlerArgs {
    /// No queue named, or `*` among them.
    pub fn takes_every_queue(&self) -> bool {
        self.queues.is_empty() || self.queues.iter().any(|q| q == "*")
    }

    /// The queues as the log shows them.
    pub fn queues_shown(&self) -> Vec<String> {
        if self.takes_every_queue() {
            let mut q = vec!["*".to_owned()];
            q.extend(self.queues.iter().filter(|q| *q != "*").cloned());
            q.dedup();
            q
        } else {
            self.queues.clone()
        }
    }

    fn http_policy(&self) -> HttpPolicy {
        let nets = self
            .http_allow_net
            .iter()
            .fold(HttpPolicy::default(), |p, net| p.allow_net(*net));
        self.http_allow_host
            .iter()
            .cloned()
            .fold(nets, HttpPolicy::allow_host)
    }

    /// `None` when `exec` is off.
    fn exec_policy(&self) -> Option<ExecPolicy> {
        let policy = if self.exec_allow_any {
            ExecPolicy::allow_any()
        } else if !self.exec_allow.is_empty() {
            ExecPolicy::allow(self.exec_allow.iter().cloned())
                .allow_env(self.exec_allow_env.iter().cloned())
                .allow_cwd(self.exec_allow_cwd.iter().cloned())
        } else {
            return None;
        };
        Some(policy.inherit_env(self.exec_inherit_env.iter().cloned()))
    }

    pub fn exec_enabled(&self) -> bool {
        self.exec_allow_any || !self.exec_allow.is_empty()
    }

    /// When `exec` is on, keeps its commands from this process's secrets (refusing what
    /// would expose them), before `database` is opened, and returns the user they run as;
    /// `None` when `exec` is off.
    pub fn isolate_exec(&self, database: &DatabaseArgs) -> Result<Option<ExecUser>, CliError> {
        if !self.exec_enabled() {
            return Ok(None);
        }
        crate::isolation::isolate_exec(self.exec_user.as_deref(), database).map(Some)
    }
}

/// A variable name `--exec-allow-env` may allow.
fn settable_env(text: &str) -> Result<EnvName, String> {
    let name: EnvName = text.parse()?;
    if name.is_loader_variable() {
        return Err(format!(
            "{name} changes which code every program loads, so payloads may never set it \
             under an allow-list; to give commands a value of yours, set it in this \
             process's environment and pass --exec-inherit-env {name}"
        ));
    }
    Ok(name)
}

/// A directory `--exec-allow-cwd` may allow: one that exists, as its canonical path.
fn existing_dir(text: &str) -> Result<PathBuf, String> {
    let path = Path::new(text)
        .canonicalize()
        .map_err(|e| format!("{text:?}: {e}"))?;
    if !path.is_dir() {
        return Err(format!("{text:?} is not a directory"));
    }
    Ok(path)
}

pub async fn run(args: WorkerArgs) -> Result<(), CliError> {
    let exec_user = args.handlers.isolate_exec(&args.database)?;
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
    let worker = builtin(store, args.concurrency, &args.handlers, exec_user.as_ref())
        .retention(args.retention.policy())
        .build()?;
    tracing::info!(worker = worker.id(), queues = ?args.handlers.queues_shown(), "worker started");
    let stop = CancellationToken::new();
    let exporter = metrics.map(|listener| {
        let app = tasktable_server::metrics::recorded_only_router();
        let stopped = stop.clone().cancelled_owned();
        tokio::spawn(async move {
            let limits = tasktable_server::listen::ConnectionLimits::for_this_process();
            if let Err(e) = tasktable_server::listen::serve(listener, app, limits, stopped).await {
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

/// A worker with the built-in handlers: `http` and `http_batch` always, `exec` only when
/// allowed and isolated (`exec_user`, from [`HandlerArgs::isolate_exec`]). Without `exec`,
/// this worker never claims `exec` tasks: they wait for a worker that allows them.
pub fn builtin(
    store: Arc<dyn Store>,
    concurrency: usize,
    handlers: &HandlerArgs,
    exec_user: Option<&ExecUser>,
) -> WorkerBuilder {
    tracing::info!(
        http_allow_net = ?shown(&handlers.http_allow_net),
        http_allow_host = ?shown(&handlers.http_allow_host),
        "http tasks may connect to public addresses and these"
    );
    let http = HttpHandler::new(handlers.http_policy());
    let mut builder = Worker::builder(store)
        .concurrency(concurrency)
        .register(http.clone())
        .register_batch(tasktable_handlers::HttpBatchHandler::new(http));
    if handlers.takes_every_queue() {
        builder = builder.all_queues();
    }
    for queue in handlers.queues.iter().filter(|q| *q != "*") {
        builder = builder.queue(queue, concurrency);
    }
    if let Some(id) = &handlers.worker_id {
        builder = builder.identity(tasktable::WorkerIdentity::named(id));
    }
    builder = builder.worker_silence(handlers.worker_silence);
    for group in &handlers.groups {
        builder = builder.group(group);
    }
    if let (Some(policy), Some(user)) = (handlers.exec_policy(), exec_user) {
        tracing::info!(
            programs = ?handlers.exec_allow,
            any = handlers.exec_allow_any,
            env = ?shown(&handlers.exec_allow_env),
            cwd = ?handlers.exec_allow_cwd,
            inherit_env = ?shown(&handlers.exec_inherit_env),
            user = %user,
            "exec tasks may run"
        );
        let mut exec = ExecHandler::new(policy).run_as(user.clone());
        if let Some(grace) = handlers.exec_kill_grace {
            exec = exec.kill_grace(grace);
        }
        builder = builder.register(exec);
    }
    builder
}

/// Values as people write them, for the log.
fn shown<T: std::fmt::Display>(values: &[T]) -> Vec<String> {
    values.iter().map(ToString::to_string).collect()
}
