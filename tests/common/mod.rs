//! The one harness of the integration tests: the real `servery` binary,
//! started on port 0 over a temp docroot and spoken to with raw bytes over
//! std `TcpStream`s (hyper's and ripgrep's test harnesses); for services
//! written in Rust, the library's own `Server` on a thread instead (`app`).
//!
//! Owns, by file:
//! - `app`: [`AppServer`], the other kind of server: `servery::Server`
//!   running a service written in Rust, on a thread of the test process
//!   (the binary serves static files only), stopped and joined on drop.
//! - `builder`: [`Builder`], what a server is started with: port 0 or given
//!   ports, a temp docroot and its files, thread or process isolation, the
//!   driver, TLS (self-signed or from files), an admin listener, the
//!   environment and fault injection, an inherited systemd socket, another
//!   program, extra arguments; `start`, `try_start`, or `spawn` without
//!   waiting for the ready line.
//! - `server`: [`TestServer`], the running server: its ready line,
//!   addresses, pid and process group, stdout and stderr, signals,
//!   `wait_exit`, worker processes, fetches (`get`, `admin_get`,
//!   `metrics`), and the drop that kills its process group and every
//!   process it started.
//! - `http`: the client side of HTTP/1.1: connections with bounded reads,
//!   a byte-exact response reader, one-shot fetches, the Prometheus series
//!   reader.
//! - `tls`: the TLS client side: pinned-certificate verification, client
//!   configs, handshakes and requests over rustls.
//! - `h2`: the HTTP/2 client side: the `h2` crate's client on a tokio
//!   runtime of the test's own, h2c or over TLS, and one request asked
//!   over both protocols with the answers compared.
//! - `h3`: the HTTP/3 client side for interop tests: aioquic's client
//!   (`tests/support/h3get.py` in the venv `scripts/install-h3-clients.sh`
//!   makes) and ngtcp2's `gtlsclient`, run with a bound, answers parsed
//!   (status, headers, body length and SHA-256); an `Err` naming the
//!   install script when a client is missing, for [`skipped`].
//! - `pebble`: [`pebble::Pebble`], Let's Encrypt's test ACME CA and its
//!   mock DNS on free ports, for the ACME engine's suite (skipped with a
//!   [`skipped`] line when pebble cannot be installed).
//! - `process`: finding a test's processes by a tag in their environment,
//!   `/proc` readers, and running a command to completion with a bound.
//! - here: the constants every file shares, [`variant_tests!`] and
//!   [`driver_tests!`], small fixtures ([`docroot`], [`free_port`],
//!   [`wait_until`]), and the startup-barrier starts the thread- and
//!   process-isolation suites share ([`spawn_behind_barrier`],
//!   [`start_with_a_failing_prepare`]).
//!
//! Does not own what one suite alone needs (a suite's docroot layout, its
//! load clients, its certificate authority): those stay in the suite.
//!
//! Flow of a test:
//! 1. Build a server with [`TestServer::builder`].
//! 2. `start()` it (or `spawn()` it and watch it start).
//! 3. Talk to it with the `http`/`tls` helpers.
//! 4. Signal it and `wait_exit`, or just let it drop: the drop kills
//!    whatever is left.
//!
//! Each test binary uses a subset, hence the `dead_code` and
//! `unused_imports` allowances.
#![allow(dead_code)]

pub mod app;
pub mod builder;
pub mod h2;
pub mod h3;
pub mod http;
pub mod pebble;
pub mod process;
pub mod server;
pub mod tls;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

// What the suites reach as `common::NAME`; each binary uses a subset.
#[allow(unused_imports)]
pub use self::{
    app::{hex, query_value, text, AppBuilder, AppServer},
    builder::Builder,
    http::*,
    process::{cpu_seconds, ensure_nofile, nofile_limits, rss_bytes, run_bounded, servery, Tag},
    server::{parse_ready_line, Ready, StartFailure, TestServer},
};
#[allow(unused_imports)]
pub use nix::sys::signal::Signal;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_servery");
/// How long a server gets to print its ready line.
pub const READY_TIMEOUT: Duration = Duration::from_secs(10);
/// Read timeout of every client socket: a response that has not arrived by
/// then is a failure, not something to wait longer for.
pub const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// The environment variable of the test-only fault hooks
/// (`src/worker/fault.rs`).
pub const FAULT: &str = "SERVERY_TEST_FAULT";
/// Size of a `big.bin` ([`docroot`]) that a client reading 1 KiB of leaves
/// the worker writing: far more than the socket buffers hold.
pub const BIG: usize = 16 * 1024 * 1024;

/// Runs each listed `fn name(arg: &str)` once per variant, as `MOD::name`
/// calling `name(ARG)`: `variant_tests!([uring = "uring", epoll = "epoll"]
/// [a, b])`. Attributes before a name (e.g. `#[ignore = ".."]`) are put on
/// every generated test.
#[allow(unused_macros)]
macro_rules! variant_tests {
    ([$($variant:ident = $arg:literal),+ $(,)?] $names:tt) => {
        $( variant_tests!(@one $variant $arg $names); )+
    };
    (@one $variant:ident $arg:literal [$($(#[$meta:meta])* $name:ident),* $(,)?]) => {
        mod $variant {
            $( $(#[$meta])* #[test] fn $name() { super::$name($arg) } )*
        }
    };
}

/// Runs each listed `fn name(driver: &str)` as `uring::name` and `epoll::name`
/// (monoio's `test_all`), through [`variant_tests!`].
#[allow(unused_macros)]
macro_rules! driver_tests {
    ($($names:tt)*) => {
        variant_tests!([uring = "uring", epoll = "epoll"] [$($names)*]);
    };
}

/// Tell the person running the tests that the current test is skipped, and
/// why: a `SKIPPED: <test>: <why>` line written straight to stderr, since
/// libtest captures only the print macros and would otherwise show a bare
/// `ok`. For what is decided at run time (pebble installed when the test
/// runs, a file limit); a tool whose presence is known at build time is
/// `#[ignore]`d with its reason instead (`build.rs`, `tests/h2spec.rs`).
#[allow(dead_code)]
pub fn skipped(why: &str) {
    use std::io::Write as _;
    let current = std::thread::current();
    let test = current.name().unwrap_or("a test");
    let line = format!("SKIPPED: {test}: {why}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// A port that was free a moment ago (for tests that must know the port
/// before the server is ready).
pub fn free_port() -> SocketAddr {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a probe listener");
    l.local_addr().expect("probe listener address")
}

/// A docroot with `small.txt` and a `big.bin` of `big` bytes.
pub fn docroot(big: usize) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("small.txt"), b"small\n").unwrap();
    let data: Vec<u8> = (0..big).map(|i| (i % 251) as u8).collect();
    std::fs::write(dir.path().join("big.bin"), data).unwrap();
    dir
}

/// Spawn `server` on `addr` with two workers, worker 1 held `delay` in its
/// prepare (the `delay-prepare` fault), and [`first_answer`] `/small.txt`
/// on `addr` from just before the spawn until `delay` + 5 s: the server,
/// the first answer, and how many tries during `delay` got none.
pub fn spawn_behind_barrier(
    server: Builder,
    addr: SocketAddr,
    delay: Duration,
) -> (TestServer, Option<(Duration, String)>, usize) {
    let started = Instant::now();
    let server = server
        .bind(addr.to_string())
        .args(&["--workers", "2"])
        .fault(&format!("delay-prepare=1:{}", delay.as_millis()))
        .spawn();
    let (first, tried_early) = first_answer(
        addr,
        "/small.txt",
        started,
        delay,
        delay + Duration::from_secs(5),
    );
    (server, first, tried_early)
}

/// Try to start `server` on `addr` with two workers, worker 0 delayed
/// 300 ms in its prepare and worker 1 failing it (the `fail-prepare`
/// fault): how the start failed. Panics if the server became ready.
pub fn start_with_a_failing_prepare(server: Builder, addr: SocketAddr) -> StartFailure {
    let started = server
        .bind(addr.to_string())
        .args(&["--workers", "2"])
        .fault("fail-prepare=1;delay-prepare=0:300")
        .try_start();
    match started {
        Ok(s) => panic!("started: {}", s.ready_line()),
        Err(f) => f,
    }
}

/// Poll `cond` every 10 ms until it holds or `limit` passes.
pub fn wait_until(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A config file (`servery.toml`) in a temp dir kept as long as this is.
pub struct ConfigFile {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
}

impl ConfigFile {
    pub fn new(text: &str) -> ConfigFile {
        let dir = tempfile::tempdir().expect("a temp dir");
        let path = dir.path().join("servery.toml");
        std::fs::write(&path, text).expect("write the config file");
        ConfigFile { _dir: dir, path }
    }

    /// Replace its text (a reload's new config).
    pub fn write(&self, text: &str) {
        std::fs::write(&self.path, text).expect("write the config file");
    }

    /// Its path, as `--config` takes it.
    pub fn arg(&self) -> &str {
        self.path.to_str().expect("a UTF-8 temp path")
    }
}
