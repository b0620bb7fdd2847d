//! TLS over a monoio socket with owned-buffer I/O: the stream HTTP/1.1 runs
//! over on a TLS listener, and the handshake that makes it.
//!
//! Everything TLS is the [`Session`]'s; this file only moves bytes between
//! its buffers and the socket: ciphertext is read into a buffer from the
//! worker's pool and given back as soon as it is processed, plaintext is
//! decrypted straight into the reader's buffer, and what a write encrypts
//! leaves in one system call. A connection with nothing buffered here
//! ([`TlsStream::drained`]) can wait on its socket's readiness holding no
//! buffer at all, as a plain one does.
//!
//! With kernel TLS ([`TlsStream::offload`]) the kernel seals what is
//! written: plaintext goes to the socket as it is (file bodies by
//! `sendfile`, through `Transport::tcp`), records of another type (an
//! alert, our KeyUpdate) by control message after what was queued before
//! them, and receiving stays in user space.

use std::io;
use std::rc::Rc;
use std::sync::Arc;

use monoio::buf::{IoBuf, IoBufMut, IoVecBuf};
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::net::TcpStream;
use monoio::BufResult;

use super::super::pool::{Pool, READ_BUF_BYTES};
use super::records::{self, alert};
use super::session::{Error, Got, Session};
use super::HandshakeBudget;
use crate::sys::ktls;
use crate::sys::rent;
use crate::sys::socket::stream_fd;

/// How much ciphertext buffer a busy connection keeps between writes; a
/// larger one (a file's chunks) is freed when sent.
const OUT_KEEP_BYTES: usize = 16 * 1024;

/// A TLS connection on a socket.
pub(crate) struct TlsStream {
    tcp: TcpStream,
    /// Boxed: rustls's connection is large, and inline it would widen every
    /// future that holds the stream (the connection's task, for its life).
    session: Box<Session>,
    pool: Rc<Pool>,
}

impl TlsStream {
    /// Run the server side of a handshake on `tcp`. Plaintext the client
    /// sent with its last flight waits in the session for the first read.
    /// What its received-handshake buffer holds beyond a pooled buffer's
    /// size is charged to `budget` while the handshake runs.
    pub(crate) async fn accept(
        tcp: TcpStream,
        config: Arc<rustls::ServerConfig>,
        pool: Rc<Pool>,
        budget: &HandshakeBudget,
    ) -> Result<TlsStream, Error> {
        let session = Box::new(Session::new(config)?);
        let mut stream = TlsStream { tcp, session, pool };
        let mut charge = budget.charge();
        loop {
            let got = stream.session.read(|_| 0);
            stream.send().await.map_err(io_to_tls)?;
            match got? {
                Got::NeedInput if stream.session.is_handshaking() => {}
                Got::Closed if stream.session.is_handshaking() => {
                    return Err(io_to_tls(io::ErrorKind::UnexpectedEof.into()))
                }
                _ => {
                    stream.give_rx();
                    return Ok(stream);
                }
            }
            if !stream.receive().await.map_err(io_to_tls)? {
                return Err(io_to_tls(io::ErrorKind::UnexpectedEof.into()));
            }
            // A handshake message longer than a pooled buffer (rustls joins
            // one across records in it) is held only within the budget.
            let beyond = stream.session.rx_capacity().saturating_sub(READ_BUF_BYTES);
            if !charge.hold(beyond) {
                return Err(Error::Budget(budget.limit()));
            }
        }
    }

    /// The TLS session (ALPN, version, SNI, resumption).
    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    /// The socket, for readiness waits and its options.
    pub(crate) fn socket(&mut self) -> &mut TcpStream {
        &mut self.tcp
    }

    /// Nothing received waits above the socket (see [`Session::drained`]).
    pub(crate) fn drained(&self) -> bool {
        self.session.drained()
    }

    /// Give every empty buffer back: what an idle connection does before it
    /// parks.
    pub(crate) fn release(&mut self) {
        let pool = &self.pool;
        self.session.release(|b| pool.give(b));
    }

    /// Ciphertext read straight from the socket (an idle wait's read): the
    /// session takes it as what it received, in the same pooled buffer.
    pub(crate) fn received(&mut self, raw: Vec<u8>) {
        // Only a drained stream is read around (`Transport::idle_socket`,
        // which gave its empty buffer back first).
        debug_assert!(self.session.drained());
        self.give_rx();
        self.session.put_rx(raw);
    }

    /// Hand our send keys to the kernel (kTLS): the `tls` ULP, then our
    /// keys as its transmit keys. `Err` leaves sealing to us: `Unsupported`
    /// when this session's keys cannot be handed over (TLS 1.2, something
    /// queued), or the kernel's refusal ([`ktls::unavailable`] tells
    /// whether it has TLS at all).
    pub(crate) fn offload(&mut self) -> io::Result<()> {
        let Some(info) = self.session.kernel_tx() else {
            return Err(io::ErrorKind::Unsupported.into());
        };
        let fd = stream_fd(&self.tcp);
        ktls::attach(fd)?;
        ktls::set_tx(fd, &info)?;
        self.session.kernel_sends();
        Ok(())
    }

    /// The kernel seals what this stream sends.
    pub(crate) fn kernel_seals(&self) -> bool {
        self.session.kernel_seals()
    }

    /// `bytes` went to a kernel-sealed socket zero-copy: count the records
    /// they may have made (one per page at most) toward our key's limit.
    pub(crate) fn sent_zero_copy(&mut self, bytes: u64) {
        self.session.kernel_sent(bytes / 4096 + 1);
    }

    /// The socket and the session, for HTTP/2's poll-style adapter.
    pub(crate) fn into_parts(mut self) -> (TcpStream, Box<Session>) {
        self.release();
        (self.tcp, self.session)
    }

    /// Send what the session has queued, all of it.
    async fn send(&mut self) -> io::Result<()> {
        while !self.session.out().is_empty() {
            let (buf, at, end) = self.session.take_out();
            let (res, slice) = self.tcp.write(buf.slice(at..end)).await;
            let buf = slice.into_inner();
            match res {
                Ok(0) => {
                    self.session.put_out(buf, at, end);
                    return Err(io::ErrorKind::WriteZero.into());
                }
                Ok(n) => self.session.put_out(buf, at + n, end),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {
                    self.session.put_out(buf, at, end)
                }
                Err(e) => {
                    self.session.put_out(buf, at, end);
                    return Err(e);
                }
            }
        }
        self.session.release_out(OUT_KEEP_BYTES);
        self.send_due().await
    }

    /// Send what the kernel must be told by record (kTLS): our KeyUpdate,
    /// then our new keys to it; an alert. A kernel that cannot take new
    /// keys (before Linux 6.14) ends the connection instead, with
    /// close_notify under the keys both sides still share.
    async fn send_due(&mut self) -> io::Result<()> {
        let due = self.session.take_due();
        if due.is_empty() {
            return Ok(());
        }
        if due.key_update {
            if !ktls::can_rekey() {
                let close = [alert::level(alert::CLOSE_NOTIFY), alert::CLOSE_NOTIFY];
                let said = self.send_record(records::ALERT, &close).await;
                self.session.fail();
                said?;
                return Err(io::Error::new(
                    io::ErrorKind::ConnectionAborted,
                    "TLS key update: this kernel cannot take new send keys",
                ));
            }
            // Derived first: a KeyUpdate must not announce keys we lack.
            let next = self.session.next_kernel_tx().map_err(tls_to_io)?;
            self.send_record(records::HANDSHAKE, &records::KEY_UPDATE_NOT_REQUESTED)
                .await?;
            if let Err(e) = ktls::set_tx(stream_fd(&self.tcp), &next) {
                // The peer has moved to keys the kernel does not have.
                self.session.fail();
                return Err(e);
            }
        }
        if let Some(desc) = due.alert {
            self.send_record(records::ALERT, &[alert::level(desc), desc])
                .await?;
        }
        Ok(())
    }

    /// One record of type `typ` through the kernel's TLS.
    async fn send_record(&mut self, typ: u8, data: &[u8]) -> io::Result<()> {
        let mut at = 0;
        while at < data.len() {
            match ktls::send_record(stream_fd(&self.tcp), typ, &data[at..]) {
                Ok(n) => at += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.tcp.writable(false).await?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// A write of `n` bytes to a kernel-sealed socket made at most this
    /// many records.
    fn kernel_wrote(&mut self, n: usize) {
        self.session
            .kernel_sent((n / records::MAX_CONTENT) as u64 + 1);
    }

    /// Read more ciphertext into the session, in a pooled buffer when it
    /// has none. `false` at the end of the stream.
    async fn receive(&mut self) -> io::Result<bool> {
        let pool = &self.pool;
        self.session.rx_or(|| pool.take()).map_err(tls_to_io)?;
        let buf = self.session.take_rx();
        let (len, cap) = (buf.len(), buf.capacity());
        let (res, slice) = self.tcp.read(buf.slice_mut(len..cap)).await;
        self.session.put_rx(slice.into_inner());
        match res {
            Ok(0) => Ok(false),
            Ok(_) => Ok(true),
            Err(e) => Err(e),
        }
    }

    /// The received-ciphertext buffer goes back to the pool when it holds
    /// nothing.
    pub(crate) fn give_rx(&mut self) {
        if let Some(b) = self.session.take_empty_rx() {
            self.pool.give(b);
        }
    }

    /// Decrypt into `buf`: how many bytes, 0 at the end of the stream (the
    /// peer's close_notify, or its FIN between records).
    async fn read_into<T: IoBufMut>(&mut self, buf: &mut T) -> io::Result<usize> {
        if buf.bytes_total() == 0 {
            return Ok(0);
        }
        loop {
            let mut done = 0;
            let got = self.session.read(|p| {
                let n = rent::append(buf, done, p);
                done += n;
                n
            });
            // A ticket, a key update's answer or an alert goes first.
            self.send().await?;
            match got.map_err(tls_to_io)? {
                Got::Bytes(n) => {
                    self.give_rx();
                    return Ok(n);
                }
                Got::Closed => return Ok(0),
                Got::NeedInput => {}
            }
            if !self.receive().await? {
                // A FIN between records ends the stream as a close would;
                // in the middle of one, the record is cut.
                return if self.session.drained() {
                    self.give_rx();
                    Ok(0)
                } else {
                    Err(io::ErrorKind::UnexpectedEof.into())
                };
            }
        }
    }

    /// Encrypt `data` and send it: how much of it was taken.
    async fn write_from(&mut self, data: &[u8]) -> io::Result<usize> {
        let n = match self.session.encrypt(data) {
            Ok(n) => n,
            Err(e) => {
                let _ = self.send().await;
                return Err(tls_to_io(e));
            }
        };
        self.send().await?;
        Ok(n)
    }
}

impl AsyncReadRent for TlsStream {
    async fn read<T: IoBufMut>(&mut self, mut buf: T) -> BufResult<usize, T> {
        let res = self.read_into(&mut buf).await;
        (res, buf)
    }

    async fn readv<T: monoio::buf::IoVecBufMut>(&mut self, buf: T) -> BufResult<usize, T> {
        // Not used by the connection; a vectored read over TLS would decrypt
        // into the first buffer only anyway.
        (Err(io::ErrorKind::Unsupported.into()), buf)
    }
}

impl AsyncWriteRent for TlsStream {
    async fn write<T: IoBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        if self.kernel_seals() {
            if let Err(e) = self.send().await {
                return (Err(e), buf);
            }
            let (res, buf) = self.tcp.write(buf).await;
            if let Ok(n) = res {
                self.kernel_wrote(n);
            }
            return (res, buf);
        }
        let res = self.write_from(rent::filled(&buf)).await;
        (res, buf)
    }

    async fn writev<T: IoVecBuf>(&mut self, buf: T) -> BufResult<usize, T> {
        if self.kernel_seals() {
            if let Err(e) = self.send().await {
                return (Err(e), buf);
            }
            let (res, buf) = self.tcp.writev(buf).await;
            if let Ok(n) = res {
                self.kernel_wrote(n);
            }
            return (res, buf);
        }
        // One staged plaintext, so small pieces make full records.
        let mut staged = Vec::new();
        rent::gather(&buf, &mut staged);
        let res = self.write_from(&staged).await;
        (res, buf)
    }

    async fn flush(&mut self) -> io::Result<()> {
        self.send().await
    }

    /// close_notify, then the FIN (RFC 8446 §6.1).
    async fn shutdown(&mut self) -> io::Result<()> {
        let said = self.session.close_notify();
        self.send().await?;
        said.map_err(tls_to_io)?;
        self.tcp.shutdown().await
    }
}

fn tls_to_io(e: Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

fn io_to_tls(e: io::Error) -> Error {
    Error::Io(e)
}
