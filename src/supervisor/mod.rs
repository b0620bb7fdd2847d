//! The supervisor: one generation of workers, from barrier to drain.
//!
//! Owns: the server's phases ([`Phase`], one writer: `Supervisor::enter`),
//! spawning worker threads, the startup barrier, shutdown deadlines, and the
//! admin endpoint's lifetime. Does not own sockets' creation (`net`), what a
//! worker does (`worker`) or signal installation (the binary forwards
//! signals through a [`Handle`]).
//!
//! Flow:
//! 1. Bind every listening socket ([`crate::net::ListenerPlan`]); start admin.
//! 2. Spawn one thread per worker; wait for the full PREPARED quorum within
//!    `startup_timeout`. Any failure, timeout or signal: roll back (ABORT to
//!    all, join all; sockets close with their workers) and return the cause.
//! 3. COMMIT to all; wait for the full READY quorum; only then report ready.
//! 4. Run until SIGTERM/SIGINT or [`Handle::stop`].
//! 5. Drain: DRAIN to all; at `drain_timeout` FORCE (cut what is left); at
//!    `force_timeout` give up on survivors and report them. A second SIGINT
//!    returns at once.

use std::net::SocketAddr;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::app::HandlerFactory;
use crate::config::Config;
use crate::net::{ListenerPlan, Source};
use crate::telemetry::admin::Admin;
use crate::telemetry::{Phase as Readiness, PhaseCell, WorkerStats};
use crate::worker::{self, Control, Driver, Report, Settings, State};

/// Signals the binary forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: drain and exit.
    Terminate,
    /// SIGINT: drain and exit; a second one exits at once.
    Interrupt,
    /// SIGHUP: reload (rolling generations; not in this version).
    Hangup,
}

/// Everything the supervisor waits on, in one channel.
#[derive(Debug)]
pub enum Event {
    Worker(Report),
    Signal(Signal),
}

/// The supervisor's phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Workers starting; waiting for the PREPARED quorum.
    Preparing,
    /// COMMIT sent; waiting for the READY quorum.
    Committing,
    /// Serving.
    Running,
    /// Shutdown begun; DRAIN sent.
    Draining,
    /// Drain deadline passed; FORCE sent.
    Forcing,
    /// Startup failed; workers being rolled back.
    RollingBack,
    /// All workers gone.
    Stopped,
}

/// Why the server could not start or did not stop cleanly.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Listeners(#[from] crate::net::Error),
    #[error("cannot start the admin listener on {addr}: {source}")]
    Admin {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("cannot spawn worker {worker}: {source}")]
    Spawn {
        worker: usize,
        source: std::io::Error,
    },
    #[error("worker {worker} failed: {reason}")]
    WorkerFailed { worker: usize, reason: String },
    #[error("worker {worker} exited unexpectedly")]
    WorkerExited { worker: usize },
    #[error("workers {workers:?} not {phase} within the startup timeout of {timeout:?}")]
    StartupTimeout {
        workers: Vec<usize>,
        phase: &'static str,
        timeout: Duration,
    },
    #[error("interrupted by {signal:?} during startup")]
    Interrupted { signal: Signal },
    #[error("second SIGINT: exiting without waiting for the drain")]
    Abandoned,
    #[error("drain timeout: {connections} connection(s) were cut")]
    ConnectionsCut { connections: usize },
    #[error("workers {workers:?} still running at the force timeout")]
    Survivors { workers: Vec<usize> },
}

/// What the ready line reports.
#[derive(Debug, Clone)]
pub struct Ready {
    pub addrs: Vec<SocketAddr>,
    pub workers: usize,
    pub driver: Driver,
    pub source: Source,
    pub cpus: Option<Vec<usize>>,
    pub admin: Option<SocketAddr>,
    /// From `Server::run` to the READY quorum.
    pub startup: Duration,
}

impl std::fmt::Display for Ready {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let urls: Vec<String> = self.addrs.iter().map(|a| format!("http://{a}")).collect();
        write!(
            f,
            "servery: ready on {} — {} workers, {}, {}, ",
            urls.join(" "),
            self.workers,
            self.driver.name(),
            self.source.name()
        )?;
        match &self.cpus {
            Some(c) => write!(f, "cpus {}", crate::config::cpus::join(c.iter()))?,
            None => write!(f, "unpinned")?,
        }
        if let Some(a) = self.admin {
            write!(f, ", admin http://{a}")?;
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

/// A server: a config and a handler factory, run by [`Server::run`].
pub struct Server<F> {
    config: Config,
    factory: Arc<F>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    stats: Arc<Vec<Arc<WorkerStats>>>,
    readiness: Arc<PhaseCell>,
}

struct Slot {
    control: flume::Sender<Control>,
    thread: Option<JoinHandle<()>>,
    state: State,
}

struct Supervisor {
    phase: Phase,
    slots: Vec<Slot>,
}

impl Supervisor {
    fn enter(&mut self, phase: Phase) {
        tracing::debug!(from = ?self.phase, to = ?phase, "supervisor transition");
        self.phase = phase;
    }

    fn broadcast(&self, c: Control) {
        for s in &self.slots {
            let _ = s.control.send(c);
        }
    }

    fn count(&self, state: State) -> usize {
        self.slots.iter().filter(|s| s.state == state).count()
    }

    fn gone(&self) -> bool {
        self.slots
            .iter()
            .all(|s| matches!(s.state, State::Exited | State::Aborted))
    }

    fn not_in(&self, states: &[State]) -> Vec<usize> {
        (0..self.slots.len())
            .filter(|&i| !states.contains(&self.slots[i].state))
            .collect()
    }

    fn join_all(&mut self) {
        for s in &mut self.slots {
            if let Some(t) = s.thread.take() {
                let _ = t.join();
            }
        }
        self.enter(Phase::Stopped);
    }
}

impl<F: HandlerFactory> Server<F> {
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
            stats: Arc::new(stats),
            readiness: Arc::new(PhaseCell::default()),
        }
    }

    /// A handle to signal or stop the server from another thread.
    pub fn handle(&self) -> Handle {
        Handle {
            tx: self.tx.clone(),
        }
    }

    /// Per-worker counters (also served by the admin endpoint).
    pub fn stats(&self) -> Arc<Vec<Arc<WorkerStats>>> {
        self.stats.clone()
    }

    /// Start, call `on_ready` after the READY quorum, serve until stopped,
    /// drain. `Ok` only for a complete, clean drain.
    pub fn run(self, on_ready: impl FnOnce(&Ready)) -> Result<(), Error> {
        let started = Instant::now();
        let cfg = &self.config;
        let plan = ListenerPlan::bind(cfg)?;
        let admin = match cfg.admin {
            Some(addr) => Some(
                Admin::start(addr, self.readiness.clone(), self.stats.clone())
                    .map_err(|source| Error::Admin { addr, source })?,
            ),
            None => None,
        };
        let settings = Settings {
            limits: cfg.limits,
            header_timeout: cfg.header_timeout,
            keepalive_timeout: cfg.keepalive_timeout,
            max_connections: cfg.max_connections.get(),
        };

        let mut sup = Supervisor {
            phase: Phase::Preparing,
            slots: Vec::new(),
        };
        let source = plan.source;
        let addrs = plan.addrs.clone();
        for (index, sockets) in plan.per_worker.into_iter().enumerate() {
            let (control, control_rx) = flume::unbounded();
            let tx = self.tx.clone();
            let init = worker::Init {
                index,
                cpu: cfg.cpus.as_ref().map(|c| c[index]),
                sockets,
                driver: cfg.driver,
                settings,
                factory: self.factory.clone(),
                stats: self.stats[index].clone(),
                control: control_rx,
                report: Arc::new(move |r| {
                    let _ = tx.send(Event::Worker(r));
                }),
            };
            let thread = std::thread::Builder::new()
                .name(format!("servery-w{index}"))
                .spawn(move || worker::run(init));
            match thread {
                Ok(t) => sup.slots.push(Slot {
                    control,
                    thread: Some(t),
                    state: State::Starting,
                }),
                Err(source) => {
                    self.roll_back(&mut sup);
                    return Err(Error::Spawn {
                        worker: index,
                        source,
                    });
                }
            }
        }

        // The barrier: PREPARED quorum, COMMIT, READY quorum.
        let deadline = started + cfg.startup_timeout;
        let mut driver = None;
        if let Err(e) = self.await_quorum(&mut sup, State::Prepared, deadline, &mut driver) {
            self.roll_back(&mut sup);
            return Err(e);
        }
        sup.enter(Phase::Committing);
        sup.broadcast(Control::Commit);
        if let Err(e) = self.await_quorum(&mut sup, State::Running, deadline, &mut driver) {
            self.roll_back(&mut sup);
            return Err(e);
        }
        sup.enter(Phase::Running);
        self.readiness.set(Readiness::Ready);
        let ready = Ready {
            addrs,
            workers: sup.slots.len(),
            driver: driver.unwrap_or(Driver::Epoll),
            source,
            cpus: cfg.cpus.clone(),
            admin: admin.as_ref().map(Admin::local_addr),
            startup: started.elapsed(),
        };
        tracing::info!(
            startup_ms = ready.startup.as_secs_f64() * 1e3,
            "ready quorum reached"
        );
        on_ready(&ready);

        let result = self.serve_then_drain(&mut sup);
        drop(admin);
        result
    }

    /// Wait until every worker has reached `target`.
    fn await_quorum(
        &self,
        sup: &mut Supervisor,
        target: State,
        deadline: Instant,
        driver: &mut Option<Driver>,
    ) -> Result<(), Error> {
        while sup.count(target) < sup.slots.len() {
            let wait = deadline.saturating_duration_since(Instant::now());
            match self.rx.recv_timeout(wait) {
                Ok(Event::Worker(r)) => {
                    sup.slots[r.worker].state = r.state;
                    match r.state {
                        State::Prepared if driver.is_none() => *driver = r.driver,
                        State::Aborted => {
                            return Err(Error::WorkerFailed {
                                worker: r.worker,
                                reason: r.reason.unwrap_or_default(),
                            })
                        }
                        State::Exited => return Err(Error::WorkerExited { worker: r.worker }),
                        _ => {}
                    }
                }
                Ok(Event::Signal(Signal::Hangup)) => {
                    tracing::warn!("SIGHUP during startup ignored");
                }
                Ok(Event::Signal(signal)) => return Err(Error::Interrupted { signal }),
                Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                    let phase = if target == State::Prepared {
                        "prepared"
                    } else {
                        "ready"
                    };
                    return Err(Error::StartupTimeout {
                        workers: sup.not_in(&[target]),
                        phase,
                        timeout: self.config.startup_timeout,
                    });
                }
            }
        }
        Ok(())
    }

    /// Startup failed: every worker exits without (further) accepting, every
    /// thread is joined, every socket closed with its worker.
    fn roll_back(&self, sup: &mut Supervisor) {
        sup.enter(Phase::RollingBack);
        sup.broadcast(Control::Abort);
        // Workers that got past COMMIT treat ABORT like DRAIN; nothing was
        // admitted before the READY quorum was announced, but they may hold
        // connections the kernel queued: FORCE cuts those at the deadline.
        let force_at = Instant::now() + self.config.drain_timeout.min(Duration::from_secs(5));
        let mut forced = false;
        while !sup.gone() {
            let now = Instant::now();
            if !forced && now >= force_at {
                sup.broadcast(Control::Force);
                forced = true;
            }
            match self.rx.recv_timeout(Duration::from_millis(100)) {
                Ok(Event::Worker(r)) => sup.slots[r.worker].state = r.state,
                Ok(Event::Signal(_)) => {}
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        sup.join_all();
    }

    fn serve_then_drain(&self, sup: &mut Supervisor) -> Result<(), Error> {
        let mut unexpected = None;
        loop {
            match self.rx.recv() {
                Ok(Event::Signal(Signal::Hangup)) => {
                    tracing::warn!("SIGHUP: configuration reload is not supported in this version; still serving");
                }
                Ok(Event::Signal(s)) => {
                    tracing::info!(signal = ?s, "shutting down: draining");
                    break;
                }
                Ok(Event::Worker(r)) => {
                    sup.slots[r.worker].state = r.state;
                    if matches!(r.state, State::Aborted | State::Exited) {
                        tracing::error!(worker = r.worker, reason = ?r.reason, "worker stopped unexpectedly; shutting down");
                        unexpected = Some(match r.reason {
                            Some(reason) => Error::WorkerFailed {
                                worker: r.worker,
                                reason,
                            },
                            None => Error::WorkerExited { worker: r.worker },
                        });
                        break;
                    }
                }
                Err(_) => break,
            }
        }

        sup.enter(Phase::Draining);
        self.readiness.set(Readiness::Draining);
        let start = Instant::now();
        let drain_at = start + self.config.drain_timeout;
        let force_at = start + self.config.force_timeout;
        sup.broadcast(Control::Drain);
        let mut cut = 0;
        while !sup.gone() {
            let now = Instant::now();
            if sup.phase == Phase::Draining && now >= drain_at {
                sup.enter(Phase::Forcing);
                tracing::warn!("drain timeout reached: cutting remaining connections");
                sup.broadcast(Control::Force);
            }
            if now >= force_at {
                let workers = sup.not_in(&[State::Exited, State::Aborted]);
                tracing::error!(?workers, "workers still alive at the force timeout");
                return Err(Error::Survivors { workers });
            }
            let next = if sup.phase == Phase::Draining {
                drain_at
            } else {
                force_at
            };
            match self.rx.recv_timeout(next.saturating_duration_since(now)) {
                Ok(Event::Worker(r)) => {
                    sup.slots[r.worker].state = r.state;
                    cut += r.cut;
                }
                Ok(Event::Signal(Signal::Interrupt)) => return Err(Error::Abandoned),
                Ok(Event::Signal(_)) => {}
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        sup.join_all();
        tracing::info!(cut, "all workers stopped");
        if let Some(e) = unexpected {
            return Err(e);
        }
        if cut > 0 {
            return Err(Error::ConnectionsCut { connections: cut });
        }
        Ok(())
    }
}
