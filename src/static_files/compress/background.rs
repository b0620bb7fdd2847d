//! The background compressor: one thread per process that makes the
//! variants of files too large for a worker to compress while a request
//! waits (above `--compress-inline-max-bytes`).
//!
//! Owns the thread, its queue and its bounds. Does not own the cache it
//! fills (`store`) nor which files are compressed (`compress`).
//!
//! A worker never waits for it: [`Background::submit`] either queues a job
//! at once or refuses it (the request is answered identity either way, and
//! a later one finds the variant cached). Bounded three ways:
//! - at most [`QUEUE_JOBS`] jobs wait (each holds one duplicated fd, no
//!   file bytes);
//! - at most [`queue_bytes`] of input is admitted and not yet finished, so
//!   a burst of large files cannot queue hours of work;
//! - one job at a time: the thread holds one file and its output in memory
//!   (at most 2 × `--compress-max-bytes` plus the encoder's state).
//!
//! Flow of one job, on the thread:
//! 1. Read the whole file from the fd (pread from offset 0, so the fd the
//!    workers send from is not moved), then `fstat` it: a file whose
//!    identity is no longer the key's changed while queued or read, and its
//!    bytes are dropped (never cached under the old identity).
//! 2. Encode; a variant no smaller than the file is recorded as "no gain".
//! 3. Insert into the store, then clear the key's pending mark.
//!
//! The thread runs at a lower priority (nice +10) on every CPU of the
//! process's set, so it takes idle time first and never steals a pinned
//! worker's CPU for long.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;

use bytes::Bytes;

use super::codec;
use super::store::{Cached, Key, Store};
use crate::static_files::cache::Identity;
use crate::sys::affinity::CpuSet;
use crate::telemetry::CompressStats;

/// Jobs that may wait for the compressor.
pub(crate) const QUEUE_JOBS: usize = 64;
/// Input bytes admitted and not finished, at least: 32 MiB is a few seconds
/// of brotli 5 on one core.
pub(crate) const QUEUE_BYTES: usize = 32 * 1024 * 1024;
/// How much the compressor thread lowers its priority.
const NICE_INCREMENT: i32 = 10;

/// The admitted-bytes bound for a largest compressible file of `max_bytes`:
/// [`QUEUE_BYTES`], or one such file if that is more.
pub(crate) fn queue_bytes(max_bytes: u64) -> usize {
    QUEUE_BYTES.max(max_bytes as usize)
}

/// One file to compress.
struct Job {
    key: Key,
    /// A duplicate of the worker's fd of the file.
    file: File,
    level: u32,
}

/// What became of a submission.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Submitted {
    /// Queued now.
    Queued,
    /// Already queued (or cached) by another request.
    Already,
    /// At a bound, or the fd could not be duplicated: not queued.
    Refused,
}

/// The handle workers submit through; dropping the last one ends the thread.
pub(crate) struct Background {
    jobs: SyncSender<Job>,
    /// Input bytes of admitted, unfinished jobs.
    admitted: Arc<AtomicUsize>,
    bound: usize,
    store: Arc<Store>,
}

impl Background {
    /// Start the thread (named `servery-compr`: a thread's name has 15 bytes
    /// in /proc) filling `store`, admitting
    /// up to `bound` input bytes, running on `cpus` when given.
    pub(crate) fn start(
        store: Arc<Store>,
        bound: usize,
        cpus: Option<CpuSet>,
    ) -> io::Result<Background> {
        let (jobs, queue) = sync_channel(QUEUE_JOBS);
        let admitted = Arc::new(AtomicUsize::new(0));
        let (thread_store, thread_admitted) = (store.clone(), admitted.clone());
        std::thread::Builder::new()
            .name("servery-compr".into())
            .spawn(move || {
                if let Some(cpus) = cpus {
                    if let Err(e) = crate::sys::affinity::run_current_thread_on(&cpus) {
                        tracing::warn!(error = %e, "compressor: cannot widen its CPU set");
                    }
                }
                if let Err(e) = crate::sys::priority::lower_current_thread(NICE_INCREMENT) {
                    tracing::warn!(error = %e, "compressor: cannot lower its priority");
                }
                run(queue, &thread_store, &thread_admitted);
            })?;
        Ok(Background {
            jobs,
            admitted,
            bound,
            store,
        })
    }

    /// Queue `file` (whose identity `key` names) for compression at `level`,
    /// or refuse at once; never blocks.
    pub(crate) fn submit(&self, key: Key, file: &File, level: u32) -> Submitted {
        let len = key.len as usize;
        let admitted = self
            .admitted
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now + len <= self.bound).then_some(now + len)
            });
        if admitted.is_err() {
            CompressStats::add(&self.store.stats().skipped, 1);
            return Submitted::Refused;
        }
        let release = || {
            self.admitted.fetch_sub(len, Ordering::AcqRel);
        };
        if !self.store.begin(key) {
            release();
            return Submitted::Already;
        }
        let job = match file.try_clone() {
            Ok(file) => Job { key, file, level },
            Err(e) => {
                tracing::warn!(error = %e, "compressor: cannot duplicate a file's fd");
                self.store.end(&key);
                release();
                CompressStats::add(&self.store.stats().skipped, 1);
                return Submitted::Refused;
            }
        };
        match self.jobs.try_send(job) {
            Ok(()) => Submitted::Queued,
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                self.store.end(&key);
                release();
                CompressStats::add(&self.store.stats().skipped, 1);
                Submitted::Refused
            }
        }
    }

    /// Input bytes admitted and not finished (tests).
    #[cfg(test)]
    pub(crate) fn admitted(&self) -> usize {
        self.admitted.load(Ordering::Acquire)
    }
}

/// The thread's loop: one job at a time until every handle is dropped.
fn run(queue: Receiver<Job>, store: &Store, admitted: &AtomicUsize) {
    for job in queue {
        let key = job.key;
        if let Some(value) = make(&job) {
            if store.insert(key, value) {
                CompressStats::add(&store.stats().background, 1);
            }
        } else {
            CompressStats::add(&store.stats().skipped, 1);
        }
        store.end(&key);
        admitted.fetch_sub(key.len as usize, Ordering::AcqRel);
    }
}

/// Steps 1 and 2 of a job; `None` when the file changed or could not be
/// read or encoded.
fn make(job: &Job) -> Option<Cached> {
    let input = read_whole(&job.file, &job.key).ok()??;
    match codec::encode(job.key.coding, job.level, &input) {
        Ok(out) if out.len() < input.len() => Some(Cached::Variant(Bytes::from(out))),
        Ok(_) => Some(Cached::NoGain),
        Err(e) => {
            tracing::warn!(error = %e, "compressor: encoding failed");
            None
        }
    }
}

/// The whole file at `file` if it is still the version `key` names
/// (`Ok(None)` when it changed before or while it was read).
pub(crate) fn read_whole(file: &File, key: &Key) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; key.len as usize];
    match file.read_exact_at(&mut buf, 0) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e),
    }
    let now = Identity::of(&file.metadata()?);
    Ok((Key::new(&now, key.coding) == *key).then_some(buf))
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use super::*;
    use crate::static_files::encoding::Coding;

    fn stats() -> &'static CompressStats {
        Box::leak(Box::new(CompressStats::new()))
    }

    fn file_of(bytes: &[u8]) -> (tempfile::NamedTempFile, File, Key) {
        let tmp = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(tmp.path(), bytes).unwrap();
        let file = File::open(tmp.path()).unwrap();
        let key = Key::new(&Identity::of(&file.metadata().unwrap()), Coding::Gzip);
        (tmp, file, key)
    }

    fn wait_for(store: &Store, key: &Key) -> Option<Cached> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Some(v) = store.get(key) {
                return Some(v);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    #[test]
    fn a_queued_file_becomes_a_cached_variant() {
        let store = Arc::new(Store::new(1 << 20, stats()));
        let bg = Background::start(store.clone(), 1 << 20, None).unwrap();
        let text = b"compress me, compress me, compress me, compress me\n".repeat(200);
        let (_tmp, file, key) = file_of(&text);
        assert_eq!(bg.submit(key, &file, 6), Submitted::Queued);
        let Some(Cached::Variant(v)) = wait_for(&store, &key) else {
            panic!("no variant");
        };
        let mut out = Vec::new();
        std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&v[..]), &mut out).unwrap();
        assert_eq!(out, text);
        let deadline = Instant::now() + Duration::from_secs(5);
        while bg.admitted() != 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(bg.admitted(), 0);
        assert_eq!(bg.submit(key, &file, 6), Submitted::Already);
    }

    #[test]
    fn past_the_byte_bound_a_job_is_refused_at_once() {
        let st = stats();
        let store = Arc::new(Store::new(1 << 20, st));
        let bg = Background::start(store, 1000, None).unwrap();
        let (_tmp, file, key) = file_of(&[b'a'; 1001]);
        assert_eq!(bg.submit(key, &file, 6), Submitted::Refused);
        assert_eq!(bg.admitted(), 0);
        assert_eq!(st.skipped.load(Ordering::Relaxed), 1);
    }

    #[test]
    fn past_the_job_bound_a_job_is_refused_at_once() {
        let store = Arc::new(Store::new(64 << 20, stats()));
        // No thread takes jobs off this queue: it only fills.
        let (jobs, _queue) = sync_channel(QUEUE_JOBS);
        let bg = Background {
            jobs,
            admitted: Arc::new(AtomicUsize::new(0)),
            bound: usize::MAX,
            store,
        };
        let (_tmp, file, key) = file_of(b"x");
        let mut outcomes = Vec::new();
        for ino in 0..QUEUE_JOBS as u64 + 3 {
            outcomes.push(bg.submit(Key { ino, ..key }, &file, 1));
        }
        let queued = outcomes.iter().filter(|&&o| o == Submitted::Queued).count();
        assert_eq!(queued, QUEUE_JOBS);
        assert_eq!(outcomes[QUEUE_JOBS..], [Submitted::Refused; 3]);
        assert_eq!(bg.admitted(), QUEUE_JOBS);
    }

    #[test]
    fn a_file_changed_before_it_is_read_is_not_cached() {
        let (tmp, file, key) = file_of(&[b'a'; 5000]);
        std::fs::write(tmp.path(), [b'b'; 6000]).unwrap();
        assert_eq!(read_whole(&file, &key).unwrap(), None);
        let (tmp, file, key) = file_of(&[b'a'; 5000]);
        let f = File::options().write(true).open(tmp.path()).unwrap();
        f.set_modified(std::time::SystemTime::UNIX_EPOCH + Duration::from_secs(7))
            .unwrap();
        assert_eq!(read_whole(&file, &key).unwrap(), None);
    }
}
