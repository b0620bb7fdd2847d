//! Transports: what a connection runs over (plain TCP, or TLS on TCP), and
//! the TLS handshake that turns an accepted socket into the latter.
//!
//! The HTTP/1.1 loop is generic over [`Transport`]; the sender asks it
//! whether the socket is reachable for zero-copy file bodies (`tcp`) and
//! whether bytes are encrypted in user space (`ENCRYPTS`). Which protocol a
//! connection speaks is not decided here but in `conn::serve` and
//! `conn::serve_tls`, from the handshake's ALPN or the first bytes.

use std::io;
use std::sync::Arc;

use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::tcp::stream_poll::TcpStreamPoll;
use monoio::net::TcpStream;

use super::super::registry::Registration;
use super::Ctx;
use crate::telemetry::WorkerStats;

/// What a connection runs over: plain TCP, or TLS on TCP.
pub(crate) trait Transport: AsyncReadRent + AsyncWriteRent {
    /// The socket itself, when response bytes go to it unchanged (so file
    /// bodies can be sent zero-copy); `None` for TLS, which must encrypt.
    fn tcp(&mut self) -> Option<&mut TcpStream>;
    /// Bytes are encrypted in user space (TLS): in-memory pieces are staged
    /// into one plaintext write, and closing first says so in-protocol
    /// (close_notify, RFC 8446 §6.1).
    const ENCRYPTS: bool;
    /// The stream may turn HTTP/2 by the h2c preface (plain TCP; a TLS
    /// connection chose its protocol by ALPN in the handshake).
    const H2C: bool;
    /// The socket in poll style, for `h2` (only asked when [`Transport::H2C`]).
    fn into_poll(self) -> io::Result<TcpStreamPoll>;
}

impl Transport for TcpStream {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
    const ENCRYPTS: bool = false;
    const H2C: bool = true;
    fn into_poll(self) -> io::Result<TcpStreamPoll> {
        self.try_into_poll_io().map_err(|(e, _)| e)
    }
}

impl Transport for monoio_rustls::ServerTlsStream<TcpStream> {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }
    const ENCRYPTS: bool = true;
    const H2C: bool = false;
    fn into_poll(self) -> io::Result<TcpStreamPoll> {
        Err(io::ErrorKind::Unsupported.into())
    }
}

/// The handshake of a connection on a TLS listener, bounded by the
/// handshake timeout and counted: the socket, the session and the
/// connection's facts with what TLS settled (ALPN, version, resumption, the
/// SNI's site); `None` when it failed (the connection is closed). A client
/// speaking plain HTTP to the TLS port fails on its first byte; it is
/// counted and closed without an error log.
pub(super) async fn handshake_within<H>(
    stream: TcpStream,
    registration: &Registration,
    ctx: &Ctx<H>,
    config: Arc<rustls::ServerConfig>,
    facts: crate::app::Connection,
) -> Option<(TcpStream, rustls::ServerConnection, crate::app::Connection)> {
    let limit = ctx.settings.tls_handshake_timeout;
    // Mid-handshake is not idle: a drain must let it finish (its request
    // then gets `Connection: close`) rather than cut the client's hello.
    registration.set_idle(false);
    match monoio::time::timeout(limit, handshake(stream, config)).await {
        Ok(Ok((tcp, session))) => {
            WorkerStats::add(&ctx.stats.tls_handshakes, 1);
            if session.handshake_kind() == Some(rustls::HandshakeKind::Resumed) {
                WorkerStats::add(&ctx.stats.tls_resumed, 1);
            }
            // rustls holds any bytes read past the handshake itself, so the
            // stream starts with empty buffers and loses nothing.
            let facts = crate::app::Connection {
                tls: Some(crate::app::Tls {
                    alpn: session.alpn_protocol().and_then(crate::app::Alpn::from_id),
                    version: session.protocol_version().map(|v| match v {
                        rustls::ProtocolVersion::TLSv1_2 => "TLSv1.2",
                        rustls::ProtocolVersion::TLSv1_3 => "TLSv1.3",
                        _ => "TLS",
                    }),
                    resumed: session.handshake_kind() == Some(rustls::HandshakeKind::Resumed),
                    site: session
                        .server_name()
                        .and_then(|name| ctx.sites.route(name.as_bytes())),
                }),
                ..facts
            };
            return Some((tcp, session, facts));
        }
        Ok(Err(Handshake::Plaintext)) => {
            WorkerStats::add(&ctx.stats.tls_plaintext, 1);
            tracing::debug!("plain HTTP on a TLS listener; closed");
        }
        Ok(Err(e)) => {
            WorkerStats::add(&ctx.stats.tls_failed, 1);
            tracing::debug!(error = %e, "TLS handshake failed");
        }
        Err(_) => {
            WorkerStats::add(&ctx.stats.tls_failed, 1);
            tracing::debug!("TLS handshake timed out");
        }
    }
    None
}

/// Why a handshake failed.
#[derive(Debug, thiserror::Error)]
enum Handshake {
    /// The first record was not TLS (`GET /...`).
    #[error("not TLS (plain HTTP?)")]
    Plaintext,
    #[error("TLS: {0}")]
    Tls(rustls::Error),
    #[error("I/O: {0}")]
    Io(io::Error),
}

/// Run the server side of a TLS handshake over `tcp`. Done here rather than
/// by monoio-rustls's acceptor so the session (resumption, and later kTLS
/// secrets) is in hand before the stream wraps it.
async fn handshake(
    mut tcp: TcpStream,
    config: Arc<rustls::ServerConfig>,
) -> Result<(TcpStream, rustls::ServerConnection), Handshake> {
    let mut session = rustls::ServerConnection::new(config).map_err(Handshake::Tls)?;
    let mut buf: Vec<u8> = Vec::with_capacity(TLS_READ_BYTES);
    loop {
        while session.wants_write() {
            let mut out = Vec::new();
            session.write_tls(&mut out).map_err(Handshake::Io)?;
            let (res, _) = tcp.write_all(out).await;
            res.map_err(Handshake::Io)?;
        }
        if !session.is_handshaking() {
            return Ok((tcp, session));
        }
        buf.clear();
        let (res, b) = tcp.read(buf).await;
        buf = b;
        match res {
            Ok(0) => return Err(Handshake::Io(io::Error::from(io::ErrorKind::UnexpectedEof))),
            Ok(_) => {}
            Err(e) => return Err(Handshake::Io(e)),
        }
        let mut input = &buf[..];
        while !input.is_empty() {
            session.read_tls(&mut input).map_err(Handshake::Io)?;
            if let Err(e) = session.process_new_packets() {
                // Tell the peer why (an alert), unless it is not TLS at all.
                if matches!(
                    e,
                    rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType)
                ) {
                    return Err(Handshake::Plaintext);
                }
                let mut out = Vec::new();
                let _ = session.write_tls(&mut out);
                let _ = tcp.write_all(out).await;
                return Err(Handshake::Tls(e));
            }
        }
    }
}

/// Read size during the handshake: one full TLS record.
const TLS_READ_BYTES: usize = 16 * 1024 + 256;
