//! The supervisor: generations of workers, from barrier to drain.
//!
//! Owns: the server's phases ([`Phase`], one writer: `Supervisor::enter`),
//! every listening socket for the life of the server, spawning workers
//! (threads or processes, `member`), the startup barrier, crash restarts
//! within a budget, health beats, rolling reloads (SIGHUP), shutdown
//! deadlines, systemd notifications and the admin endpoint's lifetime. Does
//! not own sockets' creation (`net`), what a worker does (`worker`) or
//! signal installation (the binary forwards signals through a [`Handle`]).
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

mod child;
mod member;

use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use crate::app::HandlerFactory;
use crate::config::{Config, Isolation};
use crate::net::{ListenerPlan, Source};
use crate::sys::shm::SharedCounter;
use crate::telemetry::admin::Admin;
use crate::telemetry::{Phase as Readiness, PhaseCell, Snapshot, StatsTable, WorkerStats};
use crate::worker::{Control, Driver, Report, State};
use child::ChildWatcher;
pub use member::Death;
use member::{GenerationTls, Member, Spawn};

/// Signals the binary forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: drain and exit.
    Terminate,
    /// SIGINT: drain and exit; a second one exits at once.
    Interrupt,
    /// SIGHUP: rolling reload.
    Hangup,
}

/// Everything the supervisor waits on, in one channel.
#[derive(Debug)]
pub enum Event {
    /// A worker's transition or beat reply.
    Worker {
        generation: u64,
        report: Report,
        snapshot: Option<Snapshot>,
    },
    /// A worker process was reaped.
    Exited {
        generation: u64,
        slot: usize,
        pid: u32,
        death: Death,
    },
    Signal(Signal),
}

/// The supervisor's phases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// First generation passing its barrier.
    Starting,
    /// Serving.
    Running,
    /// A new generation passing its barrier (the old one serves).
    Reloading,
    /// Shutdown begun: DRAIN sent to every generation.
    Draining,
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
    #[error("cannot watch worker processes: {0}")]
    ChildWatch(std::io::Error),
    #[error("cannot create the shared connection budget: {0}")]
    Budget(std::io::Error),
    #[error("TLS: {0}")]
    Tls(#[from] crate::tls::Error),
    #[error("cannot spawn worker {worker}: {source}")]
    Spawn {
        worker: usize,
        source: std::io::Error,
    },
    #[error("worker {worker} failed: {reason}")]
    WorkerFailed { worker: usize, reason: String },
    #[error("worker {worker} exited during startup ({death})")]
    WorkerExited { worker: usize, death: Death },
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
    #[error("drain timeout: {connections} connection(s) or worker(s) were cut")]
    ConnectionsCut { connections: usize },
    #[error("still running at the force timeout: {survivors}")]
    Survivors { survivors: String },
    #[error("crash loop: worker {worker} died {deaths} times in {window_s} s, last: {last}")]
    CrashLoop {
        worker: usize,
        deaths: usize,
        window_s: u64,
        last: Death,
    },
}

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
            "servery: ready on {} — {} workers, {}, {}, ",
            urls.join(" "),
            self.workers,
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

/// A server: a config and a handler factory, run by [`Server::run`].
pub struct Server<F> {
    config: Config,
    factory: Arc<F>,
    tx: Sender<Event>,
    rx: Receiver<Event>,
    stats: StatsTable,
    readiness: Arc<PhaseCell>,
    reloader: Option<Reloader>,
    exe: PathBuf,
}

/// One worker slot of a generation.
struct Slot {
    member: Option<Member>,
    state: State,
    /// The end was seen (final report, or reaped).
    ended: bool,
    /// We asked it to stop: its end is not a crash.
    asked: bool,
    /// Outstanding beat (number, sent at) and consecutive misses.
    beat: Option<(u64, Instant)>,
    missed: u32,
    snapshot: Snapshot,
    /// When to start a replacement (after a crash).
    restart_at: Option<Instant>,
    /// We sent SIGTERM at the drain deadline (its death cut connections).
    terminated: bool,
}

impl Slot {
    fn new(member: Member) -> Slot {
        Slot {
            member: Some(member),
            state: State::Starting,
            ended: false,
            asked: false,
            beat: None,
            missed: 0,
            snapshot: Snapshot::default(),
            restart_at: None,
            terminated: false,
        }
    }

    fn live(&self) -> bool {
        self.member.is_some() && !self.ended
    }
}

/// Shutdown deadlines of a draining generation.
#[derive(Debug, Clone, Copy)]
struct Deadlines {
    drain_at: Instant,
    force_at: Instant,
    termed: bool,
    killed: bool,
}

struct Generation {
    id: u64,
    config: Arc<Config>,
    listeners: Option<Arc<ListenerPlan>>,
    slots: Vec<Slot>,
    draining: Option<Deadlines>,
    /// Connections cut by FORCE (threads) reported on exit.
    cut: usize,
    tls: Option<GenerationTls>,
}

impl Generation {
    fn gone(&self) -> bool {
        self.slots.iter().all(|s| !s.live())
    }

    fn survivors(&self) -> Vec<String> {
        self.slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.live())
            .map(|(i, s)| match s.member.as_ref().and_then(Member::pid) {
                Some(pid) => format!("worker {i} (generation {}, pid {pid})", self.id),
                None => format!("worker {i} (generation {}, thread)", self.id),
            })
            .collect()
    }

    fn broadcast(&mut self, c: Control) {
        for s in self.slots.iter_mut().filter(|s| s.live()) {
            if matches!(c, Control::Drain | Control::Abort) {
                s.asked = true;
            }
            if let Some(m) = &s.member {
                m.send(c);
            }
        }
    }

    /// Join finished threads; processes were reaped by the child watch.
    fn finish(&mut self) {
        for s in &mut self.slots {
            if let Some(m) = &mut s.member {
                m.finish();
            }
        }
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
            stats: Arc::new(RwLock::new(stats)),
            readiness: Arc::new(PhaseCell::default()),
            reloader: None,
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
        let config = Arc::new(self.config.clone());
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
        let budget = match config.max_connections_total {
            Some(_) => Some(Arc::new(SharedCounter::create().map_err(Error::Budget)?)),
            None => None,
        };
        let mut sup = Supervisor {
            server: self,
            watcher,
            budget,
            phase: Phase::Starting,
            current: None,
            old: Vec::new(),
            next_generation: 1,
            deaths: Vec::new(),
            retired: Vec::new(),
            beat_seq: 0,
            next_beat: Instant::now(),
            interrupted: false,
            self_signed: None,
            ticket_secret: None,
        };
        let (generation, driver) =
            sup.start_generation(config.clone(), listeners.clone(), started)?;
        sup.current = Some(generation);
        sup.enter(Phase::Running);
        sup.server.readiness.set(Readiness::Ready);
        notify(&[sd_notify::NotifyState::Ready]);
        let ready = Ready {
            addrs: listeners.addrs.clone(),
            workers: config.workers.get(),
            driver,
            source: listeners.source,
            isolation: config.isolation,
            cpus: config.cpus.clone(),
            admin: admin.as_ref().map(Admin::local_addr),
            startup: started.elapsed(),
            tls: listeners.tls.clone(),
            tls_fingerprint: sup
                .current
                .as_ref()
                .and_then(|g| g.tls.as_ref())
                .map(|t| t.material.fingerprint()),
        };
        drop(listeners);
        tracing::info!(
            startup_ms = ready.startup.as_secs_f64() * 1e3,
            "ready quorum reached"
        );
        on_ready(&ready);

        let result = sup.serve().and_then(|()| sup.shut_down());
        let result = match result {
            Err(Error::Abandoned) => return Err(Error::Abandoned),
            Err(e @ Error::CrashLoop { .. }) => {
                // Stop whatever is left, then report the crash loop.
                let _ = sup.shut_down();
                Err(e)
            }
            other => other,
        };
        notify(&[sd_notify::NotifyState::Stopping]);
        drop(admin);
        result
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

struct Supervisor<F> {
    server: Server<F>,
    watcher: Option<ChildWatcher>,
    budget: Option<Arc<SharedCounter>>,
    phase: Phase,
    current: Option<Generation>,
    /// Generations draining after a reload.
    old: Vec<Generation>,
    next_generation: u64,
    /// Crash times per slot, within the restart window.
    deaths: Vec<VecDeque<Instant>>,
    /// Process mode: counters of workers already reaped, per slot.
    retired: Vec<Snapshot>,
    beat_seq: u64,
    next_beat: Instant,
    /// The shutdown came from SIGINT (a second one abandons the drain).
    interrupted: bool,
    /// `--tls-self-signed`: made once, presented by every generation.
    self_signed: Option<crate::tls::Material>,
    /// Ticket keys derive from this for the whole life of the server, so
    /// tickets survive reloads.
    ticket_secret: Option<crate::tls::TicketSecret>,
}

/// Backoff before replacing a crashed worker: 50 ms doubling, at most 1 s.
fn backoff(deaths: usize) -> Duration {
    Duration::from_millis(50u64 << deaths.min(5).saturating_sub(1)).min(Duration::from_secs(1))
}

impl<F: HandlerFactory> Supervisor<F> {
    fn enter(&mut self, phase: Phase) {
        tracing::debug!(from = ?self.phase, to = ?phase, "supervisor transition");
        self.phase = phase;
    }

    fn spawn(&self, generation: &Generation, slot: usize) -> Result<Member, Error> {
        let stats = self.stats_for(slot);
        let listeners = generation.listeners.as_ref().ok_or(Error::Spawn {
            worker: slot,
            source: std::io::Error::other("listeners already closed"),
        })?;
        let s = Spawn {
            generation: generation.id,
            slot,
            config: &generation.config,
            sockets: &listeners.per_worker[slot],
            factory: &self.server.factory,
            stats: &stats,
            budget: self.budget.as_ref(),
            events: &self.server.tx,
            tls_flags: &listeners.tls,
            tls: generation.tls.as_ref(),
        };
        let member = match (&self.watcher, generation.config.isolation) {
            (Some(w), Isolation::Process) => Member::process(s, &self.server.exe, w),
            _ => Member::thread(s),
        };
        member.map_err(|source| Error::Spawn {
            worker: slot,
            source,
        })
    }

    /// The TLS identity of a new generation: the files as they are on disk
    /// now (a reload picks up swapped certificates), or the self-signed one.
    fn generation_tls(
        &mut self,
        config: &Config,
        listeners: &ListenerPlan,
    ) -> Result<Option<GenerationTls>, Error> {
        let Some(tls) = &config.tls else {
            return Ok(None);
        };
        // Made on first use (at start, or by the reload that turns TLS on)
        // and kept for the life of the server.
        if self.ticket_secret.is_none() {
            self.ticket_secret = Some(crate::tls::TicketSecret::generate()?);
        }
        if tls.source == crate::config::TlsSource::SelfSigned && self.self_signed.is_none() {
            let mut names = vec!["localhost".to_owned()];
            for (i, a) in listeners.addrs.iter().enumerate() {
                if listeners.tls.get(i).copied().unwrap_or(false)
                    && !names.contains(&a.ip().to_string())
                {
                    names.push(a.ip().to_string());
                }
            }
            self.self_signed = Some(crate::tls::Material::self_signed(&names)?);
        }
        let material = match (&tls.source, &self.self_signed) {
            (crate::config::TlsSource::Files { cert, key }, _) => {
                crate::tls::Material::load(cert, key)?
            }
            (crate::config::TlsSource::SelfSigned, Some(m)) => m.clone(),
            (crate::config::TlsSource::SelfSigned, None) => {
                return Err(Error::Tls(crate::tls::Error::NoCertificate {
                    path: "self-signed".into(),
                }))
            }
        };
        let Some(secret) = self.ticket_secret.clone() else {
            return Ok(None);
        };
        let server_config = material.server_config(&secret, tls.ticket_rotate)?;
        Ok(Some(GenerationTls {
            material,
            secret,
            config: server_config,
        }))
    }

    fn stats_for(&self, slot: usize) -> Arc<WorkerStats> {
        if let Ok(mut t) = self.server.stats.write() {
            while t.len() <= slot {
                t.push(Arc::new(WorkerStats::default()));
            }
            return t[slot].clone();
        }
        Arc::new(WorkerStats::default())
    }

    /// Spawn a whole generation and take it through the barrier.
    fn start_generation(
        &mut self,
        config: Arc<Config>,
        listeners: Arc<ListenerPlan>,
        started: Instant,
    ) -> Result<(Generation, Driver), Error> {
        let id = self.next_generation;
        self.next_generation += 1;
        let tls = self.generation_tls(&config, &listeners)?;
        let mut generation = Generation {
            id,
            config: config.clone(),
            listeners: Some(listeners),
            slots: Vec::new(),
            draining: None,
            cut: 0,
            tls,
        };
        for slot in 0..config.workers.get() {
            match self.spawn(&generation, slot) {
                Ok(m) => generation.slots.push(Slot::new(m)),
                Err(e) => {
                    self.roll_back(&mut generation)?;
                    return Err(e);
                }
            }
        }
        let deadline = started + config.startup_timeout;
        let mut driver = None;
        let barrier = self
            .await_quorum(&mut generation, State::Prepared, deadline, &mut driver)
            .and_then(|()| {
                generation.broadcast(Control::Commit);
                self.await_quorum(&mut generation, State::Running, deadline, &mut driver)
            });
        if let Err(e) = barrier {
            self.roll_back(&mut generation)?;
            return Err(e);
        }
        tracing::info!(
            generation = id,
            workers = generation.slots.len(),
            "generation ready"
        );
        Ok((generation, driver.unwrap_or(Driver::Epoll)))
    }

    /// Wait until every slot of `g` has reached `target`; other generations'
    /// events are handled as usual meanwhile.
    fn await_quorum(
        &mut self,
        g: &mut Generation,
        target: State,
        deadline: Instant,
        driver: &mut Option<Driver>,
    ) -> Result<(), Error> {
        while g.slots.iter().any(|s| s.state != target) {
            let wait = deadline.saturating_duration_since(Instant::now());
            let event = match self.server.rx.recv_timeout(wait) {
                Ok(e) => e,
                Err(_) => {
                    return Err(Error::StartupTimeout {
                        workers: (0..g.slots.len())
                            .filter(|&i| g.slots[i].state != target)
                            .collect(),
                        phase: if target == State::Prepared {
                            "prepared"
                        } else {
                            "ready"
                        },
                        timeout: g.config.startup_timeout,
                    })
                }
            };
            match event {
                Event::Worker {
                    generation, report, ..
                } if generation == g.id => {
                    let slot = &mut g.slots[report.worker];
                    if report.beat.is_some() {
                        continue;
                    }
                    slot.state = report.state;
                    if report.state == State::Prepared && driver.is_none() {
                        *driver = report.driver;
                    }
                    match report.state {
                        State::Aborted => {
                            slot.ended = slot.member.as_ref().is_some_and(Member::ends_by_report);
                            return Err(Error::WorkerFailed {
                                worker: report.worker,
                                reason: report.reason.unwrap_or_default(),
                            });
                        }
                        State::Exited => {
                            slot.ended = slot.member.as_ref().is_some_and(Member::ends_by_report);
                            return Err(Error::WorkerExited {
                                worker: report.worker,
                                death: Death::Code(0),
                            });
                        }
                        _ => {}
                    }
                }
                Event::Exited {
                    generation,
                    slot,
                    death,
                    ..
                } if generation == g.id => {
                    g.slots[slot].ended = true;
                    g.slots[slot].state = State::Aborted;
                    // Its FAILED report travels on another thread and may
                    // arrive just after the reap: give it a moment, for the reason.
                    if let Some(reason) = self.late_reason(g.id, slot) {
                        return Err(Error::WorkerFailed {
                            worker: slot,
                            reason,
                        });
                    }
                    return Err(Error::WorkerExited {
                        worker: slot,
                        death,
                    });
                }
                Event::Signal(Signal::Hangup) => {
                    tracing::warn!("SIGHUP while a generation is starting: ignored");
                }
                Event::Signal(signal) => return Err(Error::Interrupted { signal }),
                other => self.on_event(other)?,
            }
        }
        Ok(())
    }

    /// The reason of a worker's FAILED report still in flight (at most
    /// 200 ms); other events seen meanwhile are put back.
    fn late_reason(&mut self, generation: u64, slot: usize) -> Option<String> {
        let until = Instant::now() + Duration::from_millis(200);
        let mut others = Vec::new();
        let mut found = None;
        while let Ok(e) = self
            .server
            .rx
            .recv_timeout(until.saturating_duration_since(Instant::now()))
        {
            match e {
                Event::Worker {
                    generation: g,
                    report,
                    ..
                } if g == generation && report.worker == slot && report.reason.is_some() => {
                    found = report.reason;
                    break;
                }
                other => others.push(other),
            }
        }
        for e in others {
            let _ = self.server.tx.send(e);
        }
        found
    }

    /// A generation failed its barrier: every worker exits without (further)
    /// accepting, is reaped or joined; its sockets are untouched.
    fn roll_back(&mut self, g: &mut Generation) -> Result<(), Error> {
        let before = self.phase;
        self.enter(Phase::RollingBack);
        g.broadcast(Control::Abort);
        let kill_at = Instant::now() + g.config.drain_timeout.min(Duration::from_secs(5));
        let give_up = kill_at + Duration::from_secs(2);
        let mut killed = false;
        while !g.gone() && Instant::now() < give_up {
            if !killed && Instant::now() >= kill_at {
                for s in g.slots.iter().filter(|s| s.live()) {
                    if let Some(m) = &s.member {
                        m.terminate();
                        m.kill();
                    }
                }
                killed = true;
            }
            match self.server.rx.recv_timeout(Duration::from_millis(50)) {
                Ok(Event::Worker {
                    generation, report, ..
                }) if generation == g.id => {
                    let slot = &mut g.slots[report.worker];
                    slot.state = report.state;
                    if matches!(report.state, State::Exited | State::Aborted)
                        && slot.member.as_ref().is_some_and(Member::ends_by_report)
                    {
                        slot.ended = true;
                    }
                }
                Ok(Event::Exited {
                    generation, slot, ..
                }) if generation == g.id => g.slots[slot].ended = true,
                Ok(Event::Signal(Signal::Interrupt)) if before == Phase::Starting => {
                    // The operator insists: leave now. Workers that are still
                    // alive see their control channel close and exit without
                    // serving (nothing was committed to the world yet).
                    for s in g.slots.iter().filter(|s| s.live()) {
                        if let Some(m) = &s.member {
                            m.kill();
                        }
                    }
                    return Err(Error::Abandoned);
                }
                Ok(Event::Signal(s)) => {
                    // Re-post: whoever runs next (shutdown, or the loop) acts on it.
                    if before != Phase::Starting {
                        let _ = self.server.tx.send(Event::Signal(s));
                        std::thread::sleep(Duration::from_millis(1));
                    }
                }
                Ok(other) => {
                    let _ = self.on_event(other);
                }
                Err(_) => {}
            }
        }
        g.finish();
        self.enter(before);
        Ok(())
    }

    /// Serve until a shutdown signal.
    fn serve(&mut self) -> Result<(), Error> {
        loop {
            self.tick()?;
            let wait = self.next_wakeup().saturating_duration_since(Instant::now());
            match self.server.rx.recv_timeout(wait) {
                Ok(Event::Signal(Signal::Hangup)) => self.reload(),
                Ok(Event::Signal(s)) => {
                    tracing::info!(signal = ?s, "shutting down: draining");
                    if s == Signal::Interrupt {
                        self.interrupted = true;
                    }
                    return Ok(());
                }
                Ok(other) => self.on_event(other)?,
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return Ok(()),
            }
        }
    }
}

impl<F: HandlerFactory> Supervisor<F> {
    fn generation_mut(&mut self, id: u64) -> Option<&mut Generation> {
        if self.current.as_ref().is_some_and(|g| g.id == id) {
            return self.current.as_mut();
        }
        self.old.iter_mut().find(|g| g.id == id)
    }

    /// Handle one event of a running (or draining) generation.
    fn on_event(&mut self, event: Event) -> Result<(), Error> {
        let current = self.current.as_ref().map_or(0, |g| g.id);
        match event {
            Event::Signal(_) => Ok(()),
            Event::Worker {
                generation,
                report,
                snapshot,
            } => {
                let isolation = self.server.config.isolation;
                let Some(g) = self.generation_mut(generation) else {
                    return Ok(());
                };
                let Some(slot) = g.slots.get_mut(report.worker) else {
                    return Ok(());
                };
                if let Some(seq) = report.beat {
                    if slot.beat.is_some_and(|(s, _)| s == seq) {
                        slot.beat = None;
                        slot.missed = 0;
                    }
                    if let Some(snap) = snapshot {
                        slot.snapshot = snap;
                        self.publish_stats(report.worker, isolation);
                    }
                    return Ok(());
                }
                let by_report = slot.member.as_ref().is_some_and(Member::ends_by_report);
                slot.state = report.state;
                g.cut += report.cut;
                match report.state {
                    State::Prepared if generation == current => {
                        // A replacement passed its own barrier: commit it.
                        if let Some(m) = &slot.member {
                            m.send(Control::Commit);
                        }
                        Ok(())
                    }
                    State::Running => {
                        tracing::info!(worker = report.worker, generation, pid = ?slot.member.as_ref().and_then(Member::pid), "worker ready");
                        Ok(())
                    }
                    State::Exited | State::Aborted if by_report => {
                        slot.ended = true;
                        let death = if report.state == State::Exited {
                            Death::Code(0)
                        } else {
                            Death::Code(1)
                        };
                        if let Some(r) = &report.reason {
                            tracing::error!(worker = report.worker, generation, reason = %r, "worker aborted");
                        }
                        self.on_end(generation, report.worker, death)
                    }
                    _ => Ok(()),
                }
            }
            Event::Exited {
                generation,
                slot,
                pid,
                death,
            } => {
                let Some(g) = self.generation_mut(generation) else {
                    return Ok(());
                };
                let Some(s) = g.slots.get_mut(slot) else {
                    return Ok(());
                };
                if s.member.as_ref().and_then(Member::pid) != Some(pid) {
                    return Ok(());
                }
                s.ended = true;
                if s.terminated {
                    g.cut += 1;
                }
                tracing::debug!(worker = slot, generation, pid, %death, "worker process reaped");
                self.on_end(generation, slot, death)
            }
        }
    }

    /// A worker's end was seen. A death nobody asked for, in the current
    /// generation while serving, is a crash: count it and schedule a
    /// replacement, or give up on a crash loop.
    fn on_end(&mut self, generation: u64, slot: usize, death: Death) -> Result<(), Error> {
        let isolation = self.server.config.isolation;
        let window = self.server.config.restart_window;
        let max = self.server.config.max_restarts;
        let serving = matches!(self.phase, Phase::Running | Phase::Reloading);
        let Some(g) = self.generation_mut(generation) else {
            return Ok(());
        };
        let is_current = g.draining.is_none();
        let s = &mut g.slots[slot];
        let retired = s.snapshot;
        s.snapshot = Snapshot::default();
        if let Some(m) = &mut s.member {
            m.finish();
        }
        let asked = s.asked;
        if isolation == Isolation::Process {
            while self.retired.len() <= slot {
                self.retired.push(Snapshot::default());
            }
            self.retired[slot].add(&Snapshot {
                connections_open: 0,
                rss_bytes: 0,
                ..retired
            });
            self.publish_stats(slot, isolation);
        }
        if asked || !is_current || !serving {
            return Ok(());
        }
        let pid = self
            .current
            .as_ref()
            .and_then(|g| g.slots[slot].member.as_ref())
            .and_then(Member::pid);
        tracing::error!(worker = slot, generation, ?pid, %death, "worker died unexpectedly");
        while self.deaths.len() <= slot {
            self.deaths.push(VecDeque::new());
        }
        let now = Instant::now();
        let log = &mut self.deaths[slot];
        log.push_back(now);
        while log.front().is_some_and(|t| now.duration_since(*t) > window) {
            log.pop_front();
        }
        if log.len() > max {
            return Err(Error::CrashLoop {
                worker: slot,
                deaths: log.len(),
                window_s: window.as_secs(),
                last: death,
            });
        }
        let delay = backoff(log.len());
        if let Some(g) = self.current.as_mut() {
            g.slots[slot].restart_at = Some(now + delay);
        }
        Ok(())
    }

    /// Sum what every live worker of `slot` reported, plus the reaped ones.
    fn publish_stats(&self, slot: usize, isolation: Isolation) {
        let stats = self.stats_for(slot);
        let mut total = Snapshot::default();
        for g in self.current.iter().chain(&self.old) {
            if let Some(s) = g.slots.get(slot) {
                total.add(&s.snapshot);
            }
        }
        match isolation {
            Isolation::Process => {
                if let Some(r) = self.retired.get(slot) {
                    total.add(r);
                }
                total.store(&stats);
            }
            Isolation::Thread => {
                // Threads count into the shared atomics directly; only the
                // beat-borne figures are stored.
                use std::sync::atomic::Ordering::Relaxed;
                stats.rss_bytes.store(total.rss_bytes, Relaxed);
                stats.cpu_micros.store(total.cpu_micros, Relaxed);
            }
        }
    }

    fn next_wakeup(&self) -> Instant {
        let mut next = self.next_beat;
        for g in self.current.iter().chain(&self.old) {
            for s in &g.slots {
                if let Some(t) = s.restart_at {
                    next = next.min(t);
                }
            }
            if let Some(d) = g.draining {
                if !d.termed {
                    next = next.min(d.drain_at);
                } else if !d.killed {
                    next = next.min(d.force_at);
                }
            }
        }
        next.max(Instant::now() + Duration::from_millis(1))
    }

    /// Timers: restarts due, beats, and the deadlines of draining generations.
    fn tick(&mut self) -> Result<(), Error> {
        let now = Instant::now();
        // Replacements.
        let due: Vec<usize> = self.current.as_ref().map_or_else(Vec::new, |g| {
            (0..g.slots.len())
                .filter(|&i| g.slots[i].restart_at.is_some_and(|t| t <= now))
                .collect()
        });
        for slot in due {
            let spawned = match self.current.as_ref() {
                Some(g) => self.spawn(g, slot),
                None => continue,
            };
            let Some(g) = self.current.as_mut() else {
                continue;
            };
            match spawned {
                Ok(m) => {
                    tracing::info!(worker = slot, generation = g.id, pid = ?m.pid(), "replacing crashed worker");
                    g.slots[slot] = Slot::new(m);
                }
                Err(e) => {
                    tracing::error!(error = %e, worker = slot, "cannot replace worker");
                    g.slots[slot].restart_at = None;
                    let id = g.id;
                    self.on_end(id, slot, Death::Code(-1))?;
                }
            }
        }
        // Beats.
        if now >= self.next_beat {
            self.next_beat = now + self.server.config.beat_interval;
            self.beat_seq += 1;
            let seq = self.beat_seq;
            let timeout = self.server.config.beat_timeout;
            if let Some(g) = self.current.as_mut() {
                for (i, s) in g.slots.iter_mut().enumerate() {
                    if !s.live() || s.state != State::Running {
                        continue;
                    }
                    if let Some((_, sent)) = s.beat {
                        if now.duration_since(sent) >= timeout {
                            s.missed += 1;
                        }
                    }
                    if s.missed >= 2 {
                        match &s.member {
                            Some(m @ Member::Process { .. }) => {
                                tracing::error!(worker = i, pid = ?m.pid(), "missed two beats: killing");
                                m.kill();
                                s.missed = 0;
                                s.beat = None;
                            }
                            _ => {
                                if s.missed == 2 {
                                    tracing::error!(worker = i, "worker thread missed two beats; threads cannot be killed (use --isolation process)");
                                }
                            }
                        }
                        continue;
                    }
                    if s.beat.is_none() || s.missed > 0 {
                        s.beat = Some((seq, now));
                        if let Some(m) = &s.member {
                            m.send(Control::Beat(seq));
                        }
                    }
                }
            }
        }
        // Draining generations.
        for g in self.old.iter_mut() {
            advance_deadlines(g, now);
        }
        let mut finished = Vec::new();
        self.old.retain_mut(|g| {
            if g.gone() {
                g.finish();
                finished.push(g.id);
                false
            } else {
                true
            }
        });
        for id in finished {
            tracing::info!(generation = id, "old generation drained and reaped");
        }
        Ok(())
    }

    /// SIGHUP: a new generation behind the barrier, then drain the old one.
    fn reload(&mut self) {
        let Some(reloader) = self.server.reloader.as_mut() else {
            tracing::warn!("SIGHUP: no config source to reload from; still serving");
            return;
        };
        // sd_notify(3): RELOADING=1 carries MONOTONIC_USEC so systemd
        // (Type=notify-reload) can match it to the reload it asked for.
        match sd_notify::NotifyState::monotonic_usec_now() {
            Ok(now) => notify(&[sd_notify::NotifyState::Reloading, now]),
            Err(_) => notify(&[sd_notify::NotifyState::Reloading]),
        }
        let config = match reloader() {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %e, "reload refused: bad configuration; still serving the old one");
                notify(&[sd_notify::NotifyState::Ready]);
                return;
            }
        };
        if config.isolation != self.server.config.isolation {
            tracing::error!("reload refused: --isolation cannot change on reload; restart instead");
            notify(&[sd_notify::NotifyState::Ready]);
            return;
        }
        let Some(old_listeners) = self.current.as_ref().and_then(|g| g.listeners.clone()) else {
            return;
        };
        let prev = &self.server.config;
        let tls_binds = |c: &Config| c.tls.as_ref().map(|t| t.binds.clone()).unwrap_or_default();
        let inherited = old_listeners.source == Source::Systemd;
        if inherited && (config.binds != prev.binds || tls_binds(&config) != tls_binds(prev)) {
            tracing::warn!("reload: --bind changes are ignored under socket activation (the sockets come from systemd)");
        }
        let same_addresses = inherited
            || (config.binds == prev.binds
                && tls_binds(&config) == tls_binds(prev)
                && config.listener == prev.listener);
        let listeners = if same_addresses && config.workers == prev.workers {
            old_listeners
        } else {
            let plan = if same_addresses {
                old_listeners.with_workers(config.workers.get())
            } else {
                ListenerPlan::bind(&config)
            };
            match plan {
                Ok(l) => Arc::new(l),
                Err(e) => {
                    tracing::error!(error = %e, "reload failed: cannot set up the new listeners; still serving");
                    notify(&[sd_notify::NotifyState::Ready]);
                    return;
                }
            }
        };
        self.enter(Phase::Reloading);
        let config = Arc::new(config);
        match self.start_generation(config.clone(), listeners, Instant::now()) {
            Ok((generation, _)) => {
                let id = generation.id;
                if let Some(mut old) = self.current.replace(generation) {
                    let old_config = old.config.clone();
                    start_drain(&mut old, &old_config);
                    self.old.push(old);
                }
                self.server.config = (*config).clone();
                tracing::info!(
                    generation = id,
                    "reload complete; previous generation draining"
                );
            }
            Err(Error::Interrupted { signal }) => {
                tracing::warn!(?signal, "reload interrupted; new generation rolled back");
                let _ = self.server.tx.send(Event::Signal(signal));
            }
            Err(e) => {
                tracing::error!(error = %e, "reload failed: new generation rolled back; still serving the old one");
            }
        }
        self.enter(Phase::Running);
        notify(&[sd_notify::NotifyState::Ready]);
    }

    /// Stop everything: close the listeners, drain all generations within
    /// the deadlines, report what was cut or survived.
    fn shut_down(&mut self) -> Result<(), Error> {
        self.enter(Phase::Draining);
        self.server.readiness.set(Readiness::Draining);
        notify(&[sd_notify::NotifyState::Stopping]);
        if let Some(mut g) = self.current.take() {
            let config = g.config.clone();
            start_drain(&mut g, &config);
            self.old.push(g);
        }
        // New connections are refused once the workers drop their dups.
        for g in self.old.iter_mut() {
            g.listeners = None;
        }
        let grace = Duration::from_secs(1);
        loop {
            let now = Instant::now();
            for g in self.old.iter_mut() {
                advance_deadlines(g, now);
            }
            if self.old.iter().all(Generation::gone) {
                break;
            }
            let give_up = self
                .old
                .iter()
                .filter_map(|g| g.draining.map(|d| d.force_at + grace))
                .max()
                .unwrap_or(now);
            if now >= give_up {
                let survivors: Vec<String> =
                    self.old.iter().flat_map(Generation::survivors).collect();
                tracing::error!(?survivors, "still running at the force timeout");
                return Err(Error::Survivors {
                    survivors: survivors.join(", "),
                });
            }
            let next = self
                .old
                .iter()
                .filter_map(|g| g.draining)
                .map(|d| {
                    if !d.termed {
                        d.drain_at
                    } else if !d.killed {
                        d.force_at
                    } else {
                        give_up
                    }
                })
                .min()
                .unwrap_or(give_up)
                .max(now + Duration::from_millis(1));
            match self
                .server
                .rx
                .recv_timeout(next.saturating_duration_since(now))
            {
                Ok(Event::Signal(Signal::Interrupt)) if self.interrupted => {
                    return Err(Error::Abandoned)
                }
                Ok(Event::Signal(Signal::Interrupt)) => self.interrupted = true,
                Ok(Event::Signal(_)) => {}
                Ok(other) => {
                    let _ = self.on_event(other);
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
        }
        let cut: usize = self.old.iter().map(|g| g.cut).sum();
        for g in self.old.iter_mut() {
            g.finish();
        }
        self.old.clear();
        self.enter(Phase::Stopped);
        tracing::info!(cut, "all workers stopped");
        if cut > 0 {
            return Err(Error::ConnectionsCut { connections: cut });
        }
        Ok(())
    }
}

/// Send DRAIN and set the deadlines.
fn start_drain(g: &mut Generation, config: &Config) {
    let now = Instant::now();
    g.draining = Some(Deadlines {
        drain_at: now + config.drain_timeout,
        force_at: now + config.force_timeout,
        termed: false,
        killed: false,
    });
    for s in g.slots.iter_mut() {
        s.restart_at = None;
    }
    g.broadcast(Control::Drain);
}

/// At the drain deadline FORCE/SIGTERM; at the force deadline SIGKILL.
fn advance_deadlines(g: &mut Generation, now: Instant) {
    let Some(mut d) = g.draining else { return };
    if !d.termed && now >= d.drain_at {
        d.termed = true;
        if !g.gone() {
            tracing::warn!(generation = g.id, "drain timeout: cutting what is left");
        }
        for s in g.slots.iter_mut().filter(|s| s.live()) {
            if let Some(m) = &s.member {
                if !m.ends_by_report() {
                    s.terminated = true;
                }
                m.terminate();
            }
        }
    }
    if !d.killed && now >= d.force_at {
        d.killed = true;
        for s in g.slots.iter().filter(|s| s.live()) {
            if let Some(m) = &s.member {
                tracing::error!(generation = g.id, pid = ?m.pid(), "force timeout: killing");
                m.kill();
            }
        }
    }
    g.draining = Some(d);
}
