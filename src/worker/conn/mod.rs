//! The connection layer: from an accepted socket to written responses.
//!
//! Owns: transports (plain TCP, TLS and its handshake), the HTTP/1.1
//! connection state and loop, the protocol-neutral dispatch to the service,
//! the sender that writes heads, in-memory bodies and file ranges, the
//! worker's read-buffer pool, and lingering close. Does not own parsing or
//! response encoding (the I/O-free `http` core), what a request means
//! (`app::Service`), nor accepting and draining (the worker).
//!
//! The protocol is chosen in one place, here: [`serve_tls`] by the
//! handshake's ALPN, [`serve`] by the first bytes (the HTTP/1.1 loop hands
//! a connection that opens with HTTP/2's preface back, with what it read).
//!
//! What a worker's connections share is [`Ctx`] (`ctx`), built by the
//! worker when its runtime starts.
//!
//! Modules, in the order a request meets them (hyper's proto/h1 split):
//! 1. `transport`: the stream a connection runs over; TLS handshakes.
//! 2. `h1/`: the connection's state ([`h1`'s `Conn`], private to the
//!    folder), reading with pooled buffers, taking pipelined requests within
//!    the sender's budget; `h1/input` holds its received bytes and skips
//!    request bodies; `h1/exchange` is a service's `call`, its request body
//!    fed as it is pulled (`h1/intake`), its response framed and streamed.
//! 3. `dispatch`: request → service → response, catching panics, for both
//!    protocols.
//! 4. `output`: the sender: queued heads, `Bytes` bodies and file ranges,
//!    written by one vectored write per batch and sendfile.
//! 5. `linger`: the bounded half-close after an error or a close; `reads`:
//!    a connection's timed read and idle grace on each driver.
//! 6. `pool`: read buffers shared by a worker's connections.
//! 7. `h2`: HTTP/2 connections (by ALPN, or by the h2c preface a plain
//!    connection opens with, which `h1` hands back), their streams answered
//!    by the same `dispatch`.
//! 8. `logged`: each request's access-log fields, kept until its response
//!    has left (the line says what was written and how long it took).
//!
//! Memory per connection is bounded whatever the client does: the read
//! buffer grows only for a head still arriving (up to the head limit), the
//! sender holds at most its budget before the next write, reading stops while
//! the queue is written, and an idle connection holds no buffer at all.
//!
//! [`h1`'s `Conn`]: h1

use super::budget;
mod ctx;
mod dispatch;
mod fields;
mod h1;
mod h2;
mod h3;
mod heads;
mod linger;
mod logged;
mod output;
mod pool;
mod reads;
mod settings;
mod transport;

pub(crate) use budget::WorkerBudget;
pub(crate) use ctx::{AltSvc, Ctx};
pub use h2::{H2c, Http2Conn};
pub use settings::ConnSettings;
pub(crate) use transport::HandshakeBudget;
pub use transport::KtlsChoice;

use std::rc::Rc;
use std::sync::Arc;

use monoio::net::TcpStream;

use super::registry::Registration;
use crate::app::{Connection, Service};
use crate::telemetry::WorkerStats;
use transport::Transport;

/// Serve a connection accepted on a plain listener: HTTP/1.1, unless it
/// opens with HTTP/2's preface (prior knowledge, RFC 9113 §3.3), which the
/// HTTP/1.1 loop hands back with the bytes it read.
pub(crate) async fn serve<H: Service>(
    stream: TcpStream,
    registration: Registration,
    ctx: Rc<Ctx<H>>,
    facts: Connection,
) {
    http1_then_h2c(stream, registration, ctx, facts).await
}

/// Serve a connection accepted on a TLS listener: the handshake, then the
/// protocol its ALPN chose (`h2`, or HTTP/1.1 for anything else); an
/// `acme-tls/1` validation ends with the handshake (RFC 8737 §3).
pub(crate) async fn serve_tls<H: Service>(
    stream: TcpStream,
    registration: Registration,
    ctx: Rc<Ctx<H>>,
    config: Arc<rustls::ServerConfig>,
    facts: Connection,
) {
    let Some((tls, facts)) =
        transport::handshake_within(stream, &registration, &ctx, config, facts).await
    else {
        return;
    };
    match tls.session().alpn() {
        Some(crate::acme::ACME_TLS_ALPN) => {}
        Some(b"h2") => {
            let (tcp, session) = tls.into_parts();
            match tcp.try_into_poll_io() {
                Ok(tcp) => {
                    let tls = h2::Tls::new(tcp, session, Rc::clone(&ctx.pool));
                    monoio::spawn(serve_h2(tls, registration, ctx, facts));
                }
                Err((e, _)) => tracing::warn!(error = %e, "cannot poll the socket for HTTP/2"),
            }
        }
        _ => {
            let mut tls = tls;
            transport::offload(&mut tls, &ctx);
            http1_then_h2c(tls, registration, ctx, facts).await
        }
    }
}

/// Serve an HTTP/3 connection whose QUIC handshake completed.
pub(crate) async fn serve_h3<H: Service>(ctx: Rc<Ctx<H>>, conn: super::quic::Conn) {
    let stats = ctx.stats.clone();
    let _gauge = OpenGauge::new(&stats);
    h3::serve(ctx, conn).await
}

/// HTTP/1.1 on `stream`, then HTTP/2 on what it hands back (a transport
/// that cannot be polled, TLS, never hands back: its HTTP/2 is ALPN's).
async fn http1_then_h2c<H: Service, S: Transport>(
    stream: S,
    registration: Registration,
    ctx: Rc<Ctx<H>>,
    facts: Connection,
) {
    let Some(h) = h1::serve(stream, registration, ctx.clone(), facts).await else {
        return;
    };
    match h.stream.into_poll() {
        Ok(tcp) => {
            let io = h2::Prefixed::new(h.prefix, tcp);
            monoio::spawn(serve_h2(io, h.registration, ctx, h.facts));
        }
        Err(e) => tracing::warn!(error = %e, "cannot poll the socket for HTTP/2"),
    }
}

/// An HTTP/2 connection in a task of its own, spawned as the task that
/// read its preface (HTTP/1.1's, or the TLS handshake's) ends: the task
/// then holds HTTP/2's state only (~0.8 KB), not the larger future of an
/// HTTP/1.1 connection it came from (~1.6 KB) for all its idle life
/// (issue 26's idle bound).
async fn serve_h2<H, T>(io: T, registration: Registration, ctx: Rc<Ctx<H>>, facts: Connection)
where
    H: Service,
    T: monoio::io::poll_io::AsyncRead
        + monoio::io::poll_io::AsyncWrite
        + h2::Shed
        + Unpin
        + 'static,
{
    let _gauge = OpenGauge::new(&ctx.stats);
    h2::serve(io, &registration, &ctx, facts).await
}

/// Counts a connection in the open-connection gauge while it lives.
pub(super) struct OpenGauge<'a>(&'a WorkerStats);

impl<'a> OpenGauge<'a> {
    pub(super) fn new(stats: &'a WorkerStats) -> OpenGauge<'a> {
        WorkerStats::add(&stats.connections_open, 1);
        OpenGauge(stats)
    }
}

impl Drop for OpenGauge<'_> {
    fn drop(&mut self) {
        WorkerStats::sub(&self.0.connections_open, 1);
    }
}
pub(crate) use pool::Pool;
