//! [`TestServer`]: one running `servery serve` child process (started by a
//! [`Builder`](super::Builder)) and everything a test does to it as a
//! process: its ready line ([`Ready`]), stdout and stderr, signals, its
//! exit, the process-isolation helpers (`workers`, `reload`), the fetch
//! helpers that speak to its listeners, and the cleanup.
//!
//! Does not own the command line (`builder`) or the client side of HTTP and
//! TLS (`http`, `tls`; the fetch helpers here are built on them).
//!
//! Life:
//! 1. [`TestServer::launch`] forwards the child's stdout lines to a channel
//!    (keeping every byte) and its stderr to a buffer.
//! 2. [`TestServer::wait_ready`] reads lines until the ready line, which
//!    gives the addresses, the admin listener and the TLS fingerprint.
//! 3. Drop: SIGKILL to the process group (unless the child was already
//!    reaped), reap the child, then the [`Tag`] SIGKILLs every process left
//!    carrying it (worker processes lead groups of their own), so nothing is
//!    left behind even when a test panics.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, ExitStatus};
use std::sync::{mpsc, Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::Signal;
use nix::unistd::Pid;

use super::http::{connect, read_response, send_to, try_get, Response};
use super::process::{capture, settle, text, Tag};
use super::{wait_until, Builder};

/// Why a server did not become ready.
#[derive(Debug)]
pub struct StartFailure {
    /// The exit status, if the child exited (else it was killed at the bound).
    pub status: Option<ExitStatus>,
    /// Everything it wrote to stdout.
    pub stdout: String,
    /// Everything it wrote to stderr.
    pub stderr: String,
    /// The processes it started: whether any outlived it is the test's to
    /// check ([`Tag::all_gone`]); dropping this kills them.
    pub tag: Tag,
}

/// What the ready line says: `servery: ready on http://A [https://B ...] —
/// DETAILS[, admin http://C][, tls sha256 FP]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ready {
    /// The whole line.
    pub line: String,
    /// Every listener in the line's order: plain ones first, then TLS ones.
    pub addrs: Vec<SocketAddr>,
    /// The plain (`http://`) listeners.
    pub http: Vec<SocketAddr>,
    /// The TLS (`https://`) listeners.
    pub https: Vec<SocketAddr>,
    pub admin: Option<SocketAddr>,
    /// The TLS certificate's SHA-256, as the line prints it.
    pub fingerprint: Option<String>,
}

/// Parse a ready line; `None` for any other line.
pub fn parse_ready_line(line: &str) -> Option<Ready> {
    let rest = line.strip_prefix("servery: ready on ")?;
    let (urls, details) = rest.split_once(" — ")?;
    let mut ready = Ready {
        line: line.to_owned(),
        addrs: Vec::new(),
        http: Vec::new(),
        https: Vec::new(),
        admin: None,
        fingerprint: None,
    };
    for url in urls.split_whitespace() {
        if let Some(a) = url.strip_prefix("https://") {
            ready.https.push(a.parse().ok()?);
        } else {
            ready.http.push(url.strip_prefix("http://")?.parse().ok()?);
        }
    }
    if ready.http.is_empty() && ready.https.is_empty() {
        return None;
    }
    ready.addrs = ready.http.iter().chain(&ready.https).copied().collect();
    for part in details.split(", ") {
        if let Some(a) = part.strip_prefix("admin http://") {
            ready.admin = Some(a.parse().ok()?);
        } else if let Some(fp) = part.strip_prefix("tls sha256 ") {
            ready.fingerprint = Some(fp.to_owned());
        }
    }
    Some(ready)
}

/// A `servery serve` child process (see the module doc for its life).
pub struct TestServer {
    child: Child,
    exited: Option<ExitStatus>,
    /// stdout lines not yet looked at by [`TestServer::wait_ready`].
    lines: mpsc::Receiver<String>,
    ready: Option<Ready>,
    /// What the ready line must contain (the driver, the isolation asked for).
    expect: Vec<String>,
    root: PathBuf,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    /// Dropped after `Drop::drop` has killed the child: kills what is left.
    /// `None` only once handed to a [`StartFailure`].
    tag: Option<Tag>,
    /// Held so our own docroot lives as long as the server.
    _own_root: Option<tempfile::TempDir>,
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

    /// Take over a just-spawned `child` (stdout and stderr piped) serving
    /// `root`: step 1 of the life. `own_root` is deleted after the server
    /// is gone; the ready line must contain each of `expect`.
    pub(super) fn launch(
        mut child: Child,
        root: PathBuf,
        own_root: Option<tempfile::TempDir>,
        tag: Tag,
        expect: Vec<String>,
    ) -> TestServer {
        let stderr = capture(child.stderr.take().expect("piped stderr"));
        // stdout: a thread keeps every byte and forwards each line; the
        // ready line is among them. It keeps reading after the ready line
        // (nobody listens any more) so the server never blocks on, or dies
        // of, a full pipe.
        let source = child.stdout.take().expect("piped stdout");
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let sink = stdout.clone();
        let (tx, lines) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(source).lines().map_while(Result::ok) {
                let mut all = sink.lock().unwrap_or_else(|e| e.into_inner());
                all.extend_from_slice(line.as_bytes());
                all.push(b'\n');
                drop(all);
                let _ = tx.send(line);
            }
        });
        TestServer {
            child,
            exited: None,
            lines,
            ready: None,
            expect,
            root,
            stdout,
            stderr,
            tag: Some(tag),
            _own_root: own_root,
        }
    }

    /// How a server that printed no ready line failed: its exit (waited
    /// for up to 2 s, else it is killed), its output, and its tag.
    pub(super) fn start_failure(mut self) -> StartFailure {
        let status = self.wait_exit(Duration::from_secs(2));
        if status.is_none() {
            self.kill();
        }
        settle(&self.stdout);
        settle(&self.stderr);
        StartFailure {
            status,
            stdout: self.stdout(),
            stderr: self.stderr(),
            tag: self.tag.take().expect("a server's tag"),
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The server's process group: its own (it is spawned as the leader).
    pub fn pgid(&self) -> u32 {
        self.child.id()
    }

    /// Wait up to `limit` for the ready line (at once if it was seen
    /// before): the first listener's address, or `None` if the line did not
    /// come (the server exited, or is still starting).
    pub fn wait_ready(&mut self, limit: Duration) -> Option<SocketAddr> {
        let deadline = Instant::now() + limit;
        while self.ready.is_none() {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.lines.recv_timeout(left).ok()?;
            if let Some(ready) = parse_ready_line(&line) {
                for want in &self.expect {
                    assert!(ready.line.contains(want.as_str()), "{want:?} not in {line}");
                }
                self.ready = Some(ready);
            }
        }
        Some(self.ready().addrs[0])
    }

    /// The parsed ready line; panics if it has not been seen.
    pub fn ready(&self) -> &Ready {
        self.ready
            .as_ref()
            .expect("the server is not ready (spawned, no wait_ready)")
    }

    pub fn ready_line(&self) -> &str {
        &self.ready().line
    }

    /// The first plain listener.
    pub fn addr(&self) -> SocketAddr {
        self.first(&self.ready().http, "plain")
    }

    /// Every listener, in the ready line's order (plain, then TLS).
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.ready().addrs
    }

    /// The plain listeners.
    pub fn http_addrs(&self) -> &[SocketAddr] {
        &self.ready().http
    }

    /// The first TLS listener.
    pub fn https(&self) -> SocketAddr {
        self.first(&self.ready().https, "TLS")
    }

    fn first(&self, listeners: &[SocketAddr], kind: &str) -> SocketAddr {
        *listeners
            .first()
            .unwrap_or_else(|| panic!("no {kind} listener: {}", self.ready_line()))
    }

    /// The TLS listeners.
    pub fn https_addrs(&self) -> &[SocketAddr] {
        &self.ready().https
    }

    /// The admin address; panics if the server was started without one.
    pub fn admin(&self) -> SocketAddr {
        self.ready().admin.expect("server started without --admin")
    }

    /// The TLS certificate's fingerprint from the ready line.
    pub fn fingerprint(&self) -> &str {
        let ready = self.ready();
        ready
            .fingerprint
            .as_deref()
            .unwrap_or_else(|| panic!("no tls sha256 in the ready line: {}", ready.line))
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Everything the server has written to stdout so far.
    pub fn stdout(&self) -> String {
        text(&self.stdout)
    }

    /// Everything the server has written to stderr so far.
    pub fn stderr(&self) -> String {
        text(&self.stderr)
    }

    /// Occurrences of `needle` in stderr so far.
    pub fn stderr_count(&self, needle: &str) -> usize {
        self.stderr().matches(needle).count()
    }

    /// Wait up to `limit` for `needle` to appear `n` times in stderr;
    /// panics (with stderr) if it does not.
    pub fn wait_log(&self, needle: &str, n: usize, limit: Duration) {
        let seen = wait_until(limit, || self.stderr_count(needle) >= n);
        assert!(
            seen,
            "no {needle:?} (x{n}) in stderr after {limit:?}:\n{}",
            self.stderr()
        );
    }

    /// A new connection to [`TestServer::addr`] with bounded reads.
    pub fn connect(&self) -> TcpStream {
        connect(self.addr())
    }

    /// Write `raw` on a new connection and read until the server closes it
    /// (or [`IO_TIMEOUT`](super::IO_TIMEOUT) passes). Does not half-close:
    /// whether and when the server closes is the server's decision.
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

    /// [`try_get`] on [`TestServer::addr`]: the status line, or `None`.
    pub fn try_get(&self, path: &str) -> Option<String> {
        try_get(self.addr(), path)
    }

    /// `GET path` on the admin listener (one request per connection).
    pub fn admin_get(&self, path: &str) -> Response {
        let mut s = connect(self.admin());
        let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n");
        s.write_all(req.as_bytes()).expect("write admin request");
        read_response(&mut s)
    }

    /// The admin listener's `/metrics` text (asserting a 200).
    pub fn metrics(&self) -> String {
        let r = self.admin_get("/metrics");
        assert_eq!(r.status, 200, "/metrics");
        r.body_text()
    }

    /// Poll `/metrics` every 100 ms until `done` holds or `limit` passes
    /// (process workers report with their health beats); the last text
    /// either way.
    pub fn wait_metrics(&self, limit: Duration, done: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let text = self.metrics();
            if done(&text) || Instant::now() >= deadline {
                return text;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Send `sig` to the server process.
    pub fn signal(&self, sig: Signal) {
        let pid = Pid::from_raw(self.pid() as i32);
        nix::sys::signal::kill(pid, sig).expect("kill(2) the server");
    }

    /// Send `sig` to the server's process group (not to worker processes:
    /// they lead groups of their own).
    pub fn signal_group(&self, sig: Signal) {
        let pgid = Pid::from_raw(self.pgid() as i32);
        nix::sys::signal::killpg(pgid, sig).expect("killpg(2) the server's group");
    }

    /// Still running (not exited).
    pub fn alive(&mut self) -> bool {
        self.wait_exit(Duration::ZERO).is_none()
    }

    /// Wait up to `timeout` for the process to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        if self.exited.is_none() {
            let child = &mut self.child;
            let mut status = None;
            wait_until(timeout, || {
                status = child.try_wait().ok().flatten();
                status.is_some()
            });
            self.exited = status;
            // Nothing of the server is left to hold its pipes: let the
            // readers take its last lines (on a loaded machine they can lag
            // the exit), so `stderr()` says everything it wrote.
            if status.is_some() && self.tag.as_ref().is_none_or(Tag::all_gone) {
                settle(&self.stdout);
                settle(&self.stderr);
            }
        }
        self.exited
    }

    /// SIGKILL the process group now and reap the server, then wait (up to
    /// a second each) for stdout and stderr to be read to their end.
    pub fn kill(&mut self) -> Option<ExitStatus> {
        self.kill_group();
        settle(&self.stdout);
        settle(&self.stderr);
        self.exited
    }

    /// SIGKILL to the group and reap, unless already reaped: after that its
    /// pid (the group's id) may belong to another process.
    fn kill_group(&mut self) {
        if self.exited.is_none() {
            let _ = nix::sys::signal::killpg(Pid::from_raw(self.pgid() as i32), Signal::SIGKILL);
            let _ = self.child.kill();
            if let Ok(status) = self.child.wait() {
                self.exited = Some(status);
            }
        }
    }

    /// The [`Tag`] of this server's processes.
    pub fn tag(&self) -> &Tag {
        self.tag.as_ref().expect("a server's tag")
    }

    /// Live `servery worker` processes of this server (process isolation).
    pub fn workers(&self) -> Vec<u32> {
        self.tag().workers()
    }

    /// Wait (bounded) for exactly `n` workers and return them.
    pub fn wait_workers(&self, n: usize) -> Vec<u32> {
        let mut w = Vec::new();
        let ok = wait_until(Duration::from_secs(5), || {
            w = self.workers();
            w.len() == n
        });
        assert!(ok, "want {n} workers, have {w:?}\n{}", self.stderr());
        w
    }

    /// SIGHUP, then wait until `n` workers, none of them from before, are
    /// all that is left (the new generation serves, the old one is reaped).
    pub fn reload(&self, n: usize, limit: Duration) -> Vec<u32> {
        let before = self.wait_workers(n);
        self.signal(Signal::SIGHUP);
        let mut now = Vec::new();
        let ok = wait_until(limit, || {
            now = self.workers();
            now.len() == n && now.iter().all(|p| !before.contains(p))
        });
        assert!(
            ok,
            "reload did not replace {before:?} within {limit:?}: {now:?}\n{}",
            self.stderr()
        );
        now
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.kill_group();
    }
}
