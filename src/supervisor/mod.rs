//! The supervisor: generations of workers, from barrier to drain.
//!
//! Owns: the server's phases ([`Phase`]), every listening socket for the
//! life of the server, the startup barrier, crash restarts within a
//! budget, health beats, rolling reloads (SIGHUP), shutdown deadlines,
//! systemd notifications and the admin endpoint's lifetime. Does not own
//! sockets' creation (`net`), what a worker does (`worker`), the TLS
//! identity (`tls::identity`) or signal installation (the binary forwards
//! signals through a [`Handle`]).
//!
//! Layout: [`Server::run`] is the one event loop: it waits on one channel
//! of typed [`Event`]s (worker reports, reaped processes, signals) or the
//! next timer, and hands each to `machine::Machine::step`, a state machine
//! that does no I/O and reads no clock (unit-tested with a fake host and a
//! fake clock). Its pieces: `generation` (slots, their states, the
//! barrier, drain deadlines), `restart` (the crash budget), `beats`,
//! `reload`, `shutdown`, `journal` (every transition, logged from one
//! place), and `types` at the bottom, which the others all speak; `host` is the real world it acts on (`member`: a worker thread
//! or process; `child`: the child watch).
//!
//! Flow:
//! 1. Bind every listening socket ([`crate::net::ListenerPlan`]); start
//!    admin and (process mode) the child watch.
//! 2. Generation 1: spawn a worker per slot (each gets dups of its slot's
//!    sockets); wait for the full PREPARED quorum within `startup_timeout`;
//!    COMMIT; wait for the full READY quorum. Any failure, timeout or signal
//!    rolls the generation back (ABORT, then kill; all reaped) and returns.
//! 3. Run: beat each worker every `beat_interval`; a worker that misses two
//!    beats is killed. A worker that dies unasked is replaced on its slot
//!    (same sockets: no queued connection is lost) after a short backoff,
//!    through its own PREPARED/COMMIT; more than `max_restarts` deaths of a
//!    slot within `restart_window` stops the server.
//! 4. SIGHUP: re-read the config, start generation N+1 behind the same
//!    barrier, then drain generation N. If N+1 fails its barrier it is rolled
//!    back and N keeps serving.
//! 5. SIGTERM/SIGINT: close the listening sockets, DRAIN every generation;
//!    at `drain_timeout` FORCE threads / SIGTERM processes; at
//!    `force_timeout` SIGKILL process groups; report survivors. A second
//!    SIGINT returns at once.

mod acks;
pub(crate) mod acme;
mod beats;
mod child;
mod generation;
mod host;
mod journal;
mod machine;
mod mail;
mod member;
pub mod process_worker;
pub(crate) mod protocol;
mod reload;
mod restart;
mod shutdown;
#[cfg(test)]
mod tests;
mod types;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::app::ServiceFactory;
use crate::config::{Config, Isolation};
use crate::net::{ListenerPlan, Source};
use crate::sys::shm::SharedCounter;
use crate::telemetry::admin::Admin;
use crate::telemetry::{PhaseCell, StatsTable, WorkerStats};
use crate::worker::Driver;
use child::ChildWatcher;
use host::Live;
use journal::Journal;
use machine::Machine;
pub use types::{Death, Error, Event, Phase, Signal};

/// What the ready line reports.
#[derive(Debug, Clone)]
pub struct Ready {
    pub addrs: Vec<SocketAddr>,
    pub workers: usize,
    pub driver: Driver,
    pub source: Source,
    pub isolation: Isolation,
    pub cpus: Option<Vec<usize>>,
    pub admin: Option<SocketAddr>,
    /// From `Server::run` to the READY quorum.
    pub startup: Duration,
    /// Which of `addrs` are TLS listeners.
    pub tls: Vec<bool>,
    /// SHA-256 of the certificate every worker presents.
    pub tls_fingerprint: Option<String>,
    /// What the TLS listeners offer.
    pub http2: crate::config::http2::Http2Config,
    /// Whether the plain listeners take HTTP/2 by its preface.
    pub h2c: crate::config::http2::H2c,
    /// Who seals TLS records on this kernel (with a TLS listener).
    pub ktls: Option<Ktls>,
    /// HTTP/3's UDP ports, and whether datagrams are steered to their
    /// connection's worker there.
    h3: Option<(Vec<u16>, bool)>,
}

/// What `--ktls` came to on this kernel, said once at start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ktls {
    /// `--ktls auto` and the kernel has TLS: it seals the records of TLS
    /// 1.3 connections speaking HTTP/1.1.
    Kernel,
    /// `--ktls auto`, but the kernel refused the `tls` ULP (why).
    Unavailable(String),
    /// `--ktls off`.
    Off,
}

impl Ktls {
    /// Ask this kernel, for a server with TLS listeners.
    fn probe(choice: crate::worker::KtlsChoice) -> Ktls {
        match choice {
            crate::worker::KtlsChoice::Off => Ktls::Off,
            crate::worker::KtlsChoice::Auto => match crate::sys::ktls::probe() {
                Ok(()) => Ktls::Kernel,
                Err(e) if crate::sys::ktls::unavailable(&e) => Ktls::Unavailable(
                    "this kernel has no tls ULP (CONFIG_TLS) or not its ciphers".into(),
                ),
                Err(e) => Ktls::Unavailable(e.to_string()),
            },
        }
    }
}

impl std::fmt::Display for Ktls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Ktls::Kernel => write!(f, "ktls on"),
            Ktls::Unavailable(why) => write!(f, "ktls unavailable ({why}), user space seals"),
            Ktls::Off => write!(f, "ktls off"),
        }
    }
}

impl Ready {
    /// The protocols a plain (`tls` false) or TLS listener speaks, in the
    /// order it prefers them.
    pub fn protocols(&self, tls: bool) -> Vec<&'static str> {
        use crate::config::http2::H2c;
        if tls {
            return self.http2.alpn.iter().map(|p| p.name()).collect();
        }
        match self.h2c {
            H2c::PriorKnowledge => vec!["http/1.1", "h2c"],
            H2c::Off => vec!["http/1.1"],
        }
    }
}

impl std::fmt::Display for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self
            .addrs
            .iter()
            .enumerate()
            .map(|(i, a)| {
                let scheme = if self.tls.get(i).copied().unwrap_or(false) {
                    "https"
                } else {
                    "http"
                };
                format!("{scheme}://{a}")
            })
            .collect();
        write!(
            f,
            "servery: ready on {} — {}, {}, {}, ",
            urls.join(" "),
            crate::plural::count(self.workers, "worker", "workers"),
            self.driver.name(),
            self.source.name()
        )?;
        if self.isolation == Isolation::Process {
            write!(f, "processes, ")?;
        }
        match &self.cpus {
            Some(c) => write!(f, "cpus {}", crate::config::cpus::join(c.iter()))?,
            None => write!(f, "unpinned")?,
        }
        if let Some(a) = self.admin {
            write!(f, ", admin http://{a}")?;
        }
        if let Some(fp) = &self.tls_fingerprint {
            write!(f, ", tls sha256 {fp}")?;
        }
        // One kind of listener speaks one set of protocols.
        for (tls, scheme) in [(false, "http"), (true, "https")] {
            let is_tls = |i: usize| self.tls.get(i).copied().unwrap_or(false);
            if (0..self.addrs.len()).any(|i| is_tls(i) == tls) {
                write!(f, ", {scheme} speaks {}", self.protocols(tls).join("+"))?;
            }
        }
        if let Some(k) = &self.ktls {
            write!(f, ", {k}")?;
        }
        if let Some((ports, steered)) = &self.h3 {
            let ports: Vec<String> = ports.iter().map(|p| format!("udp :{p}")).collect();
            write!(f, ", h3 on {}", ports.join(" "))?;
            if !steered {
                write!(f, " (not steered: see servery_quic_misrouted_total)")?;
            }
        }
        Ok(())
    }
}

/// Sends signals or a stop request to a running server.
#[derive(Debug, Clone)]
pub struct Handle {
    tx: Sender<Event>,
}

impl Handle {
    /// Forward a signal.
    pub fn signal(&self, s: Signal) {
        let _ = self.tx.send(Event::Signal(s));
    }

    /// Drain and stop, like SIGTERM.
    pub fn stop(&self) {
        self.signal(Signal::Terminate);
    }
}

/// Re-reads the configuration for a reload.
pub type Reloader = Box<dyn FnMut() -> Result<Config, String> + Send>;

/// Builds the service factory of a generation from its configuration.
pub type Remake<F> = Box<dyn Fn(&Config) -> F + Send>;

/// A server: a config and a service factory, run by [`Server::run`].
pub struct Server<F> {
    config: Config,
    factory: Arc<F>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    stats: StatsTable,
    readiness: Arc<PhaseCell>,
    reloader: Option<Reloader>,
    remake: Option<Remake<F>>,
    exe: PathBuf,
}

impl<F: ServiceFactory> Server<F> {
    pub fn new(config: Config, factory: F) -> Server<F> {
        let (tx, rx) = mpsc::channel();
        let stats = (0..config.workers.get())
            .map(|_| Arc::new(WorkerStats::default()))
            .collect();
        Server {
            config,
            factory: Arc::new(factory),
            tx,
            rx,
            stats: Arc::new(RwLock::new(stats)),
            readiness: Arc::new(PhaseCell::default()),
            reloader: None,
            remake: None,
            // Where the binary is now, so a reload after replacing it runs
            // the new one (/proc/self/exe would keep the old inode).
            exe: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("/proc/self/exe")),
        }
    }

    /// How SIGHUP gets the new configuration (the binary re-reads its file).
    pub fn with_reloader(mut self, reloader: Reloader) -> Server<F> {
        self.reloader = Some(reloader);
        self
    }

    /// Build each reload's factory from its configuration with `make` (the
    /// binary's static files: a reload's root and file settings then reach
    /// worker threads too). Without it every generation shares the factory
    /// given to [`Server::new`].
    pub fn remaking(mut self, make: Remake<F>) -> Server<F> {
        self.remake = Some(make);
        self
    }

    /// A handle to signal or stop the server from another thread.
    pub fn handle(&self) -> Handle {
        Handle {
            tx: self.tx.clone(),
        }
    }

    /// Per-worker counters (also served by the admin endpoint).
    pub fn stats(&self) -> StatsTable {
        self.stats.clone()
    }

    /// Start, call `on_ready` after the READY quorum, serve until stopped,
    /// drain. `Ok` only for a complete, clean drain.
    pub fn run(self, on_ready: impl FnOnce(&Ready)) -> Result<(), Error> {
        let started = Instant::now();
        let config = Arc::new(self.config);
        let listeners = Arc::new(ListenerPlan::bind(&config)?);
        let admin = match config.admin {
            Some(addr) => Some(
                Admin::start(addr, self.readiness.clone(), self.stats.clone())
                    .map_err(|source| Error::Admin { addr, source })?,
            ),
            None => None,
        };
        let watcher = match config.isolation {
            Isolation::Process => Some(
                ChildWatcher::start(config.child_watch, self.tx.clone())
                    .map_err(Error::ChildWatch)?,
            ),
            Isolation::Thread => None,
        };
        // `--max-connections` is the server's total: one counter every
        // worker (process) and generation shares.
        let budget = Some(Arc::new(SharedCounter::create().map_err(Error::Budget)?));
        let mut host = Live {
            factory: self.factory.clone(),
            remake: self.remake,
            events: self.tx.clone(),
            exe: self.exe,
            isolation: config.isolation,
            watcher,
            access_log: None,
            budget,
            stats: self.stats,
            retired: Vec::new(),
            readiness: self.readiness,
            reloader: self.reloader,
            identity: Default::default(),
            acme: acme::Ordering::new(),
            office: Default::default(),
        };
        let plan = host.resources(config.clone(), listeners.clone(), self.factory)?;
        let mut machine = Machine::start(host, plan, started, Journal::default());
        let mut on_ready = Some(on_ready);
        let mut listeners = Some(listeners);
        let outcome = loop {
            if let Some(driver) = machine.take_started() {
                // From here only the generations hold the sockets.
                let l = listeners.take();
                let ready = Ready {
                    addrs: l.as_ref().map(|l| l.addrs.clone()).unwrap_or_default(),
                    workers: config.workers.get(),
                    driver,
                    source: l.as_ref().map_or(Source::ReusePort, |l| l.source),
                    isolation: config.isolation,
                    cpus: config.cpus.clone(),
                    admin: admin.as_ref().map(Admin::local_addr),
                    startup: started.elapsed(),
                    tls: l.as_ref().map(|l| l.tls.clone()).unwrap_or_default(),
                    tls_fingerprint: machine
                        .current_plan()
                        .and_then(|p| p.tls.as_ref())
                        .and_then(|t| {
                            // What a client without SNI sees.
                            let site = crate::tls::without_sni(&t.identities, config.sites.default);
                            t.identities[site?].as_ref().map(|m| m.fingerprint())
                        }),
                    http2: config.http2.clone(),
                    h2c: config.conn.http2.h2c,
                    ktls: l
                        .as_ref()
                        .is_some_and(|l| l.tls.iter().any(|&t| t))
                        .then(|| Ktls::probe(config.conn.ktls)),
                    h3: l
                        .as_ref()
                        .filter(|l| !l.udp_addrs.is_empty())
                        .map(|l| (l.udp_addrs.iter().map(|a| a.port()).collect(), l.steered)),
                };
                drop(l);
                match &ready.ktls {
                    Some(Ktls::Kernel) => {
                        tracing::info!(
                            "kTLS: the kernel seals the records of TLS 1.3 over HTTP/1.1"
                        )
                    }
                    Some(Ktls::Unavailable(why)) => tracing::info!(
                        reason = %why,
                        "kTLS unavailable (the kernel refused the tls ULP): records are sealed in user space"
                    ),
                    Some(Ktls::Off) | None => {}
                }
                tracing::info!(
                    startup_ms = ready.startup.as_secs_f64() * 1e3,
                    "ready quorum reached"
                );
                if let Some(f) = on_ready.take() {
                    f(&ready);
                }
            }
            if let Some(outcome) = machine.take_outcome() {
                break outcome;
            }
            let now = Instant::now();
            let wait = machine.next_wakeup(now).saturating_duration_since(now);
            let event = match self.rx.recv_timeout(wait) {
                Ok(e) => Some(e),
                Err(RecvTimeoutError::Timeout) => None,
                // The machine's host holds a sender: cannot happen.
                Err(RecvTimeoutError::Disconnected) => break Ok(()),
            };
            machine.step(event, Instant::now());
        };
        if on_ready.is_none() && !matches!(outcome, Err(Error::Abandoned)) {
            notify(&[sd_notify::NotifyState::Stopping]);
        }
        drop(admin);
        outcome
    }
}

/// Tell systemd, when it is watching (NOTIFY_SOCKET set).
fn notify(states: &[sd_notify::NotifyState<'_>]) {
    if std::env::var_os("NOTIFY_SOCKET").is_some() {
        if let Err(e) = sd_notify::notify(false, states) {
            tracing::warn!(error = %e, "sd_notify failed");
        }
    }
}
