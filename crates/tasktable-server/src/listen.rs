//! Serving the router over TCP with limits a slow or hostile client cannot outlast.
//!
//! - A request's headers must arrive within [`ConnectionLimits::header_timeout`], and so
//!   must the next request's on a kept-alive connection: a connection that sends nothing,
//!   or half a request, or idles between requests, is closed when it runs out.
//! - A request's body must arrive whole within [`ConnectionLimits::body_timeout`] of its
//!   headers, however it trickles; else the read fails and the request is answered
//!   `400 bad_body`.
//! - An answer the client does not read is given up when a write has made no progress
//!   for the body timeout, so a client that stops reading cannot keep its connection.
//! - Open connections are capped in total and per client (an IPv4 address, or an IPv6
//!   /64, which one host commonly holds whole), below the process's file descriptor
//!   limit, so connections can never use up the descriptors the database and the
//!   listener need. One over a cap is closed at once, and the log says so.
//! - At shutdown, connections get [`SHUTDOWN_GRACE`] to finish what they are doing.
//!
//! An event stream or a long-poll claim is not cut while its client reads: it waits on
//! the server's side, which none of these limits times.

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
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpListener;
use tower::ServiceExt;

/// Descriptors kept out of the connection cap: the database's connections, the listener,
/// log and database files.
pub const RESERVED_DESCRIPTORS: usize = 128;

/// How long headers may take to arrive, by default.
pub const DEFAULT_HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a body may take to arrive after its headers, and a write of an answer may
/// wait for the client to read, by default.
pub const DEFAULT_BODY_TIMEOUT: Duration = Duration::from_secs(30);

/// How long connections may go on after the shutdown signal before they are closed.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(10);

/// What the server allows a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// Headers (of a connection's first request, and of each next one) must arrive
    /// within this, or the connection is closed.
    pub header_timeout: Duration,
    /// A body must arrive whole within this of its request's headers, and a write of an
    /// answer must make progress within it.
    pub body_timeout: Duration,
    /// Open connections at most.
    pub max_connections: usize,
    /// Open connections from one client (an IPv4 address or an IPv6 /64) at most.
    pub max_per_address: usize,
}

impl ConnectionLimits {
    /// Limits sized to this process: the connection cap is its soft limit on open files
    /// less [`RESERVED_DESCRIPTORS`], and one client may hold an eighth of it. The limit
    /// itself is left as it is (children such as `exec` tasks inherit it): raise it with
    /// `ulimit -n` or the service manager (`LimitNOFILE=`).
    pub fn for_this_process() -> Self {
        let descriptors = descriptor_limit();
        let max_connections = descriptors.saturating_sub(RESERVED_DESCRIPTORS).max(16);
        ConnectionLimits {
            header_timeout: DEFAULT_HEADER_TIMEOUT,
            body_timeout: DEFAULT_BODY_TIMEOUT,
            max_connections,
            max_per_address: (max_connections / 8).max(1),
        }
    }
}

/// The soft limit on open files, or 1,024 where it cannot be read.
fn descriptor_limit() -> usize {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE).map_or(1024, |(soft, _)| soft as usize)
}

/// Whom a connection counts against: its IPv4 address, or its IPv6 address's /64.
fn client_of(address: IpAddr) -> IpAddr {
    match address {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => IpAddr::V6(std::net::Ipv6Addr::from(
                u128::from(v6) & !((1u128 << 64) - 1),
            )),
        },
        v4 => v4,
    }
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
        let client = client_of(peer.ip());
        let Some(slot) = Slot::take(&open, client, &limits) else {
            refusals.note(client, &limits);
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
        let stream = WriteDeadline::new(stream, limits.body_timeout);
        let connection = builder.serve_connection(TokioIo::new(stream), service);
        let connection = graceful.watch(connection);
        tokio::spawn(async move {
            let _ = connection.await;
            drop(slot);
        });
    }
    drop(listener);
    if tokio::time::timeout(SHUTDOWN_GRACE, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(
            grace_ms = SHUTDOWN_GRACE.as_millis() as u64,
            "connections still busy after the shutdown grace were closed"
        );
    }
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

/// A connection whose writes fail once one has made no progress for `limit`: a client
/// that stops reading its answers cannot hold the connection, and its place under the
/// caps, for ever.
struct WriteDeadline<S> {
    inner: S,
    limit: Duration,
    stalled: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> WriteDeadline<S> {
    fn new(inner: S, limit: Duration) -> Self {
        WriteDeadline {
            inner,
            limit,
            stalled: None,
        }
    }

    /// After the inner write returned Pending: Pending until the stall lasted `limit`.
    fn poll_stall(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Error> {
        let limit = self.limit;
        let sleep = self
            .stalled
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!(
                    "the client read nothing of its answer for {} s",
                    limit.as_secs_f64()
                ),
            )),
            Poll::Pending => Poll::Pending,
        }
    }

    fn progressed<T>(&mut self, done: Poll<T>, cx: &mut Context<'_>) -> Poll<std::io::Result<T>> {
        match done {
            Poll::Ready(value) => {
                self.stalled = None;
                Poll::Ready(Ok(value))
            }
            Poll::Pending => self.poll_stall(cx).map(Err),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for WriteDeadline<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for WriteDeadline<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write(cx, buf) {
            Poll::Ready(Ok(n)) => self.progressed(Poll::Ready(n), cx),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.progressed(Poll::Pending, cx),
        }
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> Poll<std::io::Result<usize>> {
        match Pin::new(&mut self.inner).poll_write_vectored(cx, bufs) {
            Poll::Ready(Ok(n)) => self.progressed(Poll::Ready(n), cx),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.progressed(Poll::Pending, cx),
        }
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        match Pin::new(&mut self.inner).poll_flush(cx) {
            Poll::Ready(Ok(())) => self.progressed(Poll::Ready(()), cx),
            Poll::Ready(Err(e)) => Poll::Ready(Err(e)),
            Poll::Pending => self.progressed(Poll::Pending, cx),
        }
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::client_of;
    use std::net::IpAddr;

    #[test]
    fn a_client_is_an_ipv4_address_or_an_ipv6_slash_64() {
        let of = |a: &str| client_of(a.parse::<IpAddr>().unwrap()).to_string();
        assert_eq!(of("10.1.2.3"), "10.1.2.3");
        assert_eq!(of("2001:db8:1:2:aaaa::1"), "2001:db8:1:2::");
        assert_eq!(of("2001:db8:1:2:ffff:1:2:3"), "2001:db8:1:2::");
        assert_ne!(of("2001:db8:1:3::1"), of("2001:db8:1:2::1"));
        assert_eq!(of("::ffff:192.0.2.7"), "192.0.2.7");
    }
}
