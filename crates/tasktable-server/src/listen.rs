//! Serving the router over TCP with limits a slow or hostile client cannot outlast.
//!
//! - A request's headers must arrive within [`ConnectionLimits::header_timeout`], and so
//!   must the next request's on a kept-alive connection: a connection that sends nothing,
//!   or half a request, or idles between requests, is closed when it runs out.
//! - A request's body must arrive whole within [`ConnectionLimits::body_timeout`] of its
//!   headers, however it trickles; else the read fails and the request is answered
//!   `400 bad_body`.
//! - Open connections are capped in total and per client address, below the process's
//!   file descriptor limit, so connections can never use up the descriptors the database
//!   and the listener need. One over a cap is closed at once, and the log says so.
//!
//! Answers being written are never cut: an event stream or a long-poll claim waits on the
//! server's side, which none of these limits times.

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::Router;
use hyper::body::{Body as HttpBody, Frame, Incoming, SizeHint};
use hyper::server::conn::http1::Builder;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::net::IpAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tower::ServiceExt;

/// Descriptors kept out of the connection cap: the database's connections, the listener,
/// log and database files.
pub const RESERVED_DESCRIPTORS: usize = 128;

/// How long headers may take to arrive, by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a body may take to arrive after its headers, by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// What the server allows a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Headers (of a connection's first request, and of each next one) must arrive
    /// within this, or the connection is closed.
    pub header_timeout: Duration,
    /// A body must arrive whole within this of its request's headers.
    pub body_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// Open connections from one client address at most.
    pub max_per_address: usize,
}

impl ConnectionLimits {
    /// Limits sized to this process: the connection cap is the descriptor limit (the soft
    /// one, raised first to the hard one where that is allowed) less
    /// [`RESERVED_DESCRIPTORS`], and one address may hold half of it.
    pub fn for_this_process() -> Self {
        let descriptors = raise_descriptor_limit();
        let max_connections = descriptors.saturating_sub(RESERVED_DESCRIPTORS).max(16);
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections,
            max_per_address: (max_connections / 2).max(1),
        }
    }
}

/// The soft limit on open files after raising it to the hard limit (capped at 1,048,576:
/// a larger table only costs memory), or 1,024 where it cannot be read.
fn raise_descriptor_limit() -> usize {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return 1024;
    };
    let wanted = hard.min(1 << 20);
    if wanted > soft && setrlimit(Resource::RLIMIT_NOFILE, wanted, hard).is_ok() {
        return wanted as usize;
    }
    soft as usize
}

/// Serves `app` on `listener` within `limits` until `shutdown` resolves, then lets the
/// requests in flight finish. Handlers see the client's address as `ConnectInfo`.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // HTTP/1.1 only: the server has no TLS, so HTTP/2 would be cleartext by prior
    // knowledge, which no client of it speaks; and detecting it would read a connection's
    // first bytes before the header timeout starts.
    let mut builder = Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let open = Arc::new(Open::default());
    let mut refusals = Refusals::default();
    tracing::info!(
        max_connections = limits.max_connections,
        max_per_address = limits.max_per_address,
        header_timeout_ms = limits.header_timeout.as_millis() as u64,
        body_timeout_ms = limits.body_timeout.as_millis() as u64,
        "connection limits"
    );
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors or memory: wait for connections to close rather
                    // than spin on the error.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let Some(slot) = Slot::take(&open, peer.ip(), &limits) else {
            refusals.note(peer.ip(), &limits);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let body_timeout = limits.body_timeout;
        let app = app.clone();
        let service = TowerToHyperService::new(tower::service_fn(
            move |mut req: hyper::Request<Incoming>| {
                req.extensions_mut().insert(ConnectInfo(peer));
                let req = req.map(|body| Body::new(Deadline::new(body, body_timeout)));
                app.clone().oneshot(req)
            },
        ));
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    graceful.shutdown().await;
    Ok(())
}

/// Open connections, in total and by client address.
#[derive(Default)]
struct Open {
    counts: Mutex<Counts>,
}

#[derive(Default)]
struct Counts {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// One open connection, counted until it is dropped.
struct Slot {
    open: Arc<Open>,
    address: IpAddr,
}

impl Slot {
    fn take(open: &Arc<Open>, address: IpAddr, limits: &ConnectionLimits) -> Option<Slot> {
        let mut counts = open.counts.lock().unwrap();
        let mine = counts.by_address.get(&address).copied().unwrap_or(0);
        if counts.total >= limits.max_connections || mine >= limits.max_per_address {
            return None;
        }
        counts.total += 1;
        *counts.by_address.entry(address).or_default() += 1;
        Some(Slot {
            open: open.clone(),
            address,
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut counts = self.open.counts.lock().unwrap();
        counts.total -= 1;
        if let Some(n) = counts.by_address.get_mut(&self.address) {
            *n -= 1;
            if *n == 0 {
                counts.by_address.remove(&self.address);
            }
        }
    }
}

/// Connections closed for a cap, logged at most once every 10 s with how many there were.
#[derive(Default)]
struct Refusals {
    since: Option<Instant>,
    count: u64,
}

impl Refusals {
    fn note(&mut self, address: IpAddr, limits: &ConnectionLimits) {
        self.count += 1;
        if self
            .since
            .is_some_and(|t| t.elapsed() < Duration::from_secs(10))
        {
            return;
        }
        tracing::warn!(
            %address,
            refused = self.count,
            max_connections = limits.max_connections,
            max_per_address = limits.max_per_address,
            "connections closed at once: the server holds as many as it allows \
             (--max-connections, --max-connections-per-address)"
        );
        self.since = Some(Instant::now());
        self.count = 0;
    }
}

/// A request body that fails once its time is up, however slowly it trickles.
struct Deadline {
    body: Incoming,
    sleep: Pin<Box<tokio::time::Sleep>>,
    timeout: Duration,
}

impl Deadline {
    fn new(body: Incoming, timeout: Duration) -> Self {
        Deadline {
            body,
            sleep: Box::pin(tokio::time::sleep(timeout)),
            timeout,
        }
    }
}

impl HttpBody for Deadline {
    type Data = bytes::Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        if let Poll::Ready(frame) = Pin::new(&mut self.body).poll_frame(cx) {
            return Poll::Ready(frame.map(|f| f.map_err(Into::into)));
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            let message = format!(
                "the request's body did not arrive within {} s of its headers",
                self.timeout.as_secs_f64()
            );
            return Poll::Ready(Some(Err(message.into())));
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
