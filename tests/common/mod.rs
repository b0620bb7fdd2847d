//! Shared harness for the integration tests: the real `servery` binary,
//! started on port 0, spoken to with raw bytes over std `TcpStream`s.
//!
//! Owns: starting a server ([`TestServer`], [`Builder`]) and waiting for its
//! ready line, capturing its stderr, killing it on drop (so no process is left
//! behind even when a test panics), a minimal HTTP/1.1 response reader
//! ([`read_response`]), bounded reads ([`read_until_close`]), running the
//! binary to completion with a bound ([`run_bounded`]), and the
//! [`driver_tests!`] macro that runs a test under both I/O drivers, small
//! fixtures ([`free_port`], [`docroot`], [`try_get`], [`metric`]), and the TLS
//! client side (`tls`).
//!
//! Each test binary uses a subset, hence the `dead_code` allowances.
#![allow(dead_code)]

pub mod tls;

use std::ffi::OsString;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub use nix::sys::signal::Signal;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_servery");
/// How long a server gets to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Read timeout of every client socket: a response that has not arrived by
/// then is a failure, not something to wait longer for.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs each listed `fn name(driver: &str)` as `uring::name` and `epoll::name`
/// (monoio's `test_all`). Attributes before a name (e.g. `#[ignore = ".."]`)
/// are put on both generated tests.
#[allow(unused_macros)]
macro_rules! driver_tests {
    ($($(#[$meta:meta])* $name:ident),* $(,)?) => {
        mod uring {
            $( $(#[$meta])* #[test] fn $name() { super::$name("uring") } )*
        }
        mod epoll {
            $( $(#[$meta])* #[test] fn $name() { super::$name("epoll") } )*
        }
    };
}

/// A `servery serve` child process, killed (SIGKILL) and reaped on drop.
pub struct TestServer {
    child: Child,
    exited: Option<ExitStatus>,
    addrs: Vec<SocketAddr>,
    admin: Option<SocketAddr>,
    ready_line: String,
    root: PathBuf,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Held so our own docroot lives as long as the server (dropped after
    /// `Drop::drop` has killed the child).
    _own_root: Option<tempfile::TempDir>,
}

/// Why a server did not become ready.
#[derive(Debug)]
pub struct StartFailure {
    /// The exit status, if the child exited (else it was killed at the bound).
    pub status: Option<ExitStatus>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
}

/// Options for [`TestServer`]; every server gets `serve ROOT --bind
/// 127.0.0.1:0 --no-pin` unless told otherwise.
#[derive(Debug, Default)]
pub struct Builder {
    root: Option<PathBuf>,
    bind: Option<String>,
    pinned: bool,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
}

impl Builder {
    /// Serve `dir` instead of a fresh empty temp directory.
    pub fn root(mut self, dir: impl AsRef<Path>) -> Self {
        self.root = Some(dir.as_ref().to_owned());
        self
    }

    /// Listen on `addr` instead of `127.0.0.1:0`.
    pub fn bind(mut self, addr: impl Into<String>) -> Self {
        self.bind = Some(addr.into());
        self
    }

    /// Leave out `--no-pin` (the test passes its own `--cpus`/`--workers`).
    pub fn pinned(mut self) -> Self {
        self.pinned = true;
        self
    }

    /// Extra command-line arguments, after the defaults.
    pub fn args<S: AsRef<std::ffi::OsStr>>(mut self, args: &[S]) -> Self {
        self.args
            .extend(args.iter().map(|a| a.as_ref().to_os_string()));
        self
    }

    /// An environment variable for the child.
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> Self {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Start and wait for the ready line; panics (with the child's stderr)
    /// if it does not come within [`READY_TIMEOUT`].
    pub fn start(self) -> TestServer {
        match self.try_start() {
            Ok(s) => s,
            Err(f) => panic!(
                "servery did not become ready (exit: {:?})\nstdout:\n{}\nstderr:\n{}",
                f.status, f.stdout, f.stderr
            ),
        }
    }

    /// Start and wait for the ready line, or report how the start failed.
    pub fn try_start(self) -> Result<TestServer, StartFailure> {
        let (own_root, root) = match self.root {
            Some(r) => (None, r),
            None => {
                let dir = tempfile::tempdir().expect("create temp docroot");
                let path = dir.path().to_owned();
                (Some(dir), path)
            }
        };
        let mut cmd = Command::new(BIN);
        cmd.arg("serve")
            .arg(&root)
            .arg("--bind")
            .arg(self.bind.as_deref().unwrap_or("127.0.0.1:0"));
        if !self.pinned {
            cmd.arg("--no-pin");
        }
        cmd.args(&self.args)
            .envs(self.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn servery");
        let stderr = capture(child.stderr.take().expect("piped stderr"));

        // stdout: a thread forwards lines; the first is the ready line.
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            // Keeps reading after the ready line (nobody listens any more)
            // so the server never blocks on, or dies of, a full pipe.
            for line in BufReader::new(stdout).lines() {
                match line {
                    Ok(l) => {
                        let _ = tx.send(l);
                    }
                    Err(_) => break,
                }
            }
        });
        let mut server = TestServer {
            child,
            exited: None,
            addrs: Vec::new(),
            admin: None,
            ready_line: String::new(),
            root,
            stderr,
            _own_root: own_root,
        };
        let deadline = Instant::now() + READY_TIMEOUT;
        let mut seen = String::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) => {
                    if let Some((addrs, admin)) = parse_ready_line(&line) {
                        server.addrs = addrs;
                        server.admin = admin;
                        server.ready_line = line;
                        return Ok(server);
                    }
                    seen.push_str(&line);
                    seen.push('\n');
                }
                Err(_) => {
                    // Closed stdout (exited) or the bound passed.
                    let status = server.wait_exit(Duration::from_secs(2));
                    if status.is_none() {
                        server.kill();
                    }
                    settle(&server.stderr);
                    return Err(StartFailure {
                        status,
                        stdout: seen,
                        stderr: server.stderr(),
                    });
                }
            }
        }
    }
}

impl TestServer {
    /// A builder with the defaults (temp docroot, port 0, unpinned).
    pub fn builder() -> Builder {
        Builder::default()
    }

    /// Start on a fresh temp docroot with extra `args`.
    pub fn start(args: &[&str]) -> TestServer {
        Builder::default().args(args).start()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The first listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// Every listening address, in `--bind` order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The admin address; panics if the server was started without `--admin`.
    pub fn admin(&self) -> SocketAddr {
        self.admin.expect("server started without --admin")
    }

    pub fn ready_line(&self) -> &str {
        &self.ready_line
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Everything the server has written to stderr so far.
    pub fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap_or_else(|e| e.into_inner())).into_owned()
    }

    /// A new connection with [`IO_TIMEOUT`] read and write timeouts.
    pub fn connect(&self) -> TcpStream {
        connect(self.addr())
    }

    /// Write `raw` on a new connection and read until the server closes it
    /// (or [`IO_TIMEOUT`] passes). Does not half-close: whether and when the
    /// server closes is the server's decision.
    pub fn send(&self, raw: &[u8]) -> Vec<u8> {
        send_to(self.addr(), raw)
    }

    /// `GET path` on a new connection (`Connection: close`), parsed.
    pub fn get(&self, path: &str) -> Response {
        let mut s = self.connect();
        let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
        s.write_all(req.as_bytes()).expect("write request");
        read_response(&mut s)
    }

    /// `GET path` on the admin listener (one request per connection).
    pub fn admin_get(&self, path: &str) -> Response {
        let mut s = connect(self.admin());
        let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
        s.write_all(req.as_bytes()).expect("write admin request");
        read_response(&mut s)
    }

    /// Send `sig` to the server process.
    pub fn signal(&self, sig: Signal) {
        let pid = nix::unistd::Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, sig).expect("kill(2) the server");
    }

    /// Wait up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.exited.is_some() {
            return self.exited;
        }
        let deadline = Instant::now() + timeout;
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    self.exited = Some(status);
                    return self.exited;
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Ok(None) | Err(_) => return None,
            }
        }
    }

    fn kill(&mut self) {
        if self.exited.is_none() {
            let _ = self.child.kill();
            if let Ok(status) = self.child.wait() {
                self.exited = Some(status);
            }
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Parse `servery: ready on http://A [http://B ...] — ..., admin http://C`.
pub fn parse_ready_line(line: &str) -> Option<(Vec<SocketAddr>, Option<SocketAddr>)> {
    let rest = line.strip_prefix("servery: ready on ")?;
    let (urls, details) = rest.split_once(" — ")?;
    // Plain listeners first (`http://`), then TLS ones (`https://`).
    let addrs = urls
        .split_whitespace()
        .map(|u| {
            u.strip_prefix("http://")
                .or_else(|| u.strip_prefix("https://"))?
                .parse()
                .ok()
        })
        .collect::<Option<Vec<SocketAddr>>>()?;
    if addrs.is_empty() {
        return None;
    }
    let admin = match details.split_once(", admin http://") {
        Some((_, a)) => Some(a.split(',').next()?.trim().parse().ok()?),
        None => None,
    };
    Some((addrs, admin))
}

/// Drain `source` on a thread into a shared buffer.
fn capture(mut source: impl Read + Send + 'static) -> Arc<Mutex<Vec<u8>>> {
    let buf = Arc::new(Mutex::new(Vec::new()));
    let sink = buf.clone();
    std::thread::spawn(move || {
        let mut chunk = [0u8; 4096];
        loop {
            match source.read(&mut chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => sink
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .extend_from_slice(&chunk[..n]),
            }
        }
    });
    buf
}

/// Wait (up to a second) for the [`capture`] thread of `buf` to reach EOF:
/// it holds the only other reference until then.
fn settle(buf: &Arc<Mutex<Vec<u8>>>) {
    let deadline = Instant::now() + Duration::from_secs(1);
    while Arc::strong_count(buf) > 1 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A new connection with [`IO_TIMEOUT`] read and write timeouts.
pub fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect_timeout(&addr, IO_TIMEOUT)
        .unwrap_or_else(|e| panic!("connect to {addr}: {e}"));
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    s.set_write_timeout(Some(IO_TIMEOUT))
        .expect("write timeout");
    s.set_nodelay(true).expect("nodelay");
    s
}

/// Write `raw` on a new connection to `addr` and read until EOF or timeout.
/// A write the server refuses half-way (it closed early) is not an error:
/// what it answered before closing is still read.
pub fn send_to(addr: SocketAddr, raw: &[u8]) -> Vec<u8> {
    let mut s = connect(addr);
    let _ = s.write_all(raw);
    read_until_close(&mut s, IO_TIMEOUT).unwrap_or_else(|partial| partial)
}

/// Read until the peer closes (EOF or reset) within `limit`: `Ok(bytes)`.
/// `Err(bytes)` if the connection was still open at the bound.
pub fn read_until_close(s: &mut TcpStream, limit: Duration) -> Result<Vec<u8>, Vec<u8>> {
    let deadline = Instant::now() + limit;
    let mut out = Vec::new();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(out);
        }
        s.set_read_timeout(Some(left)).expect("read timeout");
        match s.read(&mut chunk) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if is_timeout(&e) => return Err(out),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            // ECONNRESET and friends: closed.
            Err(_) => return Ok(out),
        }
    }
}

/// Whether nothing at all arrives on `s` within `quiet` (the connection stays
/// open and silent). Restores [`IO_TIMEOUT`] afterwards.
pub fn stays_silent(mut s: &TcpStream, quiet: Duration) -> bool {
    s.set_read_timeout(Some(quiet)).expect("read timeout");
    let mut b = [0u8; 1];
    let silent = matches!(s.read(&mut b), Err(e) if is_timeout(&e));
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("read timeout");
    silent
}

pub fn is_timeout(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// One parsed HTTP response.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Response {
    /// e.g. `HTTP/1.1`.
    pub version: String,
    pub status: u16,
    pub reason: String,
    /// Header fields in order, names as sent.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Response {
    /// The first value of `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name` (case-insensitive), in order.
    pub fn header_all(&self, name: &str) -> Vec<&str> {
        self.headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
            .collect()
    }

    pub fn body_text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `Content-Length` value, parsed.
    pub fn content_length(&self) -> Option<u64> {
        self.header("content-length").map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("bad Content-Length {v:?}"))
        })
    }
}

/// Read one response (Content-Length framing; none for 1xx/204/304) from
/// `s`, byte-exact: nothing after it is consumed, so the stream can carry
/// the next request and response. Panics on EOF, timeout or a malformed head.
pub fn read_response(s: &mut TcpStream) -> Response {
    try_read_response(s, true).unwrap_or_else(|e| panic!("reading a response: {e}"))
}

/// Like [`read_response`] for the answer to a HEAD request: the head only.
pub fn read_response_head_only(s: &mut TcpStream) -> Response {
    try_read_response(s, false).unwrap_or_else(|e| panic!("reading a HEAD response: {e}"))
}

/// Read one response; `with_body: false` for HEAD.
pub fn try_read_response(s: &mut TcpStream, with_body: bool) -> io::Result<Response> {
    let head = read_head(s)?;
    let mut resp = parse_head(&head)?;
    if with_body && !(resp.status < 200 || resp.status == 204 || resp.status == 304) {
        if resp.header("transfer-encoding").is_some() {
            return Err(io::Error::other("unexpected Transfer-Encoding in response"));
        }
        match resp.content_length() {
            Some(n) => {
                let mut body = vec![0u8; n as usize];
                s.read_exact(&mut body)?;
                resp.body = body;
            }
            None => {
                return Err(io::Error::other(format!(
                    "response without Content-Length: {resp:?}"
                )))
            }
        }
    }
    Ok(resp)
}

/// Read up to and including the blank line, a byte at a time so nothing
/// beyond the head is taken from the socket.
fn read_head(s: &mut TcpStream) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match s.read(&mut byte) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "connection closed after {} bytes of a response head: {:?}",
                        head.len(),
                        String::from_utf8_lossy(&head)
                    ),
                ))
            }
            Ok(_) => head.push(byte[0]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        if head.len() > 64 * 1024 {
            return Err(io::Error::other("response head over 64 KiB"));
        }
    }
    Ok(head)
}

fn parse_head(head: &[u8]) -> io::Result<Response> {
    let bad = |what: &str| {
        io::Error::other(format!(
            "malformed response head ({what}): {:?}",
            String::from_utf8_lossy(head)
        ))
    };
    let text = std::str::from_utf8(head).map_err(|_| bad("not UTF-8"))?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().ok_or_else(|| bad("empty"))?;
    let mut parts = status_line.splitn(3, ' ');
    let version = parts.next().ok_or_else(|| bad("version"))?.to_owned();
    let status = parts
        .next()
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| bad("status code"))?;
    let reason = parts.next().unwrap_or("").to_owned();
    let mut headers = Vec::new();
    for line in lines.filter(|l| !l.is_empty()) {
        let (name, value) = line.split_once(':').ok_or_else(|| bad("field"))?;
        headers.push((name.to_owned(), value.trim().to_owned()));
    }
    Ok(Response {
        version,
        status,
        reason,
        headers,
        body: Vec::new(),
    })
}

/// Parse every response in `bytes` (as returned by `send`), GET framing.
/// Panics on a truncated response.
pub fn parse_responses(mut bytes: &[u8]) -> Vec<Response> {
    let mut out = Vec::new();
    while !bytes.is_empty() {
        let end = bytes
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .unwrap_or_else(|| {
                panic!(
                    "truncated response head: {:?}",
                    String::from_utf8_lossy(bytes)
                )
            })
            + 4;
        let mut resp = parse_head(&bytes[..end]).unwrap_or_else(|e| panic!("{e}"));
        bytes = &bytes[end..];
        if !(resp.status < 200 || resp.status == 204 || resp.status == 304) {
            let n = resp.content_length().expect("Content-Length") as usize;
            assert!(
                bytes.len() >= n,
                "body truncated: want {n}, have {}",
                bytes.len()
            );
            resp.body = bytes[..n].to_vec();
            bytes = &bytes[n..];
        }
        out.push(resp);
    }
    out
}

/// Run `cmd` to completion, killing it after `limit` (then panicking).
/// stdout and stderr are captured.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let out = capture(child.stdout.take().expect("stdout"));
    let err = capture(child.stderr.take().expect("stderr"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!(
                "{cmd:?} still running after {limit:?}\nstderr:\n{}",
                String::from_utf8_lossy(&err.lock().unwrap_or_else(|e| e.into_inner()))
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    // The pipes close with the process; let the capture threads finish.
    settle(&out);
    settle(&err);
    let take =
        |b: Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *b.lock().unwrap_or_else(|e| e.into_inner()));
    Output {
        status,
        stdout: take(out),
        stderr: take(err),
    }
}

/// `servery` with `args`, run to completion within 10 s.
pub fn servery(args: &[&str]) -> Output {
    run_bounded(Command::new(BIN).args(args), Duration::from_secs(10))
}

/// Shut the write half so the server sees EOF after what was sent.
pub fn half_close(s: &TcpStream) {
    let _ = s.shutdown(Shutdown::Write);
}

/// A port that was free a moment ago (for tests that must know the port
/// before the server is ready).
pub fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap()
}

/// A docroot with `small.txt` and a `big.bin` of `big` bytes.
pub fn docroot(big: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.txt"), b"small\n").unwrap();
    let data: Vec<u8> = (0..big).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), data).unwrap();
    dir
}

/// Try one GET; `Some(status line)` if anything came back.
pub fn try_get(addr: SocketAddr, path: &str) -> Option<String> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()?;
    s.set_read_timeout(Some(Duration::from_millis(500))).ok()?;
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").as_bytes())
        .ok()?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf).ok()?;
    (n > 0).then(|| {
        String::from_utf8_lossy(&buf[..n])
            .lines()
            .next()
            .unwrap_or("")
            .to_owned()
    })
}

/// The value of one series (`name` or `name{labels}`, exactly as written) in
/// a Prometheus text exposition; `None` when the series is absent.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
