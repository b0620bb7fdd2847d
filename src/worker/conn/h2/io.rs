//! The byte streams an HTTP/2 connection runs over, as the `h2` crate wants
//! them: poll-style `AsyncRead + AsyncWrite` (tokio's traits, which monoio
//! re-exports as `poll_io`).
//!
//! A plain socket becomes one with monoio's `into_poll_io` (readiness through
//! the ring on io_uring, epoll on the legacy driver). Two wrappers complete
//! it:
//! - [`Prefixed`]: the bytes the HTTP/1.1 loop had already read when it saw
//!   the h2c preface, handed to `h2` before the socket's next bytes;
//! - [`Deferred`]: every write of one pass of the connection task gathered
//!   and sent in one system call when the pass ends, each DATA payload
//!   credited to its stream's count as the socket takes it (`outbox`).
//!
//! Over TLS the socket is wrapped first by `tls::Tls`.

use std::cell::RefCell;
use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use monoio::io::poll_io::{AsyncRead, AsyncWrite, ReadBuf};

use super::outbox::{FrameScan, Outbox};

/// `prefix`, then whatever `io` reads.
pub(crate) struct Prefixed<T> {
    prefix: Bytes,
    io: T,
}

impl<T> Prefixed<T> {
    pub(crate) fn new(prefix: Bytes, io: T) -> Prefixed<T> {
        Prefixed { prefix, io }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.has_remaining() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

/// The writes of one pass of the connection task, gathered and sent
/// together by [`Flusher::poll_flush`] when the pass ends.
///
/// `h2` flushes its writer before each DATA frame of more than 256 bytes
/// that follows another, so taken as they come a batch of small responses
/// costs a system call each (and a TCP segment, or a TLS record, for the
/// client). Here `poll_flush` only notes that bytes wait; the connection
/// task writes them once it has polled `h2` and every stream. Costs one
/// copy of the bytes; the gathered bytes are bounded by [`GATHER_BYTES`],
/// past which a write waits for them to leave.
pub(crate) struct Deferred<T> {
    shared: Rc<RefCell<Gather<T>>>,
}

/// The connection task's end of a [`Deferred`].
pub(crate) struct Flusher<T> {
    shared: Rc<RefCell<Gather<T>>>,
}

struct Gather<T> {
    io: T,
    buf: Vec<u8>,
    /// `buf[sent..]` is still to write.
    sent: usize,
    /// Where the written bytes are in `h2`'s frames: each DATA payload the
    /// socket takes is credited to its stream in `outbox`.
    scan: FrameScan,
    outbox: Rc<Outbox>,
}

/// The most a [`Deferred`] gathers before a write must wait.
const GATHER_BYTES: usize = 64 * 1024;
/// What it keeps allocated between passes.
const GATHER_KEEP_BYTES: usize = 16 * 1024;

/// `io` with its writes deferred to the returned [`Flusher`]; what leaves
/// is credited to `outbox`.
pub(super) fn deferred<T>(io: T, outbox: Rc<Outbox>) -> (Deferred<T>, Flusher<T>) {
    let shared = Rc::new(RefCell::new(Gather {
        io,
        buf: Vec::new(),
        sent: 0,
        scan: FrameScan::default(),
        outbox,
    }));
    (
        Deferred {
            shared: shared.clone(),
        },
        Flusher { shared },
    )
}

impl<T: AsyncWrite + Unpin> Gather<T> {
    /// Write out what is gathered, then flush `io` (TLS: its records).
    /// `release`: the pass is over, so a buffer grown past
    /// [`GATHER_KEEP_BYTES`] is freed; within a pass it is kept for the
    /// next 64 KiB (growing it anew each time copied most of what it held).
    fn poll_drain(&mut self, cx: &mut Context<'_>, release: bool) -> Poll<io::Result<()>> {
        while self.sent < self.buf.len() {
            let n =
                std::task::ready!(Pin::new(&mut self.io).poll_write(cx, &self.buf[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            let outbox = &self.outbox;
            outbox.moved();
            (self.scan).scan(&self.buf[self.sent..self.sent + n], |id, k| {
                outbox.written(id, k)
            });
            self.sent += n;
        }
        self.sent = 0;
        if release && self.buf.capacity() > GATHER_KEEP_BYTES {
            self.buf = Vec::new();
        } else {
            self.buf.clear();
        }
        Pin::new(&mut self.io).poll_flush(cx)
    }
}

impl<T: AsyncWrite + Unpin> Flusher<T> {
    /// Send what the pass wrote; `Pending` while the socket is full (the
    /// task is woken when it drains).
    pub(crate) fn poll_flush(&self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        self.shared.borrow_mut().poll_drain(cx, true)
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Deferred<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.shared.borrow_mut().io).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Deferred<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(cx, &[io::IoSlice::new(data)])
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut g = self.shared.borrow_mut();
        let mut total = 0;
        for b in bufs {
            if g.buf.len() >= GATHER_BYTES {
                break;
            }
            let room = GATHER_BYTES - g.buf.len();
            let take = b.len().min(room);
            // Past what is kept between passes, straight to the most it
            // gathers: one move of at most 16 KiB instead of a doubling's
            // copies (file data arrives 16 KiB a frame).
            let want = g.buf.len() + take;
            if want > GATHER_KEEP_BYTES && g.buf.capacity() < GATHER_BYTES {
                let more = GATHER_BYTES - g.buf.len();
                g.buf.reserve_exact(more);
            }
            g.buf.extend_from_slice(&b[..take]);
            total += take;
            if take < b.len() {
                break;
            }
        }
        if total > 0 || bufs.iter().all(|b| b.is_empty()) {
            return Poll::Ready(Ok(total));
        }
        // Full: what is gathered must leave before more comes.
        std::task::ready!(g.poll_drain(cx, false))?;
        drop(g);
        self.poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Deferred to the end of the task's pass (`Flusher`).
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut g = self.shared.borrow_mut();
        std::task::ready!(g.poll_drain(cx, true))?;
        Pin::new(&mut g.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    /// A source that has nothing (Pending) once its bytes are read.
    struct Source(Vec<u8>);
    impl AsyncRead for Source {
        fn poll_read(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let this = self.get_mut();
            if this.0.is_empty() {
                return Poll::Pending;
            }
            let n = this.0.len().min(buf.remaining());
            buf.put_slice(&this.0[..n]);
            this.0.drain(..n);
            Poll::Ready(Ok(()))
        }
    }

    #[test]
    fn the_prefix_is_read_before_the_stream() {
        let mut p = Prefixed::new(Bytes::from_static(b"PRI "), Source(b"rest".to_vec()));
        let mut cx = Context::from_waker(Waker::noop());
        let mut got = Vec::new();
        let mut storage = [0u8; 3];
        loop {
            let mut rb = ReadBuf::new(&mut storage);
            match Pin::new(&mut p).poll_read(&mut cx, &mut rb) {
                Poll::Ready(Ok(())) => got.extend_from_slice(rb.filled()),
                Poll::Ready(Err(e)) => panic!("{e}"),
                Poll::Pending => break,
            }
        }
        assert_eq!(got, b"PRI rest");
    }
}
