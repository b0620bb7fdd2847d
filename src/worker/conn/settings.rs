//! What every connection of a worker applies, as validated
//! ([`ConnSettings`]): the connection layer's own settings type, with
//! HTTP/2's (`h2::Http2Conn`, declared where it is applied).
//!
//! Owns the type; `config` builds it from the settings table and the
//! workers take it as it is.

use std::num::NonZeroUsize;
use std::time::Duration;

use super::h2::Http2Conn;
use super::transport::KtlsChoice;
use crate::http::Limits;

/// What every worker applies to its connections, as validated: the workers
/// take it as it is.
#[derive(Debug, Clone, Copy)]
pub struct ConnSettings {
    /// The request head's limits.
    pub limits: Limits,
    /// Time to receive a request head.
    pub header_timeout: Duration,
    /// Silence allowed between two reads of a request body.
    pub body_timeout: Duration,
    /// Time a kept-alive connection may idle.
    pub keepalive_timeout: Duration,
    /// Longest wait for a client to take more response bytes.
    pub send_timeout: Duration,
    /// Prepared, unsent response bytes one connection may hold.
    pub output_buffer_bytes: usize,
    /// The same for all of a worker's connections together.
    pub worker_output_bytes: usize,
    /// `--max-connections`: open connections for the whole server, which
    /// the shared budget enforces; a worker alone may hold all of them.
    pub max_connections: NonZeroUsize,
    /// Time allowed for a TLS handshake.
    pub tls_handshake_timeout: Duration,
    /// Handshake messages a worker's connections may hold beyond their
    /// pooled read buffers, together.
    pub tls_handshake_buffer_bytes: usize,
    /// Who seals TLS records: the kernel where it can (`auto`), or us.
    pub ktls: KtlsChoice,
    /// Lingering close: time in all, silence between reads, bytes discarded.
    pub lingering_time: Duration,
    pub lingering_timeout: Duration,
    pub lingering_bytes: u64,
    /// Largest request body (413 past it).
    pub max_body_bytes: u64,
    /// From SIGTERM: connections still open then are cut. A worker keeps it
    /// itself when its supervisor is gone.
    pub drain_timeout: Duration,
    /// From SIGTERM: workers still alive then are reported and abandoned.
    pub force_timeout: Duration,
    /// HTTP/2 on the plain listeners, and what one HTTP/2 connection may cost.
    pub http2: Http2Conn,
    /// HTTP/3 on the TLS listeners' ports, and what one HTTP/3 connection
    /// may cost.
    pub http3: crate::worker::Http3Conn,
}
