//! The byte streams an HTTP/2 connection runs over: poll-style
//! `AsyncRead + AsyncWrite` (tokio's traits, which monoio re-exports as
//! `poll_io`).
//!
//! A plain socket becomes one with monoio's `into_poll_io` (readiness through
//! the ring on io_uring, epoll on the legacy driver). [`Prefixed`] gives the
//! connection the bytes the HTTP/1.1 loop had already read when it saw the
//! h2c preface, before the socket's next bytes; [`Writer`] sends what one
//! pass of the connection task wrote, in gathered writes.
//!
//! Over TLS the socket is wrapped first by `tls::Tls`.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use monoio::io::poll_io::{AsyncRead, AsyncWrite, ReadBuf};

use super::outbox::{FrameScan, Outbox};
use crate::http::h2::Output;

/// What a transport gives back while its connection is idle (no stream,
/// nothing to write): TLS its buffers and expanded keys; a plain socket
/// nothing.
pub(crate) trait Shed {
    fn shed(&mut self) {}
}

impl Shed for monoio::net::tcp::stream_poll::TcpStreamPoll {}

impl<T: Shed> Shed for Prefixed<T> {
    fn shed(&mut self) {
        if !self.prefix.has_remaining() {
            self.prefix = Bytes::new();
        }
        self.io.shed();
    }
}

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

/// Writes a connection's output ([`Output`]: frames with body payloads
/// spliced in) as the socket takes it, in gathered writes, each DATA
/// payload credited to its stream in the outbox as it leaves and dropped
/// from the output.
#[derive(Debug, Default)]
pub(super) struct Writer {
    scan: FrameScan,
}

/// Slices a gathered write carries at most.
const SLICES: usize = 64;
/// Output capacity kept between passes; a larger buffer is freed once empty.
const KEEP_BYTES: usize = 16 * 1024;

impl Writer {
    /// Write `out` until it has all left (`Ready(Ok)`) or the socket is full
    /// (`Pending`).
    pub(super) fn poll_write<T: AsyncWrite + Unpin>(
        &mut self,
        io: &mut T,
        out: &mut Output,
        outbox: &Outbox,
        cx: &mut Context<'_>,
    ) -> Poll<io::Result<()>> {
        while !out.is_empty() {
            let mut slices: [io::IoSlice<'_>; SLICES] =
                std::array::from_fn(|_| io::IoSlice::new(&[]));
            let mut used = 0;
            for chunk in out.chunks().take(SLICES) {
                slices[used] = io::IoSlice::new(chunk);
                used += 1;
            }
            let n = std::task::ready!(Pin::new(&mut *io).poll_write_vectored(cx, &slices[..used]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            outbox.moved();
            let mut left = n;
            for s in &slices[..used] {
                let k = left.min(s.len());
                self.scan.scan(&s[..k], |id, paid| outbox.written(id, paid));
                left -= k;
                if left == 0 {
                    break;
                }
            }
            out.advance(n);
        }
        out.release(KEEP_BYTES);
        Pin::new(io).poll_flush(cx)
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
