//! [`AppServer`]: a `servery::Server` running a service written in Rust, in
//! this test process, for the suites that need an app rather than the
//! static files the binary serves.
//!
//! The server is the library's own (`Server::new(config, factory)` then
//! `run`), so everything between the socket and the service is the code the
//! binary runs: only the service differs. One worker, as a thread of this
//! process, unpinned, on 127.0.0.1 port 0 with the driver asked for; the
//! settings a test cares about (`--max-body-bytes`, `--body-timeout`, ...)
//! are [`AppBuilder`] methods. The service's shared state (counters the
//! tests read) is the test's: the factory closes over it.
//!
//! Life:
//! 1. [`AppBuilder::start`] validates the config and runs the server on a
//!    thread of its own; `on_ready` sends the [`Ready`] report back, whose
//!    `addrs` hold the port the kernel chose. A server that fails to start
//!    fails the test with its error.
//! 2. The test talks to [`AppServer::addr`] with raw sockets (`http`).
//! 3. Drop: [`Handle::stop`] (SIGTERM's drain), then the thread is joined
//!    within [`STOP_TIMEOUT`], so no worker thread outlives its test.

use std::net::{SocketAddr, TcpStream};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use servery::app::ServiceFactory;
use servery::config::{DriverChoice, Isolation, RawConfig, WorkerCount};
use servery::supervisor::{Error, Handle, Ready};
use servery::telemetry::{StatsTable, WorkerStats};

use super::http::connect;
use super::READY_TIMEOUT;

/// How long a stopped server gets to drain and return (its drain timeout
/// is [`DRAIN_TIMEOUT_S`]; the rest is slack for a loaded machine).
pub const STOP_TIMEOUT: Duration = Duration::from_secs(15);
/// The drain timeout of every app server: a connection a test left in the
/// middle of a request is cut after this once the server is stopped.
const DRAIN_TIMEOUT_S: f64 = 2.0;

/// What an [`AppServer`] is started with: the settings beyond the
/// defaults. Each method is the flag of the same name.
#[derive(Debug)]
pub struct AppBuilder {
    raw: RawConfig,
}

impl AppBuilder {
    /// `--driver uring|epoll`; the server must really run on it.
    pub fn driver(mut self, driver: &str) -> Self {
        let choice: DriverChoice = driver
            .parse()
            .unwrap_or_else(|e| panic!("driver {driver:?}: {e}"));
        self.raw.driver = Some(choice);
        self
    }

    /// `--max-body-bytes N`.
    pub fn max_body_bytes(mut self, n: u64) -> Self {
        self.raw.max_body_bytes = Some(n.into());
        self
    }

    /// `--body-timeout SECONDS`.
    pub fn body_timeout(mut self, t: Duration) -> Self {
        self.raw.body_timeout = Some(t.into());
        self
    }

    /// Any other setting, on the raw config itself.
    /// A TLS listener too (`--tls-bind 127.0.0.1:0 --tls-self-signed`):
    /// [`AppServer::tls`] says where, and the certificate to pin.
    pub fn tls(mut self) -> Self {
        self.raw.tls_bind = Some(vec!["127.0.0.1:0".into()]);
        self.raw.tls_self_signed = true;
        self
    }

    pub fn raw(mut self, edit: impl FnOnce(&mut RawConfig)) -> Self {
        edit(&mut self.raw);
        self
    }

    /// Start the server with `factory` and wait until it is ready.
    pub fn start<F: ServiceFactory>(self, factory: F) -> AppServer {
        let asked = self.raw.driver;
        let config = self
            .raw
            .validate()
            .unwrap_or_else(|e| panic!("app server config: {e}"));
        let server = servery::Server::new(config, factory);
        let handle = server.handle();
        let stats = server.stats();
        let (ready_tx, ready_rx) = mpsc::channel::<Ready>();
        let (done_tx, done_rx) = mpsc::channel::<Result<(), Error>>();
        let thread = std::thread::Builder::new()
            .name("app-server".into())
            .spawn(move || {
                let outcome = server.run(|ready| {
                    let _ = ready_tx.send(ready.clone());
                });
                let _ = done_tx.send(outcome);
            })
            .expect("spawn the app server thread");
        let ready = match ready_rx.recv_timeout(READY_TIMEOUT) {
            Ok(ready) => ready,
            Err(_) => {
                handle.stop();
                let outcome = done_rx.recv_timeout(STOP_TIMEOUT);
                let _ = thread.join();
                panic!("the app server did not become ready: {outcome:?}");
            }
        };
        let want = match asked {
            Some(DriverChoice::Uring) => Some("io_uring"),
            Some(DriverChoice::Epoll) => Some("epoll"),
            _ => None,
        };
        if let Some(want) = want {
            assert_eq!(ready.driver.name(), want, "the server runs another driver");
        }
        let plain = |tls: bool| {
            ready
                .addrs
                .iter()
                .zip(&ready.tls)
                .find(|(_, &t)| t == tls)
                .map(|(a, _)| *a)
        };
        let addr = plain(false).expect("the server listens on plain TCP");
        let tls = plain(true).map(|a| {
            let fp = ready.tls_fingerprint.clone().expect("a TLS certificate");
            (a, fp)
        });
        AppServer {
            addr,
            tls,
            handle,
            stats,
            done: done_rx,
            thread: Some(thread),
        }
    }
}

/// A running in-process app server (see the module doc).
pub struct AppServer {
    addr: SocketAddr,
    /// The TLS listener and its certificate's fingerprint, if asked for.
    tls: Option<(SocketAddr, String)>,
    handle: Handle,
    stats: StatsTable,
    /// `run`'s outcome, sent as the server thread ends.
    done: mpsc::Receiver<Result<(), Error>>,
    /// `None` once joined.
    thread: Option<JoinHandle<()>>,
}

impl AppServer {
    /// One worker thread, unpinned, on 127.0.0.1 port 0, draining in
    /// [`DRAIN_TIMEOUT_S`]; the driver is the platform's unless asked.
    pub fn builder() -> AppBuilder {
        AppBuilder {
            raw: RawConfig {
                bind: Some(vec!["127.0.0.1:0".into()]),
                workers: Some(WorkerCount::Count(1)),
                no_pin: true,
                isolation: Some(Isolation::Thread),
                drain_timeout: Some(DRAIN_TIMEOUT_S.into()),
                ..RawConfig::default()
            },
        }
    }

    /// The plain listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The TLS listener and the SHA-256 fingerprint of its certificate
    /// (started with [`AppBuilder::tls`]).
    pub fn tls(&self) -> (SocketAddr, &str) {
        let (addr, fp) = self.tls.as_ref().expect("started without .tls()");
        (*addr, fp)
    }

    /// A new connection to it ([`connect`]: bounded reads, TCP_NODELAY).
    pub fn connect(&self) -> TcpStream {
        connect(self.addr)
    }

    /// The sum of one counter over the workers, e.g.
    /// `server.counter(|s| &s.handler_panics)`.
    pub fn counter(&self, which: impl Fn(&WorkerStats) -> &std::sync::atomic::AtomicU64) -> u64 {
        let table = self.stats.read().unwrap_or_else(|p| p.into_inner());
        table.iter().map(|s| WorkerStats::get(which(s))).sum()
    }

    /// Stop it and wait for `run` to return: its outcome (`Ok` only for a
    /// clean drain).
    pub fn stop(mut self) -> Result<(), Error> {
        self.shut()
    }

    fn shut(&mut self) -> Result<(), Error> {
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        self.handle.stop();
        let outcome = self.done.recv_timeout(STOP_TIMEOUT);
        match outcome {
            Ok(outcome) => {
                let _ = thread.join();
                outcome
            }
            // Not joined: it would block the test for ever. Failing the
            // test is the report.
            Err(_) => panic!("the app server did not stop within {STOP_TIMEOUT:?}"),
        }
    }
}

impl Drop for AppServer {
    fn drop(&mut self) {
        if self.thread.is_none() {
            return;
        }
        if std::thread::panicking() {
            // The test failed already: stop, but a second panic would abort.
            self.handle.stop();
            if self.done.recv_timeout(STOP_TIMEOUT).is_ok() {
                if let Some(t) = self.thread.take() {
                    let _ = t.join();
                }
            }
            return;
        }
        let _ = self.shut();
    }
}

/// A response of `status` with a text body (the test services' answers).
pub fn text(status: http::StatusCode, body: String) -> servery::app::Response {
    let mut resp = servery::app::Response::new(servery::app::Body::from(body));
    *resp.status_mut() = status;
    resp
}

/// The number after `key=` in a query string.
pub fn query_value(query: &str, key: &str) -> Option<usize> {
    query
        .split('&')
        .find_map(|kv| kv.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
}

/// Lower-case hex of `bytes` (digests).
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
