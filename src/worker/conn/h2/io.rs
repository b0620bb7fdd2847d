//! The byte streams an HTTP/2 connection runs over, as the `h2` crate wants
//! them: poll-style `AsyncRead + AsyncWrite` (tokio's traits, which monoio
//! re-exports as `poll_io`).
//!
//! A plain socket becomes one with monoio's `into_poll_io` (readiness through
//! the ring on io_uring, epoll on the legacy driver). Two wrappers complete
//! it:
//! - [`Prefixed`]: the bytes the HTTP/1.1 loop had already read when it saw
//!   the h2c preface, handed to `h2` before the socket's next bytes;
//! - [`Tls`]: rustls over the poll-style socket, for a connection whose
//!   handshake (done by `transport`) chose `h2` by ALPN. monoio-rustls's
//!   stream is completion-style (owned buffers) and cannot serve `h2`.

use std::io::{self, Read, Write};
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use monoio::io::poll_io::{AsyncRead, AsyncWrite, ReadBuf};

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

/// A rustls server session over a poll-style socket.
pub(crate) struct Tls<T> {
    io: T,
    session: rustls::ServerConnection,
    /// close_notify has been queued (shutdown started).
    closing: bool,
}

impl<T> Tls<T> {
    /// `session` has finished its handshake over `io`; rustls holds any
    /// application bytes read past it.
    pub(crate) fn new(io: T, session: rustls::ServerConnection) -> Tls<T> {
        Tls {
            io,
            session,
            closing: false,
        }
    }
}

/// The socket seen through `std::io` for rustls, `Pending` as `WouldBlock`.
struct Blocking<'a, 'b, T> {
    io: &'a mut T,
    cx: &'a mut Context<'b>,
}

impl<T: AsyncRead + Unpin> Read for Blocking<'_, '_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut rb = ReadBuf::new(buf);
        match Pin::new(&mut *self.io).poll_read(self.cx, &mut rb) {
            Poll::Ready(Ok(())) => Ok(rb.filled().len()),
            Poll::Ready(Err(e)) => Err(e),
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }
}

impl<T: AsyncWrite + Unpin> Write for Blocking<'_, '_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write(self.cx, buf) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        match Pin::new(&mut *self.io).poll_write_vectored(self.cx, bufs) {
            Poll::Ready(r) => r,
            Poll::Pending => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Tls<T> {
    /// Write queued TLS records until none is left (`Ready`) or the socket
    /// is full (`Pending`, woken when it drains).
    fn poll_send_records(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.session.wants_write() {
            let mut out = Blocking {
                io: &mut self.io,
                cx,
            };
            match self.session.write_tls(&mut out) {
                Ok(0) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for Tls<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.session.reader().read(buf.initialize_unfilled()) {
                // 0 is the peer's close_notify: the end of the stream.
                Ok(n) => {
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                Err(e) => return Poll::Ready(Err(e)),
            }
            let mut input = Blocking {
                io: &mut this.io,
                cx,
            };
            match this.session.read_tls(&mut input) {
                // EOF without close_notify: the reader says UnexpectedEof next.
                Ok(0) => match this.session.reader().read(buf.initialize_unfilled()) {
                    Ok(n) => {
                        buf.advance(n);
                        return Poll::Ready(Ok(()));
                    }
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                        return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()))
                    }
                    Err(e) => return Poll::Ready(Err(e)),
                },
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Poll::Pending,
                Err(e) => return Poll::Ready(Err(e)),
            }
            if let Err(e) = this.session.process_new_packets() {
                // Tell the peer why (the alert rustls queued), then fail.
                let _ = this.poll_send_records(cx);
                return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)));
            }
            // A key update or ticket may want sending; it goes with the
            // next write or flush.
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for Tls<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        loop {
            // rustls buffers up to its limit (64 KiB of records) and takes
            // less once it is full.
            let n = this.session.writer().write(buf)?;
            let sent = this.poll_send_records(cx)?;
            if n > 0 || buf.is_empty() {
                return Poll::Ready(Ok(n));
            }
            if sent.is_pending() {
                return Poll::Pending;
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        this.session.writer().flush()?;
        this.poll_send_records(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            // RFC 8446 §6.1: say so in-protocol before the FIN.
            this.session.send_close_notify();
            this.closing = true;
        }
        std::task::ready!(this.poll_send_records(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
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
