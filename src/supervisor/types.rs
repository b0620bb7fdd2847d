//! The supervisor's vocabulary: the events it waits on, its phases, the
//! signals it handles, how a worker died (and why, for its restart), why
//! the server stopped, and what the machine asks of a worker.
//!
//! At the bottom of `supervisor/`: the state machine, the generations, the
//! beats, restarts, children and members all speak these types, and this
//! file imports none of them, so no two of those modules need each other
//! for a type (`scripts/check-cycles.py --scope supervisor`).

use std::net::SocketAddr;
use std::time::Duration;

use crate::control::Control;
use crate::telemetry::Snapshot;
use crate::worker::Report;

/// How a worker ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Death {
    /// Exited with this code (threads: 0 = Exited, 1 = Aborted).
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

impl std::fmt::Display for Death {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Death::Code(c) => write!(f, "exit code {c}"),
            Death::Signal(s) => write!(f, "signal {s}"),
        }
    }
}

/// Signals the binary forwards.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    /// SIGTERM: drain and exit.
    Terminate,
    /// SIGINT: drain and exit; a second one exits at once.
    Interrupt,
    /// SIGHUP: rolling reload.
    Hangup,
    /// SIGUSR1: reopen the access log (logrotate's `postrotate`).
    Reopen,
}

/// Everything the supervisor waits on, in one channel.
#[derive(Debug)]
pub enum Event {
    /// A worker's transition or beat reply.
    Worker {
        generation: u64,
        report: Report,
        /// Boxed: the counters are most of the event's size.
        snapshot: Option<Box<Snapshot>>,
    },
    /// A worker process was reaped.
    Exited {
        generation: u64,
        slot: usize,
        pid: u32,
        death: Death,
    },
    Signal(Signal),
    /// The supervisor's ACME published an answer or a certificate (already
    /// in this process's table): worker processes are told, and `done`
    /// (if any) hears once every one of them has it (`acks`).
    Acme {
        update: crate::sites::published::Update,
        done: Option<std::sync::mpsc::Sender<()>>,
    },
    /// A worker process applied ACME update `seq`.
    Applied {
        generation: u64,
        slot: usize,
        seq: u64,
    },
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
    /// A generation failed its barrier (at startup, or on reload while the
    /// old one serves); its workers are being rolled back.
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
    #[error("ACME: {0}")]
    Acme(#[from] crate::acme::Error),
    #[error("cannot open the access log {target}: {source}")]
    AccessLog {
        target: String,
        source: std::io::Error,
    },
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
    #[error(
        "crash loop: worker {worker} died {} in {window_s} s, last: {last}",
        crate::plural::count(*.deaths, "time", "times")
    )]
    CrashLoop {
        worker: usize,
        deaths: usize,
        window_s: u64,
        last: Death,
    },
}

/// Why a serving worker died unasked: the `reason` label of its restart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// It exited, or a signal the supervisor did not send killed it.
    Crash,
    /// The supervisor killed it after two missed beats (`beats`).
    BeatTimeout,
}

impl Cause {
    /// The metric's label value.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Cause::Crash => "crash",
            Cause::BeatTimeout => "beat_timeout",
        }
    }
}

/// How the supervisor drives one worker, whatever its kind.
pub(crate) trait Worker {
    fn pid(&self) -> Option<u32>;
    /// Its end is its final report (threads), not a reaped exit.
    fn ends_by_report(&self) -> bool;
    fn send(&self, c: Control);
    /// Past the drain deadline: FORCE (threads) or SIGTERM (processes).
    fn terminate(&self);
    /// SIGKILL its process group (a no-op for threads).
    fn kill(&self);
    /// After its end: join the thread.
    fn finish(&mut self);
    /// Hand it ACME update `seq`, an answer or a certificate; true if it
    /// will acknowledge it (processes; threads read the supervisor's own
    /// table and return false).
    fn publish(&self, seq: u64, update: &crate::sites::published::Update) -> bool {
        let _ = (seq, update);
        false
    }
}
