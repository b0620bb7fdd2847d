//! The access log against the real binary: every format and field, what a
//! hostile client can put in a line, whole lines from 4 workers in both
//! isolation modes, SIGUSR1 after logrotate's rename, a log nobody reads
//! (a FIFO), and the flush at drain. These tests send signals, so they
//! live in their own test binary.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::h2::{tls_config, Client, Exchange};
use common::tls::{connected, get as tls_get, pinned, TLS12, TLS13};
use common::{metric, rss_bytes, wait_until, Signal, TestServer};

const LIMIT: Duration = Duration::from_secs(10);

/// A log file in a temp dir the test keeps.
fn log_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    (dir, path)
}

fn start(path: &Path, extra: &[&str]) -> TestServer {
    let mut args = vec![
        "--access-log".to_string(),
        path.display().to_string(),
        // Lines reach the file within 50 ms of their request.
        "--access-log-flush".into(),
        "0.05".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    TestServer::builder()
        .file("a.txt", "hello\n")
        .file("big.bin", vec![b'b'; 100_000])
        .args(&args)
        .start()
}

/// The lines of `path` once it holds at least `n`.
fn lines(path: &Path, n: usize) -> Vec<String> {
    let mut text = String::new();
    let ok = wait_until(LIMIT, || {
        text = std::fs::read_to_string(path).unwrap_or_default();
        text.lines().count() >= n
    });
    assert!(ok, "wanted {n} lines in {}, have:\n{text}", path.display());
    text.lines().map(str::to_owned).collect()
}

fn json(line: &str) -> serde_json::Value {
    serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line}"))
}

fn raw(addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(bytes).unwrap();
    let mut out = Vec::new();
    let _ = s.read_to_end(&mut out);
    out
}

#[test]
fn combined_is_nginxs_line_for_each_request_in_order() {
    let (_dir, path) = log_path();
    let server = start(&path, &[]);
    let addr = server.addr();
    raw(
        addr,
        b"GET /a.txt?x=1 HTTP/1.1\r\nHost: h\r\nReferer: http://r/\r\nUser-Agent: ua/1\r\n\r\n\
          HEAD /a.txt HTTP/1.1\r\nHost: h\r\n\r\n\
          GET /missing HTTP/1.0\r\n\r\n",
    );
    let got = lines(&path, 3);
    let re = |l: &str| {
        // 127.0.0.1 - - [01/Dec/2026:16:48:34 +0000] "..." ...
        let (addr, rest) = l.split_once(" - - [").unwrap();
        let (time, rest) = rest.split_once("] ").unwrap();
        assert_eq!(addr, "127.0.0.1");
        assert_eq!(time.len(), "01/Dec/2026:16:48:34 +0000".len(), "{time}");
        assert!(time.ends_with(" +0000"));
        rest.to_owned()
    };
    assert_eq!(
        re(&got[0]),
        "\"GET /a.txt?x=1 HTTP/1.1\" 200 6 \"http://r/\" \"ua/1\""
    );
    assert_eq!(re(&got[1]), "\"HEAD /a.txt HTTP/1.1\" 200 0 \"-\" \"-\"");
    assert_eq!(re(&got[2]), "\"GET /missing HTTP/1.0\" 404 14 \"-\" \"-\"");
}

#[test]
fn json_has_every_field_over_http1_http2_and_tls() {
    let (_dir, path) = log_path();
    let server = TestServer::builder()
        .file("a.txt", "hello\n")
        .tls_bind("127.0.0.1:0")
        .tls_self_signed()
        .args(&[
            "--access-log",
            path.to_str().unwrap(),
            "--access-log-format",
            "json",
            "--access-log-flush",
            "0.05",
        ])
        .start();
    // HTTP/1.1 in the clear.
    server.get("/a.txt");
    let l = json(&lines(&path, 1)[0]);
    for key in [
        "time_iso8601",
        "time_local",
        "remote_addr",
        "remote_port",
        "request_method",
        "request_uri",
        "server_protocol",
        "request",
        "status",
        "body_bytes_sent",
        "request_time_us",
        "http_referer",
        "http_user_agent",
        "host",
        "site",
        "tls_version",
        "tls_resumed",
        "worker",
        "connection",
    ] {
        assert!(l.get(key).is_some(), "{key} missing: {l}");
    }
    assert_eq!(l["remote_addr"], "127.0.0.1");
    assert!(l["remote_port"].as_u64().unwrap() > 0);
    assert_eq!(l["request_method"], "GET");
    assert_eq!(l["request_uri"], "/a.txt");
    assert_eq!(l["server_protocol"], "HTTP/1.1");
    assert_eq!(l["status"], 200);
    assert_eq!(l["body_bytes_sent"], 6);
    assert!(l["request_time_us"].as_u64().is_some());
    assert_eq!(l["tls_version"], serde_json::Value::Null);
    assert_eq!(l["worker"], 0);
    assert_eq!(
        l["site"], "default",
        "the one site of a config without [[site]]"
    );
    let t = l["time_iso8601"].as_str().unwrap();
    assert!(
        t.len() == 20 && t.ends_with('Z') && t.as_bytes()[10] == b'T',
        "{t}"
    );

    // HTTP/1.1 over TLS 1.2, then a resumed TLS 1.3 session.
    let fp = server.fingerprint().to_owned();
    let mut s = connected(&pinned(&fp, TLS12), server.https());
    tls_get(&mut s, "/a.txt", "User-Agent: tls12\r\n");
    drop(s);
    let l = json(&lines(&path, 2)[1]);
    assert_eq!(l["tls_version"], "TLSv1.2");
    assert_eq!(l["tls_resumed"], false);
    assert_eq!(l["host"], "localhost");
    assert_eq!(l["http_user_agent"], "tls12");
    let config = pinned(&fp, TLS13);
    for _ in 0..2 {
        let mut s = connected(&config, server.https());
        tls_get(&mut s, "/a.txt", "");
    }
    let got = lines(&path, 4);
    let (first, second) = (json(&got[2]), json(&got[3]));
    assert_eq!(first["tls_version"], "TLSv1.3");
    assert_eq!(second["tls_resumed"], true, "{second}");
    assert_ne!(first["connection"], second["connection"]);

    // HTTP/2 by prior knowledge, and over TLS.
    let mut c = Client::connect(server.addr());
    let a = c.send(&Exchange::get("/a.txt?v=2").field("user-agent", "h2c"));
    assert_eq!(a.status, 200);
    let l = json(&lines(&path, 5)[4]);
    assert_eq!(l["server_protocol"], "HTTP/2.0");
    assert_eq!(l["request"], "GET /a.txt?v=2 HTTP/2.0");
    assert_eq!(l["http_user_agent"], "h2c");
    assert_eq!(l["body_bytes_sent"], 6);
    let mut c = Client::tls(server.https(), tls_config(&fp, &[b"h2"])).unwrap();
    c.send(&Exchange::get("/missing"));
    let l = json(&lines(&path, 6)[5]);
    assert_eq!(l["server_protocol"], "HTTP/2.0");
    assert_eq!(l["status"], 404);
    assert_eq!(l["tls_version"], "TLSv1.3");
}

#[test]
fn a_template_names_the_fields_it_wants() {
    let (_dir, path) = log_path();
    let server = start(
        &path,
        &[
            "--access-log-format",
            "$request_method ${request_uri}|$status|$body_bytes_sent|$host|$worker|$$",
        ],
    );
    raw(
        server.addr(),
        b"GET /big.bin HTTP/1.1\r\nHost: example.com\r\nConnection: close\r\n\r\n",
    );
    assert_eq!(
        lines(&path, 1)[0],
        "GET /big.bin|200|100000|example.com|0|$"
    );
}

#[test]
fn a_bad_format_or_path_is_a_config_error_naming_the_flag() {
    let out = std::process::Command::new(common::BIN)
        .args(["check-config", ".", "--access-log-format", "$status $who"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--access-log-format: unknown field $who; fields are $time_iso8601"),
        "{err}"
    );
    let out = std::process::Command::new(common::BIN)
        .args(["check-config", ".", "--access-log", "/no/such/dir/a.log"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr)
        .contains("--access-log: the directory /no/such/dir does not exist"));
}

#[test]
fn hostile_agents_and_targets_cannot_forge_lines() {
    let (_dir, path) = log_path();
    let server = start(&path, &[]);
    // Quotes, backslashes, a tab and bytes past ASCII in the agent and the
    // referer; a quote in the target. (CR, LF and other controls cannot be
    // in a field value: the parser refuses them, and that 400 is logged.)
    raw(
        server.addr(),
        b"GET /a.txt?q=\"x\\ HTTP/1.1\r\nHost: h\r\nReferer: \"\t[31m\\\r\n\
          User-Agent: a\" 200 1 \"-\" \"fake\xff\xfe\r\nConnection: close\r\n\r\n",
    );
    raw(
        server.addr(),
        b"GET /a.txt HTTP/1.1\r\nHost: h\r\nUser-Agent: a\nb\r\n\r\n",
    );
    let got = lines(&path, 2);
    assert_eq!(
        std::fs::read(&path)
            .unwrap()
            .iter()
            .filter(|&&b| b == b'\n')
            .count(),
        2
    );
    assert!(
        got[0].ends_with(
            "\"GET /a.txt?q=\\x22x\\x5C HTTP/1.1\" 200 6 \"\\x22\\x09[31m\\x5C\" \"a\\x22 200 1 \\x22-\\x22 \\x22fake\\xFF\\xFE\""
        ),
        "{}",
        got[0]
    );
    assert!(got[1].contains("\"- - HTTP/1.1\" 400 "), "{}", got[1]);
    // Every byte of every line is printable ASCII.
    for l in &got {
        assert!(l.bytes().all(|b| (0x20..0x7f).contains(&b)), "{l}");
    }
}

/// `n` requests from `threads` keep-alive clients, each on its own
/// connection; the paths say who asked.
fn hammer(addr: SocketAddr, threads: usize, n: usize) {
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(LIMIT)).unwrap();
                for i in 0..n {
                    let req = format!(
                        "GET /a.txt?client={t}&i={i}&pad={} HTTP/1.1\r\nHost: h\r\nUser-Agent: {}\r\n\r\n",
                        "p".repeat(i % 97),
                        "u".repeat(200)
                    );
                    s.write_all(req.as_bytes()).unwrap();
                    common::read_response(&mut s);
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
}

fn whole_lines_from_four_workers(isolation: &str) {
    let (_dir, path) = log_path();
    let server = TestServer::builder()
        .file("a.txt", "hello\n")
        .isolation(isolation)
        .args(&[
            "--workers",
            "4",
            "--listener",
            "shared",
            "--access-log",
            path.to_str().unwrap(),
            // Small buffers: many hand-offs, many writes to interleave.
            "--access-log-buffer",
            "4096",
            "--access-log-flush",
            "0.05",
        ])
        .start();
    let (threads, n) = (8, 300);
    hammer(server.addr(), threads, n);
    let got = lines(&path, threads * n);
    assert_eq!(got.len(), threads * n);
    let mut seen = std::collections::HashSet::new();
    for l in &got {
        // Whole: one request line, one status, the whole agent.
        let q = l.split('"').nth(1).unwrap_or_else(|| panic!("torn: {l}"));
        assert!(
            q.starts_with("GET /a.txt?client=") && q.ends_with(" HTTP/1.1"),
            "torn: {l}"
        );
        assert!(
            l.ends_with(&format!("\"{}\"", "u".repeat(200))),
            "torn: {l}"
        );
        assert!(seen.insert(q.to_owned()), "twice: {l}");
    }
}

#[test]
fn lines_are_whole_under_four_worker_threads() {
    whole_lines_from_four_workers("thread");
}

#[test]
fn lines_are_whole_under_four_worker_processes() {
    whole_lines_from_four_workers("process");
}

fn reopen_after_rename_loses_nothing(isolation: &str) {
    let (dir, path) = log_path();
    let server = TestServer::builder()
        .file("a.txt", "hello\n")
        .isolation(isolation)
        .args(&[
            "--workers",
            "2",
            "--access-log",
            path.to_str().unwrap(),
            "--access-log-flush",
            "0.05",
        ])
        .start();
    let addr = server.addr();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let load: Vec<_> = (0..2)
        .map(|_| {
            let (stop, sent) = (stop.clone(), sent.clone());
            std::thread::spawn(move || {
                let mut s = std::net::TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(LIMIT)).unwrap();
                while !stop.load(Ordering::Relaxed) {
                    s.write_all(b"GET /a.txt HTTP/1.1\r\nHost: h\r\n\r\n")
                        .unwrap();
                    common::read_response(&mut s);
                    sent.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    // logrotate: rename, then `postrotate` sends SIGUSR1 to the server.
    let rotated = dir.path().join("access.log.1");
    assert!(wait_until(LIMIT, || sent.load(Ordering::Relaxed) > 200));
    std::fs::rename(&path, &rotated).unwrap();
    server.signal(Signal::SIGUSR1);
    assert!(
        wait_until(LIMIT, || path.exists()),
        "no new file after SIGUSR1"
    );
    let at_reopen = sent.load(Ordering::Relaxed);
    assert!(wait_until(LIMIT, || sent.load(Ordering::Relaxed) > at_reopen + 200));
    stop.store(true, Ordering::Relaxed);
    for h in load {
        h.join().unwrap();
    }
    let total = sent.load(Ordering::Relaxed) as usize;
    let count = |p: &Path| {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .count()
    };
    let ok = wait_until(LIMIT, || count(&rotated) + count(&path) == total);
    assert!(
        ok,
        "{} + {} lines for {total} requests",
        count(&rotated),
        count(&path)
    );
    assert!(
        count(&path) >= 200,
        "the new file took {} lines",
        count(&path)
    );
    // The server still serves after it.
    assert_eq!(server.get("/a.txt").status, 200);
}

#[test]
fn sigusr1_reopens_after_a_rename_and_no_line_is_lost_threads() {
    reopen_after_rename_loses_nothing("thread");
}

#[test]
fn sigusr1_reopens_after_a_rename_and_no_line_is_lost_processes() {
    reopen_after_rename_loses_nothing("process");
}

#[test]
fn a_log_nobody_reads_does_not_slow_serving_and_drops_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    assert!(std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // The reader end is open (so the server can open its end) and never
    // read: the writer blocks once the pipe's 64 KiB are full.
    let _reader = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(&fifo)
        .unwrap();
    let server = TestServer::builder()
        .file("a.txt", "hello\n")
        .admin()
        .args(&[
            "--access-log",
            fifo.to_str().unwrap(),
            "--access-log-buffer",
            "4096",
            "--access-log-backlog",
            "65536",
            "--access-log-flush",
            "0.05",
        ])
        .start();
    let rss_before = rss_bytes(server.pid());
    let started = Instant::now();
    hammer(server.addr(), 4, 2500);
    let took = started.elapsed();
    // Served all 10,000 (hammer reads every response); not at the pace of
    // a disk that never drains.
    assert!(took < Duration::from_secs(60), "{took:?}");
    let text = server.wait_metrics(LIMIT, |m| {
        metric(m, "servery_access_log_dropped_total").unwrap_or(0.0) > 0.0
    });
    let dropped = metric(&text, "servery_access_log_dropped_total").unwrap();
    let written = metric(&text, "servery_access_log_lines_total").unwrap_or(0.0);
    // The pipe took some 64 KiB of lines, the backlog 64 KiB more, and the
    // rest was dropped: nothing is held past the bound.
    assert!(dropped > 5_000.0, "dropped {dropped}, written {written}");
    let rss_after = rss_bytes(server.pid());
    assert!(
        rss_after < rss_before + 16 * 1024 * 1024,
        "RSS {rss_before} -> {rss_after}"
    );
    assert_eq!(server.get("/a.txt").status, 200);
}

fn a_drain_writes_every_buffered_line(isolation: &str) {
    let (_dir, path) = log_path();
    // Lines would otherwise wait a minute in a 1 MiB buffer.
    let mut server = TestServer::builder()
        .file("a.txt", "hello\n")
        .isolation(isolation)
        .args(&[
            "--access-log",
            path.to_str().unwrap(),
            "--access-log-flush",
            "60",
            "--access-log-buffer",
            "1048576",
        ])
        .start();
    hammer(server.addr(), 2, 100);
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        std::fs::read_to_string(&path)
            .unwrap_or_default()
            .lines()
            .count(),
        0
    );
    server.signal(Signal::SIGTERM);
    assert!(server.wait_exit(LIMIT).is_some_and(|s| s.success()));
    assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 200);
}

#[test]
fn a_drain_writes_every_buffered_line_of_worker_threads() {
    a_drain_writes_every_buffered_line("thread");
}

#[test]
fn a_drain_writes_every_buffered_line_of_worker_processes() {
    a_drain_writes_every_buffered_line("process");
}

#[test]
fn bytes_sent_say_what_left_when_the_client_goes_away() {
    let (_dir, path) = log_path();
    let server = TestServer::builder()
        .file("huge.bin", vec![b'h'; 16 * 1024 * 1024])
        .args(&[
            "--access-log",
            path.to_str().unwrap(),
            "--access-log-flush",
            "0.05",
            "--send-timeout",
            "1",
        ])
        .start();
    let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
    s.write_all(b"GET /huge.bin HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    let mut buf = [0u8; 1000];
    s.read_exact(&mut buf).unwrap();
    drop(s);
    let l = lines(&path, 1).remove(0);
    let bytes: u64 = l.split(' ').nth(9).unwrap().parse().unwrap();
    assert!(l.contains("\"GET /huge.bin HTTP/1.1\" 200 "), "{l}");
    assert!(bytes < 16 * 1024 * 1024, "{l}");
}

/// The same requests over HTTP/1.1 and over HTTP/2 give the same lines,
/// byte for byte, in every field that does not name the protocol, the
/// connection or the time: one record, whatever protocol filled it.
#[test]
fn a_line_is_the_same_over_http1_and_http2() {
    let (_dir, path) = log_path();
    let server = TestServer::builder()
        .file("a.txt", "hello\n")
        .file("big.bin", vec![b'b'; 100_000])
        .file("dir/index.html", "<p>dir</p>\n")
        .args(&[
            "--access-log",
            path.to_str().unwrap(),
            "--access-log-format",
            "$remote_addr|$request_method|$request_uri|$status|$body_bytes_sent|$http_referer|$http_user_agent|$host|$site|$tls_version|$worker",
            "--access-log-flush",
            "0.05",
        ])
        .start();
    let etag = server.get("/a.txt").header("etag").unwrap().to_owned();
    let _ = lines(&path, 1);
    let exchanges = [
        Exchange::get("/a.txt?q=1")
            .field("user-agent", "agent/1.0")
            .field("referer", "http://example.com/from"),
        Exchange::get("/a.txt").field("range", "bytes=1-3"),
        Exchange::get("/a.txt").field("if-none-match", &etag),
        Exchange::get("/missing"),
        Exchange::new("HEAD", "/big.bin"),
        Exchange::get("/big.bin"),
        Exchange::get("/dir"),
        Exchange::new("DELETE", "/a.txt"),
    ];
    for ex in &exchanges {
        let _ = ex.h1(server.addr());
    }
    let h1 = lines(&path, 1 + exchanges.len());
    let mut c = Client::connect(server.addr());
    for ex in &exchanges {
        c.send(ex);
    }
    let all = lines(&path, 1 + 2 * exchanges.len());
    let (h1, h2) = (&h1[1..], &all[1 + exchanges.len()..]);
    for (i, ex) in exchanges.iter().enumerate() {
        assert_eq!(h1[i], h2[i], "{} {}", ex.method, ex.path);
    }
    assert!(
        h1[0].contains("|GET|/a.txt?q=1|200|6|http://example.com/from|agent/1.0|"),
        "{}",
        h1[0]
    );
    assert!(h1[1].contains("|206|3|"), "{}", h1[1]);
    assert!(h1[2].contains("|304|0|"), "{}", h1[2]);
    assert!(h1[4].contains("|HEAD|/big.bin|200|0|"), "{}", h1[4]);
    assert!(h1[5].contains("|200|100000|"), "{}", h1[5]);
}

/// The 8 MiB file of the cut-off tests, and what the client reads of it.
const CUT_FILE: usize = 8 * 1024 * 1024;
const CUT_READ: usize = 1024 * 1024;

fn cut_off_server(path: &Path) -> TestServer {
    TestServer::builder()
        .file("eight.bin", vec![b'e'; CUT_FILE])
        .args(&[
            "--access-log",
            path.to_str().unwrap(),
            "--access-log-format",
            "json",
            "--access-log-flush",
            "0.05",
            "--send-timeout",
            "1",
        ])
        .start()
}

/// A client that reads 1 MiB of an 8 MiB answer and closes (a video
/// preload, a seek, a cancelled download): the line says 200 and the bytes
/// that left, at least what the client read and less than the file, as
/// nginx's `$body_bytes_sent` does. Its receive buffer is kept small so
/// what sits in socket buffers cannot make up the rest of the file.
#[test]
fn a_response_cut_off_by_the_client_logs_the_bytes_sent_over_http1() {
    let (_dir, path) = log_path();
    let server = cut_off_server(&path);
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_recv_buffer_size(64 * 1024).unwrap();
    socket.connect(&server.addr().into()).unwrap();
    let mut s = std::net::TcpStream::from(socket);
    s.set_read_timeout(Some(LIMIT)).unwrap();
    s.write_all(b"GET /eight.bin HTTP/1.1\r\nHost: h\r\n\r\n")
        .unwrap();
    let mut buf = vec![0u8; CUT_READ];
    s.read_exact(&mut buf).unwrap();
    drop(s);
    let l = json(&lines(&path, 1)[0]);
    assert_eq!(l["status"], 200, "{l}");
    assert_eq!(l["server_protocol"], "HTTP/1.1", "{l}");
    let sent = l["body_bytes_sent"].as_u64().unwrap();
    // The head is part of what the client read, not of the body.
    assert!(sent >= (CUT_READ - 1024) as u64, "{l}");
    assert!(sent < CUT_FILE as u64, "{l}");
}

/// The same over HTTP/2: the client reads 1 MiB of the stream's body
/// (granting window as it reads) and closes the connection.
#[test]
fn a_response_cut_off_by_the_client_logs_the_bytes_sent_over_http2() {
    let (_dir, path) = log_path();
    let server = cut_off_server(&path);
    let mut c = Client::connect(server.addr());
    c.run(|send| async move {
        let mut send = send.ready().await.unwrap();
        let request = http::Request::get("http://h/eight.bin").body(()).unwrap();
        let (response, _) = send.send_request(request, true).unwrap();
        let mut body = response.await.unwrap().into_body();
        let mut read = 0;
        while read < CUT_READ {
            let chunk = body.data().await.unwrap().unwrap();
            read += chunk.len();
            let _ = body.flow_control().release_capacity(chunk.len());
        }
    });
    drop(c);
    let l = json(&lines(&path, 1)[0]);
    assert_eq!(l["status"], 200, "{l}");
    assert_eq!(l["server_protocol"], "HTTP/2.0", "{l}");
    let sent = l["body_bytes_sent"].as_u64().unwrap();
    assert!(sent >= CUT_READ as u64, "{l}");
    assert!(sent < CUT_FILE as u64, "{l}");
}

#[test]
fn a_pipelining_client_cannot_grow_what_waits_for_its_lines() {
    let (_dir, path) = log_path();
    let server = start(&path, &[]);
    let rss_before = rss_bytes(server.pid());
    // 1,000 pipelined requests with 6 KiB agents, written without reading:
    // each line's fields wait for its response's write, and the connection
    // stops taking requests while 16 KiB of them wait.
    let agent = "a".repeat(6 * 1024);
    let one = format!("GET /a.txt HTTP/1.1\r\nHost: h\r\nUser-Agent: {agent}\r\n\r\n");
    let n = 1000;
    let mut s = std::net::TcpStream::connect(server.addr()).unwrap();
    s.set_read_timeout(Some(LIMIT)).unwrap();
    let writer = {
        let mut s = s.try_clone().unwrap();
        let all = one.repeat(n);
        std::thread::spawn(move || s.write_all(all.as_bytes()).unwrap())
    };
    for _ in 0..n {
        assert_eq!(common::read_response(&mut s).status, 200);
    }
    writer.join().unwrap();
    let got = lines(&path, n);
    assert_eq!(got.len(), n);
    assert!(got.iter().all(|l| l.len() > 6 * 1024));
    let rss_after = rss_bytes(server.pid());
    assert!(
        rss_after < rss_before + 8 * 1024 * 1024,
        "RSS {rss_before} -> {rss_after}"
    );
}
