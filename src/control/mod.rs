//! The words the supervisor and its workers say to each other.
//!
//! Owns: a worker's lifecycle states ([`State`]), the driver it reports
//! ([`Driver`]), supervisor → worker messages ([`Control`]) and worker →
//! supervisor reports ([`Report`]). Both sides depend on this module and
//! neither on the other's internals: thread mode passes these values over
//! channels, process mode sends them through `supervisor::protocol` (their
//! wire form, with the config a worker process is started with). Does not
//! own what a worker does on each message (`worker`) nor when the
//! supervisor sends them (`supervisor`).

/// A worker's life. Changed only by `Lifecycle::enter`, which logs and
/// reports every transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum State {
    /// Thread started: pinning, building the runtime, making the handler.
    Starting,
    /// Ready to accept but admitting nobody until COMMIT.
    Prepared,
    /// Accepting and serving (READY).
    Running,
    /// Not accepting; finishing open connections.
    Draining,
    /// Stopped because it was asked to (drain finished, or rolled back).
    Exited,
    /// Stopped by a failure nobody asked for.
    Aborted,
}

/// The I/O driver a worker runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Driver {
    IoUring,
    Epoll,
}

impl Driver {
    pub fn name(self) -> &'static str {
        match self {
            Driver::IoUring => "io_uring",
            Driver::Epoll => "epoll",
        }
    }
}

/// Supervisor → worker messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Control {
    /// The PREPARED quorum is complete: start accepting.
    Commit,
    /// Roll back: exit without accepting (valid before COMMIT).
    Abort,
    /// Stop accepting and finish open connections.
    Drain,
    /// A newer generation serves this worker's sockets (sent before
    /// `Drain` at a reload): stop reading the UDP ones, whose datagrams the
    /// newer worker hands over.
    Handover,
    /// Drain deadline passed: cut every open connection.
    Force,
    /// Health beat: answer with a report carrying the same number. Answered
    /// by the worker's event loop itself, so a wedged loop misses it.
    Beat(u64),
    /// SIGUSR1: open the access log's path again (after logrotate's rename).
    ReopenLog,
}

/// Worker → supervisor: one transition, or a beat reply.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    pub worker: usize,
    pub state: State,
    /// Set on `Prepared`: the driver the runtime was built on.
    pub driver: Option<Driver>,
    /// Set on `Aborted`: the cause.
    pub reason: Option<String>,
    /// Set on `Exited`: connections cut by FORCE.
    pub cut: usize,
    /// Set on a beat reply (the state is then unchanged).
    pub beat: Option<u64>,
}
