//! The access log's writer: one thread per log file per process, the only
//! code that waits on the disk, so a slow or full disk (or a FIFO nobody
//! reads) stalls it and never a worker.
//!
//! Flow:
//! 1. [`Sink::open`] opens the target once, non-blocking so a FIFO without
//!    a reader is refused at once instead of hanging start-up, then blocking
//!    for the thread's writes; it starts the thread.
//! 2. Workers [`Sink::hand_off`] whole buffers of whole lines. The queue is
//!    bounded in bytes (`--access-log-backlog`): a buffer that would pass
//!    it is handed back, and the worker drops and counts its lines. Emptied
//!    buffers come back to the workers through a small free list, so a
//!    steady log allocates nothing.
//! 3. The thread writes each buffer with one `write_all` (a regular file is
//!    opened `O_APPEND`, whose writes the kernel does not interleave; to a
//!    pipe or FIFO it writes at most `PIPE_BUF` bytes at a time, cut at line
//!    ends, which POSIX keeps whole against other writers, as worker
//!    processes are). A failed write loses that buffer's lines, counted.
//! 4. [`Sink::reopen`] (SIGUSR1) has the thread open the path again between
//!    two buffers: after logrotate's rename, new lines go to the new file
//!    and none is lost, since buffers written before went to the old one.
//! 5. Closing (drain, exit, reload to another log) lets the thread write
//!    what is queued, waiting at most [`CLOSE_WAIT`]; what is still queued
//!    then is counted as dropped and the thread is left to the process's
//!    exit (it may be blocked in a write no reader will finish).

use std::collections::VecDeque;
use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsFd;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::telemetry::WorkerStats;

/// How long closing waits for the thread to write what is queued.
pub const CLOSE_WAIT: Duration = Duration::from_secs(2);
/// Emptied buffers kept for reuse.
const FREE_BUFFERS: usize = 16;
/// POSIX's PIPE_BUF on Linux: a write to a pipe of at most this many bytes
/// is never interleaved with another writer's.
const PIPE_BUF: usize = 4096;

/// Where lines go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// The process's standard error.
    Stderr,
    /// A file, created if missing, appended to.
    File(PathBuf),
}

/// One worker's buffer of whole lines, with whose counters it goes.
struct Batch {
    bytes: Vec<u8>,
    lines: u64,
    stats: Arc<WorkerStats>,
}

#[derive(Default)]
struct State {
    queue: VecDeque<Batch>,
    /// Bytes in `queue`.
    queued: usize,
    free: Vec<Vec<u8>>,
    reopen: bool,
    closing: bool,
    /// The thread has written everything and ended.
    finished: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Signals the thread (work, reopen, close) and closers (finished).
    wake: Condvar,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves a consistent queue (every
        // change is one push or pop): carry on with it.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A log file's writer thread and its queue, shared by a process's workers.
pub struct Sink {
    shared: Arc<Shared>,
    backlog: usize,
}

impl std::fmt::Debug for Sink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sink")
            .field("backlog", &self.backlog)
            .finish()
    }
}

/// The open target.
struct Out {
    target: Target,
    file: Option<File>,
    /// A pipe, FIFO or terminal: writes are cut to `PIPE_BUF`.
    pipe: bool,
}

impl Out {
    fn open(target: &Target) -> io::Result<Out> {
        let (file, kind) = match target {
            Target::Stderr => {
                let fd = io::stderr().as_fd().try_clone_to_owned()?;
                let file = File::from(fd);
                let kind = file.metadata()?.file_type();
                (Some(file), kind)
            }
            Target::File(path) => {
                let file = open_append(path)?;
                let kind = file.metadata()?.file_type();
                (Some(file), kind)
            }
        };
        Ok(Out {
            target: target.clone(),
            file,
            pipe: !kind.is_file() && !kind.is_block_device(),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<()> {
        let Some(file) = self.file.as_mut() else {
            return Err(io::Error::other("no log file open"));
        };
        if !self.pipe {
            return file.write_all(bytes);
        }
        let mut rest = bytes;
        while !rest.is_empty() {
            let n = if rest.len() <= PIPE_BUF {
                rest.len()
            } else {
                // Up to the last line end within PIPE_BUF; a longer line
                // goes whole (it cannot be atomic).
                match rest[..PIPE_BUF].iter().rposition(|&b| b == b'\n') {
                    Some(i) => i + 1,
                    None => rest
                        .iter()
                        .position(|&b| b == b'\n')
                        .map_or(rest.len(), |i| i + 1),
                }
            };
            file.write_all(&rest[..n])?;
            rest = &rest[n..];
        }
        Ok(())
    }
}

/// Open `path` for appending, without waiting for a FIFO's reader.
fn open_append(path: &Path) -> io::Result<File> {
    let file = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o640)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .map_err(|e| match e.raw_os_error() {
            // open(2): O_NONBLOCK | O_WRONLY on a FIFO nobody reads.
            Some(libc::ENXIO) => io::Error::other("a FIFO with no reader"),
            _ => e,
        })?;
    crate::sys::sendfile::set_nonblocking(file.as_fd(), false)?;
    Ok(file)
}

impl Sink {
    /// Open `target` and start its writer thread. `backlog` bounds the bytes
    /// handed over and not yet written.
    pub fn open(target: &Target, backlog: usize) -> io::Result<Arc<Sink>> {
        let mut out = Out::open(target)?;
        let shared = Arc::new(Shared {
            state: Mutex::new(State::default()),
            wake: Condvar::new(),
        });
        let thread = shared.clone();
        std::thread::Builder::new()
            .name("servery-log".into())
            .spawn(move || run(&thread, &mut out))?;
        Ok(Arc::new(Sink { shared, backlog }))
    }

    /// Queue `bytes` (`lines` whole lines) for writing. `Ok` gives back an
    /// empty buffer to fill next; `Err` gives `bytes` back, unqueued: the
    /// backlog is full or the sink is closing, and the lines are the
    /// caller's to count as dropped.
    pub fn hand_off(
        &self,
        bytes: Vec<u8>,
        lines: u64,
        stats: &Arc<WorkerStats>,
    ) -> Result<Vec<u8>, Vec<u8>> {
        let mut state = self.shared.lock();
        if state.closing || state.queued + bytes.len() > self.backlog {
            return Err(bytes);
        }
        state.queued += bytes.len();
        state.queue.push_back(Batch {
            bytes,
            lines,
            stats: stats.clone(),
        });
        let spare = state.free.pop().unwrap_or_default();
        drop(state);
        self.shared.wake.notify_all();
        Ok(spare)
    }

    /// Open the path again before the next buffer (SIGUSR1).
    pub fn reopen(&self) {
        self.shared.lock().reopen = true;
        self.shared.wake.notify_all();
    }

    /// Bytes handed over and not yet written.
    pub fn queued(&self) -> usize {
        self.shared.lock().queued
    }

    /// Stop taking buffers, and wait up to `wait` for the queued ones to be
    /// written. Returns whether everything was; what was not is counted as
    /// dropped.
    pub fn close(&self, wait: Duration) -> bool {
        let deadline = Instant::now() + wait;
        let mut state = self.shared.lock();
        state.closing = true;
        self.shared.wake.notify_all();
        while !state.finished {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            state = match self.shared.wake.wait_timeout(state, left) {
                Ok((s, _)) => s,
                Err(e) => e.into_inner().0,
            };
        }
        if state.finished {
            return true;
        }
        let abandoned: Vec<Batch> = state.queue.drain(..).collect();
        state.queued = 0;
        drop(state);
        for b in &abandoned {
            WorkerStats::add(&b.stats.access_log_dropped, b.lines);
        }
        if !abandoned.is_empty() {
            tracing::warn!(
                buffers = abandoned.len(),
                "access log: the writer is stuck; its queued lines are dropped"
            );
        }
        false
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.close(CLOSE_WAIT);
    }
}

/// The writer thread.
fn run(shared: &Shared, out: &mut Out) {
    let mut state = shared.lock();
    loop {
        if state.reopen {
            state.reopen = false;
            drop(state);
            match Out::open(&out.target) {
                Ok(new) => *out = new,
                Err(e) => {
                    tracing::error!(error = %e, "access log: cannot reopen; still writing to the old file")
                }
            }
            state = shared.lock();
            continue;
        }
        if let Some(batch) = state.queue.pop_front() {
            drop(state);
            let result = out.write(&batch.bytes);
            if let Err(e) = &result {
                WorkerStats::add(&batch.stats.access_log_dropped, batch.lines);
                tracing::warn!(error = %e, lines = batch.lines, "access log: write failed; lines lost");
            } else {
                WorkerStats::add(&batch.stats.access_log_lines, batch.lines);
            }
            let mut bytes = batch.bytes;
            state = shared.lock();
            state.queued -= bytes.len();
            if state.free.len() < FREE_BUFFERS {
                bytes.clear();
                state.free.push(bytes);
            }
            continue;
        }
        if state.closing {
            state.finished = true;
            drop(state);
            if let Some(f) = out.file.as_mut() {
                let _ = f.flush();
            }
            shared.wake.notify_all();
            return;
        }
        state = match shared.wake.wait(state) {
            Ok(s) => s,
            Err(e) => e.into_inner(),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkfifo(path: &Path) {
        let ok = std::process::Command::new("mkfifo")
            .arg(path)
            .status()
            .unwrap()
            .success();
        assert!(ok);
    }

    fn stats() -> Arc<WorkerStats> {
        Arc::new(WorkerStats::default())
    }

    #[test]
    fn buffers_reach_the_file_whole_and_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let sink = Sink::open(&Target::File(path.clone()), 1 << 20).unwrap();
        let s = stats();
        for i in 0..100 {
            let line = format!("line {i}\n").into_bytes();
            sink.hand_off(line, 1, &s).unwrap();
        }
        assert!(sink.close(Duration::from_secs(5)));
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 100);
        assert_eq!(lines[99], "line 99");
        assert_eq!(WorkerStats::get(&s.access_log_lines), 100);
    }

    #[test]
    fn past_the_backlog_a_buffer_is_handed_back() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        // A reader that never reads: writes block once the pipe is full.
        let _reader = OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let sink = Sink::open(&Target::File(fifo), 256 * 1024).unwrap();
        let s = stats();
        let mut refused = 0;
        for _ in 0..100 {
            if sink.hand_off(vec![b'x'; 16 * 1024], 1, &s).is_err() {
                refused += 1;
            }
        }
        assert!(refused > 50, "{refused}");
        assert!(sink.queued() <= 256 * 1024);
        // Closing gives up on the stuck writer and counts what was queued.
        assert!(!sink.close(Duration::from_millis(100)));
        assert!(WorkerStats::get(&s.access_log_dropped) > 0);
    }

    #[test]
    fn a_fifo_without_a_reader_is_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        mkfifo(&fifo);
        let e = Sink::open(&Target::File(fifo), 1024).unwrap_err();
        assert_eq!(e.to_string(), "a FIFO with no reader");
    }

    #[test]
    fn reopen_follows_a_rename() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("access.log");
        let sink = Sink::open(&Target::File(path.clone()), 1 << 20).unwrap();
        let s = stats();
        sink.hand_off(b"before\n".to_vec(), 1, &s).unwrap();
        while sink.queued() > 0 {
            std::thread::sleep(Duration::from_millis(1));
        }
        std::fs::rename(&path, dir.path().join("access.log.1")).unwrap();
        sink.reopen();
        sink.hand_off(b"after\n".to_vec(), 1, &s).unwrap();
        assert!(sink.close(Duration::from_secs(5)));
        assert_eq!(
            std::fs::read_to_string(dir.path().join("access.log.1")).unwrap(),
            "before\n"
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "after\n");
    }

    #[test]
    fn pipe_writes_are_cut_at_line_ends_within_pipe_buf() {
        let (r, w) = std::io::pipe().unwrap();
        let mut out = Out {
            target: Target::Stderr,
            file: Some(File::from(std::os::fd::OwnedFd::from(w))),
            pipe: true,
        };
        let line = [b'a'; 99].iter().chain(b"\n").copied().collect::<Vec<u8>>();
        let bytes: Vec<u8> = line.repeat(100);
        let reader = std::thread::spawn(move || {
            let mut r = r;
            let mut all = Vec::new();
            std::io::Read::read_to_end(&mut r, &mut all).unwrap();
            all
        });
        out.write(&bytes).unwrap();
        drop(out);
        assert_eq!(reader.join().unwrap(), bytes);
    }
}
