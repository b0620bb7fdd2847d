//! The HTTP/1.1 connection loop.
//!
//! One task per connection, on the worker's runtime. The loop is shaped to
//! cross into the kernel as rarely as possible:
//! 1. Read whatever the client sent (one read op).
//! 2. Parse every complete request in the buffer (pipelining), append each
//!    response to one output buffer, in order.
//! 3. Write the output buffer once; file bodies larger than the memory cache
//!    stream after the heads before them.
//! 4. Decide: close (error, `Connection: close`, HTTP/1.0 default, drain) or
//!    wait for more under the header or keep-alive timeout.
//!
//! A GET/HEAD/OPTIONS/405 request that declares a body has that body read and
//! discarded (up to `MAX_DISCARD_BYTES`) so it is never parsed as a request.

use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::os::unix::fs::FileExt;
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use monoio::buf::{IoBufMut, SliceMut};
use monoio::io::{AsyncReadRent, AsyncWriteRent, AsyncWriteRentExt};
use monoio::net::TcpStream;

use super::registry::Registration;
use super::Ctx;
use crate::app::Handler;
use crate::http::response::write_head;
use crate::http::{
    self, Body, FileRange, Head, Method, ParseError, Part, Persistence, Response, Status, Version,
};
use crate::sys::sendfile;
use crate::telemetry::WorkerStats;

/// First read buffer size: a typical request head fits many times over.
const READ_BUF_BYTES: usize = 8 * 1024;
/// Output buffer kept between responses; grows for pipelined batches.
const OUT_BUF_BYTES: usize = 16 * 1024;
/// Chunk of a file body read per write on the buffered path.
const FILE_CHUNK_BYTES: usize = 256 * 1024;
/// Most bytes asked of one sendfile call: large enough to amortise the call,
/// small enough that one connection cannot monopolise the worker.
const SENDFILE_CHUNK_BYTES: usize = 1024 * 1024;
/// Largest declared body we read and throw away on a method that takes none;
/// beyond it the request is refused (413) and the connection closed.
pub(crate) const MAX_DISCARD_BYTES: u64 = 1024 * 1024;

const ALLOW: &str = "GET, HEAD, OPTIONS";

/// What a connection runs over: plain TCP, or TLS on TCP.
pub(crate) trait Transport: AsyncReadRent + AsyncWriteRent {
    /// The socket itself, when response bytes go to it unchanged (so file
    /// bodies can be sent zero-copy); `None` for TLS, which must encrypt.
    fn tcp(&mut self) -> Option<&mut TcpStream>;
    /// Whether closing should first say so in-protocol (TLS close_notify).
    const GRACEFUL_CLOSE: bool;
}

impl Transport for TcpStream {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        Some(self)
    }
    const GRACEFUL_CLOSE: bool = false;
}

impl Transport for monoio_rustls::ServerTlsStream<TcpStream> {
    fn tcp(&mut self) -> Option<&mut TcpStream> {
        None
    }
    const GRACEFUL_CLOSE: bool = true;
}

/// A connection on a TLS listener: handshake (bounded by the handshake
/// timeout), then the same loop as plain connections. A client speaking
/// plain HTTP to the TLS port fails the handshake on its first byte; it is
/// counted and closed without an error log.
pub(crate) async fn serve_tls<H: Handler>(
    stream: TcpStream,
    registration: Registration,
    ctx: Rc<Ctx<H>>,
    config: Arc<rustls::ServerConfig>,
) {
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
            let tls = monoio_rustls::ServerTlsStream::new(tcp, session);
            serve(tls, registration, ctx).await
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

/// Decrements the open-connection gauge when the task ends.
struct OpenGauge(Rc<dyn Fn()>);

impl Drop for OpenGauge {
    fn drop(&mut self) {
        (self.0)();
    }
}

/// What the connection does after writing the current batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum After {
    KeepOpen,
    Close,
}

/// Serve one accepted connection. `registration` (made by the accept loop,
/// so the connection cap counts it at once) is dropped before `stream`,
/// a parameter declared earlier: the entry leaves the registry before the fd
/// closes.
pub(crate) async fn serve<H: Handler, S: Transport>(
    mut stream: S,
    registration: Registration,
    ctx: Rc<Ctx<H>>,
) {
    WorkerStats::add(&ctx.stats.connections_open, 1);
    let stats = ctx.stats.clone();
    let _gauge = OpenGauge(Rc::new(move || {
        WorkerStats::sub(&stats.connections_open, 1)
    }));

    let mut rbuf: Vec<u8> = Vec::with_capacity(READ_BUF_BYTES);
    let mut out: Vec<u8> = Vec::with_capacity(OUT_BUF_BYTES);
    let mut discard: u64 = 0;
    let mut served_any = false;
    let mut head_started = Instant::now();
    let settings = ctx.settings;

    loop {
        // 1-2. Answer everything complete in the buffer.
        let mut pos = 0;
        let mut after = After::KeepOpen;
        loop {
            if discard > 0 {
                let skip = discard.min((rbuf.len() - pos) as u64) as usize;
                pos += skip;
                discard -= skip as u64;
                if discard > 0 {
                    break;
                }
            }
            if pos == rbuf.len() {
                break;
            }
            let next = match next_request(&ctx, &rbuf[pos..]) {
                Ok(Some(next)) => next,
                Ok(None) => break,
                Err(e) => {
                    push_response(
                        &ctx,
                        &mut out,
                        &error_response(&e),
                        true,
                        Persistence::Close,
                    );
                    after = After::Close;
                    break;
                }
            };
            let Next {
                resp,
                persistence,
                declared,
                include_body,
                consumed,
            } = next;
            pos += consumed;
            served_any = true;
            discard = declared;
            push_response(&ctx, &mut out, &resp, include_body, persistence);
            if include_body && matches!(resp.body, Body::File(_) | Body::Parts(_)) {
                let (res, buf) =
                    send_body(&mut stream, out, &resp.body, settings.send_timeout).await;
                out = buf;
                if res.is_err() {
                    return;
                }
            }
            if persistence == Persistence::Close {
                after = After::Close;
                break;
            }
        }
        rbuf.drain(..pos);

        // 3. One write for the whole batch.
        if !out.is_empty() {
            let (res, buf) = write_timed(&mut stream, out, settings.send_timeout).await;
            out = buf;
            out.clear();
            if res.is_err() {
                return;
            }
        }
        if after == After::Close || (rbuf.is_empty() && discard == 0 && ctx.draining.get()) {
            return close_gracefully(&mut stream, settings.send_timeout).await;
        }

        // 4. Wait for more bytes.
        let idle = rbuf.is_empty() && discard == 0;
        registration.set_idle(idle);
        let wait = if idle && served_any {
            settings.keepalive_timeout
        } else {
            match settings.header_timeout.checked_sub(head_started.elapsed()) {
                Some(left) if !left.is_zero() => left,
                _ => return close_gracefully(&mut stream, settings.send_timeout).await,
            }
        };
        if rbuf.len() == rbuf.capacity() {
            rbuf.reserve(rbuf.capacity().max(READ_BUF_BYTES));
        }
        let len = rbuf.len();
        let read = monoio::time::timeout(wait, stream.read(rbuf.slice_mut(len..))).await;
        let (res, slice): (io::Result<usize>, SliceMut<Vec<u8>>) = match read {
            Ok(r) => r,
            // Header or keep-alive timeout: close.
            Err(_) => return close_gracefully(&mut stream, settings.send_timeout).await,
        };
        rbuf = slice.into_inner();
        match res {
            // The client closed (or a drain shut our read side; over TLS that
            // reads as an unexpected EOF): say goodbye where the protocol can.
            Ok(0) | Err(_) => return close_gracefully(&mut stream, settings.send_timeout).await,
            Ok(_) => {
                if idle {
                    head_started = Instant::now();
                }
                registration.set_idle(false);
            }
        }
    }
}

/// End a connection the way its protocol asks: TLS sends close_notify
/// (RFC 8446 §6.1) before the FIN; plain TCP just closes.
async fn close_gracefully<S: Transport>(stream: &mut S, limit: Duration) {
    if S::GRACEFUL_CLOSE {
        let _ = monoio::time::timeout(limit, stream.shutdown()).await;
    }
}

/// One request taken from the buffer, answered.
struct Next {
    resp: Response,
    persistence: Persistence,
    /// Body bytes that follow the head, to discard.
    declared: u64,
    /// False for HEAD.
    include_body: bool,
    /// Bytes of the head.
    consumed: usize,
}

/// Parse the next request head in `buf` and answer it; `Ok(None)` when the
/// head is not complete yet.
fn next_request<H: Handler>(ctx: &Ctx<H>, buf: &[u8]) -> Result<Option<Next>, ParseError> {
    let Some((head, consumed)) = http::parse(buf, &ctx.settings.limits)? else {
        return Ok(None);
    };
    WorkerStats::add(&ctx.stats.requests, 1);
    let (resp, persistence, declared) = answer(ctx, &head)?;
    Ok(Some(Next {
        resp,
        persistence,
        declared,
        include_body: head.method != Method::Head,
        consumed,
    }))
}

/// Decide the response to one parsed request, and how many body bytes of it
/// follow in the stream to be discarded.
fn answer<H: Handler>(
    ctx: &Ctx<H>,
    head: &Head<'_>,
) -> Result<(Response, Persistence, u64), ParseError> {
    if head.transfer_encoding {
        return Err(ParseError::UnsupportedTransferEncoding);
    }
    let declared = head.content_length.unwrap_or(0);
    if declared > MAX_DISCARD_BYTES {
        return Err(ParseError::BodyTooLarge { length: declared });
    }
    let persistence = if !head.keep_alive || ctx.draining.get() {
        Persistence::Close
    } else if head.version == Version::Http10 {
        Persistence::KeepAlive
    } else {
        Persistence::Default
    };
    let resp = match head.method {
        Method::Get | Method::Head => ctx.handler.handle(head),
        Method::Options => Response::new(Status::NO_CONTENT, Body::Empty).header("Allow", ALLOW),
        Method::Other => Response::text(Status::METHOD_NOT_ALLOWED, "405 Method Not Allowed\n")
            .header("Allow", ALLOW),
    };
    Ok((resp, persistence, declared))
}

/// The response for a request that could not be taken: the one place a
/// protocol error becomes bytes (status from `ParseError::status`).
fn error_response(e: &ParseError) -> Response {
    let status = e.status();
    tracing::debug!(error = %e, status = status.code(), "request refused");
    let body = match status.code() {
        400 => "400 Bad Request\n",
        413 => "413 Content Too Large\n",
        414 => "414 URI Too Long\n",
        431 => "431 Request Header Fields Too Large\n",
        501 => "501 Not Implemented\n",
        _ => "error\n",
    };
    Response::text(status, body)
}

/// Append a response's head, and its in-memory body, to `out`.
fn push_response<H: Handler>(
    ctx: &Ctx<H>,
    out: &mut Vec<u8>,
    resp: &Response,
    include_body: bool,
    persistence: Persistence,
) {
    WorkerStats::add(&ctx.stats.responses[resp.status.class().min(5)], 1);
    let mut date = ctx.date.borrow_mut();
    write_head(out, resp, date.now(), persistence);
    if let (Body::Bytes(b), true) = (&resp.body, include_body) {
        out.extend_from_slice(b);
    }
}

/// Send a streamed body (file range or parts) after whatever is buffered in
/// `out`. In-memory pieces are appended to `out`; file pieces flush `out` and
/// go out zero-copy. Errors (including a file that shrank under us) end the
/// connection: the promised Content-Length can no longer be honoured.
async fn send_body<S: Transport>(
    stream: &mut S,
    mut out: Vec<u8>,
    body: &Body,
    send_timeout: Duration,
) -> (io::Result<()>, Vec<u8>) {
    let single;
    let parts: &[Part] = match body {
        Body::File(f) => {
            single = [Part::File(f.clone())];
            &single
        }
        Body::Parts(p) => p,
        Body::Empty | Body::Bytes(_) => return (Ok(()), out),
    };
    for part in parts {
        match part {
            Part::Bytes(b) => out.extend_from_slice(b),
            Part::File(f) => {
                // Like nginx's tcp_nopush: hold partial segments while the
                // head and the file go out, so the head rides in the first
                // full segment and the body leaves in full segments.
                let corked = match stream.tcp() {
                    Some(tcp) => sendfile::set_cork(tcp.as_raw_fd(), true).is_ok(),
                    None => false,
                };
                if !out.is_empty() {
                    let (res, buf) = write_timed(stream, out, send_timeout).await;
                    out = buf;
                    out.clear();
                    if let Err(e) = res {
                        return (Err(e), out);
                    }
                }
                let (res, buf) = match stream.tcp() {
                    Some(tcp) => send_file(tcp, out, f, send_timeout).await,
                    None => send_buffered(stream, out, f, send_timeout).await,
                };
                out = buf;
                if corked {
                    // Uncorking pushes out the last partial segment.
                    if let Some(tcp) = stream.tcp() {
                        let _ = sendfile::set_cork(tcp.as_raw_fd(), false);
                    }
                }
                if let Err(e) = res {
                    return (Err(e), out);
                }
            }
        }
    }
    (Ok(()), out)
}

/// Send a file range: sendfile(2) with an explicit offset (zero-copy), the
/// socket non-blocking meanwhile so a slow reader parks this task, not the
/// worker. Falls back to buffered reads where sendfile is refused.
async fn send_file(
    stream: &mut TcpStream,
    out: Vec<u8>,
    file: &FileRange,
    send_timeout: Duration,
) -> (io::Result<()>, Vec<u8>) {
    let fd = stream.as_raw_fd();
    let was_nonblocking = match sendfile::set_nonblocking(fd, true) {
        Ok(w) => w,
        Err(e) => return (Err(e), out),
    };
    let mut offset = file.offset;
    let end = file.offset + file.len;
    let mut result = Ok(());
    while offset < end {
        let want = ((end - offset) as usize).min(SENDFILE_CHUNK_BYTES);
        match sendfile::sendfile_at(fd, file.file.as_fd(), &mut offset, want) {
            Ok(0) => {
                result = Err(io::Error::from(io::ErrorKind::UnexpectedEof));
                break;
            }
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                match monoio::time::timeout(send_timeout, stream.writable(false)).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        result = Err(e);
                        break;
                    }
                    Err(_) => {
                        result = Err(io::Error::from(io::ErrorKind::TimedOut));
                        break;
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if matches!(e.raw_os_error(), Some(libc::EINVAL) | Some(libc::ENOSYS)) => {
                // This file system cannot sendfile: copy through a buffer.
                let _ = sendfile::set_nonblocking(fd, was_nonblocking);
                let rest = FileRange {
                    file: file.file.clone(),
                    offset,
                    len: end - offset,
                };
                return send_buffered(stream, out, &rest, send_timeout).await;
            }
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = sendfile::set_nonblocking(fd, was_nonblocking) {
        result = result.and(Err(e));
    }
    (result, out)
}

/// Send a file range through a buffer: pread a chunk, write it, repeat.
async fn send_buffered<S: AsyncWriteRent>(
    stream: &mut S,
    mut out: Vec<u8>,
    file: &FileRange,
    send_timeout: Duration,
) -> (io::Result<()>, Vec<u8>) {
    let mut offset = file.offset;
    let end = file.offset + file.len;
    while offset < end {
        let start = out.len();
        let want = ((end - offset) as usize).min(FILE_CHUNK_BYTES);
        out.resize(start + want, 0);
        match file.file.read_at(&mut out[start..], offset) {
            Ok(0) => {
                out.clear();
                return (Err(io::Error::from(io::ErrorKind::UnexpectedEof)), out);
            }
            Ok(n) => {
                out.truncate(start + n);
                offset += n as u64;
            }
            Err(e) => {
                out.clear();
                return (Err(e), out);
            }
        }
        let (res, buf) = write_timed(stream, out, send_timeout).await;
        out = buf;
        out.clear();
        if let Err(e) = res {
            return (Err(e), out);
        }
    }
    (Ok(()), out)
}

/// Write all of `out`, giving up after `limit` (nginx's `send_timeout`): a
/// client that stops reading cannot hold the connection forever. On timeout
/// the buffer stays with the cancelled write; a fresh one is returned and
/// the connection closes.
async fn write_timed<S: AsyncWriteRent>(
    stream: &mut S,
    out: Vec<u8>,
    limit: Duration,
) -> (io::Result<()>, Vec<u8>) {
    match monoio::time::timeout(limit, stream.write_all(out)).await {
        Ok((res, buf)) => (res.map(|_| ()), buf),
        Err(_) => (Err(io::Error::from(io::ErrorKind::TimedOut)), Vec::new()),
    }
}
