//! Logs a client cannot inflate, against the real binary: a thousand
//! hostile HTTP/2 connections are a thousand in /metrics
//! (`servery_peer_misbehaviour_total`) and a handful of lines on stderr,
//! under both isolations.
//!
//! Each probe is an h2c connection by prior knowledge (RFC 9113 §3.3) that
//! sends the preface, an empty SETTINGS and a WINDOW_UPDATE of the
//! connection by 0 (a connection error of type PROTOCOL_ERROR, RFC 9113
//! §6.9): the server answers GOAWAY PROTOCOL_ERROR, closes, and logs one
//! WARN line for the connection. The probe reads until the GOAWAY.
//!
//! The frames are written by the small helpers below (a frame is a 24-bit
//! length, a type, flags, a 31-bit stream id and the payload, RFC 9113
//! §4.1): a well-behaved client library cannot send a zero increment.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use common::{connect, metric, wait_until, TestServer};

/// The client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
/// Frame types and the ACK flag (RFC 9113 §6.5, §6.7).
const SETTINGS: u8 = 0x4;
const GOAWAY: u8 = 0x7;
const WINDOW_UPDATE: u8 = 0x8;
/// RFC 9113 §7.
const PROTOCOL_ERROR: u32 = 0x1;

/// Hostile connections per test.
const PROBES: u64 = 1000;
/// Clients sending them at once: a few, so the flood is quick on a 2-core
/// machine without being a load test.
const CLIENTS: u64 = 4;
/// The line the server writes for each probe.
const LINE: &str = "HTTP/2 client broke the protocol";
/// What the summary line of a window says before its count.
const SUMMARY: &str = "suppressed ";
/// servery's budget (`telemetry::peer`): lines per window per process, and
/// the window.
const LINES_PER_WINDOW: u64 = 5;
const WINDOW: Duration = Duration::from_secs(10);

/// A frame on stream 0 (every frame here is a connection's).
fn frame(out: &mut Vec<u8>, kind: u8, flags: u8, payload: &[u8]) {
    let len = u32::try_from(payload.len()).expect("a small payload");
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(&[kind, flags, 0, 0, 0, 0]);
    out.extend_from_slice(payload);
}

/// The next frame's type, flags and payload (reads bounded by the
/// connection's timeout).
fn read_frame(s: &mut TcpStream) -> std::io::Result<(u8, u8, Vec<u8>)> {
    let mut head = [0u8; 9];
    s.read_exact(&mut head)?;
    let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload)?;
    Ok((head[3], head[4], payload))
}

/// One hostile connection (see the module doc); returns once the server
/// has sent its GOAWAY.
fn probe(addr: SocketAddr, n: u64) {
    let mut s = connect(addr);
    let mut out = PREFACE.to_vec();
    frame(&mut out, SETTINGS, 0, &[]);
    frame(&mut out, WINDOW_UPDATE, 0, &0u32.to_be_bytes());
    s.write_all(&out)
        .unwrap_or_else(|e| panic!("probe {n}: write: {e}"));
    loop {
        let (kind, _, payload) =
            read_frame(&mut s).unwrap_or_else(|e| panic!("probe {n}: no GOAWAY: {e}"));
        if kind == GOAWAY {
            let code = u32::from_be_bytes(payload[4..8].try_into().expect("a GOAWAY payload"));
            assert_eq!(code, PROTOCOL_ERROR, "probe {n}");
            return;
        }
    }
}

/// The counts in the window summaries on `stderr`.
fn summarised(stderr: &str) -> u64 {
    stderr
        .lines()
        .filter_map(|l| {
            l.split_once(SUMMARY)?
                .1
                .split_once(" lines of peer misbehaviour")
        })
        .filter_map(|(n, _)| n.parse::<u64>().ok())
        .sum()
}

/// [`PROBES`] hostile connections to a server in `isolation` with two
/// workers: all counted, few printed, the rest summed up in the summaries.
fn hostile_connections_are_counted_not_logged(isolation: &str) {
    let server = TestServer::builder()
        .isolation(isolation)
        .admin()
        .args(&["--workers", "2", "--beat-interval", "0.2"])
        .start();
    let name = "servery_peer_misbehaviour_total";
    assert_eq!(metric(&server.metrics(), name), Some(0.0));
    let addr = server.addr();
    let started = Instant::now();
    std::thread::scope(|scope| {
        for c in 0..CLIENTS {
            scope.spawn(move || {
                for n in (c..PROBES).step_by(CLIENTS as usize) {
                    probe(addr, n);
                }
            });
        }
    });
    let flood = started.elapsed();
    // In process isolation the count travels with the workers' beats.
    let text = server.wait_metrics(Duration::from_secs(10), |t| {
        metric(t, name).is_some_and(|v| v >= PROBES as f64)
    });
    assert_eq!(metric(&text, name), Some(PROBES as f64), "{text}");
    // Still the same a few beats later: nothing is counted twice.
    std::thread::sleep(Duration::from_millis(600));
    assert_eq!(metric(&server.metrics(), name), Some(PROBES as f64));

    // Each process prints at most its allowance per window (the flood
    // normally fits in one).
    let processes = if isolation == "process" { 2 } else { 1 };
    let windows = flood.as_secs() / WINDOW.as_secs() + 1;
    let allowed = LINES_PER_WINDOW * processes * windows;
    let printed = server.stderr_count(LINE) as u64;
    assert!(
        (1..=allowed).contains(&printed),
        "{printed} lines (allowed {allowed}) after a flood of {flood:?}:\n{}",
        server.stderr()
    );
    // The rest are summed up when their windows end.
    let summed = wait_until(WINDOW + Duration::from_secs(5), || {
        summarised(&server.stderr()) + server.stderr_count(LINE) as u64 >= PROBES
    });
    let stderr = server.stderr();
    let printed = server.stderr_count(LINE) as u64;
    assert!(summed, "summaries short of {PROBES}:\n{stderr}");
    assert_eq!(printed + summarised(&stderr), PROBES, "{stderr}");
    let summaries = stderr.matches(SUMMARY).count() as u64;
    assert!(summaries <= processes * windows, "{stderr}");
    eprintln!(
        "{isolation}: {PROBES} probes in {flood:?}, {printed} lines and {summaries} summaries"
    );
}

variant_tests!([thread = "thread", process = "process"] [
    hostile_connections_are_counted_not_logged,
]);
