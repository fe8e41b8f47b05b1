//! What users implement: a [`Handler`] per task kind, answering with a result or a
//! [`HandlerError`] that says what should happen next.

use crate::context::TaskContext;
use futures::future::BoxFuture;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;
use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tasktable_core::HandlerOutcome;

/// Runs tasks of one kind.
///
/// ```
/// # use tasktable_runtime::{Handler, HandlerError, TaskContext};
/// # #[derive(serde::Deserialize)]
/// # struct Email;
/// # mod smtp {
/// #     pub async fn send(_: &super::Email) -> std::io::Result<()> { Ok(()) }
/// # }
/// struct SendEmail;
/// impl Handler for SendEmail {
///     const KIND: &'static str = "send_email";
///     type Payload = Email;
///     type Output = ();
///     async fn run(&self, _ctx: TaskContext, email: Email) -> Result<(), HandlerError> {
///         smtp::send(&email).await?; // any error is retryable
///         Ok(())
///     }
/// }
/// # fn main() {}
/// ```
pub trait Handler: Send + Sync + 'static {
    /// The task kind this handler runs.
    const KIND: &'static str;
    /// The payload, deserialized from the task's JSON.
    type Payload: DeserializeOwned + Send + 'static;
    /// Stored as the task's result.
    type Output: Serialize + Send + 'static;

    /// Runs one attempt. `Ok` completes the task, storing the output as its result (an
    /// output that serializes to `null` stores none); an error does what the
    /// [`HandlerError`] says, and a panic is a retryable error. A payload that does not
    /// deserialize into `Payload` fails the task for good without a call. The attempt is
    /// aborted when the task's timeout passes, and told to stop through
    /// [`TaskContext::stopped`] when its lease is lost, the task is cancelled or
    /// retargeted, or the worker shuts down: what it returns then is not recorded.
    fn run(
        &self,
        ctx: TaskContext,
        payload: Self::Payload,
    ) -> impl Future<Output = Result<Self::Output, HandlerError>> + Send;
}

/// How a handler says an attempt did not succeed. Any `std::error::Error` converts into a
/// retryable one, so `?` works in handlers.
pub struct HandlerError {
    kind: ErrorKind,
    message: String,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum ErrorKind {
    Retry(Option<Duration>),
    Permanent,
    Snooze(Duration),
    Cancel,
}

impl HandlerError {
    /// Retry after the task's backoff; when this was the task's last attempt, it fails.
    pub fn retry(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Retry(None), message)
    }
    /// Retry after exactly `after` (for example a server's Retry-After) instead of the
    /// backoff; the attempt is spent all the same.
    pub fn retry_after(message: impl Into<String>, after: Duration) -> Self {
        Self::new(ErrorKind::Retry(Some(after)), message)
    }
    /// Fail now, whatever attempts remain.
    pub fn permanent(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::Permanent, message)
    }
    /// Run again after `after` without spending an attempt.
    pub fn snooze(after: Duration) -> Self {
        Self::new(ErrorKind::Snooze(after), "snoozed")
    }
    /// Cancel the task, whatever attempts remain; `reason` is recorded as the attempt's
    /// error.
    pub fn cancel(reason: impl Into<String>) -> Self {
        Self::new(ErrorKind::Cancel, reason)
    }

    fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        HandlerError {
            kind,
            message: message.into(),
        }
    }

    /// Whether it asks to give up at once, whatever tries remain.
    pub(crate) fn is_permanent(&self) -> bool {
        matches!(self.kind, ErrorKind::Permanent | ErrorKind::Cancel)
    }

    /// The wait a retry asked for ([`retry_after`](Self::retry_after)), if any.
    pub(crate) fn asked_wait(&self) -> Option<Duration> {
        match self.kind {
            ErrorKind::Retry(after) => after,
            _ => None,
        }
    }

    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    pub(crate) fn into_outcome(self) -> HandlerOutcome {
        match self.kind {
            ErrorKind::Retry(retry_after) => HandlerOutcome::Error {
                message: self.message,
                retry_after,
            },
            ErrorKind::Permanent => HandlerOutcome::Failed {
                message: self.message,
            },
            ErrorKind::Snooze(after) => HandlerOutcome::Snooze { after },
            ErrorKind::Cancel => HandlerOutcome::Cancel {
                reason: self.message,
            },
        }
    }
}

impl fmt::Debug for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "HandlerError({:?}: {})", self.kind, self.message)
    }
}

impl fmt::Display for HandlerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl<E: std::error::Error + Send + Sync + 'static> From<E> for HandlerError {
    fn from(err: E) -> Self {
        let mut message = err.to_string();
        let mut source = err.source();
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        HandlerError::retry(message)
    }
}

/// A handler with its types erased, so the worker can hold handlers of every kind.
pub(crate) trait ErasedHandler: Send + Sync {
    fn call(
        self: Arc<Self>,
        ctx: TaskContext,
        payload: Value,
    ) -> BoxFuture<'static, HandlerOutcome>;
}

pub(crate) struct Typed<H>(pub H);

impl<H: Handler> ErasedHandler for Typed<H> {
    fn call(
        self: Arc<Self>,
        ctx: TaskContext,
        payload: Value,
    ) -> BoxFuture<'static, HandlerOutcome> {
        Box::pin(async move {
            let payload: H::Payload = match serde_json::from_value(payload) {
                Ok(p) => p,
                Err(e) => {
                    return HandlerOutcome::Failed {
                        message: format!("payload does not fit handler {}: {e}", H::KIND),
                    }
                }
            };
            match self.0.run(ctx, payload).await {
                Ok(output) => match serde_json::to_value(output) {
                    Ok(Value::Null) => HandlerOutcome::Succeeded { result: None },
                    Ok(v) => HandlerOutcome::Succeeded { result: Some(v) },
                    Err(e) => HandlerOutcome::Failed {
                        message: format!("result of {} cannot be stored as JSON: {e}", H::KIND),
                    },
                },
                Err(e) => e.into_outcome(),
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_error_becomes_a_retry_with_its_causes() {
        let io = std::io::Error::other("disk full");
        let e: HandlerError = io.into();
        assert_eq!(
            e.into_outcome(),
            HandlerOutcome::Error {
                message: "disk full".into(),
                retry_after: None
            }
        );
    }

    #[test]
    fn explicit_kinds_map_to_outcomes() {
        assert!(matches!(
            HandlerError::permanent("no").into_outcome(),
            HandlerOutcome::Failed { .. }
        ));
        assert_eq!(
            HandlerError::snooze(Duration::from_secs(3)).into_outcome(),
            HandlerOutcome::Snooze {
                after: Duration::from_secs(3)
            }
        );
        assert!(matches!(
            HandlerError::cancel("obsolete").into_outcome(),
            HandlerOutcome::Cancel { .. }
        ));
    }
}
