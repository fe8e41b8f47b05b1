//! Which traces the OpenTelemetry environment asks for, read by the rules of the
//! OpenTelemetry specification's environment variables, within what tasktable exports:
//! OTLP over HTTP, as protobuf or JSON.

use crate::TelemetryError;
use std::time::Duration;

/// How spans are encoded on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// `http/protobuf`, the default.
    Protobuf,
    /// `http/json`.
    Json,
}

impl Protocol {
    /// Its name in `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Protobuf => "http/protobuf",
            Protocol::Json => "http/json",
        }
    }
}

/// The export the environment asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceConfig {
    /// Where spans go, as the log may show it (without user information or query):
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`, else `OTEL_EXPORTER_OTLP_ENDPOINT` with
    /// `/v1/traces`, else `http://localhost:4318/v1/traces`.
    pub endpoint: String,
    /// `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL`, else `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub protocol: Protocol,
    /// `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT`, else `OTEL_EXPORTER_OTLP_TIMEOUT`, in
    /// milliseconds; 10 s unless set.
    pub timeout: Duration,
    /// Whether `OTEL_SERVICE_NAME` or `OTEL_RESOURCE_ATTRIBUTES` names the service
    /// (otherwise it is `tasktable`).
    pub service_named: bool,
}

/// The export timeout when none is set (the specification's default).
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

impl TraceConfig {
    /// The export asked for by the variables `get` reads, or `None` for none: traces are
    /// off unless an OTLP endpoint is set (`OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) or `OTEL_TRACES_EXPORTER=otlp` asks for the
    /// default one (`http://localhost:4318/v1/traces`), and off whatever else is set
    /// when `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`. gRPC and exporters
    /// other than OTLP are refused with an error naming the variable.
    pub fn from_env(
        get: impl Fn(&str) -> Option<String>,
    ) -> Result<Option<TraceConfig>, TelemetryError> {
        let set = |name: &str| {
            get(name)
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
        };
        if set("OTEL_SDK_DISABLED").is_some_and(|v| v.eq_ignore_ascii_case("true")) {
            return Ok(None);
        }
        let exporter = set("OTEL_TRACES_EXPORTER").map(|v| v.to_ascii_lowercase());
        match exporter.as_deref() {
            Some("none") => return Ok(None),
            None | Some("otlp") => {}
            Some(other) => {
                return Err(TelemetryError::Unsupported(format!(
                    "OTEL_TRACES_EXPORTER={other} is not supported: tasktable exports traces \
                     with otlp (or none)"
                )))
            }
        }
        let endpoint = match (
            set("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            set("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(url), _) => Some(shown("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", &url, "")?),
            (None, Some(base)) => Some(shown("OTEL_EXPORTER_OTLP_ENDPOINT", &base, "/v1/traces")?),
            (None, None) => None,
        };
        if endpoint.is_none() && exporter.is_none() {
            return Ok(None);
        }
        let endpoint = endpoint.unwrap_or_else(|| "http://localhost:4318/v1/traces".to_owned());
        let (name, value) = match set("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(v) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Some(v)),
            None => (
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                set("OTEL_EXPORTER_OTLP_PROTOCOL"),
            ),
        };
        let protocol = match value.as_deref().map(str::to_ascii_lowercase).as_deref() {
            None | Some("http/protobuf") => Protocol::Protobuf,
            Some("http/json") => Protocol::Json,
            Some(other) => {
                return Err(TelemetryError::Unsupported(format!(
                    "{name}={other} is not supported: tasktable exports OTLP over HTTP, \
                     http/protobuf (the default) or http/json, to a collector's HTTP port \
                     (4318)"
                )))
            }
        };
        let (name, value) = match set("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT") {
            Some(v) => ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", Some(v)),
            None => (
                "OTEL_EXPORTER_OTLP_TIMEOUT",
                set("OTEL_EXPORTER_OTLP_TIMEOUT"),
            ),
        };
        let timeout = match value {
            None => DEFAULT_TIMEOUT,
            Some(ms) => ms
                .parse::<u64>()
                .ok()
                .filter(|ms| *ms > 0)
                .map(Duration::from_millis)
                .ok_or_else(|| {
                    TelemetryError::Unsupported(format!(
                        "{name}={ms} is not a timeout: give whole milliseconds, above 0"
                    ))
                })?,
        };
        let service_named = set("OTEL_SERVICE_NAME").is_some()
            || set("OTEL_RESOURCE_ATTRIBUTES").is_some_and(|attributes| {
                attributes
                    .split(',')
                    .any(|pair| pair.trim_start().starts_with("service.name="))
            });
        Ok(Some(TraceConfig {
            endpoint,
            protocol,
            timeout,
            service_named,
        }))
    }
}

/// The endpoint in variable `name`, with `path` added, as the log shows it: scheme, host,
/// port and path. Anything but an http or https URL is refused, naming the variable (not
/// its value, which may hold a secret).
fn shown(name: &str, value: &str, path: &str) -> Result<String, TelemetryError> {
    let url = url::Url::parse(value)
        .ok()
        .filter(|url| matches!(url.scheme(), "http" | "https") && url.host_str().is_some())
        .ok_or_else(|| {
            TelemetryError::Unsupported(format!(
                "{name} is not an http or https URL (such as http://collector:4318)"
            ))
        })?;
    let port = url.port().map(|p| format!(":{p}")).unwrap_or_default();
    let base = url.path().trim_end_matches('/');
    Ok(format!(
        "{}://{}{port}{base}{path}",
        url.scheme(),
        url.host_str().unwrap_or_default()
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn read(vars: &[(&str, &str)]) -> Result<Option<TraceConfig>, TelemetryError> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TraceConfig::from_env(|name| vars.get(name).cloned())
    }

    const ENDPOINT: (&str, &str) = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://collector:4318");

    #[test]
    fn traces_are_off_unless_an_endpoint_or_the_exporter_is_set() {
        assert_eq!(read(&[]).unwrap(), None);
        assert_eq!(read(&[("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]).unwrap(), None);
        let on = read(&[ENDPOINT]).unwrap().unwrap();
        assert_eq!(on.protocol, Protocol::Protobuf);
        assert_eq!(on.timeout, DEFAULT_TIMEOUT);
        assert!(!on.service_named);
        assert!(
            read(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://c/v1/traces")])
                .unwrap()
                .is_some()
        );
        assert!(read(&[("OTEL_TRACES_EXPORTER", "otlp")]).unwrap().is_some());
    }

    #[test]
    fn disabled_or_none_wins_over_an_endpoint() {
        assert_eq!(
            read(&[ENDPOINT, ("OTEL_SDK_DISABLED", "TRUE")]).unwrap(),
            None
        );
        assert_eq!(
            read(&[ENDPOINT, ("OTEL_TRACES_EXPORTER", "none")]).unwrap(),
            None
        );
        assert!(read(&[ENDPOINT, ("OTEL_SDK_DISABLED", "false")])
            .unwrap()
            .is_some());
    }

    #[test]
    fn the_traces_protocol_wins_over_the_general_one() {
        let json = read(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]);
        assert_eq!(json.unwrap().unwrap().protocol, Protocol::Json);
        let both = read(&[
            ENDPOINT,
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ]);
        assert_eq!(both.unwrap().unwrap().protocol, Protocol::Protobuf);
    }

    #[test]
    fn what_is_not_supported_is_refused_by_name() {
        let grpc = read(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]).unwrap_err();
        assert!(
            grpc.to_string()
                .contains("OTEL_EXPORTER_OTLP_PROTOCOL=grpc"),
            "{grpc}"
        );
        let zipkin = read(&[("OTEL_TRACES_EXPORTER", "zipkin")]).unwrap_err();
        assert!(
            zipkin.to_string().contains("OTEL_TRACES_EXPORTER=zipkin"),
            "{zipkin}"
        );
        let timeout = read(&[ENDPOINT, ("OTEL_EXPORTER_OTLP_TIMEOUT", "5s")]).unwrap_err();
        assert!(
            timeout
                .to_string()
                .contains("OTEL_EXPORTER_OTLP_TIMEOUT=5s"),
            "{timeout}"
        );
    }

    #[test]
    fn endpoints_are_shown_without_secrets_and_must_be_http_urls() {
        let base = read(&[(
            "OTEL_EXPORTER_OTLP_ENDPOINT",
            "https://u:pw@collector:4318/?k=v",
        )]);
        assert_eq!(
            base.unwrap().unwrap().endpoint,
            "https://collector:4318/v1/traces"
        );
        let exact = read(&[
            ENDPOINT,
            (
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "http://c/custom/traces",
            ),
        ]);
        assert_eq!(exact.unwrap().unwrap().endpoint, "http://c/custom/traces");
        let default = read(&[("OTEL_TRACES_EXPORTER", "otlp")]).unwrap().unwrap();
        assert_eq!(default.endpoint, "http://localhost:4318/v1/traces");
        for (name, value) in [
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "not-a-url"),
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "ftp://u:pw-secret@c/"),
        ] {
            let refused = read(&[(name, value)]).unwrap_err().to_string();
            assert!(refused.contains(name), "{refused}");
            assert!(!refused.contains("secret"), "{refused}");
        }
    }

    #[test]
    fn timeouts_and_service_names_are_read() {
        let config = read(&[
            ENDPOINT,
            ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
            (
                "OTEL_RESOURCE_ATTRIBUTES",
                "deployment.environment=prod, service.name=jobs",
            ),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(config.timeout, Duration::from_millis(2500));
        assert!(config.service_named);
        let named = read(&[ENDPOINT, ("OTEL_SERVICE_NAME", "jobs")])
            .unwrap()
            .unwrap();
        assert!(named.service_named);
    }
}
