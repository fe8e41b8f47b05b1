//! `tasktable serve`: the HTTP API and the dashboard (`/ui`) over a store, with the
//! rescuer, the scheduler of recurring schedules, retention (when given ages) and (unless
//! `--workers 0`) a worker running the built-in handlers in the same process, all stopped
//! together on SIGTERM or SIGINT.

use crate::database::{self, DatabaseArgs};
use crate::error::CliError;
use crate::worker::{self, HandlerArgs};
use clap::Args;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use tasktable::{Rescuer, RescuerConfig, Retainer, RetentionConfig, Scheduler, SchedulerConfig};
use tasktable_dashboard::DashConfig;
use tasktable_server::host::AllowedHosts;
use tasktable_server::listen::ConnectionLimits;
use tasktable_server::{AppState, Limits, Role, TokenSet};
use tokio_util::sync::CancellationToken;

/// The shortest `--worker-silence`: twice the heartbeat of tasktable's workers.
pub const MIN_WORKER_SILENCE: std::time::Duration = std::time::Duration::from_secs(10);

#[derive(Args, Debug)]
pub struct ServeArgs {
    #[command(flatten)]
    database: DatabaseArgs,
    #[command(flatten)]
    retention: crate::retention::RetentionArgs,
    /// Do not migrate at start-up. By default serve applies the migrations the database
    /// lacks (safe with many servers at once), so a fresh machine needs no set-up; pass
    /// this when migrations run separately (`tasktable migrate`).
    #[arg(long)]
    no_migrate: bool,
    /// Address to listen on. Port 0 picks a free port. The address listened on is printed
    /// as the first line on stdout. Without tokens, only a loopback address is allowed.
    #[arg(
        long,
        env = "TASKTABLE_LISTEN",
        value_name = "ADDR",
        default_value = "127.0.0.1:8080"
    )]
    listen: String,
    /// File of bearer tokens, one `<role> <name> sha256:<hex>` line each (`tasktable token
    /// new` prints such lines). Tokens may also be given in the environment as
    /// TASKTABLE_TOKENS=role:token,role:token. With no tokens, authentication is off.
    #[arg(long, env = "TASKTABLE_TOKENS_FILE", value_name = "PATH")]
    tokens_file: Option<PathBuf>,
    /// Without tokens the server answers only requests addressed to a loopback name or
    /// address (localhost, 127.0.0.1, [::1]), so web pages cannot reach it by DNS
    /// rebinding. This adds another host name or address it answers to, for example the
    /// name of an SSH tunnel; repeat it, or give several separated by commas. No effect
    /// with tokens.
    #[arg(
        long = "allow-host",
        env = "TASKTABLE_ALLOW_HOSTS",
        value_name = "HOST",
        value_delimiter = ','
    )]
    allow_hosts: Vec<String>,
    /// Mark the dashboard's session cookie `Secure` on every response. Without it, the
    /// cookie is `Secure` only when a proxy in front says the browser used HTTPS
    /// (`X-Forwarded-Proto: https` or `Forwarded: proto=https`).
    #[arg(long, env = "TASKTABLE_SECURE_COOKIES")]
    secure_cookies: bool,
    /// Largest request body accepted.
    #[arg(long, value_name = "BYTES", default_value_t = Limits::default().max_body_bytes)]
    max_body_bytes: usize,
    /// How long a request's headers may take to arrive, and a kept-alive connection may
    /// idle between requests, before the connection is closed.
    #[arg(long, value_name = "DURATION", value_parser = crate::input::duration, default_value = "10s")]
    header_timeout: Duration,
    /// How long a request's body may take to arrive after its headers (400 bad_body
    /// beyond), and how long a write of an answer may wait for the client to read it
    /// (the connection is closed beyond). Event streams and long-poll claims are not
    /// timed while their client reads.
    #[arg(long, value_name = "DURATION", value_parser = crate::input::duration, default_value = "30s")]
    body_timeout: Duration,
    /// Most connections open at once; further ones are closed at once. Default: the
    /// process's soft limit on open files (ulimit -n) less 128 kept for the database and
    /// files.
    #[arg(long, value_name = "N")]
    max_connections: Option<usize>,
    /// Most connections open at once from one client (an IPv4 address or an IPv6 /64).
    /// Default: an eighth of --max-connections. Behind a reverse proxy every client has
    /// the proxy's address: raise it there.
    #[arg(long, value_name = "N")]
    max_connections_per_address: Option<usize>,
    /// Most live pull workers one token may register (each worker id belongs to the token
    /// that first used it); a heartbeat or claim that would register one more is refused
    /// with 403 too_many_workers until one leaves or falls silent.
    #[arg(long, value_name = "N", default_value_t = Limits::default().max_workers_per_token,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_workers_per_token: u32,
    /// Tasks the in-process worker runs at once with the built-in handlers (`http` and
    /// `http_batch`, and `exec` when allowed); 0 runs no worker here.
    #[arg(long, value_name = "N", default_value_t = 10)]
    workers: usize,
    #[command(flatten)]
    handlers: HandlerArgs,
}

pub async fn run(args: ServeArgs) -> Result<(), CliError> {
    if args.handlers.worker_silence < MIN_WORKER_SILENCE {
        return Err(CliError::usage(format!(
            "--worker-silence must be at least {}s: workers beat every 5s, and one late beat must not mark a worker gone",
            MIN_WORKER_SILENCE.as_secs()
        )));
    }
    let limits = connection_limits(&args)?;
    let tokens = load_tokens(&args)?;
    let addrs = resolve(&args.listen).await?;
    if tokens.is_empty() && addrs.iter().any(|a| !a.ip().is_loopback()) {
        return Err(CliError::usage(no_tokens_message(&args.listen)));
    }
    let mut allowed = AllowedHosts::default();
    for host in &args.allow_hosts {
        allowed
            .allow(host)
            .map_err(|e| CliError::usage(format!("--allow-host: {e}")))?;
    }
    if !tokens.is_empty() && !args.allow_hosts.is_empty() {
        tracing::warn!("--allow-host has no effect: with tokens every host name is answered");
    }
    if args.workers == 0 && args.handlers.exec_enabled() {
        return Err(CliError::usage(
            "--exec-allow and --exec-allow-any need a worker; drop --workers 0",
        ));
    }
    let exec_user = args.handlers.isolate_exec(&args.database)?;

    let store = database::open(&args.database).await?;
    if !args.no_migrate {
        database::migrate(store.as_ref()).await?;
    }
    let listener = tokio::net::TcpListener::bind(&addrs[..])
        .await
        .map_err(|e| CliError::failure(format!("cannot listen on {}: {e}", args.listen)))?;
    let address = listener.local_addr()?;
    // The worker binds its metrics when it starts: the exporter must be in place first.
    tasktable_server::metrics::install();
    let worker = match args.workers {
        0 => None,
        // The rescuer and scheduler below serve this process; the worker need not run
        // others.
        n => Some(
            worker::builtin(store.clone(), n, &args.handlers, exec_user.as_ref())
                .rescue_interval(None)
                .schedule_interval(None)
                .build()?,
        ),
    };

    let stop = CancellationToken::new();
    tokio::spawn({
        let stop = stop.clone();
        async move {
            tasktable::shutdown_signal().await;
            tracing::info!("shutting down");
            stop.cancel();
        }
    });
    // It also marks silent workers gone, whether or not this process runs a worker.
    let rescuer = Rescuer::new(
        store.clone(),
        RescuerConfig {
            worker_silence: args.handlers.worker_silence,
            ..RescuerConfig::default()
        },
    );
    let rescuer = tokio::spawn(rescuer.run(stop.clone().cancelled_owned()));
    // Fires recurring schedules whether or not this process runs a worker.
    let scheduler = Scheduler::new(store.clone(), SchedulerConfig::default());
    let scheduler = tokio::spawn(scheduler.run(stop.clone().cancelled_owned()));
    let policy = args.retention.policy();
    policy
        .validate()
        .map_err(|e| CliError::usage(format!("retention: {e}")))?;
    let retainer = (!policy.is_empty()).then(|| {
        let config = RetentionConfig {
            policy,
            ..Default::default()
        };
        tokio::spawn(Retainer::new(store.clone(), config).run(stop.clone().cancelled_owned()))
    });
    // In the registry before the server says it listens, so whoever waits for that line
    // finds the worker there.
    if let Some(w) = &worker {
        if let Err(e) = w.register().await {
            tracing::warn!(error = %e, "could not register the in-process worker");
        }
    }
    let worker = worker.map(|w| tokio::spawn(w.run(stop.clone().cancelled_owned())));

    let [admin, operator, worker_tokens, reader] = Role::ALL.map(|role| tokens.count(role));
    tracing::info!(
        %address,
        backend = store.backend(),
        admin,
        operator,
        worker = worker_tokens,
        reader,
        in_process_workers = args.workers,
        exec = args.handlers.exec_enabled(),
        "listening"
    );
    crate::output::line(format!("listening on http://{address}"))?;
    tracing::info!("dashboard at http://{address}/ui");

    let mut state = AppState::new(store, tokens);
    state.stop = stop.clone();
    state.limits.max_body_bytes = args.max_body_bytes;
    state.limits.max_workers_per_token = args.max_workers_per_token;
    // Readers see the built-in handlers' secret payload fields redacted, in the API and
    // on the dashboard alike.
    state.redactions = std::sync::Arc::new(tasktable_server::redact::Redactions::new(
        tasktable_handlers::SECRET_FIELDS,
        tasktable_handlers::SECRET_URL_FIELDS,
    ));
    let dashboard = DashConfig {
        secure_cookies: args.secure_cookies,
        ..DashConfig::default()
    };
    let app = tasktable_server::router(state.clone())
        .merge(tasktable_dashboard::router_with(state.clone(), dashboard));
    // Last, so the rule covers every route: API, dashboard, /metrics and /healthz.
    let app = tasktable_server::host::enforce(app, &state.tokens, allowed);
    let served =
        tasktable_server::listen::serve(listener, app, limits, stop.clone().cancelled_owned())
            .await;
    stop.cancel();
    if let Some(worker) = worker {
        let _ = worker.await;
    }
    let _ = rescuer.await;
    let _ = scheduler.await;
    if let Some(retainer) = retainer {
        let _ = retainer.await;
    }
    tracing::info!("stopped");
    served.map_err(|e| CliError::failure(format!("the server failed: {e}")))
}

/// The connection limits the flags ask for, checked; the caps default to what this
/// process's descriptor limit allows.
fn connection_limits(args: &ServeArgs) -> Result<ConnectionLimits, CliError> {
    let mut limits = ConnectionLimits::for_this_process();
    for (flag, value) in [
        ("--header-timeout", args.header_timeout),
        ("--body-timeout", args.body_timeout),
    ] {
        if value < Duration::from_millis(100) {
            return Err(CliError::usage(format!("{flag} must be at least 100ms")));
        }
    }
    limits.header_timeout = args.header_timeout;
    limits.body_timeout = args.body_timeout;
    if let Some(n) = args.max_connections {
        if n == 0 || n > limits.max_connections {
            return Err(CliError::usage(format!(
                "--max-connections must be 1 to {} here (the soft limit on open files less {} for the database and files; raise it with ulimit -n)",
                limits.max_connections,
                tasktable_server::listen::RESERVED_DESCRIPTORS
            )));
        }
        limits.max_connections = n;
        limits.max_per_address = (n / 8).max(1);
    }
    if let Some(n) = args.max_connections_per_address {
        if n == 0 || n > limits.max_connections {
            return Err(CliError::usage(format!(
                "--max-connections-per-address must be 1 to --max-connections ({})",
                limits.max_connections
            )));
        }
        limits.max_per_address = n;
    }
    Ok(limits)
}

async fn resolve(listen: &str) -> Result<Vec<SocketAddr>, CliError> {
    let bad = |why: String| {
        CliError::usage(format!(
            "--listen {listen:?}: {why}; give HOST:PORT such as 127.0.0.1:8080"
        ))
    };
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host(listen)
        .await
        .map_err(|e| bad(e.to_string()))?
        .collect();
    if addrs.is_empty() {
        return Err(bad("resolves to no address".into()));
    }
    Ok(addrs)
}

fn no_tokens_message(listen: &str) -> String {
    format!(
        "refusing to listen on {listen} without tokens: anyone who can reach it could submit and change tasks.
Configure at least one token, then start the server again:
  tasktable token new --role admin
prints a token and a tokens-file line. Either put the line in a file and pass --tokens-file FILE
(or set TASKTABLE_TOKENS_FILE=FILE), or set TASKTABLE_TOKENS=admin:<token> in the server's
environment. Clients send the token with --token or TASKTABLE_TOKEN.
To serve only this machine without tokens, listen on a loopback address such as 127.0.0.1:8080."
    )
}

/// The tokens from `--tokens-file` and `TASKTABLE_TOKENS`.
fn load_tokens(args: &ServeArgs) -> Result<TokenSet, CliError> {
    let mut tokens = TokenSet::default();
    if let Some(path) = &args.tokens_file {
        let text = std::fs::read_to_string(path).map_err(|e| {
            CliError::failure(format!("cannot read tokens file {}: {e}", path.display()))
        })?;
        tokens
            .add_file_contents(&text)
            .map_err(|e| CliError::usage(format!("{}: {e}", path.display())))?;
    }
    if let Ok(value) = std::env::var("TASKTABLE_TOKENS") {
        tokens
            .add_env_value(&value)
            .map_err(|e| CliError::usage(format!("TASKTABLE_TOKENS: {e}")))?;
    }
    Ok(tokens)
}
