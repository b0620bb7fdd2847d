//! The access log: one line per answered request, written off the workers.
//!
//! Owns: the line's formats and escaping (`format`), its time (`clock`),
//! the per-worker buffer
//! ([`Log`]), and the writer thread with its bounded queue (`writer`). Does
//! not own what a request's facts are (the connection loops gather them:
//! `worker::conn::h1`'s and `h2`'s) nor when SIGUSR1 reopens (the supervisor
//! asks, `Sink::reopen` does it).
//!
//! Flow, one line:
//! 1. When a response has left (its last byte written, or the client gone),
//!    the connection calls [`Log::write`] with the request's [`Line`].
//! 2. The worker formats it into its own buffer: no lock, no system call,
//!    nothing shared. The time is formatted once per second.
//! 3. A full buffer (`--access-log-buffer`), and every `--access-log-flush`
//!    a partial one, is handed whole to the writer thread (`Sink`), which
//!    takes a spare buffer back. If the writer is behind by more than
//!    `--access-log-backlog` bytes the buffer's lines are dropped and
//!    counted (`servery_access_log_dropped_total`): a worker never waits.
//! 4. On drain and exit the worker hands over what it holds, and the
//!    supervisor (or the worker process) closes the sink, which writes what
//!    is queued within a bound.
//!
//! In thread isolation all workers share one sink; in process isolation each
//! worker process opens its own on the same path (appends of whole buffers,
//! as nginx's workers do), and SIGUSR1 reaches each through its control
//! channel.

mod clock;
mod format;
mod writer;

use std::cell::{Cell, RefCell};
use std::io;
use std::sync::Arc;
use std::time::Duration;

pub use clock::Stamp;
pub use format::{escape_json, escape_text, Field, Format, FormatError, Line, Protocol, COMBINED};
pub use writer::{Sink, Target, CLOSE_WAIT};

use crate::telemetry::WorkerStats;
use clock::Clock;

/// The validated access-log settings (`config::access_log` builds them from
/// `--access-log*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogConfig {
    /// `None`: no log.
    pub target: Option<Target>,
    pub format: Format,
    pub buffer_bytes: usize,
    pub flush: Duration,
    pub backlog_bytes: usize,
}

/// What the workers of a process need to log: the sink and how to fill it.
#[derive(Debug, Clone)]
pub struct Setup {
    pub sink: Arc<Sink>,
    pub format: Arc<Format>,
    /// A worker's buffer: handed over when it holds this much.
    pub buffer_bytes: usize,
    /// A partial buffer is handed over after this long.
    pub flush: Duration,
}

impl Setup {
    /// Open the log `config` asks for; `None` when it is off.
    pub fn open(config: &AccessLogConfig) -> io::Result<Option<Setup>> {
        let Some(target) = &config.target else {
            return Ok(None);
        };
        Ok(Some(Setup {
            sink: Sink::open(target, config.backlog_bytes)?,
            format: Arc::new(config.format.clone()),
            buffer_bytes: config.buffer_bytes,
            flush: config.flush,
        }))
    }
}

/// One worker's side of the log: its buffer of whole lines.
#[derive(Debug)]
pub struct Log {
    setup: Setup,
    buf: RefCell<Vec<u8>>,
    /// Lines in `buf`.
    lines: Cell<u64>,
    clock: RefCell<Clock>,
    stats: Arc<WorkerStats>,
}

impl Log {
    pub fn new(setup: Setup, stats: Arc<WorkerStats>) -> Log {
        Log {
            buf: RefCell::new(Vec::with_capacity(setup.buffer_bytes)),
            setup,
            lines: Cell::new(0),
            clock: RefCell::new(Clock::default()),
            stats,
        }
    }

    /// Format `line`, stamped now, and hand the buffer over if it is full.
    pub fn write(&self, line: &Line<'_>) {
        let full = {
            let mut clock = self.clock.borrow_mut();
            let mut buf = self.buf.borrow_mut();
            self.setup.format.write(&mut buf, clock.now(), line);
            self.lines.set(self.lines.get() + 1);
            buf.len() >= self.setup.buffer_bytes
        };
        if full {
            self.flush();
        }
    }

    /// Hand over whatever the buffer holds (the timer, drain, exit).
    pub fn flush(&self) {
        let lines = self.lines.replace(0);
        if lines == 0 {
            return;
        }
        let mut buf = self.buf.borrow_mut();
        let full = std::mem::take(&mut *buf);
        *buf = match self.setup.sink.hand_off(full, lines, &self.stats) {
            Ok(spare) => spare,
            Err(mut refused) => {
                WorkerStats::add(&self.stats.access_log_dropped, lines);
                refused.clear();
                refused
            }
        };
        if buf.capacity() < self.setup.buffer_bytes {
            let want = self.setup.buffer_bytes - buf.len();
            buf.reserve(want);
        }
    }

    /// The sink this worker writes through (tests close it to read the file).
    #[cfg(test)]
    pub(crate) fn setup_sink(&self) -> Arc<Sink> {
        self.setup.sink.clone()
    }

    /// How often the worker's timer calls [`Log::flush`].
    pub fn interval(&self) -> Duration {
        self.setup.flush
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup(path: &std::path::Path, buffer: usize, backlog: usize) -> Setup {
        Setup {
            sink: Sink::open(&Target::File(path.to_owned()), backlog).unwrap(),
            format: Arc::new(Format::parse("$status $request_uri").unwrap()),
            buffer_bytes: buffer,
            flush: Duration::from_secs(1),
        }
    }

    fn line(target: &[u8]) -> Line<'_> {
        Line {
            peer: None,
            method: b"GET",
            target,
            protocol: Protocol::Http11,
            status: 200,
            body_bytes: 0,
            duration_us: 0,
            referer: None,
            user_agent: None,
            host: None,
            site: None,
            tls_version: None,
            tls_resumed: None,
            worker: 0,
            connection: 0,
        }
    }

    #[test]
    fn a_full_buffer_is_handed_over_and_a_partial_one_on_flush() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a.log");
        let stats = Arc::new(WorkerStats::default());
        let log = Log::new(setup(&path, 64, 1 << 20), stats.clone());
        for _ in 0..10 {
            log.write(&line(b"/0123456789"));
        }
        // 16 bytes a line: every fourth fills the 64-byte buffer.
        let sink = log.setup.sink.clone();
        log.flush();
        drop(log);
        assert!(sink.close(Duration::from_secs(5)));
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 10);
        assert!(text.lines().all(|l| l == "200 /0123456789"));
        assert_eq!(WorkerStats::get(&stats.access_log_lines), 10);
        assert_eq!(WorkerStats::get(&stats.access_log_dropped), 0);
    }
}
