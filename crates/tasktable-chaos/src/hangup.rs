//! Clients that hang up mid-request: each sends a whole HTTP request, waits a moment
//! drawn at random, and resets the connection before reading any answer, so the server
//! drops the handler's future wherever it happens to be (waiting for a connection, inside
//! a transaction's `BEGIN`, between two statements, in its `COMMIT`). A client whose
//! request the server acted on never learns of it, as after a timeout or a crash.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::Value;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// Longest wait between sending a request and resetting its connection.
pub const MAX_WAIT: Duration = Duration::from_millis(4);

/// A `POST` of `body` as JSON to `path`, as bytes on the wire (HTTP/1.1, addressed to
/// the loopback address the server listens on, which a server without tokens requires).
pub fn post(addr: SocketAddr, path: &str, body: &Value) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Sends `request` and resets the connection `after` later (SO_LINGER 0: an RST, not a
/// FIN, so the server sees the connection fail rather than a half-close).
pub async fn send_and_reset(
    addr: SocketAddr,
    request: &[u8],
    after: Duration,
) -> std::io::Result<()> {
    let mut stream = TcpStream::connect(addr).await?;
    stream.set_nodelay(true)?;
    stream.write_all(request).await?;
    if !after.is_zero() {
        tokio::time::sleep(after).await;
    }
    stream.set_zero_linger()?;
    drop(stream);
    Ok(())
}

/// Sends the requests `next` makes, one at a time, each reset 0 to [`MAX_WAIT`] after it
/// was sent and followed by a pause of up to `pause` (a server finishes what a client
/// that hung up asked for, so clients that never pause would only measure how much work
/// piles up), until `stop`; counts each request sent in `sent`.
pub async fn run(
    addr: SocketAddr,
    seed: u64,
    mut next: impl FnMut(&mut StdRng) -> Vec<u8>,
    pause: Duration,
    sent: Arc<AtomicU64>,
    stop: CancellationToken,
) {
    let mut rng = StdRng::seed_from_u64(seed);
    while !stop.is_cancelled() {
        let request = next(&mut rng);
        let after = rng.random_range(Duration::ZERO..=MAX_WAIT);
        match send_and_reset(addr, &request, after).await {
            Ok(()) => {
                sent.fetch_add(1, Ordering::Relaxed);
                let rest = rng.random_range(Duration::ZERO..=pause);
                tokio::select! {
                    () = tokio::time::sleep(rest) => {}
                    () = stop.cancelled() => {}
                }
            }
            // The API is down or restarting (a fault of the run): try again shortly.
            Err(_) => {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(100)) => {}
                    () = stop.cancelled() => {}
                }
            }
        }
    }
}

/// Hang-up clients running, each with what it asks and how many requests it sent.
#[derive(Debug, Default)]
pub struct Hangups {
    clients: Vec<(&'static str, JoinHandle<()>, Arc<AtomicU64>)>,
}

impl Hangups {
    /// Starts a client that sends the requests `next` makes ([`run`]), counted as `what`.
    pub fn spawn(
        &mut self,
        what: &'static str,
        addr: SocketAddr,
        seed: u64,
        next: impl FnMut(&mut StdRng) -> Vec<u8> + Send + 'static,
        pause: Duration,
        stop: &CancellationToken,
    ) {
        let sent = Arc::new(AtomicU64::new(0));
        let client = tokio::spawn(run(addr, seed, next, pause, sent.clone(), stop.clone()));
        self.clients.push((what, client, sent));
    }

    /// Waits for the clients (stopped by their token); the requests they sent, by what
    /// they asked.
    pub async fn stop(self) -> BTreeMap<&'static str, u64> {
        let mut sent = BTreeMap::new();
        for (what, client, count) in self.clients {
            let _ = client.await;
            *sent.entry(what).or_default() += count.load(Ordering::Relaxed);
        }
        sent
    }
}
