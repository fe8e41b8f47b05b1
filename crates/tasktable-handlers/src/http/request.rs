//! The `http` payload, and turning it into a request that is known to be sendable.

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use reqwest::Url;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

/// Per-request timeout when the payload names none.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// What an `http` task sends. Unknown fields are refused, so a misspelt option fails the
/// task instead of being ignored.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpPayload {
    /// `http://` or `https://` only.
    pub url: String,
    /// Default `POST`.
    #[serde(default)]
    pub method: HttpMethod,
    /// Sent as given, and dropped on a redirect to another origin. Their values never
    /// appear in error messages or in `Debug` output, and readers of the task see them
    /// redacted (see [`SECRET_FIELDS`](crate::SECRET_FIELDS)).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// Sent as JSON (`Content-Type: application/json` unless a header says otherwise).
    /// Absent or `null`: the request has no body.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body: Option<Value>,
    /// How long the request may take, from connecting to the end of the response body.
    /// Default 30 s. When the task's own timeout is shorter, that one ends the attempt
    /// instead (recorded as `timed_out`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_ms: Option<u64>,
}

impl HttpPayload {
    /// A `POST` to `url` with no headers and no body.
    pub fn new(url: impl Into<String>) -> Self {
        HttpPayload {
            url: url.into(),
            method: HttpMethod::default(),
            headers: BTreeMap::new(),
            body: None,
            timeout_ms: None,
        }
    }
}

/// Shows headers by name only: values may be credentials.
impl fmt::Debug for HttpPayload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpPayload")
            .field("url", &self.url)
            .field("method", &self.method)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("body", &self.body)
            .field("timeout_ms", &self.timeout_ms)
            .finish()
    }
}

/// The methods an `http` task may use, spelt in capitals in the payload.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum HttpMethod {
    Get,
    #[default]
    Post,
    Put,
    Patch,
    Delete,
}

impl From<HttpMethod> for reqwest::Method {
    fn from(m: HttpMethod) -> Self {
        match m {
            HttpMethod::Get => reqwest::Method::GET,
            HttpMethod::Post => reqwest::Method::POST,
            HttpMethod::Put => reqwest::Method::PUT,
            HttpMethod::Patch => reqwest::Method::PATCH,
            HttpMethod::Delete => reqwest::Method::DELETE,
        }
    }
}

/// A payload checked and converted, ready to send.
#[derive(Debug)]
pub(super) struct Prepared {
    pub method: reqwest::Method,
    pub url: Url,
    pub headers: HeaderMap,
    pub body: Option<Value>,
    /// `None`: the task's timeout is the shorter one, and the runtime enforces it.
    pub timeout: Option<Duration>,
}

impl Prepared {
    /// Checks the payload; an `Err` says why it can never be sent (no header values).
    pub fn new(payload: HttpPayload, task_timeout: Option<Duration>) -> Result<Self, String> {
        // The one parse that redaction shares, so readers never see a password this sends.
        let url = tasktable_core::url::parse_http(&payload.url)?;
        let mut headers = HeaderMap::new();
        for (name, value) in &payload.headers {
            let key = HeaderName::from_bytes(name.as_bytes())
                .map_err(|_| format!("invalid header name {name:?}"))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| format!("header {name:?} has an invalid value"))?;
            value.set_sensitive(true);
            headers.append(key, value);
        }
        let asked = match payload.timeout_ms {
            Some(0) => return Err("timeout_ms must be greater than 0".into()),
            Some(ms) => Duration::from_millis(ms),
            None => DEFAULT_TIMEOUT,
        };
        let timeout = match task_timeout {
            Some(task) if task <= asked => None,
            _ => Some(asked),
        };
        Ok(Prepared {
            method: payload.method.into(),
            url,
            headers,
            body: payload.body,
            timeout,
        })
    }

    /// `METHOD url` for messages, without credentials, query or fragment.
    pub fn describe(&self) -> String {
        format!("{} {}", self.method, Self::describe_url(&self.url))
    }

    /// `url` for messages, without credentials, query or fragment.
    pub fn describe_url(url: &Url) -> String {
        format!("{}{}", url.origin().ascii_serialization(), url.path())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn payload(v: Value) -> HttpPayload {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_to_a_post_without_body_and_a_30_second_timeout() {
        let p = Prepared::new(payload(json!({"url": "https://example.com/x"})), None).unwrap();
        assert_eq!(p.method, reqwest::Method::POST);
        assert_eq!(p.body, None);
        assert_eq!(p.timeout, Some(Duration::from_secs(30)));
    }

    #[test]
    fn a_shorter_task_timeout_takes_over_from_the_request_timeout() {
        let p = payload(json!({"url": "http://h/", "timeout_ms": 5000}));
        let long = Prepared::new(p.clone(), Some(Duration::from_secs(60))).unwrap();
        assert_eq!(long.timeout, Some(Duration::from_secs(5)));
        let short = Prepared::new(p, Some(Duration::from_secs(2))).unwrap();
        assert_eq!(short.timeout, None);
    }

    #[test]
    fn refuses_unknown_fields_and_methods() {
        let bad = [
            json!({"url": "http://h/", "bdy": {}}),
            json!({"url": "http://h/", "method": "TRACE"}),
            json!({"url": "http://h/", "method": "post"}),
        ];
        for v in bad {
            assert!(
                serde_json::from_value::<HttpPayload>(v.clone()).is_err(),
                "{v}"
            );
        }
    }

    #[test]
    fn refuses_other_schemes_and_zero_timeouts() {
        for (v, want) in [
            (json!({"url": "ftp://h/file"}), "scheme \"ftp\""),
            (json!({"url": "file:///etc/passwd"}), "scheme \"file\""),
            (json!({"url": "not a url"}), "invalid url"),
            (json!({"url": "http://h/", "timeout_ms": 0}), "timeout_ms"),
        ] {
            let err = Prepared::new(payload(v), None).unwrap_err();
            assert!(err.contains(want), "{err:?} should contain {want:?}");
        }
    }

    #[test]
    fn a_bad_header_is_named_without_its_value() {
        let v = json!({"url": "http://h/", "headers": {"Authorization": "Bearer s3cret\n"}});
        let err = Prepared::new(payload(v), None).unwrap_err();
        assert!(err.contains("Authorization"), "{err}");
        assert!(!err.contains("s3cret"), "{err}");
    }

    #[test]
    fn readers_are_shown_the_url_this_sends_to_without_its_password() {
        for url in [
            "https://bot:s3cr3t@h.example/x",
            "https:/bot:s3cr3t@h.example/x",
            "https:\\bot:s3cr3t@h.example/x",
            "https:\\\\bot:s3cr3t@h.example/x",
            "https:bot:s3cr3t@h.example/x",
            "HTTPS://bot:s3cr3t@H.EXAMPLE/x",
            "ht\ttps://bot:s3c\nr3t@h.example/x",
            " \u{1}https:/bot:s3cr3t@h.example/x\u{0} ",
            "https://bot:s3cr3t%40x@[::1]:8443/x",
            "http:bot:s3@cr3t@h.example:8080",
        ] {
            let sent = Prepared::new(HttpPayload::new(url), None).unwrap().url;
            assert!(
                sent.password().is_some_and(|p| p.contains("cr3t")),
                "{url:?}"
            );
            let shown = tasktable_core::url::redact_password(url);
            assert!(!shown.contains("cr3t"), "{url:?} is shown as {shown:?}");
            let read = Url::parse(&shown).unwrap();
            assert_eq!(
                (read.host_str(), read.port(), read.username(), read.path()),
                (sent.host_str(), sent.port(), sent.username(), sent.path()),
                "{url:?} is shown as {shown:?}"
            );
        }
        for unsendable in [
            "https://bot:s3cr3t@h.example:99999/",
            "https:/bot:s3cr3t@[::1/",
            "https://bot:s3/cr3t@h.example/",
        ] {
            assert!(Prepared::new(HttpPayload::new(unsendable), None).is_err());
            let shown = tasktable_core::url::redact_password(unsendable);
            assert!(
                !shown.contains("cr3t"),
                "{unsendable:?} is shown as {shown:?}"
            );
        }
    }

    #[test]
    fn debug_output_and_descriptions_hide_secrets() {
        let mut p = HttpPayload::new("https://user:pw@h.example/a/b?token=t0k#frag");
        p.headers.insert("X-Api-Key".into(), "k3y".into());
        let debug = format!("{p:?}");
        assert!(
            debug.contains("X-Api-Key") && !debug.contains("k3y"),
            "{debug}"
        );
        let described = Prepared::new(p, None).unwrap().describe();
        assert_eq!(described, "POST https://h.example/a/b");
    }
}
