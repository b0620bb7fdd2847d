//! The connection layer: from an accepted socket to written responses.
//!
//! Owns: transports (plain TCP, TLS and its handshake), the HTTP/1.1
//! connection state and loop, the protocol-neutral dispatch to the service,
//! the sender that writes heads, in-memory bodies and file ranges, the
//! worker's read-buffer pool, and lingering close. Does not own parsing or
//! response encoding (the I/O-free `http` core), what a request means
//! (`app::Service`), nor accepting and draining (the worker).
//!
//! Modules, in the order a request meets them (hyper's proto/h1 split):
//! 1. `transport`: the stream a connection runs over; TLS handshakes, and
//!    ALPN's choice of HTTP/2 (`h2`) or HTTP/1.1.
//! 2. `h1`: the connection's state ([`h1`'s `Conn`]), reading with pooled
//!    buffers, taking pipelined requests within the sender's budget;
//!    `input` holds its received bytes and skips request bodies.
//! 3. `dispatch`: request → service → response, catching panics;
//!    `exchange`: a service's `call`, its request body fed as it is pulled
//!    (`intake`), its response framed and streamed.
//! 4. `output`: the sender: queued heads, `Bytes` bodies and file ranges,
//!    written by one vectored write per batch and sendfile.
//! 5. `linger`: the bounded half-close after an error or a close.
//! 6. `pool`: read buffers shared by a worker's connections.
//! 7. `h2`: HTTP/2 connections (by ALPN, or by the h2c preface a plain
//!    connection opens with, which `h1` hands over), their streams answered
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

mod budget;
mod dispatch;
mod exchange;
mod h1;
mod h2;
mod input;
mod intake;
mod linger;
mod logged;
mod output;
mod pool;
mod transport;

pub(crate) use budget::WorkerBudget;
pub(crate) use h1::serve;

use crate::telemetry::WorkerStats;

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
pub(crate) use transport::serve_tls;
