//! TLS for HTTP/2: the connection's TLS session (`transport::session`,
//! the same one HTTP/1.1 runs on) driven in poll style over the poll-style
//! socket, as the `h2` crate wants its I/O.
//!
//! Reads decrypt straight into `h2`'s buffer; received ciphertext sits in
//! a buffer from the worker's pool only until it is processed. Writes are
//! encrypted as they come (the `Deferred` writer above hands over a whole
//! pass at once) and sent when the pass flushes, or sooner once
//! [`session::ENCRYPT_MAX`] bytes wait: the pending ciphertext is bounded.

use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use monoio::io::poll_io::{AsyncRead, AsyncWrite, ReadBuf};

use super::super::pool::Pool;
use super::super::transport::session::{self, Got, Session};
use crate::sys::rent;

/// How much ciphertext buffer is kept between passes; more is freed once
/// sent.
const OUT_KEEP_BYTES: usize = 16 * 1024;

/// A TLS session over a poll-style socket.
pub(crate) struct Tls<T> {
    io: T,
    session: Box<Session>,
    pool: Rc<Pool>,
    /// close_notify has been queued (shutdown started).
    closing: bool,
}

impl<T> Tls<T> {
    /// `session` has finished its handshake over `io`; it holds any
    /// plaintext that came with the client's last flight.
    pub(crate) fn new(io: T, session: Box<Session>, pool: Rc<Pool>) -> Tls<T> {
        Tls {
            io,
            session,
            pool,
            closing: false,
        }
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> Tls<T> {
    /// Send queued ciphertext until none is left (`Ready`) or the socket is
    /// full (`Pending`, woken when it drains).
    fn poll_send(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while !self.session.out().is_empty() {
            match Pin::new(&mut self.io).poll_write(cx, self.session.out()) {
                Poll::Ready(Ok(0)) => return Poll::Ready(Err(io::ErrorKind::WriteZero.into())),
                Poll::Ready(Ok(n)) => self.session.sent(n),
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending => return Poll::Pending,
            }
        }
        self.session.release_out(OUT_KEEP_BYTES);
        Poll::Ready(Ok(()))
    }

    /// The received-ciphertext buffer goes back to the pool when it holds
    /// nothing.
    fn give_rx(&mut self) {
        if let Some(b) = self.session.take_empty_rx() {
            self.pool.give(b);
        }
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
            let got = this.session.read(|p| {
                let n = p.len().min(buf.remaining());
                buf.put_slice(&p[..n]);
                n
            });
            // A ticket, a key update's answer or an alert: sent now if the
            // socket takes it, else with the next flush.
            let sent = this.poll_send(cx);
            match got {
                Ok(Got::Bytes(_)) => {
                    this.give_rx();
                    return Poll::Ready(Ok(()));
                }
                // The peer's close_notify: the end of the stream.
                Ok(Got::Closed) => return Poll::Ready(Ok(())),
                Ok(Got::NeedInput) => {}
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            }
            if let Poll::Ready(Err(e)) = sent {
                return Poll::Ready(Err(e));
            }
            let pool = &this.pool;
            let rx = match this.session.rx_or(|| pool.take()) {
                Ok(rx) => rx,
                Err(e) => return Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e))),
            };
            let before = rx.len();
            let io = &mut this.io;
            let read = rent::fill_spare(rx, |rb| Pin::new(io).poll_read(cx, rb));
            match read {
                Poll::Pending => {
                    this.give_rx();
                    return Poll::Pending;
                }
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            if this.session.rx_len() == before {
                // The FIN: between records it ends the stream; in the middle
                // of one, the record is cut.
                if this.session.drained() {
                    this.give_rx();
                    return Poll::Ready(Ok(()));
                }
                return Poll::Ready(Err(io::ErrorKind::UnexpectedEof.into()));
            }
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
        if buf.is_empty() {
            return Poll::Ready(Ok(0));
        }
        // Bounded: past this much unsent, the socket must take some first.
        if this.session.out().len() >= session::ENCRYPT_MAX {
            std::task::ready!(this.poll_send(cx))?;
        }
        match this.session.encrypt(buf) {
            Ok(n) => Poll::Ready(Ok(n)),
            Err(e) => {
                let _ = this.poll_send(cx);
                Poll::Ready(Err(io::Error::new(io::ErrorKind::InvalidData, e)))
            }
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        std::task::ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.closing {
            // RFC 8446 §6.1: say so in-protocol before the FIN.
            let _ = this.session.close_notify();
            this.closing = true;
        }
        std::task::ready!(this.poll_send(cx))?;
        Pin::new(&mut this.io).poll_shutdown(cx)
    }
}
