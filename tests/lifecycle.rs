//! Worker lifecycle against the real binary: pinning, the startup barrier
//! (with the test-only `SERVERY_TEST_FAULT` hooks), drain and its deadlines.
//! These tests send signals, so they live in their own test binary.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{
    docroot, free_port, metric, read_response, slow_download, spawn_behind_barrier,
    start_with_a_failing_prepare, try_get, Signal, TestServer, BIG,
};

/// Threads of `pid` named `servery-w*`, with their allowed CPU list.
fn worker_threads(pid: u32) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let task = task.unwrap().path();
        let comm = std::fs::read_to_string(task.join("comm")).unwrap_or_default();
        let comm = comm.trim().to_owned();
        if !comm.starts_with("servery-w") {
            continue;
        }
        let status = std::fs::read_to_string(task.join("status")).unwrap_or_default();
        let cpus = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap_or("")
            .trim()
            .to_owned();
        out.push((comm, cpus));
    }
    out.sort();
    out
}

#[test]
fn two_workers_are_pinned_to_distinct_cpus_and_both_serve() {
    let root = docroot(0);
    let server = TestServer::builder()
        .root(root.path())
        .pinned()
        .args(&["--workers", "2", "--cpus", "0,1", "--admin", "127.0.0.1:0"])
        .start();
    assert!(
        server.ready_line().contains("2 workers"),
        "{}",
        server.ready_line()
    );
    // A thread a worker starts (the heap trimmer) carries its creator's name
    // until it first runs and names itself: on a loaded machine that can
    // take a while, so wait for the names to settle.
    let mut threads = worker_threads(server.pid());
    common::wait_until(Duration::from_secs(10), || {
        threads = worker_threads(server.pid());
        threads.len() == 2
    });
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert_eq!(threads[0], ("servery-w0".to_owned(), "0".to_owned()));
    assert_eq!(threads[1], ("servery-w1".to_owned(), "1".to_owned()));

    for _ in 0..200 {
        let r = server.get("/small.txt");
        assert_eq!(r.status, 200);
    }
    let metrics = server.admin_get("/metrics").body_text();
    for w in 0..2 {
        let key = format!("servery_requests_total{{worker=\"{w}\"}}");
        let n = metric(&metrics, &key).unwrap_or_else(|| panic!("no {key} in\n{metrics}"));
        assert!(n > 0.0, "worker {w} served nothing:\n{metrics}");
    }
    // One port for both workers.
    assert_eq!(server.addrs().len(), 1);
}

#[test]
fn no_request_is_answered_before_the_delayed_worker_prepares() {
    let root = docroot(0);
    let addr = free_port();
    let delay = Duration::from_millis(1500);
    let (mut server, first_answer, refused_early) =
        spawn_behind_barrier(TestServer::builder().root(root.path()), addr, delay);
    server.kill();
    let ready = server.stdout();
    let (at, line) = first_answer.expect("never answered");
    assert!(
        at >= delay,
        "answered after {at:?}, before the {delay:?} barrier"
    );
    assert!(line.starts_with("HTTP/1.1 200"), "{line}");
    assert!(refused_early > 0, "the test never tried during the barrier");
    assert!(ready.starts_with("servery: ready on"), "{ready}");
}

#[test]
fn a_failed_prepare_rolls_back_and_frees_the_port() {
    let root = docroot(0);
    let addr = free_port();
    let out = start_with_a_failing_prepare(TestServer::builder().root(root.path()), addr);
    assert_eq!(out.status.and_then(|s| s.code()), Some(1));
    assert!(out.stdout.is_empty(), "printed: {}", out.stdout);
    let err = &out.stderr;
    assert!(err.contains("worker 1 failed"), "{err}");
    assert!(err.contains("injected prepare failure"), "{err}");
    TcpListener::bind(addr).expect("port still held after rollback");
    assert!(try_get(addr, "/small.txt").is_none());
}

#[test]
fn startup_timeout_names_the_slow_worker() {
    let root = docroot(0);
    let out = match TestServer::builder()
        .root(root.path())
        .args(&["--workers", "2", "--startup-timeout", "0.3"])
        .fault("delay-prepare=1:1500")
        .try_start()
    {
        Ok(s) => panic!("started: {}", s.ready_line()),
        Err(f) => f,
    };
    assert_eq!(out.status.and_then(|s| s.code()), Some(1));
    let err = &out.stderr;
    assert!(err.contains("workers [1] not prepared"), "{err}");
}

/// What an operator reads: with stderr a pipe (a file, the journal) the log
/// lines carry no colour codes, a worker thread's ready line no `pid=None`,
/// and stdout ends with one line once the drain is done, as it began with
/// the ready line.
#[test]
fn logs_are_plain_text_off_a_terminal_and_stdout_says_when_it_stopped() {
    let root = docroot(0);
    let mut server = TestServer::builder()
        .root(root.path())
        .env("RUST_LOG", "info")
        .start();
    server.signal(Signal::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("exited after SIGTERM");
    assert!(status.success(), "{status:?}");
    let err = server.stderr();
    assert!(err.contains("worker ready"), "{err}");
    assert!(!err.contains('\u{1b}'), "a colour code on a pipe: {err:?}");
    assert!(!err.contains("pid=None"), "{err}");
    let out = server.stdout();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    assert!(lines[0].starts_with("servery: ready on"), "{out}");
    assert_eq!(
        lines[1],
        "servery: stopped: every request finished, every worker exited"
    );
}

/// Start a server on `root` with `args` under `driver`.
fn serve(root: &tempfile::TempDir, driver: &str, args: &[&str]) -> TestServer {
    TestServer::builder()
        .root(root.path())
        .driver(driver)
        .args(args)
        .start()
}

/// Wait until a new connection to `addr` is refused (drain closed it).
fn refused_soon(addr: SocketAddr) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

fn slow_client_gets_its_whole_response_after_sigterm(driver: &str) {
    let root = docroot(BIG);
    let mut server = serve(&root, driver, &["--drain-timeout", "20"]);
    let (mut s, head_len) = slow_download(server.addr(), "");
    server.signal(Signal::SIGTERM);
    assert!(
        refused_soon(server.addr()),
        "new connections still accepted after SIGTERM"
    );
    // After the 1 KiB read so far, the rest of the body must arrive.
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.read_to_end(&mut rest).unwrap();
    assert_eq!(1024 - head_len + rest.len(), BIG, "body cut short");
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("did not exit");
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
}

/// A server with one kept-alive connection that has been answered once,
/// then SIGTERM: the connection is idle when the drain begins.
fn answered_then_sigterm(root: &tempfile::TempDir, driver: &str) -> (TestServer, TcpStream) {
    let server = serve(root, driver, &[]);
    let mut s = server.connect();
    s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).status, 200);
    server.signal(Signal::SIGTERM);
    (server, s)
}

fn idle_keepalive_connections_are_closed_by_drain(driver: &str) {
    let root = docroot(0);
    let (mut server, mut s) = answered_then_sigterm(&root, driver);
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "idle connection not closed");
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("did not exit");
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
}

/// The request that crosses the drain's FIN on `s`, then the client closes
/// its side: the server neither answers nor resets it, and exits 0.
fn a_crossing_request_is_discarded(mut server: TestServer, mut s: TcpStream) {
    s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    if let Err(e) = s.shutdown(std::net::Shutdown::Write) {
        panic!("the connection was reset under the crossing request: {e}");
    }
    let mut buf = [0u8; 64];
    match s.read(&mut buf) {
        Ok(0) => {}
        Ok(n) => panic!("answered after the drain's FIN: {:?}", &buf[..n]),
        Err(e) => panic!("the crossing request got {e} instead of a clean close"),
    }
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("did not exit");
    assert_eq!(status.code(), Some(0), "{}", server.stderr());
}

/// A drain closes an idle keep-alive connection with a FIN and keeps
/// reading: a request the client sends after (or across) that FIN is read
/// and discarded, and the connection ends without a reset, so the client,
/// which got no byte of a response, can retry it (RFC 9112 §9.3.1).
fn request_crossing_a_drain_fin_is_discarded_not_reset(driver: &str) {
    let root = docroot(0);
    let (server, mut s) = answered_then_sigterm(&root, driver);
    let mut buf = [0u8; 64];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "no FIN from the drain");
    a_crossing_request_is_discarded(server, s);
}

/// A connection busy with a response when the drain begins (so the drain's
/// sweep of idle connections passed it by) closes once that response is
/// written the way the drain closes idle ones: FIN, then a request the
/// client sends after the response, crossing that FIN, is discarded rather
/// than reset.
fn request_after_a_response_the_drain_waited_for_is_discarded_not_reset(driver: &str) {
    let root = docroot(BIG);
    let server = serve(&root, driver, &["--drain-timeout", "20"]);
    let (mut s, head_len) = slow_download(server.addr(), "");
    server.signal(Signal::SIGTERM);
    assert!(refused_soon(server.addr()), "the drain did not begin");
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut rest = vec![0u8; BIG - (1024 - head_len)];
    s.read_exact(&mut rest).unwrap();
    a_crossing_request_is_discarded(server, s);
}

fn pipelined_request_during_drain_gets_connection_close(driver: &str) {
    let root = docroot(BIG);
    let mut server = serve(&root, driver, &[]);
    let (mut s, _) = slow_download(server.addr(), "GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
    server.signal(Signal::SIGTERM);
    std::thread::sleep(Duration::from_millis(200));
    let mut all = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.read_to_end(&mut all).unwrap();
    let second = all
        .windows(12)
        .rposition(|w| w == b"HTTP/1.1 200")
        .expect("no second response");
    let tail = String::from_utf8_lossy(&all[second..]);
    assert!(tail.contains("Connection: close\r\n"), "{tail}");
    assert!(tail.ends_with("small\n"), "{tail}");
    let status = server
        .wait_exit(Duration::from_secs(10))
        .expect("did not exit");
    assert_eq!(status.code(), Some(0));
}

fn connection_held_past_drain_timeout_is_cut(driver: &str) {
    let root = docroot(BIG);
    let mut server = serve(
        &root,
        driver,
        &["--drain-timeout", "0.5", "--force-timeout", "5"],
    );
    let (mut s, _) = slow_download(server.addr(), "");
    server.signal(Signal::SIGTERM);
    let status = server
        .wait_exit(Duration::from_secs(5))
        .expect("did not exit");
    assert_eq!(status.code(), Some(1));
    assert!(server.stderr().contains("were cut"), "{}", server.stderr());
    // The client sees the cut: the stream ends before the whole body.
    let mut rest = Vec::new();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let _ = s.read_to_end(&mut rest);
    assert!(rest.len() < BIG);
}

fn second_sigint_exits_at_once(driver: &str) {
    let root = docroot(BIG);
    let mut server = serve(
        &root,
        driver,
        &["--drain-timeout", "30", "--force-timeout", "40"],
    );
    let (_s, _) = slow_download(server.addr(), "");
    server.signal(Signal::SIGINT);
    assert!(
        server.wait_exit(Duration::from_millis(300)).is_none(),
        "exited before the drain"
    );
    server.signal(Signal::SIGINT);
    let status = server
        .wait_exit(Duration::from_secs(3))
        .expect("second SIGINT ignored");
    assert_eq!(status.code(), Some(130));
}

driver_tests! {
    slow_client_gets_its_whole_response_after_sigterm,
    idle_keepalive_connections_are_closed_by_drain,
    request_crossing_a_drain_fin_is_discarded_not_reset,
    request_after_a_response_the_drain_waited_for_is_discarded_not_reset,
    pipelined_request_during_drain_gets_connection_close,
    connection_held_past_drain_timeout_is_cut,
    second_sigint_exits_at_once,
}

#[test]
fn shared_listener_serves_from_both_workers() {
    let root = docroot(0);
    let server = TestServer::builder()
        .root(root.path())
        .args(&[
            "--workers",
            "2",
            "--listener",
            "shared",
            "--admin",
            "127.0.0.1:0",
        ])
        .start();
    assert!(
        server.ready_line().contains("shared"),
        "{}",
        server.ready_line()
    );
    for _ in 0..50 {
        assert_eq!(server.get("/small.txt").status, 200);
    }
    let metrics = server.admin_get("/metrics").body_text();
    let total: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("servery_requests_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum();
    assert_eq!(total, 50, "{metrics}");
}

#[test]
fn readyz_turns_503_while_draining() {
    let root = docroot(BIG);
    let mut server = serve(
        &root,
        "uring",
        &["--admin", "127.0.0.1:0", "--drain-timeout", "20"],
    );
    assert_eq!(server.admin_get("/readyz").status, 200);
    let (_s, _) = slow_download(server.addr(), "");
    server.signal(Signal::SIGTERM);
    let until = Instant::now() + Duration::from_secs(3);
    let mut status = 200;
    while Instant::now() < until && status == 200 {
        status = server.admin_get("/readyz").status;
    }
    assert_eq!(status, 503);
    assert_eq!(server.admin_get("/healthz").status, 200);
    drop(_s);
    assert_eq!(
        server.wait_exit(Duration::from_secs(10)).unwrap().code(),
        Some(0)
    );
}

/// systemd socket activation: a listening socket passed as fd 3 with
/// LISTEN_FDS=1 and LISTEN_PID set to the server's pid is used, shared.
#[test]
fn inherits_a_systemd_socket() {
    let root = docroot(0);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = TestServer::builder()
        .root(root.path())
        .systemd_socket(listener)
        .args(&["--workers", "2"])
        .start();
    let line = server.ready_line();
    assert!(line.contains(&format!("http://{addr}")), "{line}");
    assert!(line.contains("systemd"), "{line}");
    assert_eq!(
        try_get(addr, "/small.txt").as_deref(),
        Some("HTTP/1.1 200 OK")
    );
}

/// nginx's `send_timeout`: a client that stops taking bytes is dropped.
#[test]
fn client_that_stops_reading_is_dropped_after_send_timeout() {
    let root = docroot(BIG);
    let server = serve(&root, "uring", &["--send-timeout", "1"]);
    let (mut s, head_len) = slow_download(server.addr(), "");
    // Stall well past the timeout, then read what is left.
    std::thread::sleep(Duration::from_secs(3));
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut rest = Vec::new();
    let _ = s.read_to_end(&mut rest);
    assert!(
        1024 - head_len + rest.len() < BIG,
        "the whole body arrived; not dropped"
    );
    // The server is still fine.
    assert_eq!(server.get("/small.txt").status, 200);
}
