//! HTTP/2 attacks against the real binary over h2c (prior knowledge, plain
//! TCP on 127.0.0.1): one test per attack of RFC 9113 §10.5 and the known
//! CVEs, each written with the hand-made frames of `h2_attacks/wire.rs` so
//! it can send what no client library would.
//!
//! Every test asserts three things:
//! 1. the defence, as the frames the server answers with (RST_STREAM
//!    REFUSED_STREAM, GOAWAY ENHANCE_YOUR_CALM, a 431, a close), read with
//!    a bound;
//! 2. the server stays up: a fresh HTTP/1.1 `GET /small.txt` answers 200
//!    afterwards ([`Attack::finish`]);
//! 3. its memory stays bounded: the RSS of the server process (VmRSS of
//!    `/proc/<pid>/status`; one worker in thread isolation, so the pid is
//!    the whole server, as in `tests/memory.rs`) grows less than
//!    [`GROWTH_LIMIT`] between the warmed-up start and the highest sample
//!    taken during and after the attack.
//!
//! The drain test asserts the server's exit instead of check 2, and signals
//! only the server it started. A test marked `#[ignore]` shows a weakness
//! found here; its reason says what fails and where.
//!
//! Each prints one `h2_attacks:` line with what it saw (run with
//! `--nocapture`). Every case runs under `--driver uring` and `--driver
//! epoll` (`driver_tests!` at the bottom).

#[macro_use]
mod common;
#[path = "h2_attacks/wire.rs"]
mod wire;

use std::fs;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use common::{rss_bytes, Signal, TestServer};
use wire::{flag, kind, setting, Block, Code, Conn, End, Frame, Seen};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The most the server's RSS may grow during one attack: the per-connection
/// budgets (`--output-buffer-bytes`, 128 streams, a header list of 16 KiB)
/// with wide margin.
const GROWTH_LIMIT: u64 = 32 * MIB as u64;
/// How long a test waits for any one answer from the server.
const ANSWER_WITHIN: Duration = Duration::from_secs(5);
/// How long a flooding client leaves its socket unread.
const QUIET: Duration = Duration::from_secs(1);
/// How often RSS is sampled while a client sleeps.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// The large file of the docroot.
const LARGE: usize = MIB;

/// `GET path` (END_STREAM: no body) on `stream`.
fn get(stream: u32, path: &str) -> Frame {
    Frame::headers(
        stream,
        flag::END_HEADERS | flag::END_STREAM,
        Block::get(path).bytes(),
    )
}

/// `GET path` without END_STREAM: the request may still have a body, so the
/// static files wait for it (up to `--body-timeout`, 60 s) before
/// answering, and the stream stays open.
fn get_open(stream: u32, path: &str) -> Frame {
    Frame::headers(stream, flag::END_HEADERS, Block::get(path).bytes())
}

/// The `n`th client stream id (1, 3, 5, ...).
fn sid(n: usize) -> u32 {
    1 + 2 * n as u32
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// A counter of `/metrics`, summed over the workers (the series without a
/// `worker` label); 0 when absent.
fn total(metrics: &str, name: &str) -> f64 {
    common::metric(metrics, name).unwrap_or(0.0)
}

/// One attack: a server with one worker (thread isolation, the given
/// driver, an admin listener) over a docroot of `small.txt` and
/// [`LARGE`]-byte `large.bin`, warmed up over HTTP/1.1 and HTTP/2 before
/// its RSS is first read.
struct Attack {
    server: TestServer,
    driver: String,
    _root: tempfile::TempDir,
    rss_before: u64,
    rss_max: u64,
    rss_last: u64,
}

impl Attack {
    fn start(driver: &str, args: &[&str]) -> Attack {
        let root = tempfile::tempdir().expect("tempdir");
        fs::write(root.path().join("small.txt"), b"small\n").expect("write small.txt");
        let large: Vec<u8> = (0..LARGE).map(|i| (i % 251) as u8).collect();
        fs::write(root.path().join("large.bin"), large).expect("write large.bin");
        let server = TestServer::builder()
            .root(root.path())
            .driver(driver)
            .admin()
            .args(&["--workers", "1"])
            .args(args)
            .start();
        for (path, len) in [("/small.txt", 6), ("/large.bin", LARGE)] {
            let r = server.get(path);
            assert_eq!(r.status, 200, "warm-up GET {path}: {r:?}");
            assert_eq!(r.body.len(), len, "warm-up GET {path}");
        }
        let mut attack = Attack {
            server,
            driver: driver.to_owned(),
            _root: root,
            rss_before: 0,
            rss_max: 0,
            rss_last: 0,
        };
        // HTTP/2's own one-off allocations (buffers, HPACK tables).
        let mut c = attack.open(&[]);
        c.send_frame(&get(1, "/small.txt")).expect("warm-up GET");
        let r = response(&mut c, 1);
        assert_eq!(
            r.status,
            Some(200),
            "warm-up h2 GET: {}",
            r.seen.summary(10)
        );
        drop(c);
        std::thread::sleep(Duration::from_millis(50));
        attack.rss_before = rss_bytes(attack.server.pid());
        attack.rss_max = attack.rss_before;
        attack.rss_last = attack.rss_before;
        attack
    }

    /// An h2c connection with these client SETTINGS, handshake done.
    fn open(&self, settings: &[(u16, u32)]) -> Conn {
        Conn::open(self.server.addr(), settings)
    }

    fn sample(&mut self) {
        self.rss_last = rss_bytes(self.server.pid());
        self.rss_max = self.rss_max.max(self.rss_last);
    }

    /// Sleep `d`, sampling RSS every [`SAMPLE_EVERY`].
    fn sleep_sampling(&mut self, d: Duration) {
        let until = Instant::now() + d;
        while Instant::now() < until {
            self.sample();
            std::thread::sleep(SAMPLE_EVERY.min(until.saturating_duration_since(Instant::now())));
        }
        self.sample();
    }

    fn growth(&self) -> u64 {
        self.rss_max.saturating_sub(self.rss_before)
    }

    /// The RSS part of a report line.
    fn rss_line(&self) -> String {
        format!(
            "RSS before {:.1} MiB, max {:.1} MiB, last {:.1} MiB, growth {:.1} MiB",
            mib(self.rss_before),
            mib(self.rss_max),
            mib(self.rss_last),
            mib(self.growth())
        )
    }

    /// Report, then checks 2 and 3 of the module doc: the server still
    /// answers a fresh HTTP/1.1 GET with 200, and its RSS grew less than
    /// [`GROWTH_LIMIT`].
    fn finish(mut self, what: &str, observed: &str) {
        self.sample();
        eprintln!(
            "h2_attacks: {}: {what}: {observed}; {}",
            self.driver,
            self.rss_line()
        );
        let r = self.server.get("/small.txt");
        assert_eq!(r.status, 200, "{what}: the server no longer answers: {r:?}");
        assert!(
            self.growth() < GROWTH_LIMIT,
            "{what}: server RSS grew by {:.1} MiB (limit {:.1} MiB)",
            mib(self.growth()),
            mib(GROWTH_LIMIT)
        );
    }
}

/// A response as read off one stream.
struct Response {
    /// The `:status` of its HEADERS (`None` if none came, or one the reader
    /// cannot decode).
    status: Option<u16>,
    body: usize,
    /// Every frame read, and how the read ended: a frame with END_STREAM or
    /// a RST_STREAM on the stream, a GOAWAY, a close, or silence.
    seen: Seen,
}

/// Read the response on `stream` to its end (or to a reset, a GOAWAY, a
/// close, or [`ANSWER_WITHIN`] of silence).
fn response(c: &mut Conn, stream: u32) -> Response {
    let mut status = None;
    let mut body = 0;
    let seen = c.until(ANSWER_WITHIN, |f| {
        if f.stream == stream && f.kind == kind::HEADERS && status.is_none() {
            status = f.status();
        }
        if f.stream == stream && f.kind == kind::DATA {
            body += f.payload.len();
        }
        f.kind == kind::GOAWAY
            || f.stream == stream && (f.has(flag::END_STREAM) || f.kind == kind::RST_STREAM)
    });
    Response { status, body, seen }
}

// 1. Max concurrent streams (RFC 9113 §5.1.2).

/// `max` streams held open (HEADERS without END_STREAM) and one more: RFC
/// 9113 §5.1.2 lets the server refuse the one past its
/// SETTINGS_MAX_CONCURRENT_STREAMS as a stream error, PROTOCOL_ERROR or
/// REFUSED_STREAM; REFUSED_STREAM tells the client it may retry (§8.7).
/// The connection goes on: once stream 1 ends, a new stream is answered.
fn streams_past_the_limit_are_refused(driver: &str, max: usize, args: &[&str]) {
    let mut a = Attack::start(driver, args);
    let mut c = a.open(&[]);
    assert_eq!(
        c.server_setting(setting::MAX_CONCURRENT_STREAMS),
        Some(max as u32),
        "the server's SETTINGS: {:?}",
        c.server_settings
    );
    let frames: Vec<Frame> = (0..=max).map(|n| get_open(sid(n), "/small.txt")).collect();
    c.send_frames(&frames).expect("write the HEADERS");
    let refused = sid(max);
    let seen = c.ping_pong(*b"refusals", ANSWER_WITHIN);
    a.sample();
    assert!(
        matches!(seen.end, End::Matched(_)),
        "no PING ACK after {} HEADERS: {}",
        max + 1,
        seen.summary(10)
    );
    assert_eq!(
        seen.frames,
        [Frame::rst_stream(refused, Code::REFUSED_STREAM)],
        "stream {} of {} (id {refused}) should be refused, and nothing else happen",
        max + 1,
        max + 1
    );

    // The open streams are still served: end stream 1's (empty) body.
    c.send_frame(&Frame::data(1, true, b""))
        .expect("end stream 1");
    let first = response(&mut c, 1);
    assert_eq!(
        first.status,
        Some(200),
        "stream 1: {}",
        first.seen.summary(10)
    );
    assert_eq!(first.body, 6, "stream 1's body");
    // Its slot is free again: a new stream is answered.
    let next = sid(max + 1);
    c.send_frame(&get(next, "/small.txt"))
        .expect("a new stream");
    let later = response(&mut c, next);
    assert_eq!(
        later.status,
        Some(200),
        "stream {next}: {}",
        later.seen.summary(10)
    );
    a.finish(
        &format!("{max} open streams and one more"),
        &format!(
            "stream {} answered RST_STREAM({refused}, REFUSED_STREAM); stream 1 then answered 200, \
             and a new stream {next} 200",
            max + 1
        ),
    );
}

fn stream_past_128_is_refused(driver: &str) {
    streams_past_the_limit_are_refused(driver, 128, &[]);
}

fn stream_past_4_is_refused(driver: &str) {
    streams_past_the_limit_are_refused(driver, 4, &["--h2-max-concurrent-streams", "4"]);
}

// 2. Rapid reset (CVE-2023-44487).

/// What a rapid-reset attack counted in `/metrics` (summed over workers).
fn reset_metrics(a: &Attack) -> (f64, f64, f64) {
    let m = a.server.wait_metrics(Duration::from_secs(2), |m| {
        total(m, "servery_h2_calmed_total") >= 1.0
    });
    (
        total(&m, "servery_h2_calmed_total"),
        total(&m, "servery_h2_resets_total"),
        total(&m, "servery_h2_streams_total"),
    )
}

/// The classic: thousands of HEADERS + RST_STREAM pairs written as fast as
/// the socket takes them. The server must end the connection with GOAWAY
/// ENHANCE_YOUR_CALM long before the last pair (`--h2-max-resets`, 200 in
/// 10 s: each stream is answered before more is read, so its reset is
/// counted as it comes), and count it in `servery_h2_calmed_total`.
fn rapid_reset_gets_goaway_enhance_your_calm(driver: &str) {
    const PAIRS: usize = 10_000;
    let mut a = Attack::start(driver, &[]);
    let mut c = a.open(&[]);
    let block = Block::get("/small.txt");
    let bytes = wire::encode_all((0..PAIRS).flat_map(|n| {
        [
            Frame::headers(sid(n), flag::END_HEADERS | flag::END_STREAM, block.bytes()),
            Frame::rst_stream(sid(n), Code::CANCEL),
        ]
    }));
    let total_bytes = bytes.len();
    let writer = wire::flood(&c.s, bytes);
    let seen = c.until(ANSWER_WITHIN, |f| f.kind == kind::GOAWAY);
    a.sample();
    let closed = c.until_closed(ANSWER_WITHIN);
    c.shutdown();
    let written = writer.join().expect("writer");
    a.sample();
    let (last, code) = seen
        .goaway()
        .unwrap_or_else(|| panic!("no GOAWAY under rapid reset: {}", seen.summary(10)));
    assert_eq!(code, Code::ENHANCE_YOUR_CALM, "{}", seen.summary(10));
    assert!(
        last < sid(PAIRS - 1) / 2,
        "GOAWAY only after stream {last} of {}",
        sid(PAIRS - 1)
    );
    assert!(
        closed.end.closed(),
        "not closed after the GOAWAY: {}",
        closed.summary(10)
    );
    let (calmed, resets, streams) = reset_metrics(&a);
    assert!(calmed >= 1.0, "servery_h2_calmed_total {calmed}");
    a.finish(
        &format!("rapid reset, {PAIRS} HEADERS+RST_STREAM pairs"),
        &format!(
            "GOAWAY(last {last}, {code:?}) then close, {} of {total_bytes} B written; \
             calmed_total {calmed}, resets_total {resets}, streams_total {streams}",
            written
        ),
    );
}

/// Resets the server does count, one at a time: each stream asks for the
/// large file with a zero window (SETTINGS_INITIAL_WINDOW_SIZE 0), so its
/// response waits for credit; the client resets it once the response
/// HEADERS arrive. Past `--h2-max-resets` (200 in 10 s) the connection gets
/// GOAWAY ENHANCE_YOUR_CALM.
fn resets_of_streams_in_flight_pass_max_resets_and_are_calmed(driver: &str) {
    const MAX: usize = 200;
    const TRIES: usize = 3 * MAX;
    let mut a = Attack::start(driver, &[]);
    let mut c = a.open(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    let mut goaway = None;
    let mut resets = 0;
    for n in 0..TRIES {
        if c.send_frame(&get(sid(n), "/large.bin")).is_err() {
            break;
        }
        let seen = c.until(ANSWER_WITHIN, |f| {
            f.kind == kind::GOAWAY || f.stream == sid(n) && f.kind == kind::HEADERS
        });
        if let Some(g) = seen.goaway() {
            goaway = Some(g);
            break;
        }
        match seen.end {
            End::Matched(f) => assert_eq!(f.status(), Some(200), "stream {}: {f}", sid(n)),
            end => panic!("stream {}: no response head: {end:?}", sid(n)),
        }
        if c.send_frame(&Frame::rst_stream(sid(n), Code::CANCEL))
            .is_err()
        {
            break;
        }
        resets += 1;
    }
    if goaway.is_none() {
        goaway = c.until(ANSWER_WITHIN, |f| f.kind == kind::GOAWAY).goaway();
    }
    a.sample();
    let (last, code) =
        goaway.unwrap_or_else(|| panic!("{resets} resets of streams in flight, no GOAWAY"));
    assert_eq!(code, Code::ENHANCE_YOUR_CALM);
    assert!(
        (MAX..MAX + 10).contains(&resets),
        "GOAWAY after {resets} resets (--h2-max-resets {MAX})"
    );
    let (calmed, counted, streams) = reset_metrics(&a);
    assert!(calmed >= 1.0, "servery_h2_calmed_total {calmed}");
    assert!(counted > MAX as f64, "servery_h2_resets_total {counted}");
    drop(c);
    a.finish(
        "resets of streams waiting for credit",
        &format!(
            "GOAWAY(last {last}, {code:?}) after {resets} resets; calmed_total {calmed}, \
             resets_total {counted}, streams_total {streams}"
        ),
    );
}

/// Rapid reset the server does not count: each stream is a GET without
/// END_STREAM, so the static files wait for its body (`stream::discard`);
/// a PING round trip makes sure the server has accepted it, then the
/// client resets it.
/// Every one of these streams made the server resolve a path and start an
/// answer, as in CVE-2023-44487, and a connection should still be calmed
/// past `--h2-max-resets`.
fn resets_of_streams_awaiting_a_body_are_calmed(driver: &str) {
    const MAX: usize = 200;
    const TRIES: usize = 5 * MAX;
    let mut a = Attack::start(driver, &[]);
    let mut c = a.open(&[]);
    let mut goaway = None;
    let mut resets = 0;
    for n in 0..TRIES {
        if c.send_frame(&get_open(sid(n), "/small.txt")).is_err() {
            break;
        }
        let seen = c.ping_pong((n as u64).to_be_bytes(), ANSWER_WITHIN);
        if let Some(g) = seen.goaway() {
            goaway = Some(g);
            break;
        }
        assert!(
            matches!(seen.end, End::Matched(_)),
            "stream {}: {}",
            sid(n),
            seen.summary(10)
        );
        if c.send_frame(&Frame::rst_stream(sid(n), Code::CANCEL))
            .is_err()
        {
            break;
        }
        resets += 1;
    }
    if goaway.is_none() {
        goaway = c.ping_pong(*b"the-last", ANSWER_WITHIN).goaway();
    }
    a.sample();
    let m = a.server.metrics();
    let (calmed, counted, streams) = (
        total(&m, "servery_h2_calmed_total"),
        total(&m, "servery_h2_resets_total"),
        total(&m, "servery_h2_streams_total"),
    );
    eprintln!(
        "h2_attacks: {driver}: resets of streams awaiting a body: {resets} resets, GOAWAY {goaway:?}; \
         calmed_total {calmed}, resets_total {counted}, streams_total {streams}; {}",
        a.rss_line()
    );
    let (last, code) = goaway.unwrap_or_else(|| {
        panic!(
            "{resets} client resets of accepted streams (each a GET awaiting its body) and no \
             GOAWAY; servery_h2_resets_total {counted}"
        )
    });
    assert_eq!(code, Code::ENHANCE_YOUR_CALM);
    drop(c);
    a.finish(
        "resets of streams awaiting a body",
        &format!("GOAWAY(last {last}, {code:?}) after {resets} resets"),
    );
}

// 3. HPACK bomb (RFC 7541 §7.3, RFC 9113 §10.5.1).

/// The bomb's one large field: in the dynamic table it costs 32 + 6 + 4000
/// bytes of the 4096 the table may hold (RFC 7541 §4.1).
const BOMB_VALUE: usize = 4000;

/// `GET /small.txt` with the bomb: one literal with incremental indexing
/// of [`BOMB_VALUE`] bytes, then `refs` one-byte references to it.
fn bomb(refs: usize) -> Block {
    let mut b = Block::get("/small.txt").literal_indexed_new(b"x-bomb", &[b'a'; BOMB_VALUE]);
    for _ in 0..refs {
        b = b.indexed(wire::index::FIRST_DYNAMIC);
    }
    b
}

/// A 16 KiB header block that decodes to 12,000 copies of a 4 KiB field
/// (48 MB): the server must stop decoding near `--h2-max-header-list-bytes`
/// (the decoder keeps decoding for the table's sake but keeps no field past
/// it, and the stream is answered 431), never build the list. Sent on 20 connections, so an allocation that stays would
/// show.
fn hpack_bomb_is_refused_without_allocating(driver: &str) {
    const REFS: usize = 12_000;
    const CONNECTIONS: usize = 20;
    let mut a = Attack::start(driver, &[]);
    let block = bomb(REFS);
    assert!(block.len() <= wire::MAX_FRAME, "{} B", block.len());
    let decoded = REFS * (6 + BOMB_VALUE + 32);
    let mut answers = Vec::new();
    for _ in 0..CONNECTIONS {
        let mut c = a.open(&[]);
        c.send_frame(&Frame::headers(
            1,
            flag::END_HEADERS | flag::END_STREAM,
            block.bytes(),
        ))
        .expect("write the bomb");
        let r = response(&mut c, 1);
        let closed = if r.seen.goaway().is_some() {
            c.until_closed(ANSWER_WITHIN).end.closed()
        } else {
            false
        };
        a.sample();
        answers.push((r, closed));
    }
    let (first, _) = &answers[0];
    let shown = first.seen.summary(10);
    for (i, (r, closed)) in answers.iter().enumerate() {
        assert_ne!(r.status, Some(200), "connection {i}: the bomb was answered");
        let goaway = r.seen.goaway();
        assert!(
            matches!(goaway, Some((0, Code::ENHANCE_YOUR_CALM))) && *closed
                || r.status == Some(431),
            "connection {i}: want GOAWAY(last 0, ENHANCE_YOUR_CALM) and a close, or a 431: {}",
            r.seen.summary(10)
        );
    }
    a.finish(
        &format!(
            "HPACK bomb: {} B block decoding to {:.0} MB, {CONNECTIONS} connections",
            block.len(),
            decoded as f64 / 1e6
        ),
        &format!("each answered {shown}"),
    );
}

/// A header list just past `--h2-max-header-list-bytes` (five references,
/// ~20 KB decoded against 16 KiB): RFC 9113 §10.5.1 lets the server answer
/// 431; the stream ends, the connection goes on.
fn header_list_past_the_limit_gets_431(driver: &str) {
    let mut a = Attack::start(driver, &[]);
    let mut c = a.open(&[]);
    c.send_frame(&Frame::headers(
        1,
        flag::END_HEADERS | flag::END_STREAM,
        bomb(5).bytes(),
    ))
    .expect("write the block");
    let r = response(&mut c, 1);
    a.sample();
    assert_eq!(r.status, Some(431), "{}", r.seen.summary(10));
    // The connection (and its HPACK state, which now holds the large field)
    // still serves.
    let later = c.ping_pong(*b"after431", ANSWER_WITHIN);
    let after: Vec<String> = later.frames.iter().map(|f| f.to_string()).collect();
    c.send_frame(&get(3, "/small.txt")).expect("a new stream");
    let next = response(&mut c, 3);
    assert_eq!(
        next.status,
        Some(200),
        "stream 3: {}",
        next.seen.summary(10)
    );
    a.finish(
        "header list of ~20 KB against 16 KiB",
        &format!(
            "stream 1 answered {} (then {after:?}); stream 3 answered 200",
            r.seen.summary(4)
        ),
    );
}

/// Send a header block that opens with a dynamic table size update to
/// 8192, above our SETTINGS_HEADER_TABLE_SIZE (4096): the GOAWAY it gets
/// (after the connection closed), and the frames as text.
fn table_size_update_past_the_setting(a: &mut Attack) -> (Option<(u32, Code)>, String) {
    let mut c = a.open(&[]);
    let block = Block::new()
        .size_update(8192)
        .then(&Block::get("/small.txt"));
    c.send_frame(&Frame::headers(
        1,
        flag::END_HEADERS | flag::END_STREAM,
        block.bytes(),
    ))
    .expect("write the block");
    let seen = c.until(ANSWER_WITHIN, |f| f.kind == kind::GOAWAY);
    let closed = c.until_closed(ANSWER_WITHIN);
    a.sample();
    assert!(closed.end.closed(), "not closed: {}", closed.summary(10));
    (seen.goaway(), seen.summary(4))
}

/// RFC 7541 §6.3: a size update above the protocol's limit is a decoding
/// error, which ends the connection (RFC 9113 §4.3).
fn table_size_update_past_the_setting_ends_the_connection(driver: &str) {
    let mut a = Attack::start(driver, &[]);
    let (goaway, seen) = table_size_update_past_the_setting(&mut a);
    assert!(
        matches!(
            goaway,
            Some((0, Code::COMPRESSION_ERROR | Code::PROTOCOL_ERROR))
        ),
        "{seen}"
    );
    a.finish(
        "dynamic table size update 8192 > 4096",
        &format!("{seen}, then closed"),
    );
}

/// The same, with the code RFC 9113 §4.3 names: "A decoding error in a
/// field block MUST be treated as a connection error of type
/// COMPRESSION_ERROR".
fn table_size_update_past_the_setting_is_a_compression_error(driver: &str) {
    let mut a = Attack::start(driver, &[]);
    let (goaway, seen) = table_size_update_past_the_setting(&mut a);
    assert_eq!(goaway, Some((0, Code::COMPRESSION_ERROR)), "{seen}");
    a.finish("dynamic table size update 8192 > 4096", &seen);
}

// 4. CONTINUATION flood (CVE-2024-27316 and its kin, VU#421644).

/// HEADERS without END_HEADERS, then `frames` CONTINUATION frames carrying
/// `frame`, until all are written or the server ends the connection: it
/// must end it with GOAWAY ENHANCE_YOUR_CALM, then close, once the header
/// block passes its bound (the header list's limit plus a frame, each
/// CONTINUATION frame counting at least 1 KiB). How much of the flood was
/// written is reported, not asserted: the kernel's socket buffers take the
/// first MiB or so whatever the server does.
fn continuation_flood(driver: &str, what: &str, frames: usize, frame: Vec<u8>) {
    let mut a = Attack::start(driver, &[]);
    let mut c = a.open(&[]);
    let mut out = Frame::headers(1, 0, Block::get("/small.txt").bytes()).encode();
    let one = Frame::continuation(1, false, &frame).encode();
    out.reserve(one.len() * frames);
    for _ in 0..frames {
        out.extend_from_slice(&one);
    }
    let total_bytes = out.len();
    let writer = wire::flood(&c.s, out);
    let seen = c.until(ANSWER_WITHIN, |f| f.kind == kind::GOAWAY);
    a.sample();
    let closed = c.until_closed(ANSWER_WITHIN);
    c.shutdown();
    let written = writer.join().expect("writer");
    a.sample();
    let goaway = seen.goaway();
    assert!(
        goaway == Some((0, Code::ENHANCE_YOUR_CALM)),
        "{what}: want GOAWAY(last 0, ENHANCE_YOUR_CALM): {}",
        seen.summary(10)
    );
    assert!(
        closed.end.closed(),
        "{what}: not closed: {}",
        closed.summary(10)
    );
    a.finish(
        what,
        &format!(
            "{}, then closed; {:.2} MiB of {:.1} MiB written",
            seen.summary(4),
            mib(written),
            mib(total_bytes as u64)
        ),
    );
}

/// CONTINUATION frames of 16 KiB, each one more header field of ~16 KB:
/// 1,024 frames, 16 MiB of header block.
fn continuation_flood_of_large_fields_is_cut(driver: &str) {
    let value = vec![b'c'; wire::MAX_FRAME - 16];
    let field = Block::new().literal_new(b"x-c", &value);
    assert!(field.len() <= wire::MAX_FRAME);
    continuation_flood(
        driver,
        "CONTINUATION flood, 1024 frames of one 16 KB field",
        1024,
        field.0,
    );
}

/// Empty CONTINUATION frames: they never grow the header block, so only a
/// bound on the frames themselves stops them; 100,000 of them.
fn continuation_flood_of_empty_frames_is_cut(driver: &str) {
    continuation_flood(
        driver,
        "CONTINUATION flood, 100000 empty frames",
        100_000,
        Vec::new(),
    );
}

// 5. Floods of control frames (RFC 9113 §10.5: SETTINGS, PING, empty DATA,
//    WINDOW_UPDATE).

/// What a flood came to.
struct Flooded {
    /// Frames of the kind the flood expects back (ACKs).
    acks: usize,
    /// Other frames, as text (at most 10).
    others: Vec<String>,
    goaway: Option<(u32, Code)>,
    closed: bool,
    /// A PING sent after the flood got its ACK.
    answered_after: bool,
    written: u64,
    total: usize,
}

impl Flooded {
    fn describe(&self) -> String {
        format!(
            "{} ACKs, other frames {:?}, GOAWAY {:?}, closed {}, PING answered after {}; \
             {:.2} of {:.2} MiB written",
            self.acks,
            self.others,
            self.goaway,
            self.closed,
            self.answered_after,
            mib(self.written),
            mib(self.total as u64)
        )
    }
}

/// Write `bytes` on `c` from a thread while the client leaves its socket
/// unread for [`QUIET`] (sampling RSS), then read everything back (counting
/// the frames `is_ack` picks) until the writer is done and the server is
/// quiet, or the server ends the connection; then a PING must be answered
/// unless it did.
fn flood(a: &mut Attack, c: &mut Conn, bytes: Vec<u8>, is_ack: impl Fn(&Frame) -> bool) -> Flooded {
    let total = bytes.len();
    let writer: JoinHandle<u64> = wire::flood(&c.s, bytes);
    a.sleep_sampling(QUIET);
    let mut out = Flooded {
        acks: 0,
        others: Vec::new(),
        goaway: None,
        closed: false,
        answered_after: false,
        written: 0,
        total,
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut quiet_since = Instant::now();
    while Instant::now() < deadline {
        match c.next(Duration::from_millis(100)) {
            Ok(f) => {
                quiet_since = Instant::now();
                if is_ack(&f) {
                    out.acks += 1;
                } else {
                    if let Some((last, code, _)) = f.goaway() {
                        out.goaway.get_or_insert((last, code));
                    }
                    if out.others.len() < 10 {
                        out.others.push(f.to_string());
                    }
                }
            }
            Err(End::Closed { .. }) => {
                out.closed = true;
                break;
            }
            Err(_) => {
                if writer.is_finished() && quiet_since.elapsed() >= Duration::from_millis(500) {
                    break;
                }
            }
        }
        if out.acks % 1000 == 0 {
            a.sample();
        }
    }
    a.sample();
    if out.closed || out.goaway.is_some() {
        c.shutdown();
    } else {
        out.answered_after = matches!(
            c.ping_pong(*b"flood-ok", ANSWER_WITHIN).end,
            End::Matched(_)
        );
    }
    out.written = writer.join().expect("writer");
    out
}

/// A flooding client: its receive window is a few KiB, so the server's
/// answers back up into it at once.
fn flooder(a: &Attack, settings: &[(u16, u32)]) -> Conn {
    Conn::connect_small_window(a.server.addr()).hello(settings)
}

/// 20,000 SETTINGS frames: each must be acknowledged (RFC 9113 §6.5.3), and
/// the server stops reading while 16 KiB of control frames wait to be
/// written, so a client that does not read stops itself.
fn settings_flood_is_bounded(driver: &str) {
    const FRAMES: usize = 20_000;
    let mut a = Attack::start(driver, &[]);
    let mut c = flooder(&a, &[]);
    let one = Frame::settings(&[(setting::INITIAL_WINDOW_SIZE, 65_535)]);
    let bytes = wire::encode_all(std::iter::repeat_n(one, FRAMES));
    let f = flood(&mut a, &mut c, bytes, |f| {
        f.kind == kind::SETTINGS && f.has(flag::ACK)
    });
    assert!(
        f.answered_after && f.acks == FRAMES || f.goaway.is_some_and(|(_, c)| c != Code::NO_ERROR),
        "SETTINGS flood: {}",
        f.describe()
    );
    a.finish(&format!("SETTINGS flood, {FRAMES} frames"), &f.describe());
}

/// 20,000 PINGs: each is answered (reading pauses while the answers wait,
/// as with SETTINGS), or the connection is ended.
fn ping_flood_is_bounded(driver: &str) {
    const FRAMES: usize = 20_000;
    let mut a = Attack::start(driver, &[]);
    let mut c = flooder(&a, &[]);
    let bytes = wire::encode_all((0..FRAMES as u64).map(|i| Frame::ping(i.to_be_bytes())));
    let f = flood(&mut a, &mut c, bytes, |f| {
        f.kind == kind::PING && f.has(flag::ACK)
    });
    assert!(
        f.answered_after && f.acks == FRAMES || f.goaway.is_some_and(|(_, c)| c != Code::NO_ERROR),
        "PING flood: {}",
        f.describe()
    );
    a.finish(&format!("PING flood, {FRAMES} frames"), &f.describe());
}

/// 20,000 empty DATA frames on an open stream: they carry nothing and cost
/// no flow-control credit, so only a count stops them (100 in a row, then
/// GOAWAY ENHANCE_YOUR_CALM).
fn empty_data_flood_is_calmed(driver: &str) {
    const FRAMES: usize = 20_000;
    let mut a = Attack::start(driver, &[]);
    let mut c = flooder(&a, &[]);
    let mut bytes = get_open(1, "/small.txt").encode();
    bytes.extend(wire::encode_all(std::iter::repeat_n(
        Frame::data(1, false, b""),
        FRAMES,
    )));
    let f = flood(&mut a, &mut c, bytes, |_| false);
    assert!(
        matches!(f.goaway, Some((_, Code::ENHANCE_YOUR_CALM))),
        "empty DATA flood: {}",
        f.describe()
    );
    a.finish(&format!("empty DATA flood, {FRAMES} frames"), &f.describe());
}

/// 40,000 WINDOW_UPDATEs of 1 byte, half on the connection and half on an
/// open stream: the windows grow by 20,000 each (far from 2^31 - 1), and
/// the server answers nothing; it must stay up and answer a PING after.
fn window_update_flood_is_bounded(driver: &str) {
    const FRAMES: usize = 40_000;
    let mut a = Attack::start(driver, &[]);
    let mut c = flooder(&a, &[]);
    let mut bytes = get_open(1, "/small.txt").encode();
    bytes.extend(wire::encode_all(
        (0..FRAMES).map(|i| Frame::window_update(if i % 2 == 0 { 0 } else { 1 }, 1)),
    ));
    let f = flood(&mut a, &mut c, bytes, |_| false);
    assert!(
        f.answered_after || f.goaway.is_some_and(|(_, c)| c != Code::NO_ERROR),
        "WINDOW_UPDATE flood: {}",
        f.describe()
    );
    a.finish(
        &format!("WINDOW_UPDATE flood, {FRAMES} frames"),
        &f.describe(),
    );
}

// 6. Zero window and a client that never reads (RFC 9113 §10.5: flow
//    control as an attack).

/// SETTINGS_INITIAL_WINDOW_SIZE 0 and a request for the large file, no
/// WINDOW_UPDATE ever: with `--send-timeout 1` the stream is reset
/// (RST_STREAM CANCEL) within a few seconds, and the connection goes on.
fn zero_window_stream_is_reset_after_the_send_timeout(driver: &str) {
    let mut a = Attack::start(driver, &["--send-timeout", "1"]);
    let mut c = a.open(&[(setting::INITIAL_WINDOW_SIZE, 0)]);
    let started = Instant::now();
    c.send_frame(&get(1, "/large.bin")).expect("GET");
    let r = response(&mut c, 1);
    let took = started.elapsed();
    a.sample();
    assert_eq!(r.status, Some(200), "{}", r.seen.summary(10));
    assert_eq!(r.body, 0, "DATA sent into a zero window");
    match &r.seen.end {
        End::Matched(f) => assert_eq!(
            f.rst_code(),
            Some(Code::CANCEL),
            "want RST_STREAM(1, CANCEL): {}",
            r.seen.summary(10)
        ),
        end => panic!("stream 1 not reset: {end:?} after {}", r.seen.summary(10)),
    }
    assert!(took < Duration::from_secs(4), "reset after {took:?}");
    let after = c.ping_pong(*b"stillup!", ANSWER_WITHIN);
    assert!(
        matches!(after.end, End::Matched(_)),
        "the connection did not go on: {}",
        after.summary(10)
    );
    a.finish(
        "zero window, GET of 1 MiB, --send-timeout 1",
        &format!(
            "{} after {took:.2?}; the connection answered a PING",
            r.seen.summary(4)
        ),
    );
}

/// Windows opened wide (2^31 - 1 for the connection and every stream), 128
/// streams each asking for the 1 MiB file, and a client that never reads
/// its socket: the server may hold at most the connection's output budget,
/// whatever the windows allow; `--send-timeout 1` resets the streams it
/// cannot send on.
fn client_that_never_reads_many_large_files_is_bounded(driver: &str) {
    const STREAMS: usize = 128;
    const WIDE: u32 = (1 << 31) - 1;
    let mut a = Attack::start(driver, &["--send-timeout", "1"]);
    let mut c = flooder(&a, &[(setting::INITIAL_WINDOW_SIZE, WIDE)]);
    let mut frames = vec![Frame::window_update(0, WIDE - 65_535)];
    frames.extend((0..STREAMS).map(|n| get(sid(n), "/large.bin")));
    c.send_frames(&frames).expect("write the requests");
    a.sleep_sampling(Duration::from_secs(3));
    // Then read for a while, to see what the server did meanwhile.
    let mut data = 0usize;
    let mut resets = 0usize;
    let mut goaway = None;
    let seen = c.until(Duration::from_secs(2), |f| {
        match f.kind {
            kind::DATA => data += f.payload.len(),
            kind::RST_STREAM => resets += 1,
            kind::GOAWAY => goaway = f.goaway().map(|(l, c, _)| (l, c)),
            _ => {}
        }
        false
    });
    a.sample();
    drop(c);
    a.finish(
        &format!("{STREAMS} GETs of 1 MiB, wide windows, a client that never reads"),
        &format!(
            "read afterwards: {:.2} MiB of DATA, {resets} RST_STREAM, GOAWAY {goaway:?}, end {:?}",
            mib(data as u64),
            seen.end
        ),
    );
}

// 7. Timeouts.

/// Only the preface, no SETTINGS: the handshake must finish within
/// `--header-timeout` (1 s), so the connection is closed within ~2 s.
fn preface_without_settings_is_closed_after_the_header_timeout(driver: &str) {
    let mut a = Attack::start(driver, &["--header-timeout", "1"]);
    let mut c = Conn::connect(a.server.addr());
    let started = Instant::now();
    c.send(wire::PREFACE).expect("write the preface");
    let seen = c.until_closed(Duration::from_secs(5));
    let took = started.elapsed();
    a.sample();
    assert!(seen.end.closed(), "still open: {}", seen.summary(10));
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_millis(2500),
        "closed after {took:?}"
    );
    a.finish(
        "preface only, --header-timeout 1",
        &format!("{} after {took:.2?}", seen.summary(4)),
    );
}

/// An h2 connection whose one stream was answered, idle past
/// `--keepalive-timeout` (1 s): GOAWAY NO_ERROR naming that stream, then
/// the close. (Before its first stream a connection has the header
/// timeout instead, as `preface_without_settings_...` shows.)
fn idle_connection_gets_goaway_no_error(driver: &str) {
    let mut a = Attack::start(driver, &["--keepalive-timeout", "1"]);
    let mut c = a.open(&[]);
    c.send_frames(&[get(1, "/small.txt")])
        .expect("write the GET");
    assert_eq!(response(&mut c, 1).status, Some(200));
    let started = Instant::now();
    let seen = c.until_closed(Duration::from_secs(5));
    let took = started.elapsed();
    a.sample();
    let goaways: Vec<(u32, Code)> = seen
        .frames
        .iter()
        .filter_map(|f| f.goaway().map(|(l, c, _)| (l, c)))
        .collect();
    assert!(seen.end.closed(), "still open: {}", seen.summary(10));
    assert!(
        !goaways.is_empty() && goaways.iter().all(|&(_, c)| c == Code::NO_ERROR),
        "{}",
        seen.summary(10)
    );
    assert_eq!(
        goaways.last().map(|g| g.0),
        Some(1),
        "the last GOAWAY's stream"
    );
    assert!(
        took >= Duration::from_millis(800) && took < Duration::from_secs(3),
        "closed after {took:?}"
    );
    a.finish(
        "idle h2 connection, --keepalive-timeout 1",
        &format!("{} after {took:.2?}", seen.summary(6)),
    );
}

// 8. Drain.

/// A download in flight when the server is told to stop (SIGTERM,
/// `--drain-timeout 5`): the client gets GOAWAY NO_ERROR whose last stream
/// id covers its stream, the stream still completes as the client gives
/// credit, then the connection closes and the server exits 0.
fn drain_lets_the_stream_in_flight_finish(driver: &str) {
    let mut a = Attack::start(driver, &["--drain-timeout", "5"]);
    let mut c = a.open(&[]);
    c.send_frame(&get(1, "/large.bin")).expect("GET");
    // The default windows (65,535) let the first 64 KiB out; then the stream
    // waits for credit.
    let mut body = 0usize;
    let mut status = None;
    let first = c.until(ANSWER_WITHIN, |f| {
        if f.stream == 1 && f.kind == kind::HEADERS {
            status = f.status();
        }
        if f.stream == 1 && f.kind == kind::DATA {
            body += f.payload.len();
        }
        body >= 65_535 || f.kind == kind::GOAWAY || f.kind == kind::RST_STREAM
    });
    assert_eq!(status, Some(200), "{}", first.summary(10));
    assert_eq!(body, 65_535, "{}", first.summary(10));
    a.sample();
    a.server.signal(Signal::SIGTERM);
    let mut goaways = Vec::new();
    let seen = c.until(ANSWER_WITHIN, |f| f.kind == kind::GOAWAY);
    match &seen.end {
        End::Matched(f) => goaways.extend(f.goaway().map(|(l, c, _)| (l, c))),
        end => panic!("no GOAWAY after SIGTERM: {end:?} {}", seen.summary(10)),
    }
    // The last sample: once the stream ends the server may exit at once.
    a.sample();
    // Credit for the rest of the file, on the connection and the stream;
    // then read to the stream's end.
    c.send_frames(&[
        Frame::window_update(0, LARGE as u32),
        Frame::window_update(1, LARGE as u32),
    ])
    .expect("WINDOW_UPDATE after the GOAWAY");
    let ended = c.until(Duration::from_secs(10), |f| {
        if let Some((l, code, _)) = f.goaway() {
            goaways.push((l, code));
        }
        if f.stream == 1 && f.kind == kind::DATA {
            body += f.payload.len();
        }
        f.stream == 1 && (f.has(flag::END_STREAM) || f.kind == kind::RST_STREAM)
    });
    match &ended.end {
        End::Matched(f) => assert!(
            f.kind == kind::DATA && f.has(flag::END_STREAM),
            "stream 1 ended with {f}"
        ),
        end => panic!("stream 1 did not end: {end:?} {}", ended.summary(10)),
    }
    assert_eq!(body, LARGE, "the body");
    let closed = c.until_closed(ANSWER_WITHIN);
    for f in &closed.frames {
        goaways.extend(f.goaway().map(|(l, c, _)| (l, c)));
    }
    assert!(
        closed.end.closed(),
        "not closed after the stream: {}",
        closed.summary(10)
    );
    assert!(
        goaways
            .iter()
            .all(|&(last, code)| code == Code::NO_ERROR && last >= 1),
        "GOAWAYs {goaways:?}"
    );
    let status = a
        .server
        .wait_exit(Duration::from_secs(10))
        .expect("the server did not exit after the drain");
    eprintln!(
        "h2_attacks: {driver}: drain during a 1 MiB download: GOAWAYs {goaways:?}, body {body} B, \
         then closed ({:?}), exit {status}; {}",
        closed.end,
        a.rss_line()
    );
    assert_eq!(status.code(), Some(0), "{}", a.server.stderr());
    assert!(
        a.growth() < GROWTH_LIMIT,
        "RSS grew by {:.1} MiB",
        mib(a.growth())
    );
}

driver_tests! {
    stream_past_128_is_refused,
    stream_past_4_is_refused,
    rapid_reset_gets_goaway_enhance_your_calm,
    resets_of_streams_in_flight_pass_max_resets_and_are_calmed,
    resets_of_streams_awaiting_a_body_are_calmed,
    hpack_bomb_is_refused_without_allocating,
    header_list_past_the_limit_gets_431,
    table_size_update_past_the_setting_ends_the_connection,
    table_size_update_past_the_setting_is_a_compression_error,
    continuation_flood_of_large_fields_is_cut,
    continuation_flood_of_empty_frames_is_cut,
    settings_flood_is_bounded,
    ping_flood_is_bounded,
    empty_data_flood_is_calmed,
    window_update_flood_is_bounded,
    zero_window_stream_is_reset_after_the_send_timeout,
    client_that_never_reads_many_large_files_is_bounded,
    preface_without_settings_is_closed_after_the_header_timeout,
    idle_connection_gets_goaway_no_error,
    drain_lets_the_stream_in_flight_finish,
}
