//! Hostile clients on the TLS port: input that is not TLS, a record header
//! larger than TLS allows, a ClientHello dribbled a byte at a time or left
//! half sent on a thousand connections, long handshake messages on many
//! connections past the worker's budget, a client that never reads a 10 MiB
//! answer, data after close_notify, a ClientHello inside an established
//! TLS 1.2 session (in plaintext framing, and as a real renegotiation), and
//! a record cut short by the client's EOF.
//!
//! Every case checks that the server answers the hostile input with an
//! alert or a close (every client read is bounded, so a hang fails rather
//! than sticks), that another client is served a correct `/1k.bin`
//! meanwhile or afterwards ([`served`]), and, where memory is the point,
//! that the server's resident memory (VmRSS of the spawned process, read
//! as `tests/memory.rs` reads it) grows less than a named bound.
//!
//! Each server listens on TLS only with its self-signed identity, pinned
//! by the clients from the ready line's fingerprint, and runs one worker in
//! thread isolation (the harness's default, so the spawned pid is the whole
//! server); every case runs under `--driver uring` and `--driver epoll`
//! (`driver_tests!` at the bottom). Times are asserted only as generous
//! upper bounds. Everything is on 127.0.0.1, and the harness kills each
//! server when its test ends.

#[macro_use]
mod common;

use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::crypto::cipher::{
    AeadKey, InboundOpaqueMessage, MessageDecrypter, MessageEncrypter, OutboundChunks,
    OutboundPlainMessage,
};
use rustls::pki_types::ServerName;
use rustls::{
    AlertDescription, ClientConfig, ClientConnection, ConnectionTrafficSecrets, ContentType,
    ProtocolVersion, StreamOwned, SupportedCipherSuite,
};

use common::tls::{self, pinned, Tls, TLS12, TLS13};
use common::{
    ensure_nofile, nofile_limits, read_until_close, rss_bytes, Builder, TestServer, IO_TIMEOUT,
};

const KIB: usize = 1024;
const MIB: usize = 1024 * KIB;

/// The file every well-behaved client fetches.
const SMALL: &str = "1k.bin";
const SMALL_BYTES: usize = KIB;

/// The first byte of an alert record (RFC 8446 §5.1, `ContentType.alert`).
const ALERT: u8 = 21;
/// The first byte of a handshake record.
const HANDSHAKE: u8 = 22;
/// The first byte of an application-data record.
const APPLICATION_DATA: u8 = 23;

/// Handshake timeout of the cases whose close must come from the input
/// itself, not from the clock: six times [`CLOSED_WITHIN`], so a close by
/// the timer cannot pass for one.
const PATIENT_HANDSHAKE: &str = "30s";
/// How long a connection the server should drop at once (on what it read,
/// or on the client's EOF) may take to close: milliseconds on an idle
/// machine, seconds of margin on a loaded one, and far below every timeout
/// of the server under test (the keep-alive timeout is 75 s by default, the
/// head timeout 20 s).
const CLOSED_WITHIN: Duration = IO_TIMEOUT;

/// Handshake timeout of the dribbled ClientHello.
const DRIBBLE_TIMEOUT: Duration = Duration::from_secs(2);
/// One byte of the dribbled ClientHello every this long: a few hundred
/// bytes take far longer than [`DRIBBLE_TIMEOUT`].
const DRIBBLE_EVERY: Duration = Duration::from_millis(100);
/// The dribbling client must be closed by then: four times its timeout.
const DRIBBLE_CLOSED_WITHIN: Duration = Duration::from_secs(8);

/// Connections that each send half a ClientHello and stop.
const HALF_HELLOS: usize = 1_000;
/// Handshake timeout of the half-hello case: long enough to open every
/// connection and measure before the first is closed (that takes about a
/// second here), short enough for the test to end in a few seconds.
const HALF_HELLO_TIMEOUT: Duration = Duration::from_secs(6);
/// What one half-finished handshake may cost the server in RSS. Measured
/// at b37ae5e (the debug binary `cargo test` builds, thread isolation, one
/// worker): 16.2 KiB a connection under either driver, steady from run to
/// run. The bound is half again that: twice it (32 KiB) would let a server
/// add a buffer of a whole TLS record (16 KiB) per handshake unnoticed.
const HALF_HELLO_BYTES_PER_CONNECTION: u64 = 24 * KIB as u64;
/// File descriptors the half-hello case needs in this process: the client
/// ends of both drivers' runs (libtest runs them in parallel), plus slack;
/// the server, which inherits the limit, holds the other ends.
const HALF_HELLO_NOFILE_NEEDED: u64 = 2 * HALF_HELLOS as u64 + 200;

/// The file the never-reading client asks for: far more than the socket
/// buffers of both ends hold, so the server is left with most of it.
const NEVER_READ_BYTES: usize = 10 * MIB;
/// `--send-timeout` of the never-reading case.
const SEND_TIMEOUT: Duration = Duration::from_secs(2);
/// The most the server's RSS may grow while a client leaves a 10 MiB answer
/// unread: one connection's output budget (256 KiB by default), a file
/// chunk and the TLS records encrypted from them, with wide margin, and
/// far below the answer itself (a server holding it would grow by 10 MiB).
/// Measured at b37ae5e: 0.1 MiB under either driver, after a warm-up that
/// read the file once.
const NEVER_READ_GROWTH_LIMIT: u64 = 4 * MIB as u64;

fn mib(bytes: u64) -> f64 {
    bytes as f64 / MIB as f64
}

/// A byte pattern of `len` bytes: what every docroot file holds.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// `len` bytes that look random (xorshift64*, fixed seed) and are no TLS
/// record: the first is no content type (20..=24).
fn noise(len: usize) -> Vec<u8> {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut out: Vec<u8> = (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect();
    if (20..=24).contains(&out[0]) {
        out[0] ^= 0x80;
    }
    out
}

/// A TLS-only server with the self-signed identity, on I/O `driver`,
/// serving `/1k.bin`.
fn tls_server(driver: &str) -> Builder {
    TestServer::builder()
        .no_bind()
        .driver(driver)
        .tls_self_signed()
        .file(SMALL, pattern(SMALL_BYTES))
}

/// A TLS 1.3 client pinning `server`'s certificate.
fn client(server: &TestServer) -> Arc<ClientConfig> {
    pinned(server.fingerprint(), TLS13)
}

/// A well-behaved client: a fresh TLS 1.3 connection, `GET /1k.bin` with
/// `Connection: close`, answered 200 with the file's bytes. `when` names
/// the moment in a failure.
fn served(server: &TestServer, when: &str) {
    let mut s = tls::connect(&client(server), server.https())
        .unwrap_or_else(|e| panic!("{when}: handshake of a normal client: {e}"));
    let r = tls::request(&mut s, "/1k.bin", "Connection: close\r\n")
        .unwrap_or_else(|e| panic!("{when}: GET /1k.bin: {e}"));
    assert_eq!(r.status, 200, "{when}: {r:?}");
    assert!(
        r.body == pattern(SMALL_BYTES),
        "{when}: /1k.bin body differs ({} bytes)",
        r.body.len()
    );
}

/// A plain TCP connection to `server`'s TLS listener, with bounded reads
/// and writes.
fn raw(server: &TestServer) -> TcpStream {
    common::connect(server.https())
}

/// A TLS handshake over `tcp` with SNI `localhost`.
fn handshake(tcp: TcpStream, config: &Arc<ClientConfig>) -> Tls {
    let name = ServerName::try_from("localhost").expect("a server name");
    let conn = ClientConnection::new(config.clone(), name).expect("a client connection");
    let mut s = StreamOwned::new(conn, tcp);
    while s.conn.is_handshaking() {
        s.conn
            .complete_io(&mut s.sock)
            .unwrap_or_else(|e| panic!("TLS handshake: {e}"));
    }
    s
}

/// A TLS 1.3 connection whose socket receives into a buffer as small as
/// the kernel allows (set before connecting, so the window stays small).
fn small_window_tls(server: &TestServer) -> Tls {
    use socket2::{Domain, Protocol, Socket, Type};
    let sock = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).expect("socket");
    sock.set_recv_buffer_size(4 * KIB).expect("SO_RCVBUF");
    sock.connect(&server.https().into())
        .unwrap_or_else(|e| panic!("connect to {}: {e}", server.https()));
    let tcp: TcpStream = sock.into();
    tcp.set_read_timeout(Some(IO_TIMEOUT))
        .expect("read timeout");
    tcp.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    tcp.set_nodelay(true).expect("nodelay");
    handshake(tcp, &client(server))
}

/// The ClientHello record a fresh rustls client with `config` opens with.
fn client_hello(config: &Arc<ClientConfig>) -> Vec<u8> {
    let name = ServerName::try_from("localhost").expect("a server name");
    let mut conn = ClientConnection::new(config.clone(), name).expect("a client connection");
    let mut hello = Vec::new();
    while conn.wants_write() {
        conn.write_tls(&mut hello).expect("write the ClientHello");
    }
    assert_eq!(hello[0], HANDSHAKE, "a handshake record: {hello:02x?}");
    let len = u16::from_be_bytes([hello[3], hello[4]]) as usize;
    assert_eq!(hello.len(), 5 + len, "one record");
    hello
}

/// Read until the server closes `s` (EOF or a reset) within `limit`, and
/// check that nothing but an alert came before: what the server may say to
/// input it refuses where record types travel in the clear (before a
/// handshake, or in TLS 1.2). Panics, naming `what`, if the connection is
/// still open at `limit`.
fn refused(s: &mut TcpStream, limit: Duration, what: &str) -> Vec<u8> {
    let got = read_until_close(s, limit).unwrap_or_else(|got| {
        panic!(
            "{what}: still open after {limit:?} ({} bytes read)",
            got.len()
        )
    });
    assert!(
        got.is_empty() || got[0] == ALERT,
        "{what}: neither a close nor an alert: {:02x?}",
        &got[..got.len().min(32)]
    );
    got
}

/// Feed what the server sent on an established session to the client's
/// rustls, up to the server's EOF: the plaintext it carried, and how the
/// session ended (close_notify, an alert, a record rustls refused, or a
/// bare EOF).
fn decode(conn: &mut ClientConnection, got: &[u8]) -> (Vec<u8>, String) {
    let mut plain = Vec::new();
    let mut rest = got;
    loop {
        // An empty `rest` reads as the EOF.
        let at_eof = rest.is_empty();
        match conn.read_tls(&mut rest) {
            Ok(_) => {}
            Err(e) => return (plain, format!("read_tls: {e}")),
        }
        if let Err(e) = conn.process_new_packets() {
            return (plain, format!("{e}"));
        }
        let mut chunk = [0u8; 16 * KIB];
        loop {
            match conn.reader().read(&mut chunk) {
                Ok(0) => return (plain, "close_notify".to_owned()),
                Ok(n) => plain.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => return (plain, format!("{e}")),
            }
        }
        if at_eof {
            return (plain, "a bare EOF".to_owned());
        }
    }
}

/// A record header announcing `typ` and one byte more than any TLS record
/// may hold: 2^14 + 2048 + 1 (RFC 5246 §6.2.3; TLS 1.3 allows less still,
/// RFC 8446 §5.2).
fn oversized_record_header(typ: u8) -> [u8; 5] {
    let [hi, lo] = ((1u16 << 14) + 2048 + 1).to_be_bytes();
    [typ, 0x03, 0x03, hi, lo]
}

// ---------------------------------------------------------------------------
// Before the handshake

/// Input that is not TLS: 64 bytes of noise, and a plain HTTP request
/// line. Each is closed (or answered with an alert) at once, long before
/// the handshake timeout, with no HTTP answer; another client is served
/// after each.
fn garbage_instead_of_a_client_hello_is_closed(driver: &str) {
    let server = tls_server(driver)
        .args(&["--tls-handshake-timeout", PATIENT_HANDSHAKE])
        .start();
    for (what, input) in [
        ("64 bytes of noise", noise(64)),
        ("a plain request line", b"GET / HTTP/1.1\r\n".to_vec()),
    ] {
        let mut s = raw(&server);
        s.write_all(&input)
            .unwrap_or_else(|e| panic!("write {what}: {e}"));
        refused(&mut s, CLOSED_WITHIN, what);
        served(&server, &format!("after {what}"));
    }
}

/// A record header announcing 2^14 + 2048 + 1 bytes is refused from the
/// header alone, without waiting for the body that will never come: as the
/// first bytes of a connection (a handshake record), and on an established
/// TLS 1.3 session (an application-data record), where the server must
/// answer nothing before it closes.
fn an_oversized_record_header_is_refused_without_waiting_for_its_body(driver: &str) {
    let server = tls_server(driver)
        .args(&["--tls-handshake-timeout", PATIENT_HANDSHAKE])
        .start();

    let mut s = raw(&server);
    s.write_all(&oversized_record_header(HANDSHAKE))
        .expect("write the record header");
    let got = refused(&mut s, CLOSED_WITHIN, "an oversized first record");
    eprintln!(
        "tls_hostile: {driver}: oversized first record: {}",
        if got.is_empty() { "closed" } else { "alert" }
    );
    served(&server, "after an oversized first record");

    let mut s = tls::connected(&client(&server), server.https());
    assert_eq!(tls::get(&mut s, "/1k.bin", "").status, 200);
    s.sock
        .write_all(&oversized_record_header(APPLICATION_DATA))
        .expect("write the record header");
    let got = read_until_close(&mut s.sock, CLOSED_WITHIN).unwrap_or_else(|got| {
        panic!(
            "an oversized record in a session: still open after {CLOSED_WITHIN:?} ({} bytes read)",
            got.len()
        )
    });
    let (plain, end) = decode(&mut s.conn, &got);
    assert!(plain.is_empty(), "answered {plain:?}");
    eprintln!("tls_hostile: {driver}: oversized record in a session: ended by {end}");
    served(&server, "after an oversized record in a session");
}

/// A real ClientHello (rustls's) sent one byte every 100 ms is cut at the
/// handshake timeout (2 s), long before it is complete, while other
/// clients are served by the same worker.
fn a_client_hello_dribbled_a_byte_at_a_time_is_cut_at_the_handshake_timeout(driver: &str) {
    let timeout = format!("{}s", DRIBBLE_TIMEOUT.as_secs());
    let server = tls_server(driver)
        .args(&["--tls-handshake-timeout", &timeout])
        .start();
    let hello = client_hello(&client(&server));
    let mut s = raw(&server);
    s.set_read_timeout(Some(DRIBBLE_EVERY))
        .expect("read timeout");
    let started = Instant::now();
    let mut sent = 0;
    let mut got = Vec::new();
    let mut others = 0;
    let mut chunk = [0u8; 1024];
    let closed_after = loop {
        let elapsed = started.elapsed();
        assert!(
            elapsed < DRIBBLE_CLOSED_WITHIN,
            "still open after {elapsed:?}, {sent} of {} bytes sent",
            hello.len()
        );
        if sent < hello.len() {
            if s.write_all(&hello[sent..=sent]).is_err() {
                break started.elapsed();
            }
            sent += 1;
        }
        // The read's timeout paces the dribble.
        match s.read(&mut chunk) {
            Ok(0) => break started.elapsed(),
            Ok(n) => got.extend_from_slice(&chunk[..n]),
            Err(e) if common::is_timeout(&e) || e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break started.elapsed(),
        }
        if sent % 5 == 0 {
            served(&server, "while a ClientHello dribbles in");
            others += 1;
        }
    };
    eprintln!(
        "tls_hostile: {driver}: dribbled ClientHello closed after {closed_after:?}, {sent} of {} \
         bytes sent; {others} other clients served meanwhile",
        hello.len()
    );
    assert!(
        sent < hello.len(),
        "the whole ClientHello got in ({sent} bytes over {closed_after:?})"
    );
    assert!(
        got.is_empty() || got[0] == ALERT,
        "neither a close nor an alert: {got:02x?}"
    );
    assert!(others > 0, "no other client tried while the hello dribbled");
    served(&server, "after the dribbled ClientHello");
}

/// Open, nothing to read, not closed: a non-blocking peek would block.
fn still_open(s: &TcpStream) -> bool {
    s.set_nonblocking(true).expect("nonblocking");
    let peeked = s.peek(&mut [0u8; 1]);
    s.set_nonblocking(false).expect("blocking");
    matches!(peeked, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

/// [`HALF_HELLOS`] connections each send the first half of a real
/// ClientHello and stop: each costs the server at most
/// [`HALF_HELLO_BYTES_PER_CONNECTION`] of RSS while it waits, another
/// client is served meanwhile, and every one is closed by the handshake
/// timeout.
fn half_client_hellos_on_many_connections_cost_little_and_time_out(driver: &str) {
    if !ensure_nofile(HALF_HELLO_NOFILE_NEEDED) {
        common::skipped(&format!(
            "RLIMIT_NOFILE {:?} (soft, hard) is below the {HALF_HELLO_NOFILE_NEEDED} this test \
             needs, and could not be raised",
            nofile_limits()
        ));
        return;
    }
    let timeout = format!("{}s", HALF_HELLO_TIMEOUT.as_secs());
    let server = tls_server(driver)
        .args(&["--tls-handshake-timeout", &timeout])
        .start();
    // Settle the server's one-off allocations (the handshake path, the
    // memory cache) before the baseline.
    served(&server, "warm-up");
    let hello = client_hello(&client(&server));
    let half = &hello[..hello.len() / 2];

    let before = rss_bytes(server.pid());
    let opened = Instant::now();
    let mut conns: Vec<TcpStream> = (0..HALF_HELLOS)
        .map(|i| {
            let mut s = raw(&server);
            s.write_all(half)
                .unwrap_or_else(|e| panic!("connection {i}: write half a ClientHello: {e}"));
            s
        })
        .collect();
    let open_took = opened.elapsed();
    // Let the server read every half hello.
    std::thread::sleep(Duration::from_secs(1));
    served(&server, "beside the half handshakes");
    let after = rss_bytes(server.pid());
    let measured_at = opened.elapsed();
    let open = conns.iter().filter(|s| still_open(s)).count();
    let per_conn = after.saturating_sub(before) / HALF_HELLOS as u64;
    eprintln!(
        "tls_hostile: {driver}: {HALF_HELLOS} half ClientHellos ({} of {} bytes) opened in \
         {open_took:?}: RSS before {:.1} MiB, after {:.1} MiB, {per_conn} B per connection",
        half.len(),
        hello.len(),
        mib(before),
        mib(after),
    );
    assert!(
        measured_at < HALF_HELLO_TIMEOUT && open == HALF_HELLOS,
        "measured {measured_at:?} after the first connection, with {open} of {HALF_HELLOS} still \
         open: the per-connection figure counts every half handshake only before the {:?} \
         handshake timeout",
        HALF_HELLO_TIMEOUT
    );

    let deadline = opened + 3 * HALF_HELLO_TIMEOUT;
    for (i, s) in conns.iter_mut().enumerate() {
        let left = deadline.saturating_duration_since(Instant::now());
        refused(
            s,
            left.max(Duration::from_millis(1)),
            &format!("half ClientHello {i}"),
        );
    }
    eprintln!(
        "tls_hostile: {driver}: every half ClientHello closed {:?} after the first was opened",
        opened.elapsed()
    );
    drop(conns);
    served(&server, "after the half handshakes");
    assert!(
        per_conn <= HALF_HELLO_BYTES_PER_CONNECTION,
        "each half-finished handshake costs the server {per_conn} B of RSS (limit \
         {HALF_HELLO_BYTES_PER_CONNECTION} B)"
    );
}

/// Connections that each send most of a 60,000-byte handshake message
/// (longer than a pooled read buffer, within rustls's 64 KiB) and stop.
const LONG_HELLOS: usize = 200;
/// What each sends of it: two full records and part of a third.
const LONG_HELLO_SENT: usize = 40 * KIB;
/// The worker's budget for such messages in that case: room for about a
/// dozen of them.
const LONG_HELLO_BUDGET: usize = MIB;
/// The most the server's RSS may grow with [`LONG_HELLOS`] of them: the
/// budget, each connection's pooled buffer and state (~9 KiB, as the half
/// hellos above), and margin; without the budget each would hold a 64 KiB
/// buffer, 12.5 MiB in all.
const LONG_HELLO_GROWTH_LIMIT: u64 = 6 * MIB as u64;

/// The first [`LONG_HELLO_SENT`] bytes of a ClientHello announcing 60,000
/// bytes, in records of at most 2^14 bytes.
fn long_hello() -> Vec<u8> {
    let mut message = vec![1, 0x00, 0xEA, 0x60];
    message.extend(pattern(LONG_HELLO_SENT - 4 - 3 * 5));
    let mut wire = Vec::new();
    for record in message.chunks(16_384) {
        wire.extend([HANDSHAKE, 3, 1]);
        wire.extend((record.len() as u16).to_be_bytes());
        wire.extend(record);
    }
    wire
}

/// [`LONG_HELLOS`] connections each send most of a long handshake message
/// and stop: the worker holds such messages only within
/// `--tls-handshake-buffer-bytes`, refusing (closing) the connections past
/// it at once, and its RSS grows less than [`LONG_HELLO_GROWTH_LIMIT`];
/// another client is served meanwhile.
fn long_handshake_messages_are_held_within_the_workers_budget(driver: &str) {
    let needed = 2 * LONG_HELLOS as u64 + 200;
    if !ensure_nofile(needed) {
        common::skipped(&format!(
            "RLIMIT_NOFILE {:?} (soft, hard) is below the {needed} this test needs",
            nofile_limits()
        ));
        return;
    }
    let server = tls_server(driver)
        .args(&[
            "--tls-handshake-timeout",
            PATIENT_HANDSHAKE,
            "--tls-handshake-buffer-bytes",
            &LONG_HELLO_BUDGET.to_string(),
        ])
        .start();
    served(&server, "warm-up");
    let hello = long_hello();
    let before = rss_bytes(server.pid());
    let conns: Vec<TcpStream> = (0..LONG_HELLOS)
        .map(|i| {
            let mut s = raw(&server);
            // The server may close a refused one while the rest is written.
            if let Err(e) = s.write_all(&hello) {
                eprintln!("connection {i}: write cut: {e}");
            }
            s
        })
        .collect();
    std::thread::sleep(Duration::from_secs(1));
    served(&server, "beside the long handshakes");
    let after = rss_bytes(server.pid());
    let open = conns.iter().filter(|s| still_open(s)).count();
    let growth = after.saturating_sub(before);
    eprintln!(
        "tls_hostile: {driver}: {LONG_HELLOS} long handshake messages ({LONG_HELLO_SENT} B each): \
         {open} held, {} refused; RSS +{:.1} MiB",
        LONG_HELLOS - open,
        mib(growth)
    );
    let room = LONG_HELLO_BUDGET / (16 * KIB);
    assert!(
        open >= 1 && open <= room,
        "{open} of {LONG_HELLOS} long handshakes held: the budget has room for 1 to {room}"
    );
    assert!(
        growth <= LONG_HELLO_GROWTH_LIMIT,
        "RSS grew {:.1} MiB (limit {:.1} MiB)",
        mib(growth),
        mib(LONG_HELLO_GROWTH_LIMIT)
    );
    drop(conns);
    served(&server, "after the long handshakes");
}

// ---------------------------------------------------------------------------
// On an established session

/// The most a TCP send buffer may autotune to (`net.ipv4.tcp_wmem`'s third
/// field; 4 MiB by default).
fn tcp_wmem_max() -> Option<usize> {
    let text = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").ok()?;
    text.split_whitespace().nth(2)?.parse().ok()
}

/// A client asks for a 10 MiB file over TLS and never reads: the server's
/// RSS grows less than [`NEVER_READ_GROWTH_LIMIT`], other clients are
/// served meanwhile, and the send timeout (2 s) closes the connection long
/// before the answer is through (what the client finds when it finally
/// reads: a close after far less than 10 MiB).
fn a_client_that_never_reads_a_10m_answer_is_bounded_and_cut_by_the_send_timeout(driver: &str) {
    let send_buffer_max = tcp_wmem_max();
    if send_buffer_max.is_none_or(|max| max >= NEVER_READ_BYTES / 2) {
        common::skipped(&format!(
            "net.ipv4.tcp_wmem allows a send buffer of {send_buffer_max:?} bytes: the kernel \
             could take most of the {NEVER_READ_BYTES}-byte answer, and a client not reading \
             could not be told from one that has read it"
        ));
        return;
    }
    let send_timeout = format!("{}s", SEND_TIMEOUT.as_secs());
    let server = tls_server(driver)
        .file("10m.bin", pattern(NEVER_READ_BYTES))
        .args(&["--send-timeout", &send_timeout])
        .start();
    // Warm-up: the whole file once, read to its end, so the file path's
    // buffers exist before the baseline.
    let mut s = tls::connected(&client(&server), server.https());
    let r = tls::get(&mut s, "/10m.bin", "Connection: close\r\n");
    assert_eq!(r.status, 200, "{r:?}");
    assert!(r.body == pattern(NEVER_READ_BYTES), "10m.bin body differs");
    drop(s);
    served(&server, "warm-up");

    let before = rss_bytes(server.pid());
    let mut max = before;
    let mut s = small_window_tls(&server);
    s.write_all(b"GET /10m.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .and_then(|()| s.flush())
        .expect("write the request");
    let asked = Instant::now();
    let mut others = 0;
    while asked.elapsed() < SEND_TIMEOUT + Duration::from_secs(1) {
        served(&server, "while a client does not read");
        others += 1;
        max = max.max(rss_bytes(server.pid()));
        std::thread::sleep(Duration::from_millis(100));
    }
    let growth = max.saturating_sub(before);
    let got = read_until_close(&mut s.sock, 4 * SEND_TIMEOUT).unwrap_or_else(|got| {
        panic!(
            "the never-reading client is still open {:?} after its request ({} bytes read)",
            asked.elapsed(),
            got.len()
        )
    });
    eprintln!(
        "tls_hostile: {driver}: client not reading a 10 MiB answer: RSS before {:.1} MiB, max \
         {:.1} MiB, growth {:.2} MiB; {} bytes reached it before the close; {others} other \
         clients served meanwhile",
        mib(before),
        mib(max),
        mib(growth),
        got.len(),
    );
    assert!(
        got.len() < NEVER_READ_BYTES,
        "the whole answer ({} bytes) went through: the send timeout did not cut it",
        got.len()
    );
    assert!(
        growth <= NEVER_READ_GROWTH_LIMIT,
        "server RSS grew by {:.2} MiB (limit {:.1} MiB) under one client not reading a 10 MiB \
         answer",
        mib(growth),
        mib(NEVER_READ_GROWTH_LIMIT),
    );
    served(&server, "after the never-reading client");
}

/// After a request and its answer the client sends close_notify, then more:
/// a request (a valid record of the session), or noise. RFC 8446 §6.1: data
/// after a closure alert MUST be ignored, so nothing is answered; the
/// server closes at once, and the next client is served.
fn data_after_close_notify_is_ignored_and_the_connection_closed(driver: &str) {
    let server = tls_server(driver).start();
    for what in ["a request", "noise"] {
        let mut s = tls::connected(&client(&server), server.https());
        assert_eq!(tls::get(&mut s, "/1k.bin", "").status, 200);
        s.conn.send_close_notify();
        if what == "a request" {
            // rustls still encrypts application data after close_notify.
            s.conn
                .writer()
                .write_all(b"GET /1k.bin HTTP/1.1\r\nHost: localhost\r\n\r\n")
                .expect("encrypt a request");
        }
        while s.conn.wants_write() {
            s.conn
                .write_tls(&mut s.sock)
                .expect("write close_notify and what follows");
        }
        if what == "noise" {
            // The server may have closed already: a failed write is fine.
            let _ = s.sock.write_all(&noise(64));
        }
        let got = read_until_close(&mut s.sock, CLOSED_WITHIN).unwrap_or_else(|got| {
            panic!(
                "{what} after close_notify: still open after {CLOSED_WITHIN:?} ({} bytes read)",
                got.len()
            )
        });
        let (plain, end) = decode(&mut s.conn, &got);
        assert!(
            plain.is_empty(),
            "{what} after close_notify: answered {:?}",
            String::from_utf8_lossy(&plain)
        );
        eprintln!("tls_hostile: {driver}: {what} after close_notify: ended by {end}");
        served(&server, &format!("after {what} after close_notify"));
    }
}

/// A TLS 1.2 session, one request answered, then a ClientHello record in
/// plaintext framing (what a client starting over would send): the server
/// cannot read it as a record of the session, and answers with an alert
/// (`bad_record_mac`) or a close; other clients are served.
fn a_plaintext_client_hello_inside_a_tls12_session_is_refused(driver: &str) {
    let server = tls_server(driver).start();
    let config = pinned(server.fingerprint(), TLS12);
    let mut s = tls::connected(&config, server.https());
    assert_eq!(s.conn.protocol_version(), Some(ProtocolVersion::TLSv1_2));
    assert_eq!(tls::get(&mut s, "/1k.bin", "").status, 200);
    s.sock
        .write_all(&client_hello(&config))
        .expect("write the ClientHello");
    // TLS 1.2 encrypts an alert's body, not its record type.
    let got = refused(
        &mut s.sock,
        CLOSED_WITHIN,
        "a plaintext ClientHello in a session",
    );
    let (plain, end) = decode(&mut s.conn, &got);
    assert!(plain.is_empty(), "answered {plain:?}");
    eprintln!("tls_hostile: {driver}: plaintext ClientHello in a TLS 1.2 session: ended by {end}");
    served(&server, "after a plaintext ClientHello in a session");
}

/// An established TLS 1.2 session taken out of rustls, protecting records
/// by hand with its extracted keys: how a client sends what rustls never
/// would, a ClientHello inside the session (a renegotiation).
struct Tls12Session {
    sock: TcpStream,
    encrypter: Box<dyn MessageEncrypter>,
    decrypter: Box<dyn MessageDecrypter>,
    write_seq: u64,
    read_seq: u64,
}

/// The key and IV of one direction of a session.
fn key_and_iv(secrets: ConnectionTrafficSecrets) -> (AeadKey, Vec<u8>) {
    match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv }
        | ConnectionTrafficSecrets::Aes256Gcm { key, iv }
        | ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => (key, iv.as_ref().to_vec()),
        _ => panic!("an AEAD this test does not know"),
    }
}

impl Tls12Session {
    /// Take over `s`, a TLS 1.2 session of a config with
    /// `enable_secret_extraction`.
    fn take_over(s: Tls) -> Tls12Session {
        let Some(SupportedCipherSuite::Tls12(suite)) = s.conn.negotiated_cipher_suite() else {
            panic!("not a TLS 1.2 session");
        };
        // The extracted IV is the fixed (implicit) part, then the explicit
        // nonce's (RFC 5288 §3 for GCM; all implicit for ChaCha20, RFC 7905).
        let fixed = suite.aead_alg.key_block_shape().fixed_iv_len;
        let StreamOwned { conn, sock } = s;
        let secrets = conn
            .dangerous_extract_secrets()
            .expect("the session's secrets");
        let (write_seq, tx) = secrets.tx;
        let (read_seq, rx) = secrets.rx;
        let (key, iv) = key_and_iv(tx);
        let encrypter = suite.aead_alg.encrypter(key, &iv[..fixed], &iv[fixed..]);
        let (key, iv) = key_and_iv(rx);
        let decrypter = suite.aead_alg.decrypter(key, &iv[..fixed]);
        Tls12Session {
            sock,
            encrypter,
            decrypter,
            write_seq,
            read_seq,
        }
    }

    /// Encrypt `payload` into one record of type `typ` and send it.
    fn send(&mut self, typ: ContentType, payload: &[u8]) {
        let msg = OutboundPlainMessage {
            typ,
            version: ProtocolVersion::TLSv1_2,
            payload: OutboundChunks::Single(payload),
        };
        let record = self
            .encrypter
            .encrypt(msg, self.write_seq)
            .expect("encrypt a record")
            .encode();
        self.write_seq += 1;
        self.sock.write_all(&record).expect("write a record");
    }

    /// Decrypt every whole record in `bytes`: (type, plaintext) each; what
    /// is left of a record cut short is returned untouched.
    fn open(&mut self, mut bytes: &[u8]) -> (Vec<(ContentType, Vec<u8>)>, usize) {
        let mut records = Vec::new();
        while bytes.len() >= 5 {
            let len = u16::from_be_bytes([bytes[3], bytes[4]]) as usize;
            if bytes.len() < 5 + len {
                break;
            }
            let typ = ContentType::from(bytes[0]);
            let version = ProtocolVersion::from(u16::from_be_bytes([bytes[1], bytes[2]]));
            let mut payload = bytes[5..5 + len].to_vec();
            let plain = self
                .decrypter
                .decrypt(
                    InboundOpaqueMessage::new(typ, version, &mut payload),
                    self.read_seq,
                )
                .unwrap_or_else(|e| panic!("decrypt a {typ:?} record of the server: {e}"));
            self.read_seq += 1;
            records.push((plain.typ, plain.payload.to_vec()));
            bytes = &bytes[5 + len..];
        }
        (records, bytes.len())
    }
}

/// A TLS 1.2 session of a config that lets the test take it over, one
/// request answered on it, and a renegotiation's ClientHello (a handshake
/// message) ready to send inside it.
fn tls12_session_and_a_client_hello(server: &TestServer) -> (Tls12Session, Vec<u8>) {
    let hello = client_hello(&pinned(server.fingerprint(), TLS12));
    let mut config = Arc::unwrap_or_clone(pinned(server.fingerprint(), TLS12));
    config.enable_secret_extraction = true;
    let mut s = tls::connected(&Arc::new(config), server.https());
    assert_eq!(s.conn.protocol_version(), Some(ProtocolVersion::TLSv1_2));
    assert_eq!(tls::get(&mut s, "/1k.bin", "").status, 200);
    // The handshake message, without the plaintext record header.
    let message = hello[5..].to_vec();
    (Tls12Session::take_over(s), message)
}

/// `GET /1k.bin` with `Connection: close`, as the session's next record.
const GET_AND_CLOSE: &[u8] =
    b"GET /1k.bin HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";

/// A TLS 1.2 session, one request answered, then a real renegotiation (a
/// ClientHello as a handshake message inside the session) and, right
/// behind it, `GET /1k.bin` with `Connection: close`. The server must not
/// renegotiate: no handshake record comes back, only alerts (a warning
/// `no_renegotiation`, RFC 5246 §7.4.1.2, or a fatal one followed by
/// nothing) and the answer to the request, which, if it comes, is correct;
/// then the close, within a few seconds. Other clients are served.
fn a_renegotiation_inside_a_tls12_session_is_not_performed(driver: &str) {
    let server = tls_server(driver).start();
    let (mut session, hello) = tls12_session_and_a_client_hello(&server);
    session.send(ContentType::Handshake, &hello);
    session.send(ContentType::ApplicationData, GET_AND_CLOSE);
    let got = read_until_close(&mut session.sock, CLOSED_WITHIN).unwrap_or_else(|got| {
        panic!(
            "still open {CLOSED_WITHIN:?} after a renegotiation and Connection: close ({} \
             bytes)",
            got.len()
        )
    });
    let (records, partial) = session.open(&got);
    assert_eq!(partial, 0, "a record cut short: {got:02x?}");
    let mut alerts = Vec::new();
    let mut answer = Vec::new();
    for (typ, plain) in &records {
        match typ {
            ContentType::Alert => alerts.push((plain[0], AlertDescription::from(plain[1]))),
            ContentType::ApplicationData => answer.extend_from_slice(plain),
            other => panic!("a {other:?} record in answer to a renegotiation: {plain:02x?}"),
        }
    }
    eprintln!(
        "tls_hostile: {driver}: renegotiation then a request in a TLS 1.2 session: alerts \
         {alerts:?}, {} bytes answered",
        answer.len()
    );
    let fatal = alerts.iter().any(|&(level, _)| level == 2);
    for &(level, description) in &alerts {
        assert!(
            level == 2
                || description == AlertDescription::NoRenegotiation
                || description == AlertDescription::CloseNotify,
            "a warning alert {description:?}"
        );
    }
    if !fatal && !answer.is_empty() {
        // Refused with a warning: the session goes on.
        let r = common::read_response(&mut &answer[..]);
        assert_eq!(r.status, 200, "{r:?}");
        assert!(r.body == pattern(SMALL_BYTES), "/1k.bin body differs");
    }
    served(&server, "after a renegotiation");
}

/// The refusal of a renegotiation is sent when it is decided, not with
/// whatever the server sends next: a client that asked and waits for the
/// answer gets an alert or a close within a few seconds.
fn a_renegotiation_inside_a_tls12_session_is_refused_at_once(driver: &str) {
    let server = tls_server(driver).start();
    let (mut session, hello) = tls12_session_and_a_client_hello(&server);
    session.send(ContentType::Handshake, &hello);
    let (got, closed) = match read_until_close(&mut session.sock, CLOSED_WITHIN) {
        Ok(bytes) => (bytes, true),
        Err(bytes) => (bytes, false),
    };
    let (records, partial) = session.open(&got);
    assert_eq!(partial, 0, "a record cut short: {got:02x?}");
    let alerts: Vec<(u8, AlertDescription)> = records
        .iter()
        .map(|(typ, plain)| match typ {
            ContentType::Alert => (plain[0], AlertDescription::from(plain[1])),
            other => panic!("a {other:?} record in answer to a renegotiation: {plain:02x?}"),
        })
        .collect();
    eprintln!(
        "tls_hostile: {driver}: renegotiation in a TLS 1.2 session: alerts {alerts:?}, {}",
        if closed { "closed" } else { "still open" }
    );
    assert!(
        closed || !alerts.is_empty(),
        "neither an alert nor a close within {CLOSED_WITHIN:?} of a renegotiation"
    );
    served(&server, "after a renegotiation");
}

/// A TLS 1.3 session, one request answered, then an application-data record
/// header announcing 100 bytes, 10 of them, and the client's EOF: the
/// server closes at once (not at a timeout), answering nothing; other
/// clients are served.
fn a_record_cut_short_by_eof_is_closed(driver: &str) {
    let server = tls_server(driver).start();
    let mut s = tls::connected(&client(&server), server.https());
    assert_eq!(tls::get(&mut s, "/1k.bin", "").status, 200);
    s.sock
        .write_all(&[APPLICATION_DATA, 0x03, 0x03, 0x00, 100])
        .and_then(|()| s.sock.write_all(&noise(10)))
        .expect("write a truncated record");
    s.sock.shutdown(Shutdown::Write).expect("shutdown(SHUT_WR)");
    let got = read_until_close(&mut s.sock, CLOSED_WITHIN).unwrap_or_else(|got| {
        panic!(
            "a truncated record then EOF: still open after {CLOSED_WITHIN:?} ({} bytes read)",
            got.len()
        )
    });
    let (plain, end) = decode(&mut s.conn, &got);
    assert!(plain.is_empty(), "answered {plain:?}");
    eprintln!("tls_hostile: {driver}: truncated record then EOF: ended by {end}");
    served(&server, "after a truncated record");
}

// ---------------------------------------------------------------------------
// Counted

/// Each failed handshake is counted by why it failed
/// (`servery_tls_failures_total{reason}`): a client that says nothing past
/// the handshake timeout, one that leaves inside its ClientHello, one whose
/// record is refused; and the total (`servery_tls_failed_total`) is their sum.
fn failed_handshakes_are_counted_by_reason(driver: &str) {
    let server = tls_server(driver)
        .admin()
        .args(&["--workers", "1", "--tls-handshake-timeout", "1s"])
        .start();
    let config = client(&server);
    // Timeout: connect and say nothing.
    let mut silent = raw(&server);
    // Closed: half a ClientHello, then leave.
    let hello = client_hello(&config);
    let mut gone = raw(&server);
    gone.write_all(&hello[..hello.len() / 2])
        .expect("half a hello");
    gone.shutdown(Shutdown::Both).expect("shutdown");
    drop(gone);
    // Refused: a record longer than TLS allows.
    let mut big = raw(&server);
    big.write_all(&oversized_record_header(HANDSHAKE))
        .expect("write the record header");
    let _ = read_until_close(&mut big, CLOSED_WITHIN);
    let _ = read_until_close(&mut silent, CLOSED_WITHIN);
    let want = [("timeout", 1.0), ("closed", 1.0), ("refused", 1.0)];
    let text = server.wait_metrics(Duration::from_secs(10), |t| {
        want.iter().all(|(reason, n)| {
            common::metric(
                t,
                &format!("servery_tls_failures_total{{worker=\"0\",reason=\"{reason}\"}}"),
            ) == Some(*n)
        })
    });
    for (reason, n) in want {
        assert_eq!(
            common::metric(
                &text,
                &format!("servery_tls_failures_total{{worker=\"0\",reason=\"{reason}\"}}")
            ),
            Some(n),
            "{reason}:\n{text}"
        );
    }
    assert_eq!(common::metric(&text, "servery_tls_failed_total"), Some(3.0));
    served(&server, "after the failed handshakes");
}

/// An idle TLS connection is counted parked (`servery_tls_parked`) while it
/// waits, and no longer once it is used again or closed.
fn an_idle_tls_connection_is_counted_parked(driver: &str) {
    let server = tls_server(driver).admin().start();
    let mut s = tls::connected(&client(&server), server.https());
    assert_eq!(tls::get(&mut s, "/1k.bin", "").status, 200);
    let parked = |n: f64| {
        let text = server.wait_metrics(Duration::from_secs(10), |t| {
            common::metric(t, "servery_tls_parked") == Some(n)
        });
        assert_eq!(
            common::metric(&text, "servery_tls_parked"),
            Some(n),
            "{text}"
        );
    };
    parked(1.0);
    drop(s);
    parked(0.0);
}

driver_tests! {
    failed_handshakes_are_counted_by_reason,
    an_idle_tls_connection_is_counted_parked,
    garbage_instead_of_a_client_hello_is_closed,
    an_oversized_record_header_is_refused_without_waiting_for_its_body,
    a_client_hello_dribbled_a_byte_at_a_time_is_cut_at_the_handshake_timeout,
    half_client_hellos_on_many_connections_cost_little_and_time_out,
    long_handshake_messages_are_held_within_the_workers_budget,
    a_client_that_never_reads_a_10m_answer_is_bounded_and_cut_by_the_send_timeout,
    data_after_close_notify_is_ignored_and_the_connection_closed,
    a_plaintext_client_hello_inside_a_tls12_session_is_refused,
    a_renegotiation_inside_a_tls12_session_is_not_performed,
    a_renegotiation_inside_a_tls12_session_is_refused_at_once,
    a_record_cut_short_by_eof_is_closed,
}
