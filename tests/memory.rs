//! The server's memory under hostile clients: every test plays a client that
//! never reads, reads slowly, idles, or sends more than the limits allow, and
//! bounds the server's resident memory (VmRSS of the spawned process, read
//! from `/proc/<pid>/status`).
//!
//! Each server runs one worker (`--workers 1`) with thread isolation (the
//! default), so the spawned pid is the whole server, over a fresh temp docroot
//! holding only the files its test asks for; every case runs under both
//! `--driver uring` and `--driver epoll` (see `driver_tests!` at the bottom).
//! Bounds have wide margin; nothing here asserts on time. Everything listens
//! and connects on 127.0.0.1 only, and every socket and server is closed when
//! its test ends (`TestServer`'s `Drop` kills the server).

#[macro_use]
mod common;

use std::fs;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use common::{connect, ensure_nofile, nofile_limits, read_response, rss_bytes, TestServer};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The most the server's RSS may grow under a flood or slow readers: the
/// per-connection output budget times the connections, with wide margin.
const FLOOD_GROWTH_LIMIT: u64 = 64 * MIB as u64;
/// Past this the flood test stops early: it has failed anyway, and the
/// machine keeps its memory.
const FLOOD_ABORT_GROWTH: u64 = 1024 * MIB as u64;
/// How long the flooding and slow-reading clients keep going.
const FLOOD_FOR: Duration = Duration::from_secs(8);
/// How often RSS is sampled while a test runs.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Kept-alive connections opened by the idle tests.
const IDLE_CONNECTIONS: usize = 2_000;
/// What one idle kept-alive connection may cost the server.
const IDLE_BYTES_PER_CONNECTION: u64 = 4_096;
/// File descriptors the idle tests need: both ends of every connection run
/// under the same limit (the server inherits ours), plus slack.
const IDLE_NOFILE_NEEDED: u64 = 4_200;
/// Read and write timeout of each try in the refusal (431/413) tests, so a
/// server that neither answers nor reads costs seconds, not minutes.
const TRY_TIMEOUT: Duration = Duration::from_secs(2);
/// Tries (fresh connections) per refusal test.
const REFUSAL_TRIES: usize = 20;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// A temp docroot holding `files` (name, length), each a byte pattern.
fn docroot(files: &[(&str, usize)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().expect("tempdir");
    for &(name, len) in files {
        let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        fs::write(dir.path().join(name), body).expect("write docroot file");
    }
    dir
}

/// One worker, thread isolation, I/O `driver`, serving `root`, plus `args`.
fn server(root: &Path, driver: &str, args: &[&str]) -> TestServer {
    TestServer::builder()
        .root(root)
        .driver(driver)
        .args(&["--workers", "1"])
        .args(args)
        .start()
}

/// `GET path` on its own connection; checks the body length. Fills the
/// memory cache and settles the server's one-off allocations before RSS is
/// sampled.
fn warm_up(server: &TestServer, path: &str, len: usize) {
    let resp = server.get(path);
    assert_eq!(resp.status, 200, "warm-up GET {path}: {resp:?}");
    assert_eq!(resp.body.len(), len, "warm-up GET {path}: body length");
}

/// `count` copies of a minimal keep-alive `GET path`, back to back.
fn pipelined_gets(path: &str, count: usize) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")
        .repeat(count)
        .into_bytes()
}

/// Highest and last RSS seen while a test runs, sampled at most every
/// [`SAMPLE_EVERY`].
struct RssWatch {
    pid: u32,
    before: u64,
    max: u64,
    last: u64,
    sampled_at: Instant,
}

impl RssWatch {
    fn start(pid: u32) -> RssWatch {
        let before = rss_bytes(pid);
        RssWatch {
            pid,
            before,
            max: before,
            last: before,
            sampled_at: Instant::now(),
        }
    }

    /// Sample if [`SAMPLE_EVERY`] has passed since the last sample.
    fn tick(&mut self) {
        if self.sampled_at.elapsed() >= SAMPLE_EVERY {
            self.sample();
        }
    }

    fn sample(&mut self) {
        self.last = rss_bytes(self.pid);
        self.max = self.max.max(self.last);
        self.sampled_at = Instant::now();
    }

    /// Growth over the start at the highest sample.
    fn growth(&self) -> u64 {
        self.max.saturating_sub(self.before)
    }

    fn report(&self, what: &str) {
        eprintln!(
            "memory: {what}: RSS before {:.1} MiB, max {:.1} MiB, end {:.1} MiB, growth {:.1} MiB",
            mib(self.before),
            mib(self.max),
            mib(self.last),
            mib(self.growth()),
        );
    }
}

fn pipelining_flood_without_reading_is_bounded(driver: &str) {
    const CONNECTIONS: usize = 50;
    const BATCH: usize = 200;
    let root = docroot(&[("64k.bin", 64 * KIB)]);
    let server = server(root.path(), driver, &[]);
    warm_up(&server, "/64k.bin", 64 * KIB);

    let batch = pipelined_gets("/64k.bin", BATCH);
    let req_len = batch.len() / BATCH;
    let mut watch = RssWatch::start(server.pid());
    // Per connection: the socket (None once the server closed it) and how
    // far into the current batch it has written.
    let mut conns: Vec<(Option<TcpStream>, usize)> = (0..CONNECTIONS)
        .map(|_| {
            let s = server.connect();
            s.set_nonblocking(true).expect("nonblocking");
            (Some(s), 0)
        })
        .collect();
    let mut written: u64 = 0;
    let mut closed = 0usize;
    let deadline = Instant::now() + FLOOD_FOR;
    while Instant::now() < deadline && watch.growth() <= FLOOD_ABORT_GROWTH {
        let mut progressed = false;
        for (slot, off) in conns.iter_mut() {
            let Some(s) = slot else { continue };
            // Write until the socket is full: the server not reading (and
            // so the kernel buffers filling) is the expected backpressure.
            loop {
                match s.write(&batch[*off..]) {
                    Ok(0) => break,
                    Ok(n) => {
                        progressed = true;
                        written += n as u64;
                        *off = (*off + n) % batch.len();
                    }
                    Err(e) if common::is_timeout(&e) => break,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => {
                        *slot = None;
                        closed += 1;
                        break;
                    }
                }
            }
        }
        watch.tick();
        if !progressed {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    watch.sample();
    watch.report(&format!("{driver}: pipelining flood without reading"));
    eprintln!(
        "memory: {driver}: pipelining flood: {} requests ({:.1} MiB) written on {CONNECTIONS} connections, \
         {closed} closed by the server",
        written / req_len as u64,
        mib(written),
    );
    drop(conns);
    assert!(
        watch.growth() <= FLOOD_GROWTH_LIMIT,
        "server RSS grew by {:.1} MiB (limit {:.1} MiB) under {CONNECTIONS} connections \
         pipelining without reading",
        mib(watch.growth()),
        mib(FLOOD_GROWTH_LIMIT),
    );
}

/// Open [`IDLE_CONNECTIONS`] connections, each fetching `path` (`len`
/// bytes) once and then idling kept-alive; the server's RSS growth per
/// connection must stay within [`IDLE_BYTES_PER_CONNECTION`].
fn idle_keepalive_cost(driver: &str, name: &str, len: usize) {
    if !ensure_nofile(IDLE_NOFILE_NEEDED) {
        common::skipped(&format!(
            "RLIMIT_NOFILE {:?} (soft, hard) is below the {IDLE_NOFILE_NEEDED} this test \
             needs, and could not be raised",
            nofile_limits()
        ));
        return;
    }
    let root = docroot(&[(name, len)]);
    let server = server(root.path(), driver, &[]);
    let path = format!("/{name}");
    warm_up(&server, &path, len);

    let before = rss_bytes(server.pid());
    let request = pipelined_gets(&path, 1);
    let conns: Vec<TcpStream> = (0..IDLE_CONNECTIONS)
        .map(|i| {
            let mut s = server.connect();
            s.write_all(&request).expect("write request");
            let resp = read_response(&mut s);
            assert_eq!(resp.status, 200, "connection {i}: {resp:?}");
            assert_eq!(resp.body.len(), len, "connection {i}: body length");
            s
        })
        .collect();
    // Let the server finish with the last responses and park every
    // connection as idle.
    std::thread::sleep(Duration::from_secs(1));
    let after = rss_bytes(server.pid());
    let per_conn = after.saturating_sub(before) / IDLE_CONNECTIONS as u64;
    eprintln!(
        "memory: {driver}: {IDLE_CONNECTIONS} idle keep-alive connections after GET {path} ({len} B): \
         RSS before {:.1} MiB, after {:.1} MiB, {per_conn} B per connection",
        mib(before),
        mib(after),
    );

    // They really were kept alive: the last one still answers.
    let mut last = conns
        .last()
        .expect("connections")
        .try_clone()
        .expect("clone");
    last.write_all(&request)
        .expect("write on an idle connection");
    assert_eq!(
        read_response(&mut last).status,
        200,
        "idle connection reused"
    );
    drop(conns);

    assert!(
        per_conn <= IDLE_BYTES_PER_CONNECTION,
        "each idle keep-alive connection costs the server {per_conn} B of RSS after a \
         {len} B response (limit {IDLE_BYTES_PER_CONNECTION} B)",
    );
}

fn idle_keepalive_connections_after_64k_cost_little(driver: &str) {
    idle_keepalive_cost(driver, "64k.bin", 64 * KIB);
}

fn idle_keepalive_connections_after_1k_cost_little(driver: &str) {
    idle_keepalive_cost(driver, "1k.bin", KIB);
}

/// A client socket whose receive buffer is as small as the kernel allows,
/// set before connecting so the advertised window stays small.
fn small_window_connect(addr: SocketAddr) -> TcpStream {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    sock.set_recv_buffer_size(4 * KIB).expect("SO_RCVBUF");
    sock.connect(&addr.into())
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    sock.into()
}

fn slow_readers_of_pipelined_8m_are_bounded(driver: &str) {
    const CONNECTIONS: usize = 20;
    const PIPELINED: usize = 20;
    const READ_CHUNK: usize = 4 * KIB;
    const READ_EVERY: Duration = Duration::from_millis(100);
    let root = docroot(&[("8m.bin", 8 * MIB), ("1k.bin", KIB)]);
    let server = server(root.path(), driver, &[]);
    // The 8 MiB file is past the memory cache; warm the server on a small one
    // and the file cache on the big one (read fully, so no leftover work).
    warm_up(&server, "/1k.bin", KIB);
    warm_up(&server, "/8m.bin", 8 * MIB);

    let mut watch = RssWatch::start(server.pid());
    let requests = pipelined_gets("/8m.bin", PIPELINED);
    // None once the server closed the connection.
    let mut conns: Vec<Option<TcpStream>> = (0..CONNECTIONS)
        .map(|_| {
            let mut s = small_window_connect(server.addr());
            s.set_write_timeout(Some(common::IO_TIMEOUT))
                .expect("write timeout");
            s.write_all(&requests).expect("write pipelined requests");
            s.set_nonblocking(true).expect("nonblocking");
            Some(s)
        })
        .collect();
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut read: u64 = 0;
    let mut closed = 0usize;
    let deadline = Instant::now() + FLOOD_FOR;
    while Instant::now() < deadline {
        for slot in &mut conns {
            let Some(s) = slot else { continue };
            match s.read(&mut chunk) {
                Ok(n) if n > 0 => read += n as u64,
                Err(e) if common::is_timeout(&e) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // EOF or an error: the server closed it.
                Ok(_) | Err(_) => {
                    *slot = None;
                    closed += 1;
                }
            }
        }
        watch.sample();
        std::thread::sleep(READ_EVERY);
    }
    watch.sample();
    watch.report(&format!(
        "{driver}: slow readers of pipelined 8 MiB responses"
    ));
    eprintln!(
        "memory: {driver}: slow readers: {:.2} MiB read on {CONNECTIONS} connections \
         ({PIPELINED} pipelined GETs each), {closed} closed by the server",
        mib(read),
    );
    drop(conns);
    assert!(
        watch.growth() <= FLOOD_GROWTH_LIMIT,
        "server RSS grew by {:.1} MiB (limit {:.1} MiB) under {CONNECTIONS} slow readers of \
         {PIPELINED} pipelined 8 MiB responses each",
        mib(watch.growth()),
        mib(FLOOD_GROWTH_LIMIT),
    );
}

/// What a client that overran a limit read back on one connection.
enum Answer {
    /// The status line (or the first bytes, if shorter).
    Status(String),
    /// A reset (or a cut short answer ahead) before a status line arrived:
    /// where it happened.
    Reset(String),
    /// An orderly close before a status line arrived.
    Closed(String),
    /// Nothing within [`TRY_TIMEOUT`].
    Silent(String),
    /// Any other read error.
    Error(String),
}

impl std::fmt::Display for Answer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Answer::Status(line) => write!(f, "status line {line:?}"),
            Answer::Reset(when) => write!(f, "reset {when}"),
            Answer::Closed(got) => write!(f, "closed after {got:?}"),
            Answer::Silent(got) => write!(f, "nothing more within {TRY_TIMEOUT:?} after {got:?}"),
            Answer::Error(e) => write!(f, "read error: {e}"),
        }
    }
}

/// Read up to the end of the status line (or 64 bytes).
fn read_status_line(s: &mut TcpStream) -> Answer {
    s.set_read_timeout(Some(TRY_TIMEOUT)).expect("read timeout");
    let mut got = Vec::new();
    let mut chunk = [0u8; 64];
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    loop {
        if let Some(end) = got.windows(2).position(|w| w == b"\r\n") {
            return Answer::Status(text(&got[..end]));
        }
        if got.len() >= 64 {
            return Answer::Status(text(&got));
        }
        match s.read(&mut chunk[..64 - got.len()]) {
            Ok(0) => return Answer::Closed(text(&got)),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if common::is_timeout(&e) => return Answer::Silent(text(&got)),
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => {
                return Answer::Reset(format!("after {:?}", text(&got)))
            }
            Err(e) => return Answer::Error(format!("{e} after {:?}", text(&got))),
        }
    }
}

/// Where the refused request sits on its connection.
#[derive(Clone, Copy)]
enum Placement {
    /// First on a fresh connection: the refusal is the only answer.
    Alone,
    /// Behind a pipelined `GET /64k.bin` on a client with a small receive
    /// window, so at the refusal most of the 64 KiB answer (and the refusal
    /// after it) still sits in the server's send queue. A plain close(2) with
    /// unread input resets the connection and the kernel drops that queue
    /// (RFC 9112 §9.6); a lingering close delivers both answers.
    BehindResponse,
}

/// [`REFUSAL_TRIES`] connections, each overrunning a limit with `overrun`
/// (which ignores write errors: the server may answer and stop reading at any
/// point) placed as `placement` says; every one must then read a status line
/// starting with `want` (after the whole 64 KiB answer ahead of it, if any),
/// never a reset.
fn refused_every_time(
    server: &TestServer,
    driver: &str,
    what: &str,
    want: &str,
    placement: Placement,
    overrun: impl Fn(&mut TcpStream),
) {
    let answers: Vec<Answer> = (0..REFUSAL_TRIES)
        .map(|_| {
            let mut s = match placement {
                Placement::Alone => connect(server.addr()),
                Placement::BehindResponse => {
                    let s = small_window_connect(server.addr());
                    s.set_nodelay(true).expect("nodelay");
                    s
                }
            };
            s.set_write_timeout(Some(TRY_TIMEOUT))
                .expect("write timeout");
            if let Placement::BehindResponse = placement {
                if s.write_all(&pipelined_gets("/64k.bin", 1)).is_err() {
                    return Answer::Error("write of the GET ahead failed".into());
                }
            }
            overrun(&mut s);
            if let Placement::BehindResponse = placement {
                s.set_read_timeout(Some(TRY_TIMEOUT)).expect("read timeout");
                match common::try_read_response(&mut s, true) {
                    Ok(r) if r.status == 200 && r.body.len() == 64 * KIB => {}
                    Ok(r) => {
                        return Answer::Error(format!(
                            "the GET ahead got {} {}",
                            r.status, r.reason
                        ))
                    }
                    // After a reset Linux reports ECONNRESET (or EPIPE) once, then EOF:
                    // either way the answer was cut short.
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::ConnectionReset
                                | io::ErrorKind::BrokenPipe
                                | io::ErrorKind::UnexpectedEof
                        ) =>
                    {
                        return Answer::Reset(format!("inside the 64 KiB answer ahead ({e})"))
                    }
                    Err(e) => return Answer::Error(format!("the answer ahead: {e}")),
                }
            }
            read_status_line(&mut s)
        })
        .collect();
    let good = answers
        .iter()
        .filter(|a| matches!(a, Answer::Status(l) if l.starts_with(want)))
        .count();
    let resets = answers
        .iter()
        .filter(|a| matches!(a, Answer::Reset(_)))
        .count();
    eprintln!(
        "memory: {driver}: {what}: {good}/{REFUSAL_TRIES} answered {want:?}, {resets} reset before a \
         status line"
    );
    let bad: Vec<String> = answers
        .iter()
        .filter(|a| !matches!(a, Answer::Status(l) if l.starts_with(want)))
        .map(|a| a.to_string())
        .collect();
    assert!(
        bad.is_empty(),
        "{driver}: {what}: {} of {REFUSAL_TRIES} tries did not read {want:?}: {}",
        bad.len(),
        bad.join("; "),
    );
}

/// The head limit of the 431 tests.
const MAX_HEAD_BYTES: &str = "4096";

/// A request head of ~64 KiB (far past [`MAX_HEAD_BYTES`]), written a
/// field at a time until all is sent or a write fails.
fn send_oversized_head(s: &mut TcpStream) {
    const SEND_BYTES: usize = 64 * KIB;
    let start = b"GET /1k.bin HTTP/1.1\r\nHost: x\r\n";
    if s.write_all(start).is_err() {
        return;
    }
    let mut sent = start.len();
    // ~1 KiB per field, so the head passes the byte limit well before the
    // field-count limit matters.
    let mut i = 0;
    while sent < SEND_BYTES {
        let line = format!("X-Fill-{i:04}: {}\r\n", "a".repeat(1000));
        if s.write_all(line.as_bytes()).is_err() {
            return;
        }
        sent += line.len();
        i += 1;
    }
    let _ = s.write_all(b"\r\n");
}

/// A GET declaring a 50 MB body (past what the server will read and discard),
/// then 1 MiB of it in 64 KiB writes, stopping at the first failed write.
fn send_large_declared_body(s: &mut TcpStream) {
    const BODY_SENT: usize = MIB;
    const BODY_CHUNK: usize = 64 * KIB;
    let head = b"GET /1k.bin HTTP/1.1\r\nHost: x\r\nContent-Length: 50000000\r\n\r\n";
    if s.write_all(head).is_err() {
        return;
    }
    let chunk = vec![b'b'; BODY_CHUNK];
    for _ in 0..BODY_SENT / BODY_CHUNK {
        if s.write_all(&chunk).is_err() {
            return;
        }
    }
}

fn oversized_head_gets_431_not_a_reset(driver: &str) {
    let root = docroot(&[("1k.bin", KIB)]);
    let server = server(root.path(), driver, &["--max-head-bytes", MAX_HEAD_BYTES]);
    warm_up(&server, "/1k.bin", KIB);
    refused_every_time(
        &server,
        driver,
        "oversized head",
        "HTTP/1.1 431",
        Placement::Alone,
        send_oversized_head,
    );
}

fn oversized_head_behind_a_pipelined_response_gets_431_not_a_reset(driver: &str) {
    let root = docroot(&[("1k.bin", KIB), ("64k.bin", 64 * KIB)]);
    let server = server(root.path(), driver, &["--max-head-bytes", MAX_HEAD_BYTES]);
    warm_up(&server, "/64k.bin", 64 * KIB);
    refused_every_time(
        &server,
        driver,
        "oversized head behind a 64 KiB response",
        "HTTP/1.1 431",
        Placement::BehindResponse,
        send_oversized_head,
    );
}

fn large_declared_body_gets_413_not_a_reset(driver: &str) {
    let root = docroot(&[("1k.bin", KIB)]);
    let server = server(root.path(), driver, &[]);
    warm_up(&server, "/1k.bin", KIB);
    refused_every_time(
        &server,
        driver,
        "large declared body",
        "HTTP/1.1 413",
        Placement::Alone,
        send_large_declared_body,
    );
}

fn large_declared_body_behind_a_pipelined_response_gets_413_not_a_reset(driver: &str) {
    let root = docroot(&[("1k.bin", KIB), ("64k.bin", 64 * KIB)]);
    let server = server(root.path(), driver, &[]);
    warm_up(&server, "/64k.bin", 64 * KIB);
    refused_every_time(
        &server,
        driver,
        "large declared body behind a 64 KiB response",
        "HTTP/1.1 413",
        Placement::BehindResponse,
        send_large_declared_body,
    );
}

driver_tests! {
    pipelining_flood_without_reading_is_bounded,
    idle_keepalive_connections_after_64k_cost_little,
    idle_keepalive_connections_after_1k_cost_little,
    slow_readers_of_pipelined_8m_are_bounded,
    oversized_head_gets_431_not_a_reset,
    oversized_head_behind_a_pipelined_response_gets_431_not_a_reset,
    large_declared_body_gets_413_not_a_reset,
    large_declared_body_behind_a_pipelined_response_gets_413_not_a_reset,
}
