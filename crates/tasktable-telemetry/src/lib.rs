//! What tasktable's processes write about themselves: log lines on stderr, as text or
//! one JSON object a line, and OpenTelemetry traces over OTLP/HTTP when the standard
//! `OTEL_*` environment asks for them ([`Telemetry::init`]).
//!
//! Owns: the process's `tracing` subscriber (filters, formats, the OpenTelemetry layer),
//! reading the OpenTelemetry environment, the OTLP exporter and its HTTP client, and
//! flushing spans at exit.
//!
//! Must not know: tasks, stores or handlers. Which spans exist and what they carry is
//! `tasktable-runtime`'s (`tasktable_runtime::trace`); this crate exports the spans of
//! that crate's target and nothing else.

#![warn(missing_docs)]

mod env;
mod sender;

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{WithExportConfig, WithHttpConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tracing_subscriber::filter::{EnvFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::Layer;

pub use env::{Protocol, TraceConfig};

/// The target of the spans exported ([`tasktable_runtime::trace::TARGET`]'s value: this
/// crate does not depend on the runtime).
const TRACE_TARGET: &str = "tasktable::trace";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum LogFormat {
    /// Human-readable lines, coloured on a terminal.
    #[default]
    Text,
    /// One JSON object a line, the event's fields at its top level.
    Json,
}

/// Why telemetry could not be set up; the process should not start.
#[derive(Debug, thiserror::Error)]
pub enum TelemetryError {
    /// The OpenTelemetry environment asks for something this build does not do.
    #[error("{0}")]
    Unsupported(String),
    /// The exporter could not be built.
    #[error("cannot set up the OTLP exporter: {0}")]
    Exporter(String),
}

/// The process's telemetry, set up once; [`Telemetry::shutdown`] sends the spans still
/// buffered.
#[derive(Debug)]
pub struct Telemetry {
    provider: Option<SdkTracerProvider>,
    /// Told to the exporter's client at shutdown, so that what fails then is said once.
    closing: Arc<AtomicBool>,
}

impl Telemetry {
    /// Installs the process's subscriber: logs on stderr in `format` at `RUST_LOG`'s
    /// levels (`default` when it is unset), and, given a `runtime` to send from (a tokio
    /// runtime that outlives the telemetry) and when [`TraceConfig::from_env`] finds
    /// traces asked for, an OpenTelemetry layer that exports tasktable's spans over
    /// OTLP/HTTP. Fails when the environment asks for what is not supported (gRPC,
    /// another exporter), naming the variable.
    pub fn init(
        default: &str,
        format: LogFormat,
        runtime: Option<&tokio::runtime::Handle>,
    ) -> Result<Telemetry, TelemetryError> {
        let closing = Arc::new(AtomicBool::new(false));
        let config = match runtime {
            Some(runtime) => TraceConfig::from_env(|name| std::env::var(name).ok())?
                .map(|config| (config, runtime)),
            None => None,
        };
        let provider = match &config {
            Some((config, runtime)) => Some(provider(config, runtime, closing.clone())?),
            None => None,
        };
        let otel = provider.as_ref().map(|provider| {
            tracing_opentelemetry::layer()
                .with_tracer(provider.tracer("tasktable"))
                // The spans' own attributes only: not where in tasktable's code they
                // were opened, nor its threads or idle times.
                .with_level(false)
                .with_target(false)
                .with_location(false)
                .with_threads(false)
                .with_tracked_inactivity(false)
                .with_filter(Targets::new().with_target(TRACE_TARGET, tracing::Level::INFO))
        });
        let registry = tracing_subscriber::registry().with(otel);
        let fmt = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
        match format {
            LogFormat::Text => registry
                .with(
                    fmt.with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
                        .with_filter(log_filter(default)),
                )
                .init(),
            LogFormat::Json => registry
                .with(
                    fmt.json()
                        .flatten_event(true)
                        .with_filter(log_filter(default)),
                )
                .init(),
        }
        if let Some((config, _)) = &config {
            tracing::info!(
                endpoint = %config.endpoint,
                protocol = config.protocol.as_str(),
                "exporting traces"
            );
        }
        Ok(Telemetry { provider, closing })
    }

    /// Sends the spans still buffered, waiting at most a few seconds for the collector.
    /// Call it before the process exits, while the runtime given to
    /// [`Telemetry::init`] still runs.
    pub fn shutdown(self) {
        if let Some(provider) = self.provider {
            self.closing.store(true, Ordering::Relaxed);
            if let Err(e) = provider.shutdown_with_timeout(Duration::from_secs(5)) {
                tracing::warn!(error = %e, "the last spans could not be sent");
            }
        }
    }
}

/// What reaches the log: `RUST_LOG` (or `default`), never tasktable's trace spans (they
/// are for the exporter), and never sqlx's lines that print the value of a database
/// URL parameter it does not know (`?sslpassword=` is one).
fn log_filter(default: &str) -> EnvFilter {
    let mut filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    for quiet in [
        "sqlx_postgres::options::parse=error".to_owned(),
        "sqlx_mysql::options::parse=error".to_owned(),
        format!("{TRACE_TARGET}=off"),
    ] {
        if let Ok(directive) = quiet.parse() {
            filter = filter.add_directive(directive);
        }
    }
    filter
}

fn provider(
    config: &TraceConfig,
    runtime: &tokio::runtime::Handle,
    closing: Arc<AtomicBool>,
) -> Result<SdkTracerProvider, TelemetryError> {
    let exporter = opentelemetry_otlp::SpanExporter::builder()
        .with_http()
        .with_protocol(match config.protocol {
            Protocol::Protobuf => opentelemetry_otlp::Protocol::HttpBinary,
            Protocol::Json => opentelemetry_otlp::Protocol::HttpJson,
        })
        .with_http_client(sender::Sender::new(
            runtime.clone(),
            config.timeout,
            closing,
        )?)
        .with_timeout(config.timeout)
        // The endpoint and headers come from OTEL_EXPORTER_OTLP_[TRACES_]ENDPOINT and
        // _HEADERS, read by the exporter itself.
        .build()
        .map_err(|e| TelemetryError::Exporter(e.to_string()))?;
    let mut resource = Resource::builder();
    if !config.service_named {
        resource = resource.with_service_name("tasktable");
    }
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_resource(resource.build())
        .build())
}
