//! The Host grammar end to end (RFC 9112 §3.2, §3.2.2; RFC 9110 §7.2; RFC
//! 3986 §3.2.2): raw requests to the real binary, over plain TCP and over
//! TLS, every case under both `--driver uring` and `--driver epoll` (see
//! `driver_tests!` at the bottom).
//!
//! Each test starts one server with a plain listener and a TLS listener
//! (`--tls-bind 127.0.0.1:0 --tls-self-signed`) over a temp docroot holding
//! `file.txt`; the shared harness's ready-line parser lists the plain
//! address first, then the `https://` one. The TLS client accepts any
//! certificate (`common::tls::trusting_any`): what is under test is the HTTP
//! layer inside the tunnel, not the identity (tests/tls.rs checks that).
//!
//! A refused Host must be answered `400` and the connection closed (the
//! parser's verdict, `http::error`); an accepted one serves the file.

#[macro_use]
mod common;

use std::io::{self, Read, Write};

use common::tls::{connected, trusting_any};
use common::{is_timeout, parse_responses, Response, TestServer};

const FILE: &[u8] = b"host grammar\n";

/// Host values the grammar refuses (each must be a 400 and a close).
const BAD_HOSTS: &[&str] = &[
    "user@example.com",
    "user:pass@example.com:80",
    "example.com/x",
    "a, b",
    "a,b",
    "example.com:http",
    "example.com:8o",
    "example.com:65536",
    "a b",
    "a\tb",
    "[::1",
    "::1]",
    "[::1]x",
    "[1::2::3]",
];

/// Host values the grammar takes (each must serve `file.txt`).
const GOOD_HOSTS: &[&str] = &[
    "example.com",
    "example.com:8080",
    "127.0.0.1",
    "[::1]:80",
    "host:",
    "",
];

/// Which listener a request goes to.
#[derive(Debug, Clone, Copy)]
enum Transport {
    Plain,
    Tls,
}

/// One server with both listeners, on the harness's temp docroot with
/// `file.txt` written into it.
fn start(driver: &str) -> TestServer {
    let server = TestServer::builder()
        .driver(driver)
        .tls_self_signed()
        .start();
    assert_eq!(
        server.addrs().len(),
        2,
        "a plain and a TLS listener: {}",
        server.ready_line()
    );
    std::fs::write(server.root().join("file.txt"), FILE).expect("write file.txt");
    server
}

/// Anything that carries the bytes of one connection.
trait Stream: Read + Write {}
impl<T: Read + Write> Stream for T {}

fn open(server: &TestServer, transport: Transport) -> Box<dyn Stream> {
    match transport {
        Transport::Plain => Box::new(common::connect(server.addrs()[0])),
        Transport::Tls => Box::new(connected(&trusting_any(), server.https())),
    }
}

/// Write `raw` on a new connection and read until the server closes it.
/// `Err` with what arrived if it was still open after
/// [`common::IO_TIMEOUT`].
fn exchange(server: &TestServer, transport: Transport, raw: &str) -> Result<Vec<u8>, Vec<u8>> {
    let mut s = open(server, transport);
    // A server that closes early may refuse part of the write; what it
    // answered before closing is still read.
    let _ = s.write_all(raw.as_bytes()).and_then(|()| s.flush());
    let mut out = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            // EOF, after close_notify on TLS.
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if is_timeout(&e) => return Err(out),
            // A TCP close without close_notify, or a reset: closed.
            Err(_) => return Ok(out),
        }
    }
}

/// The one response `raw` gets, asserting the server then closed.
fn answer(server: &TestServer, transport: Transport, raw: &str) -> Response {
    let bytes = exchange(server, transport, raw).unwrap_or_else(|got| {
        panic!(
            "{transport:?}: connection still open after {raw:?}; got {:?}",
            String::from_utf8_lossy(&got)
        )
    });
    let mut responses = parse_responses(&bytes);
    assert_eq!(
        responses.len(),
        1,
        "{transport:?}: {raw:?} got {responses:?}"
    );
    responses.remove(0)
}

/// Every value in [`BAD_HOSTS`] is a 400, then a close (no `Connection:
/// close` asked for: closing is the server's decision).
fn bad_hosts_are_400_and_close(driver: &str, transport: Transport) {
    let server = start(driver);
    let mut wrong = Vec::new();
    for host in BAD_HOSTS {
        let raw = format!("GET /file.txt HTTP/1.1\r\nHost: {host}\r\n\r\n");
        let r = answer(&server, transport, &raw);
        if r.status != 400 {
            wrong.push(format!("Host {host:?}: {} {}", r.status, r.body_text()));
        }
    }
    assert!(wrong.is_empty(), "{transport:?}: {wrong:#?}");
}

/// Every value in [`GOOD_HOSTS`] serves the file.
fn good_hosts_are_served(driver: &str, transport: Transport) {
    let server = start(driver);
    let mut wrong = Vec::new();
    for host in GOOD_HOSTS {
        let raw = format!("GET /file.txt HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        let r = answer(&server, transport, &raw);
        if r.status != 200 || r.body != FILE {
            wrong.push(format!("Host {host:?}: {} {}", r.status, r.body_text()));
        }
    }
    assert!(wrong.is_empty(), "{transport:?}: {wrong:#?}");
}

/// RFC 9112 §3.2.2: the target's authority wins over the Host field, so a
/// Host that names another origin does not change what is served.
fn absolute_form_target_wins_over_host(driver: &str, transport: Transport) {
    let server = start(driver);
    for target in [
        "http://example.com/file.txt",
        "https://example.com:8443/file.txt",
        "HTTP://[::1]/file.txt",
    ] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: other\r\nConnection: close\r\n\r\n");
        let r = answer(&server, transport, &raw);
        assert_eq!(r.status, 200, "{transport:?}: {target}: {}", r.body_text());
        assert_eq!(r.body, FILE, "{transport:?}: {target}");
    }
}

/// The target's authority is held to the same grammar: userinfo, a bad
/// port or an empty host in it is a 400 and a close, whatever Host says.
fn absolute_form_with_bad_authority_is_400_and_close(driver: &str, transport: Transport) {
    let server = start(driver);
    let mut wrong = Vec::new();
    for target in [
        "http://u@x/file.txt",
        "http://u:p@example.com/file.txt",
        "http://example.com:65536/file.txt",
        "http:///file.txt",
    ] {
        let raw = format!("GET {target} HTTP/1.1\r\nHost: example.com\r\n\r\n");
        let r = answer(&server, transport, &raw);
        if r.status != 400 {
            wrong.push(format!("{target}: {} {}", r.status, r.body_text()));
        }
    }
    assert!(wrong.is_empty(), "{transport:?}: {wrong:#?}");
}

fn bad_hosts_are_400_and_close_plain(driver: &str) {
    bad_hosts_are_400_and_close(driver, Transport::Plain);
}

fn bad_hosts_are_400_and_close_tls(driver: &str) {
    bad_hosts_are_400_and_close(driver, Transport::Tls);
}

fn good_hosts_are_served_plain(driver: &str) {
    good_hosts_are_served(driver, Transport::Plain);
}

fn good_hosts_are_served_tls(driver: &str) {
    good_hosts_are_served(driver, Transport::Tls);
}

fn absolute_form_target_wins_over_host_plain(driver: &str) {
    absolute_form_target_wins_over_host(driver, Transport::Plain);
}

fn absolute_form_target_wins_over_host_tls(driver: &str) {
    absolute_form_target_wins_over_host(driver, Transport::Tls);
}

fn absolute_form_with_bad_authority_is_400_and_close_plain(driver: &str) {
    absolute_form_with_bad_authority_is_400_and_close(driver, Transport::Plain);
}

fn absolute_form_with_bad_authority_is_400_and_close_tls(driver: &str) {
    absolute_form_with_bad_authority_is_400_and_close(driver, Transport::Tls);
}

driver_tests! {
    bad_hosts_are_400_and_close_plain,
    bad_hosts_are_400_and_close_tls,
    good_hosts_are_served_plain,
    good_hosts_are_served_tls,
    absolute_form_target_wins_over_host_plain,
    absolute_form_target_wins_over_host_tls,
    absolute_form_with_bad_authority_is_400_and_close_plain,
    absolute_form_with_bad_authority_is_400_and_close_tls,
}
