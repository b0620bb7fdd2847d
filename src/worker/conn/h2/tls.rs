//! TLS for HTTP/2: the connection's TLS session (`transport::session`,
//! the same one HTTP/1.1 runs on) driven in poll style over the poll-style
//! socket.
//!
//! Reads decrypt straight into the connection's read buffer; received
//! ciphertext sits in a buffer from the worker's pool only until it is
//! processed. Writes are encrypted as they come (the connection's writer
//! hands over a whole pass at once, its slices joined into full records)
//! and sent when the pass flushes, or sooner once [`session::ENCRYPT_MAX`]
//! bytes wait: the pending ciphertext is bounded.

use std::io;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use monoio::io::poll_io::{AsyncRead, AsyncWrite, ReadBuf};

use super::super::pool::Pool;
use super::super::transport::session::{self, Got, Session};
use crate::sys::rent;

/// The most plaintext a record carries (RFC 8446 §5.1).
const RECORD_BYTES: usize = 16 * 1024;

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

impl<T> super::io::Shed for Tls<T> {
    /// Every buffer that holds nothing, and the expanded keys (rebuilt at
    /// the next record), go back: an idle TLS connection holds rustls's
    /// state only.
    fn shed(&mut self) {
        let pool = &self.pool;
        self.session.release(|b| pool.give(b));
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

    /// Slices joined into records of up to [`RECORD_BYTES`]: a pass of
    /// small responses (a HEADERS frame, a DATA header and a body each) is
    /// a few records, not one per slice.
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.session.out().len() >= session::ENCRYPT_MAX {
            std::task::ready!(this.poll_send(cx))?;
        }
        let max = session::ENCRYPT_MAX;
        let mut staged = [0u8; RECORD_BYTES];
        let mut staged_len = 0;
        let mut total = 0;
        let (mut i, mut off) = (0, 0);
        let mut seal = |data: &[u8], total: &mut usize| match this.session.encrypt(data) {
            Ok(n) => {
                *total += n;
                Ok(())
            }
            Err(e) => Err(io::Error::new(io::ErrorKind::InvalidData, e)),
        };
        let result = loop {
            if total + staged_len >= max {
                break Ok(());
            }
            let Some(b) = bufs.get(i) else { break Ok(()) };
            let rest = &b[off..];
            if rest.is_empty() {
                (i, off) = (i + 1, 0);
                continue;
            }
            if staged_len == 0 && rest.len() >= RECORD_BYTES {
                // Large enough alone: sealed from where it is.
                let take = rest.len().min(max - total);
                if let Err(e) = seal(&rest[..take], &mut total) {
                    break Err(e);
                }
                off += take;
                continue;
            }
            let k = rest
                .len()
                .min(RECORD_BYTES - staged_len)
                .min(max - total - staged_len);
            staged[staged_len..staged_len + k].copy_from_slice(&rest[..k]);
            staged_len += k;
            off += k;
            if staged_len == RECORD_BYTES {
                if let Err(e) = seal(&staged, &mut total) {
                    break Err(e);
                }
                staged_len = 0;
            }
        };
        let result = result.and_then(|()| {
            if staged_len > 0 {
                seal(&staged[..staged_len], &mut total)
            } else {
                Ok(())
            }
        });
        if let Err(e) = result {
            let _ = this.poll_send(cx);
            return Poll::Ready(Err(e));
        }
        Poll::Ready(Ok(total))
    }

    fn is_write_vectored(&self) -> bool {
        true
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
