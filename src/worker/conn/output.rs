//! The sender: a connection's queued responses and how they reach the socket.
//!
//! Owns heads, in-memory bodies and file ranges between "answered" and
//! "written". Nothing is copied on the way out of a plain connection:
//! 1. `push` formats the head into the worker's head arena (one `BytesMut`
//!    all its connections share) and queues it as a frozen slice of it, then
//!    queues the body as it came from the handler: a cached body is the
//!    cache's own `Bytes` (a refcount, not a copy), a large file is a range
//!    of its fd.
//! 2. `flush` writes each run of in-memory pieces with one vectored write
//!    (`writev`), so a pipelined batch of small responses still leaves in
//!    one write, and each file range by `sendfile(2)` with explicit offsets
//!    while the socket is corked (nginx's `tcp_nopush`): the head rides in
//!    the body's first full segment.
//! 3. TLS must encrypt, so there the in-memory run is gathered into one
//!    plaintext staging copy per write (rustls copies it into records anyway;
//!    one record per piece would cost a syscall each) and file ranges are
//!    read through a bounded chunk.
//!
//! Bounds: the caller stops taking pipelined requests once [`Output::full`]
//! says the queue holds [`OUTPUT_BUDGET_BYTES`] or [`MAX_QUEUED`] responses
//! (or anything, while the worker is past its output budget, in which the
//! queued in-memory bytes count until written),
//! and flushes before reading again, so what one connection holds is the
//! budget, whatever the client pipelines. A queued head keeps its arena chunk
//! ([`HEAD_ARENA_BYTES`]) alive until written, so a stalled connection pins
//! at most one chunk per queued head. The queue and the iovec arrays are
//! reused from batch to batch (the hot path allocates nothing) and dropped
//! when the connection goes idle ([`Output::release`]).

use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use monoio::io::{AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;

use super::budget::WorkerBudget;
use super::transport::Transport;
use crate::http::response::write_head;
use crate::http::{Body, FileRange, Part, Persistence, Response};
use crate::sys::iovec::IoSlices;
use crate::sys::sendfile;
use crate::sys::socket::stream_fd;

/// Queued response bytes (heads and in-memory bodies) past which no more
/// pipelined requests are taken until the queue is written. Large enough that
/// a pipelined batch of small responses leaves in one write; small enough
/// that bodies made per request (listings, app bodies) cannot pile up.
pub(crate) const OUTPUT_BUDGET_BYTES: usize = 64 * 1024;
/// Most responses queued at once, whatever their size (a batch of 304s is
/// all heads): bounds the queue and the iovec array of one write.
pub(crate) const MAX_QUEUED: usize = 64;
/// One chunk of a worker's head arena: the heads of some 40 responses. A
/// new chunk is allocated when less than [`HEAD_ROOM_BYTES`] is left; the
/// old one is freed when its last head has been written.
pub(crate) const HEAD_ARENA_BYTES: usize = 8 * 1024;
/// Room left in the arena below which a new chunk is taken first (a head
/// with many fields may be longer: the arena then grows while formatting).
const HEAD_ROOM_BYTES: usize = 1024;
/// Chunk of a file body read per write where sendfile cannot be used (TLS,
/// file systems without it).
const FILE_CHUNK_BYTES: usize = 64 * 1024;
/// Most bytes asked of one sendfile call: large enough to amortise the call,
/// small enough that one connection cannot monopolise the worker.
const SENDFILE_CHUNK_BYTES: usize = 1024 * 1024;

impl Drop for Output {
    fn drop(&mut self) {
        self.worker.give(self.counted);
    }
}

/// One queued piece of output.
#[derive(Debug)]
enum Chunk {
    /// A head, or an in-memory body, written from where it lives.
    Mem(Bytes),
    /// A file range, sent zero-copy where the transport allows.
    File(FileRange),
}

/// A connection's unsent responses, in order.
#[derive(Debug)]
pub(crate) struct Output {
    /// The worker's output budget: queued in-memory bytes count in it
    /// until their write completes.
    worker: Rc<WorkerBudget>,
    /// What this queue counts in `worker` now.
    counted: usize,
    queue: Vec<Chunk>,
    /// The vectored-write description, kept between writes (`None` after a
    /// write that timed out took it, or while idle).
    slices: Option<IoSlices>,
    /// In-memory bytes queued (heads and bodies).
    mem_bytes: usize,
    /// Responses queued.
    responses: usize,
    /// Bytes ever queued on this connection (the access log places each
    /// response's body in this count).
    pushed: u64,
    /// Bytes of it written: every piece whose write completed.
    written: u64,
}

impl Output {
    pub(crate) fn new(worker: Rc<WorkerBudget>) -> Output {
        Output {
            worker,
            counted: 0,
            queue: Vec::new(),
            slices: None,
            mem_bytes: 0,
            responses: 0,
            pushed: 0,
            written: 0,
        }
    }

    /// Queue `resp`: its head (with `Date` and `Connection`, formatted in
    /// the worker's head arena `heads`), then its body unless `include_body`
    /// is false (HEAD). Returns [`Output::pushed`] after the head.
    pub(crate) fn push(
        &mut self,
        heads: &mut BytesMut,
        resp: &Response,
        date: &[u8],
        persistence: Persistence,
        extra: &[u8],
        include_body: bool,
    ) -> u64 {
        self.push_head(heads, |out| write_head(out, resp, date, persistence, extra));
        let body_at = self.pushed;
        if !include_body {
            return body_at;
        }
        match &resp.body {
            Body::Empty => {}
            Body::Bytes(b) => self.push_mem(b.clone()),
            Body::File(f) => self.push_file(f),
            Body::Parts(parts) => self.push_parts(parts),
        }
        body_at
    }

    fn push_file(&mut self, f: &FileRange) {
        self.pushed += f.len;
        self.queue.push(Chunk::File(f.clone()));
    }

    /// Bytes queued so far, written or not.
    pub(crate) fn pushed(&self) -> u64 {
        self.pushed
    }

    /// Bytes written so far.
    pub(crate) fn written(&self) -> u64 {
        self.written
    }

    /// Queue one response's head, formatted by `write` into the arena.
    pub(crate) fn push_head(&mut self, heads: &mut BytesMut, write: impl FnOnce(&mut BytesMut)) {
        if heads.capacity() - heads.len() < HEAD_ROOM_BYTES {
            // Reclaims the chunk when every head cut from it is gone.
            heads.reserve(HEAD_ARENA_BYTES);
        }
        write(heads);
        let head = heads.split().freeze();
        self.push_mem(head);
        self.responses += 1;
    }

    /// Queue body pieces: in-memory ones as they are, file ranges zero-copy.
    pub(crate) fn push_parts(&mut self, parts: &[Part]) {
        for part in parts {
            match part {
                Part::Bytes(b) => self.push_mem(b.clone()),
                Part::File(f) => self.push_file(f),
            }
        }
    }

    /// Queue in-memory bytes after what is queued (a body, a chunk's framing).
    pub(crate) fn push_mem(&mut self, b: Bytes) {
        if b.is_empty() {
            return;
        }
        self.mem_bytes += b.len();
        self.counted += b.len();
        self.worker.take(b.len());
        self.pushed += b.len() as u64;
        self.queue.push(Chunk::Mem(b));
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.queue.is_empty()
    }

    /// Whether the queue is at its budget: take no more requests until it
    /// is flushed. A queued file range counts as full: it is written before
    /// the next request is parsed, as it may take long. So does any queued
    /// byte while the worker is past `--worker-output-bytes`: the
    /// connection waits for its socket before preparing more.
    pub(crate) fn full(&self) -> bool {
        self.mem_bytes >= OUTPUT_BUDGET_BYTES
            || (self.mem_bytes > 0 && self.worker.over())
            || self.responses >= MAX_QUEUED
            || self.queue.iter().any(|c| matches!(c, Chunk::File(_)))
    }

    /// Drop the queue's and the iovecs' storage (the connection idles).
    pub(crate) fn release(&mut self) {
        debug_assert!(self.queue.is_empty());
        self.queue = Vec::new();
        self.slices = None;
    }

    /// Write everything queued, each write bounded by `send_timeout`. On
    /// error the queue is dropped and the connection must close: a promised
    /// Content-Length can no longer be honoured.
    pub(crate) async fn flush<S: Transport>(
        &mut self,
        stream: &mut S,
        send_timeout: Duration,
    ) -> io::Result<()> {
        self.mem_bytes = 0;
        self.responses = 0;
        let has_file = self.queue.iter().any(|c| matches!(c, Chunk::File(_)));
        // Like nginx's tcp_nopush: hold partial segments while heads and
        // files go out, so the body leaves in full segments.
        let corked = has_file
            && match stream.tcp() {
                Some(tcp) => sendfile::set_cork(stream_fd(tcp), true).is_ok(),
                None => false,
            };
        let mut slot = Slot(self.slices.take());
        let mut done = 0;
        let result = write_queue(stream, &mut self.queue, &mut slot, send_timeout, &mut done).await;
        self.written += done;
        self.queue.clear();
        self.worker.give(std::mem::take(&mut self.counted));
        self.slices = slot.0;
        if corked {
            // Uncorking pushes out the last partial segment.
            if let Some(tcp) = stream.tcp() {
                let _ = sendfile::set_cork(stream_fd(tcp), false);
            }
        }
        result
    }
}

/// Write `queue` in order, adding to `done` every byte a write took, as it
/// takes them: a client that leaves mid-body still has the bytes it was
/// sent counted (the access log's `$body_bytes_sent`, as nginx counts it).
async fn write_queue<S: Transport>(
    stream: &mut S,
    queue: &mut Vec<Chunk>,
    slot: &mut Slot,
    send_timeout: Duration,
    done: &mut u64,
) -> io::Result<()> {
    for chunk in queue.drain(..) {
        match chunk {
            Chunk::Mem(b) => {
                if !slot.get().has_room() {
                    write_run(stream, slot, send_timeout, done).await?;
                }
                slot.get().push(b);
            }
            Chunk::File(f) => {
                write_run(stream, slot, send_timeout, done).await?;
                // Boxed: a file send is long and rare next to the in-memory
                // path, and its state would otherwise widen every
                // connection's future, idle ones included.
                match stream.tcp() {
                    Some(tcp) => {
                        let before = *done;
                        let sent = Box::pin(send_file(tcp, &f, send_timeout, done)).await;
                        stream.sent_zero_copy(*done - before);
                        sent?
                    }
                    None => Box::pin(send_buffered(stream, &f, send_timeout, done)).await?,
                }
            }
        }
    }
    write_run(stream, slot, send_timeout, done).await
}

/// The connection's `IoSlices` while a flush runs: lent to each write and
/// given back, or lost with a write that timed out.
#[derive(Debug, Default)]
struct Slot(Option<IoSlices>);

impl Slot {
    fn get(&mut self) -> &mut IoSlices {
        self.0.get_or_insert_with(IoSlices::default)
    }
}

/// Write the run of in-memory pieces gathered in `slot`, then empty it: one
/// vectored write from the pieces themselves on plain TCP (resumed after a
/// partial write); one staged plaintext write over TLS. Adds to `done` what
/// each write took (over TLS, the whole run once written).
async fn write_run<S: Transport>(
    stream: &mut S,
    slot: &mut Slot,
    limit: Duration,
    done: &mut u64,
) -> io::Result<()> {
    let Some(mut slices) = slot.0.take() else {
        return Ok(());
    };
    if slices.remaining() > 0 && S::ENCRYPTS {
        let staged = slices.gather();
        let len = staged.len() as u64;
        slices.clear();
        slot.0 = Some(slices);
        timed(limit, stream.write_all(staged)).await?;
        *done += len;
        return Ok(());
    }
    while slices.remaining() > 0 {
        match monoio::time::timeout(limit, stream.writev(slices)).await {
            // The slices are freed with the cancelled write.
            Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut)),
            Ok((res, back)) => {
                slices = back;
                match res {
                    Ok(0) => return Err(io::Error::from(io::ErrorKind::WriteZero)),
                    Ok(n) => {
                        *done += n as u64;
                        slices.advance(n);
                    }
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
    }
    slices.clear();
    slot.0 = Some(slices);
    Ok(())
}

/// Run one write, giving up after `limit` (nginx's `send_timeout`): a client
/// that stops reading cannot hold the connection forever. On timeout the
/// buffer stays with the cancelled write and is freed with it.
async fn timed<T>(
    limit: Duration,
    write: impl std::future::Future<Output = monoio::BufResult<usize, T>>,
) -> io::Result<()> {
    match monoio::time::timeout(limit, write).await {
        Ok((res, _)) => res.map(|_| ()),
        Err(_) => Err(io::Error::from(io::ErrorKind::TimedOut)),
    }
}

/// Send a file range: sendfile(2) with an explicit offset (zero-copy), the
/// socket non-blocking meanwhile so a slow reader parks this task, not the
/// worker. Falls back to buffered reads where sendfile is refused. Adds to
/// `done` what each call sent.
async fn send_file(
    stream: &mut TcpStream,
    file: &FileRange,
    limit: Duration,
    done: &mut u64,
) -> io::Result<()> {
    let was_nonblocking = sendfile::set_nonblocking(stream_fd(stream), true)?;
    let mut offset = file.offset;
    let end = file.offset + file.len;
    let mut result = Ok(());
    while offset < end {
        let want = ((end - offset) as usize).min(SENDFILE_CHUNK_BYTES);
        match sendfile::sendfile_at(stream_fd(stream), file.file.as_fd(), &mut offset, want) {
            Ok(0) => {
                result = Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                break;
            }
            Ok(n) => *done += n as u64,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                match monoio::time::timeout(limit, stream.writable(false)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        result = Err(e);
                        break;
                    }
                    Err(_) => {
                        result = Err(io::Error::from(io::ErrorKind::TimedOut));
                        break;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) => {
                // This file system cannot sendfile: copy through a buffer.
                sendfile::set_nonblocking(stream_fd(stream), was_nonblocking)?;
                let rest = FileRange {
                    file: file.file.clone(),
                    offset,
                    len: end - offset,
                };
                return Box::pin(send_buffered(stream, &rest, limit, done)).await;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = sendfile::set_nonblocking(stream_fd(stream), was_nonblocking) {
        result = result.and(Err(e));
    }
    result
}

/// Send a file range through one bounded buffer: pread a chunk, write it,
/// repeat, adding each chunk written to `done`. The buffer lives only for
/// this range.
async fn send_buffered<S: AsyncWriteRent>(
    stream: &mut S,
    file: &FileRange,
    limit: Duration,
    done: &mut u64,
) -> io::Result<()> {
    let mut offset = file.offset;
    let end = file.offset + file.len;
    let mut buf: Vec<u8> = Vec::new();
    while offset < end {
        let want = ((end - offset) as usize).min(FILE_CHUNK_BYTES);
        buf.resize(want, 0);
        let n = file.file.read_at(&mut buf[..want], offset)?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        buf.truncate(n);
        offset += n as u64;
        match monoio::time::timeout(limit, stream.write_all(buf)).await {
            Ok((res, b)) => {
                res?;
                *done += n as u64;
                buf = b;
            }
            Err(_) => return Err(io::Error::from(io::ErrorKind::TimedOut)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http::Status;

    const DATE: &[u8] = b"Sun, 06 Nov 1994 08:49:37 GMT";

    fn output() -> Output {
        let stats = std::sync::Arc::new(crate::telemetry::WorkerStats::default());
        Output::new(Rc::new(WorkerBudget::new(1 << 20, stats)))
    }

    fn cached(len: usize) -> Response {
        Response::new(Status::OK, Body::Bytes(Bytes::from(vec![b'x'; len])))
    }

    #[test]
    fn queued_bytes_count_in_the_worker_budget_and_past_it_the_queue_is_full() {
        let stats = std::sync::Arc::new(crate::telemetry::WorkerStats::default());
        let worker = Rc::new(WorkerBudget::new(1 << 20, stats));
        let mut out = Output::new(worker.clone());
        out.push(
            &mut BytesMut::new(),
            &cached(1000),
            DATE,
            Persistence::KeepAlive,
            b"",
            true,
        );
        assert!(worker.held() > 1000, "{}", worker.held());
        assert!(!out.full());
        // Another connection takes the worker past its budget: this one
        // stops taking requests until its queue is written.
        worker.take(1 << 20);
        assert!(out.full());
        worker.give(1 << 20);
        assert!(!out.full());
        let held = worker.held();
        drop(out);
        assert_eq!(
            worker.held(),
            0,
            "the queue's {held} bytes went back with it"
        );
    }

    #[test]
    fn a_cached_body_is_queued_not_copied() {
        let resp = cached(1000);
        let Body::Bytes(body) = &resp.body else {
            unreachable!()
        };
        let mut out = output();
        out.push(
            &mut BytesMut::new(),
            &resp,
            DATE,
            Persistence::Default,
            b"",
            true,
        );
        let Chunk::Mem(queued) = &out.queue[1] else {
            panic!("body not queued as memory")
        };
        assert_eq!(queued.as_ptr(), body.as_ptr());
    }

    #[test]
    fn head_requests_queue_only_the_head() {
        let mut out = output();
        out.push(
            &mut BytesMut::new(),
            &cached(10),
            DATE,
            Persistence::Default,
            b"",
            false,
        );
        assert_eq!(out.queue.len(), 1);
    }

    #[test]
    fn the_budget_stops_a_pipelined_batch() {
        let mut out = output();
        let mut n = 0;
        while !out.full() {
            out.push(
                &mut BytesMut::new(),
                &cached(16 * 1024),
                DATE,
                Persistence::Default,
                b"",
                true,
            );
            n += 1;
        }
        assert_eq!(n, OUTPUT_BUDGET_BYTES / (16 * 1024));
        let mut small = output();
        while !small.full() {
            small.push(
                &mut BytesMut::new(),
                &Response::new(Status::NOT_MODIFIED, Body::Empty),
                DATE,
                Persistence::Default,
                b"",
                true,
            );
        }
        assert_eq!(small.responses, MAX_QUEUED);
    }

    #[test]
    fn heads_of_a_batch_share_one_arena_chunk() {
        let mut arena = BytesMut::new();
        let mut out = output();
        out.push(
            &mut arena,
            &cached(1),
            DATE,
            Persistence::Default,
            b"",
            true,
        );
        out.push(
            &mut arena,
            &cached(1),
            DATE,
            Persistence::Default,
            b"",
            true,
        );
        let (Chunk::Mem(a), Chunk::Mem(b)) = (&out.queue[0], &out.queue[2]) else {
            unreachable!()
        };
        // Adjacent splits of the same allocation.
        assert_eq!(a.as_ptr().wrapping_add(a.len()), b.as_ptr());
    }
}
