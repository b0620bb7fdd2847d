//! Worker lifecycle against the real binary: pinning, the startup barrier
//! (with the test-only `SERVERY_TEST_FAULT` hooks), drain and its deadlines.
//! These tests send signals, so they live in their own test binary.

#[macro_use]
mod common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::{docroot, free_port, read_response, try_get, Signal, TestServer, BIN};

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
    let threads = worker_threads(server.pid());
    assert_eq!(threads.len(), 2, "{threads:?}");
    assert_eq!(threads[0], ("servery-w0".to_owned(), "0".to_owned()));
    assert_eq!(threads[1], ("servery-w1".to_owned(), "1".to_owned()));

    for _ in 0..200 {
        let r = server.get("/small.txt");
        assert_eq!(r.status, 200);
    }
    let metrics = server.admin_get("/metrics").body_text();
    for w in 0..2 {
        let key = format!("servery_requests_total{{worker=\"{w}\"}} ");
        let n: u64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix(&key))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in\n{metrics}"));
        assert!(n > 0, "worker {w} served nothing:\n{metrics}");
    }
    // One port for both workers.
    assert_eq!(server.addrs().len(), 1);
}

#[test]
fn no_request_is_answered_before_the_delayed_worker_prepares() {
    let root = docroot(0);
    let addr = free_port();
    let delay = Duration::from_millis(1500);
    let started = Instant::now();
    let mut child = Command::new(BIN)
        .args([
            "serve",
            root.path().to_str().unwrap(),
            "--no-pin",
            "--workers",
            "2",
        ])
        .args(["--bind", &addr.to_string()])
        .env(
            "SERVERY_TEST_FAULT",
            format!("delay-prepare=1:{}", delay.as_millis()),
        )
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut refused_early = 0;
    let mut first_answer = None;
    while started.elapsed() < delay + Duration::from_secs(5) {
        match try_get(addr, "/small.txt") {
            Some(line) => {
                first_answer = Some((started.elapsed(), line));
                break;
            }
            None if started.elapsed() < delay => refused_early += 1,
            None => {}
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut ready = String::new();
    let mut stdout = child.stdout.take().unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let _ = stdout.read_to_string(&mut ready);
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
    let out = Command::new(BIN)
        .args([
            "serve",
            root.path().to_str().unwrap(),
            "--no-pin",
            "--workers",
            "2",
        ])
        .args(["--bind", &addr.to_string()])
        .env("SERVERY_TEST_FAULT", "fail-prepare=1;delay-prepare=0:300")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        out.stdout.is_empty(),
        "printed: {}",
        String::from_utf8_lossy(&out.stdout)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("worker 1 failed"), "{err}");
    assert!(err.contains("injected prepare failure"), "{err}");
    TcpListener::bind(addr).expect("port still held after rollback");
    assert!(try_get(addr, "/small.txt").is_none());
}

#[test]
fn startup_timeout_names_the_slow_worker() {
    let root = docroot(0);
    let out = Command::new(BIN)
        .args([
            "serve",
            root.path().to_str().unwrap(),
            "--no-pin",
            "--workers",
            "2",
        ])
        .args(["--bind", "127.0.0.1:0", "--startup-timeout", "0.3"])
        .env("SERVERY_TEST_FAULT", "delay-prepare=1:1500")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("workers [1] not prepared"), "{err}");
}

/// Start a server on `root` with `args` under `driver`.
fn serve(root: &tempfile::TempDir, driver: &str, args: &[&str]) -> TestServer {
    TestServer::builder()
        .root(root.path())
        .args(&["--driver", driver])
        .args(args)
        .start()
}

/// A connection that asked for `big.bin` and read only its first bytes.
fn slow_download(server: &TestServer, extra: &str) -> (TcpStream, usize) {
    let mut s = server.connect();
    s.write_all(format!("GET /big.bin HTTP/1.1\r\nHost: t\r\n\r\n{extra}").as_bytes())
        .unwrap();
    let mut first = [0u8; 1024];
    s.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"HTTP/1.1 200"));
    let head_len = first.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    (s, head_len)
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

const BIG: usize = 16 * 1024 * 1024;

fn slow_client_gets_its_whole_response_after_sigterm(driver: &str) {
    let root = docroot(BIG);
    let mut server = serve(&root, driver, &["--drain-timeout", "20"]);
    let (mut s, head_len) = slow_download(&server, "");
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

fn idle_keepalive_connections_are_closed_by_drain(driver: &str) {
    let root = docroot(0);
    let mut server = serve(&root, driver, &[]);
    let mut s = server.connect();
    s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).status, 200);
    server.signal(Signal::SIGTERM);
    let mut buf = [0u8; 16];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "idle connection not closed");
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
    let mut server = serve(&root, driver, &[]);
    let mut s = server.connect();
    s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    assert_eq!(read_response(&mut s).status, 200);
    server.signal(Signal::SIGTERM);
    let mut buf = [0u8; 64];
    assert_eq!(s.read(&mut buf).unwrap(), 0, "no FIN from the drain");
    // The request that crossed the FIN; then the client closes its side.
    s.write_all(b"GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    std::thread::sleep(Duration::from_millis(200));
    s.shutdown(std::net::Shutdown::Write).unwrap();
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

fn pipelined_request_during_drain_gets_connection_close(driver: &str) {
    let root = docroot(BIG);
    let mut server = serve(&root, driver, &[]);
    let (mut s, _) = slow_download(&server, "GET /small.txt HTTP/1.1\r\nHost: t\r\n\r\n");
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
    let (mut s, _) = slow_download(&server, "");
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
    let (_s, _) = slow_download(&server, "");
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
    let (_s, _) = slow_download(&server, "");
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
#[allow(unsafe_code)]
fn inherits_a_systemd_socket() {
    use std::os::fd::AsRawFd;
    use std::os::unix::process::CommandExt;
    let root = docroot(0);
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let fd = listener.as_raw_fd();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(format!(
            "LISTEN_PID=$$ LISTEN_FDS=1 exec {BIN} serve {} --no-pin --workers 2",
            root.path().display()
        ))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    // SAFETY: between fork and exec only dup2/fcntl run, which are
    // async-signal-safe; `fd` stays open in the parent for the call.
    unsafe {
        cmd.pre_exec(move || {
            // dup2 onto itself keeps FD_CLOEXEC: clear it instead.
            let rc = if fd == 3 {
                libc::fcntl(3, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, 3)
            };
            if rc < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    drop(listener);
    let mut line = String::new();
    {
        use std::io::BufRead;
        let mut out = std::io::BufReader::new(child.stdout.as_mut().unwrap());
        out.read_line(&mut line).unwrap();
    }
    if line.is_empty() {
        let _ = child.wait();
        let mut err = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut err)
            .unwrap();
        panic!("no ready line; stderr: {err}");
    }
    assert!(line.contains(&format!("http://{addr}")), "{line}");
    assert!(line.contains("systemd"), "{line}");
    assert_eq!(
        try_get(addr, "/small.txt").as_deref(),
        Some("HTTP/1.1 200 OK")
    );
    let _ = child.kill();
    let _ = child.wait();
}

/// nginx's `send_timeout`: a client that stops taking bytes is dropped.
#[test]
fn client_that_stops_reading_is_dropped_after_send_timeout() {
    let root = docroot(BIG);
    let server = serve(&root, "uring", &["--send-timeout", "1"]);
    let (mut s, head_len) = slow_download(&server, "");
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
