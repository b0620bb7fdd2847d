//! Transports: what a connection runs over (plain TCP, or TLS on TCP), and
//! the TLS handshake that turns an accepted socket into the latter.
//!
//! The HTTP/1.1 loop is generic over [`Transport`]; the sender asks it
//! whether the socket is reachable for zero-copy file bodies (`tcp`) and
//! whether bytes are encrypted in user space (`ENCRYPTS`); the idle wait
//! asks whether anything is buffered above the socket (`idle_socket`), so a
//! TLS connection parks like a plain one when nothing is. Which protocol a
//! connection speaks is not decided here but in `conn::serve` and
//! `conn::serve_tls`, from the handshake's ALPN or the first bytes.
//!
//! TLS is ours over rustls's unbuffered API: `session` (I/O-free: the
//! session and its bounded buffers; `hello` reads the SNI), `tls` (the
//! owned-buffer stream HTTP/1.1 runs on, and the handshake); HTTP/2 drives
//! the same session in poll style (`h2::tls`). Decision record:
//! docs/decisions/0015-tls-transport.md.

mod hello;
mod records;
pub(crate) mod session;
mod tls;

pub(crate) use tls::TlsStream;

use std::io;
use std::rc::Rc;
use std::sync::Arc;

use monoio::buf::SliceMut;
use monoio::io::{AsyncReadRent, AsyncWriteRent};
use monoio::net::tcp::stream_poll::TcpStreamPoll;
use monoio::net::TcpStream;
use monoio::BufResult;

use super::super::registry::Registration;
use super::Ctx;
use crate::choice::choice;
use crate::telemetry::{TlsFailure, WorkerStats};
use session::Error;

choice! {
    /// Who seals the TLS records a connection sends (`--ktls`).
    pub enum KtlsChoice {
        /// The kernel (kTLS) where it has TLS and the session suits it
        /// (TLS 1.3, HTTP/1.1); user space otherwise.
        Auto = "auto",
        /// User space always.
        Off = "off",
    }
}

/// Bytes of received handshake messages a worker's TLS connections may hold
/// beyond their pooled read buffers, together (`--tls-handshake-buffer-bytes`):
/// a ClientHello fits a pooled buffer (a few KiB), and what is longer (up
/// to 64 KiB, rustls's bound for one message) is taken from this budget
/// while its handshake runs. Past it the handshake is refused: many
/// connections each sending most of a 64 KiB message cannot make a worker
/// hold more than the budget.
pub(crate) struct HandshakeBudget {
    held: std::cell::Cell<usize>,
    limit: usize,
}

impl HandshakeBudget {
    pub(crate) fn new(limit: usize) -> HandshakeBudget {
        HandshakeBudget {
            held: std::cell::Cell::new(0),
            limit,
        }
    }

    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// One handshake's share, given back when it is dropped.
    pub(crate) fn charge(&self) -> Charge<'_> {
        Charge {
            budget: self,
            bytes: 0,
        }
    }
}

/// What one handshake holds of its worker's [`HandshakeBudget`].
pub(crate) struct Charge<'a> {
    budget: &'a HandshakeBudget,
    bytes: usize,
}

impl Charge<'_> {
    /// The handshake now holds `bytes`: `false` when that would take the
    /// worker past its budget (its share stays as it was).
    pub(crate) fn hold(&mut self, bytes: usize) -> bool {
        let others = self.budget.held.get() - self.bytes;
        if bytes > self.bytes && others + bytes > self.budget.limit {
            return false;
        }
        self.budget.held.set(others + bytes);
        self.bytes = bytes;
        true
    }
}

impl Drop for Charge<'_> {
    fn drop(&mut self) {
        self.budget.held.set(self.budget.held.get() - self.bytes);
    }
}

/// What a connection runs over: plain TCP, or TLS on TCP.
pub(crate) trait Transport: AsyncReadRent + AsyncWriteRent {
    /// The socket itself, when response bytes go to it unchanged (so file
    /// bodies can be sent zero-copy): plain TCP, and TLS whose records the
    /// kernel seals (kTLS); `None` for TLS sealed in user space.
    fn tcp(&mut self) -> Option<&mut TcpStream>;
    /// `bytes` were sent zero-copy to [`Transport::tcp`]'s socket.
    fn sent_zero_copy(&mut self, _bytes: u64) {}
    /// The socket, when nothing received waits above it (no plaintext, no
    /// partial record), so its readiness is the connection's: the idle
    /// wait reads or parks on it.
    fn idle_socket(&mut self) -> Option<&mut TcpStream>;
    /// The connection parks (idle past the grace): give back everything
    /// that holds nothing (TLS: its buffers and expanded keys).
    fn park(&mut self) {}
    /// Bytes are encrypted (TLS, in user space or by the kernel): in-memory
    /// pieces are staged into one plaintext write (so records are full), a
    /// read must go through the stream (what the socket holds is
    /// ciphertext), and closing first says so in-protocol (close_notify,
    /// RFC 8446 §6.1).
    const ENCRYPTS: bool;
    /// The stream may turn HTTP/2 by the h2c preface (plain TCP; a TLS
    /// connection chose its protocol by ALPN in the handshake).
    const H2C: bool;
    /// The socket in poll style, for `h2` (only asked when [`Transport::H2C`]).
    fn into_poll(self) -> io::Result<TcpStreamPoll>;
    /// Bytes an idle wait read straight from the socket: plain TCP hands
    /// them back as they are (they are the request); TLS keeps them as
    /// received ciphertext (`None`), and the request is read through it.
    fn arrived(&mut self, raw: Vec<u8>) -> Option<Vec<u8>>;
    /// The read after an idle wait, as a future small enough to stay in the
    /// connection's task for its life: a TLS read (which may send, and
    /// reads on until a record is whole) is boxed, since it runs once a
    /// wake-up while the task keeps room for its largest state always.
    fn read_woken(
        &mut self,
        buf: SliceMut<Vec<u8>>,
    ) -> impl std::future::Future<Output = BufResult<usize, SliceMut<Vec<u8>>>>;
}

impl Transport for TcpStream {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
    fn idle_socket(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
    const ENCRYPTS: bool = false;
    const H2C: bool = true;
    fn into_poll(self) -> io::Result<TcpStreamPoll> {
        self.try_into_poll_io().map_err(|(e, _)| e)
    }
    fn arrived(&mut self, raw: Vec<u8>) -> Option<Vec<u8>> {
        Some(raw)
    }
    fn read_woken(
        &mut self,
        buf: SliceMut<Vec<u8>>,
    ) -> impl std::future::Future<Output = BufResult<usize, SliceMut<Vec<u8>>>> {
        self.read(buf)
    }
}

impl Transport for TlsStream {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        if self.kernel_seals() {
            Some(self.socket())
        } else {
            None
        }
    }
    fn sent_zero_copy(&mut self, bytes: u64) {
        TlsStream::sent_zero_copy(self, bytes);
    }
    fn idle_socket(&mut self) -> Option<&mut TcpStream> {
        if !self.drained() {
            return None;
        }
        // The empty receive buffer goes back to the pool (the socket is read
        // with one of its own); the rest waits for `park`, since a busy
        // client's next request usually comes within the grace.
        self.give_rx();
        Some(self.socket())
    }
    fn park(&mut self) {
        self.release();
    }
    const ENCRYPTS: bool = true;
    const H2C: bool = false;
    fn into_poll(self) -> io::Result<TcpStreamPoll> {
        Err(io::ErrorKind::Unsupported.into())
    }
    fn arrived(&mut self, raw: Vec<u8>) -> Option<Vec<u8>> {
        self.received(raw);
        None
    }
    fn read_woken(
        &mut self,
        buf: SliceMut<Vec<u8>>,
    ) -> impl std::future::Future<Output = BufResult<usize, SliceMut<Vec<u8>>>> {
        Box::pin(self.read(buf))
    }
}

/// The handshake of a connection on a TLS listener, bounded by the
/// handshake timeout and counted: the stream and the connection's facts
/// with what TLS settled (ALPN, version, resumption, the SNI's site);
/// `None` when it failed (the connection is closed, after an alert saying
/// why when the peer spoke TLS). A client speaking plain HTTP to the TLS
/// port fails on its first byte; it is counted and closed without an error
/// log.
pub(super) async fn handshake_within<H>(
    stream: TcpStream,
    registration: &Registration,
    ctx: &Ctx<H>,
    config: Arc<rustls::ServerConfig>,
    facts: crate::app::Connection,
) -> Option<(TlsStream, crate::app::Connection)> {
    let limit = ctx.settings.tls_handshake_timeout;
    // Mid-handshake is not idle: a drain must let it finish (its request
    // then gets `Connection: close`) rather than cut the client's hello.
    registration.set_idle(false);
    // Boxed: the handshake's state is large and lives only as long as it
    // runs; inline, the connection's task would keep its size for life.
    let accepted = Box::pin(TlsStream::accept(
        stream,
        config,
        Rc::clone(&ctx.pool),
        &ctx.handshakes,
    ));
    match monoio::time::timeout(limit, accepted).await {
        Ok(Ok(tls)) => {
            let session = tls.session();
            WorkerStats::add(&ctx.stats.tls_handshakes, 1);
            if session.resumed() {
                WorkerStats::add(&ctx.stats.tls_resumed, 1);
            }
            let facts = crate::app::Connection {
                tls: Some(crate::app::Tls {
                    alpn: session.alpn().and_then(crate::app::Alpn::from_id),
                    version: session.version().map(|v| match v {
                        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
                        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
                        _ => "TLS",
                    }),
                    resumed: session.resumed(),
                    site: session
                        .sni()
                        .and_then(|name| ctx.sites.route(name.as_bytes())),
                }),
                ..facts
            };
            return Some((tls, facts));
        }
        Ok(Err(Error::NotTls)) => {
            WorkerStats::add(&ctx.stats.tls_plaintext, 1);
            tracing::debug!("plain HTTP on a TLS listener; closed");
        }
        Ok(Err(e)) => {
            let reason = match &e {
                Error::Io(_) => TlsFailure::Closed,
                _ => TlsFailure::Refused,
            };
            failed(ctx, reason);
            tracing::debug!(error = %e, "TLS handshake failed");
        }
        Err(_) => {
            failed(ctx, TlsFailure::Timeout);
            tracing::debug!("TLS handshake timed out");
        }
    }
    None
}

/// After the handshake of a connection that will speak HTTP/1.1: hand its
/// send keys to the kernel where `--ktls auto` and the kernel allow. The
/// first refusal that says the kernel has no TLS stops this worker trying
/// (the supervisor said so once at start); any other refusal leaves this
/// one connection to user space.
pub(super) fn offload<H>(tls: &mut TlsStream, ctx: &Ctx<H>) {
    if ctx.settings.ktls == KtlsChoice::Off || ctx.ktls_missing.get() {
        return;
    }
    match tls.offload() {
        Ok(()) => WorkerStats::add(&ctx.stats.tls_ktls, 1),
        Err(e) if crate::sys::ktls::unavailable(&e) => ctx.ktls_missing.set(true),
        Err(e) if e.kind() == io::ErrorKind::Unsupported => {}
        Err(e) => tracing::debug!(error = %e, "kTLS refused; this connection seals in user space"),
    }
}

/// Count a failed handshake, in the total and by its reason.
fn failed<H>(ctx: &Ctx<H>, reason: TlsFailure) {
    WorkerStats::add(&ctx.stats.tls_failed, 1);
    WorkerStats::add(&ctx.stats.tls_failures[reason as usize], 1);
}

#[cfg(test)]
mod tests {
    use super::HandshakeBudget;

    #[test]
    fn handshakes_hold_within_the_budget_and_give_back_when_dropped() {
        let budget = HandshakeBudget::new(100);
        let mut a = budget.charge();
        let mut b = budget.charge();
        assert!(a.hold(60));
        assert!(!b.hold(50), "60 + 50 is past 100");
        assert!(b.hold(40));
        assert_eq!(budget.held.get(), 100);
        assert!(a.hold(20), "shrinking is always allowed");
        assert!(a.hold(60), "and growing back within the budget");
        assert!(!a.hold(61));
        assert_eq!(budget.held.get(), 100, "a refused hold keeps the share");
        drop(a);
        assert_eq!(budget.held.get(), 40);
        drop(b);
        assert_eq!(budget.held.get(), 0);
    }
}
