//! What an HTTP answer means for the task: success, retry (and when), or permanent failure.

use super::policy::Refused;
use super::HttpResult;
use crate::captured::{first_chars, Head, RESULT_LIMIT, SNIPPET_CHARS};
use crate::secrets::redact;
use reqwest::header::{HeaderMap, RETRY_AFTER};
use reqwest::StatusCode;
use std::time::Duration;
use tasktable_runtime::HandlerError;

/// Longest wait a server's Retry-After can ask for.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(3600);

/// Why an attempt did not succeed, before secrets are blanked out of the message.
#[derive(Debug, PartialEq)]
pub(super) enum Failure {
    Retry {
        message: String,
        after: Option<Duration>,
    },
    Permanent(String),
}

impl Failure {
    fn retry(message: String) -> Self {
        Failure::Retry {
            message,
            after: None,
        }
    }

    /// The handler's error, with every occurrence of a secret replaced.
    pub fn into_error(self, secrets: &[String]) -> HandlerError {
        let redact = |message: String| redact(message, secrets.iter().map(String::as_str));
        match self {
            Failure::Retry {
                message,
                after: Some(after),
            } => HandlerError::retry_after(redact(message), after),
            Failure::Retry {
                message,
                after: None,
            } => HandlerError::retry(redact(message)),
            Failure::Permanent(message) => HandlerError::permanent(redact(message)),
        }
    }
}

/// Reads at most [`RESULT_LIMIT`] bytes of the body; the rest is never read.
pub(super) async fn read_body(response: &mut reqwest::Response) -> Result<Head, reqwest::Error> {
    let mut head = Head::new(RESULT_LIMIT);
    while let Some(chunk) = response.chunk().await? {
        head.push(&chunk);
        if head.is_truncated() {
            break;
        }
    }
    Ok(head)
}

/// Sorts a complete answer. `what` names the request in messages.
pub(super) fn judge(
    what: &str,
    status: StatusCode,
    headers: &HeaderMap,
    body: Result<Head, reqwest::Error>,
) -> Result<HttpResult, Failure> {
    let body = match body {
        Ok(body) => body,
        // Only a success needs the whole body; a failure is reported as it is.
        Err(e) if status.is_success() => return Err(transport(what, e)),
        Err(_) => Head::new(0),
    };
    let explain = || {
        let text = body.text();
        let snippet = first_chars(text.trim(), SNIPPET_CHARS);
        let reason = status.canonical_reason().unwrap_or("");
        let head = format!("{what}: HTTP {} {reason}", status.as_u16());
        if snippet.is_empty() {
            head
        } else {
            format!("{head}: {snippet}")
        }
    };
    if status.is_success() {
        return Ok(HttpResult {
            status: status.as_u16(),
            body: body.json_or_text(),
        });
    }
    if status.is_server_error()
        || status == StatusCode::TOO_MANY_REQUESTS
        || status == StatusCode::REQUEST_TIMEOUT
    {
        return Err(Failure::Retry {
            message: explain(),
            after: retry_after(headers),
        });
    }
    if status.is_redirection() {
        return Err(Failure::Permanent(format!(
            "{}; the redirect was not followed",
            explain()
        )));
    }
    Err(Failure::Permanent(explain()))
}

/// A failure before a complete answer: connection, timeout, an address the policy refuses.
pub(super) fn transport(what: &str, err: reqwest::Error) -> Failure {
    if let Some(refused) = refused(&err) {
        return Failure::Permanent(format!("{what}: {refused}"));
    }
    let permanent = err.is_builder();
    // reqwest prints the full URL, query and credentials included; `what` already names
    // the request without them.
    let message = format!("{what}: {}", chain(&err.without_url()));
    if permanent {
        Failure::Permanent(message)
    } else {
        Failure::retry(message)
    }
}

/// The policy's refusal, when that is what stopped the client from connecting: the
/// resolver's error reaches here as the cause of a connection error.
fn refused<'a>(err: &'a (dyn std::error::Error + 'static)) -> Option<&'a Refused> {
    let mut cause = Some(err);
    while let Some(e) = cause {
        if let Some(refused) = e.downcast_ref::<Refused>() {
            return Some(refused);
        }
        cause = e.source();
    }
    None
}

/// A server's Retry-After in seconds, capped; HTTP dates are ignored (the task's backoff
/// applies instead).
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let seconds: u64 = headers
        .get(RETRY_AFTER)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()?;
    Some(Duration::from_secs(seconds).min(MAX_RETRY_AFTER))
}

/// An error and its causes, joined: reqwest puts the useful part ("connection refused",
/// "operation timed out") in the sources.
fn chain(err: &dyn std::error::Error) -> String {
    let mut message = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        message.push_str(": ");
        message.push_str(&s.to_string());
        source = s.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;
    use serde_json::json;

    fn body(text: &str) -> Result<Head, reqwest::Error> {
        let mut head = Head::new(RESULT_LIMIT);
        head.push(text.as_bytes());
        Ok(head)
    }

    fn with_retry_after(v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(RETRY_AFTER, HeaderValue::from_str(v).unwrap());
        h
    }

    #[test]
    fn success_keeps_the_status_and_a_json_or_text_body() {
        let ok = judge(
            "GET u",
            StatusCode::OK,
            &HeaderMap::new(),
            body("{\"a\":1}"),
        )
        .unwrap();
        assert_eq!((ok.status, ok.body), (200, json!({"a": 1})));
        let text = judge("GET u", StatusCode::CREATED, &HeaderMap::new(), body("hi")).unwrap();
        assert_eq!((text.status, text.body), (201, json!("hi")));
    }

    #[test]
    fn server_errors_throttling_and_request_timeouts_are_retried() {
        for status in [500, 502, 503, 429, 408] {
            let status = StatusCode::from_u16(status).unwrap();
            let err = judge("POST u", status, &HeaderMap::new(), body("busy")).unwrap_err();
            assert!(
                matches!(err, Failure::Retry { after: None, .. }),
                "{status}: {err:?}"
            );
        }
    }

    #[test]
    fn retry_after_seconds_are_honoured_up_to_an_hour() {
        let cases = [("7", Some(7)), (" 120 ", Some(120)), ("86400", Some(3600))];
        for (header, want) in cases {
            let err = judge(
                "POST u",
                StatusCode::SERVICE_UNAVAILABLE,
                &with_retry_after(header),
                body(""),
            )
            .unwrap_err();
            let want = want.map(Duration::from_secs);
            assert!(
                matches!(err, Failure::Retry { after, .. } if after == want),
                "{header}"
            );
        }
        let date = with_retry_after("Wed, 21 Oct 2015 07:28:00 GMT");
        assert_eq!(retry_after(&date), None);
    }

    #[test]
    fn other_client_errors_and_final_redirects_are_permanent_with_status_and_body() {
        let err = judge(
            "POST u",
            StatusCode::NOT_FOUND,
            &HeaderMap::new(),
            body("no such thing"),
        );
        assert_eq!(
            err.unwrap_err(),
            Failure::Permanent("POST u: HTTP 404 Not Found: no such thing".into())
        );
        let err = judge(
            "GET u",
            StatusCode::MULTIPLE_CHOICES,
            &HeaderMap::new(),
            body(""),
        );
        assert!(matches!(err, Err(Failure::Permanent(m)) if m.contains("HTTP 300")));
    }

    #[test]
    fn long_bodies_are_cut_in_messages() {
        let long = "x".repeat(10_000);
        let Err(Failure::Permanent(m)) = judge(
            "POST u",
            StatusCode::BAD_REQUEST,
            &HeaderMap::new(),
            body(&long),
        ) else {
            panic!("expected a permanent failure");
        };
        assert!(
            m.len() < SNIPPET_CHARS + 100 && m.ends_with("..."),
            "{}",
            m.len()
        );
    }
}
