//! Slow and hostile clients against `tasktable serve`: connections that send nothing or
//! half a request, or idle, are closed after the header timeout; a body that trickles is
//! cut off after the body timeout; a flood from one address leaves room for others; and
//! none of it cuts an event stream or a long-poll claim.

mod common;

use common::serve::{Server, ADMIN};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

/// A guard against a test that would otherwise hang: far above every timeout under test.
const GUARD: Duration = Duration::from_secs(60);

fn address(server: &Server) -> SocketAddr {
    server.url.strip_prefix("http://").unwrap().parse().unwrap()
}

fn connect(server: &Server) -> TcpStream {
    let stream = TcpStream::connect(address(server)).expect("connect");
    stream.set_read_timeout(Some(GUARD)).unwrap();
    stream
}

/// Reads until the server closes the connection; what it sent before.
fn until_closed(mut stream: TcpStream) -> String {
    let mut got = Vec::new();
    match stream.read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => {}
        Err(e) => panic!("the server kept the connection open: {e}"),
    }
    String::from_utf8_lossy(&got).into_owned()
}

fn request(method: &str, path: &str, body: &str) -> String {
    format!(
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {ADMIN}\r\n\
         Content-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// One answer's status line and body, read off a kept-alive connection.
fn answer(reader: &mut BufReader<TcpStream>) -> (String, String) {
    let mut status = String::new();
    reader.read_line(&mut status).unwrap();
    let mut length = 0;
    loop {
        let mut line = String::new();
        let read = reader.read_line(&mut line).unwrap();
        assert!(
            read > 0,
            "the server closed the connection mid-answer: {status}"
        );
        if line == "\r\n" {
            break;
        }
        if let Some(n) = line.to_ascii_lowercase().strip_prefix("content-length:") {
            length = n.trim().parse().unwrap();
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).unwrap();
    (status, String::from_utf8(body).unwrap())
}

#[test]
fn silent_half_sent_and_idle_connections_are_closed_after_the_header_timeout() {
    let server = Server::start_with(&["--workers", "0", "--header-timeout", "1s"]);
    let silent = connect(&server);
    let mut half = connect(&server);
    half.write_all(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    let mut idle = connect(&server);
    idle.write_all(request("GET", "/healthz", "").as_bytes())
        .unwrap();
    let mut idle = BufReader::new(idle);
    let (status, _) = answer(&mut idle);
    assert!(status.contains(" 200 "), "{status}");

    assert_eq!(until_closed(silent), "", "nothing is answered to nothing");
    let said = until_closed(half);
    assert!(
        !said.contains(" 200 "),
        "half a request is not served: {said}"
    );
    assert_eq!(
        until_closed(idle.into_inner()),
        "",
        "an idle kept-alive connection is closed"
    );
}

#[test]
fn a_body_that_trickles_is_refused_after_the_body_timeout() {
    let server = Server::start_with(&["--workers", "0", "--body-timeout", "1s"]);
    let mut stream = connect(&server);
    let full = request("POST", "/api/v1/tasks", r#"{"kind": "k", "payload": null}"#);
    // All but the body's last bytes, and then nothing.
    stream
        .write_all(&full.as_bytes()[..full.len() - 5])
        .unwrap();
    let mut reader = BufReader::new(stream);
    let (status, body) = answer(&mut reader);
    assert!(status.contains(" 400 "), "{status} {body}");
    assert!(body.contains("bad_body"), "{body}");
    assert!(body.contains("did not arrive within 1 s"), "{body}");
    let listed = server.tt(&["ls", "--json"]).json();
    assert_eq!(
        listed["tasks"],
        serde_json::json!([]),
        "nothing was submitted"
    );
}

#[test]
fn event_streams_and_long_poll_claims_outlive_the_timeouts() {
    let server = Server::start_with(&[
        "--workers",
        "0",
        "--header-timeout",
        "1s",
        "--body-timeout",
        "1s",
    ]);
    let mut events = connect(&server);
    events
        .write_all(
            format!(
                "GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAccept: text/event-stream\r\n\
                 Authorization: Bearer {ADMIN}\r\n\r\n"
            )
            .as_bytes(),
        )
        .unwrap();
    let mut events = BufReader::new(events);
    let mut line = String::new();
    events.read_line(&mut line).unwrap();
    assert!(line.contains(" 200 "), "{line}");

    // A claim that waits three times the timeouts, for a kind nobody submits.
    let mut claim = connect(&server);
    let body = r#"{"kinds": ["never"], "worker_id": "patient", "wait_ms": 3000}"#;
    claim
        .write_all(request("POST", "/api/v1/claim", body).as_bytes())
        .unwrap();
    let mut claim = BufReader::new(claim);
    let (status, tasks) = answer(&mut claim);
    assert!(status.contains(" 200 "), "{status}");
    assert_eq!(tasks, r#"{"tasks":[]}"#, "the long poll ran its course");

    // The event stream, open all that while, still carries what happens next.
    server.tt(&["submit", "late", "--json"]).ok();
    loop {
        line.clear();
        assert!(events.read_line(&mut line).unwrap() > 0, "the stream ended");
        if line.starts_with("data:") && line.contains("submitted") {
            break;
        }
    }
}

#[test]
fn a_flood_from_one_address_leaves_room_for_another() {
    // The test holds more connections than a default soft limit of 1,024 allows.
    let (_, hard) =
        nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
    nix::sys::resource::setrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE, hard, hard).unwrap();
    // Every address, so that 127.0.0.2 reaches it as well as 127.0.0.1.
    let server = Server::start_limited(&["--workers", "0", "--listen", "0.0.0.0:0"], Some(1024));
    let flood: Vec<TcpStream> = (0..1100)
        .map(|_| {
            let mut s = TcpStream::connect(address(&server)).expect("connect");
            let _ = s.write_all(b"GET /healthz HTTP/1.1\r\n");
            s
        })
        .collect();
    // From 127.0.0.2, loopback too and another client address to the server: a socket
    // bound to it before it connects (connecting to it alone would come from 127.0.0.1).
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let mut other = runtime
        .block_on(async {
            let socket = tokio::net::TcpSocket::new_v4()?;
            socket.bind(SocketAddr::from(([127, 0, 0, 2], 0)))?;
            socket.connect(address(&server)).await
        })
        .expect("connect from 127.0.0.2")
        .into_std()
        .unwrap();
    other.set_nonblocking(false).unwrap();
    other.set_read_timeout(Some(GUARD)).unwrap();
    other
        .write_all(request("GET", "/healthz", "").as_bytes())
        .unwrap();
    let (status, _) = answer(&mut BufReader::new(other));
    assert!(status.contains(" 200 "), "{status}");
    drop(flood);
    let log = std::fs::read_to_string(server.dir.path().join("serve.log")).unwrap();
    assert!(
        log.contains("connections closed at once"),
        "the log says connections were refused: {log}"
    );
}

#[test]
fn serve_refuses_connection_limits_it_cannot_keep() {
    use common::serve::{command, finish};
    for (flags, says) in [
        (
            &["--header-timeout", "10ms"][..],
            "--header-timeout must be at least 100ms",
        ),
        (
            &["--body-timeout", "0s"][..],
            "--body-timeout must be at least 100ms",
        ),
        (
            &["--max-connections", "0"][..],
            "--max-connections must be 1 to",
        ),
        (
            &["--max-connections", "100000000"][..],
            "--max-connections must be 1 to",
        ),
        (
            &[
                "--max-connections",
                "50",
                "--max-connections-per-address",
                "51",
            ][..],
            "--max-connections-per-address must be 1 to --max-connections (50)",
        ),
        (
            &["--max-connections-per-address", "0"][..],
            "--max-connections-per-address must be 1",
        ),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let db = format!("sqlite://{}", dir.path().join("t.db").display());
        let mut args = vec!["serve", "--database-url", &db, "--listen", "127.0.0.1:0"];
        args.extend_from_slice(flags);
        finish(command(&args), None).fails(2, says);
        assert!(
            !dir.path().join("t.db").exists(),
            "{flags:?}: refused before the database was touched"
        );
    }
}

#[test]
fn a_client_that_never_reads_its_answers_is_disconnected() {
    // Two connections from one client fill its place (an eighth of 16).
    let server = Server::start_with(&[
        "--workers",
        "0",
        "--body-timeout",
        "1s",
        "--max-connections",
        "16",
    ]);
    let greedy: Vec<TcpStream> = (0..2)
        .map(|_| {
            let stream = connect(&server);
            // Far more answer than the socket buffers hold, none of it read.
            let ask = request("GET", "/api/v1/openapi.json", "").repeat(100);
            stream.set_write_timeout(Some(GUARD)).unwrap();
            let mut writer = &stream;
            let _ = writer.write_all(ask.as_bytes());
            stream
        })
        .collect();
    // Once the stalled writes time out, the client has room again. Polled: no signal
    // says when the server gave up on them.
    let deadline = std::time::Instant::now() + GUARD;
    loop {
        let mut probe = connect(&server);
        let _ = probe.write_all(request("GET", "/healthz", "").as_bytes());
        let mut reader = BufReader::new(probe);
        let mut status = String::new();
        if reader.read_line(&mut status).is_ok() && status.contains(" 200 ") {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the stalled connections were kept"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(greedy);
}
