//! One HTTP/2 stream: its request through the same dispatch as HTTP/1.1,
//! its body fed as the service pulls it, its response sent within the
//! peer's flow-control window.
//!
//! Flow:
//! 1. A declared `content-length` past `--max-body-bytes` is 413 before the
//!    service runs. The static files answer from the head
//!    (`dispatch::respond_to_head`), any other service is called with a
//!    `Request` whose body is fed by [`feed`].
//! 2. [`feed`] reads a DATA chunk only when the service waits for one and
//!    gives its flow-control credit back only once the service has taken
//!    it, so a service that stops reading stops the client (its window
//!    closes) and a connection never holds more than the windows we
//!    advertise. Past `--max-body-bytes` the answer becomes 413; silence
//!    past `--body-timeout` 408.
//! 3. The response head is sent (`:status`, the service's fields less the
//!    connection-specific ones RFC 9113 §8.2.2 forbids, `content-length`
//!    when known, `server`, `date`); HEAD, 204 and 304 end the stream there.
//! 4. Body bytes go out as the window allows: a piece never waits in our
//!    buffers for more credit than the stream has (at most the
//!    `h2` send buffer, [`SEND_BUFFER_BYTES`]); file ranges are read from
//!    the page cache one window's worth at a time, at most
//!    [`FILE_CHUNK_BYTES`]. A peer that gives no credit for
//!    `--send-timeout` has the stream reset.
//! 5. A client that resets the stream drops the service's future; the reset
//!    is counted against `--h2-max-resets`.
//! 6. When the answer ends, however it ends, its access-log line is written
//!    (`Logged`'s drop) with the status and the body bytes it sent.
//!
//! Past 600 lines: every way a stream's body leaves (eager, within credit,
//! file ranges a window at a time, joined stream frames) shares the send
//! timeout and the reset accounting kept here.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::os::unix::fs::FileExt;
use std::pin::pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::server::SendResponse;
use h2::{Reason, RecvStream, SendStream};
use http::header::{self, HeaderValue};

use super::super::super::Ctx;
use super::super::dispatch::{self, poll_caught};
use super::super::logged::{Captured, CLIENT_CLOSED};
use super::heads;
use crate::app::body::Feed;
use crate::app::response::{from_static, Kind};
use crate::app::{into_body, Body, BodyError, Connection, Request, RequestBody, Service};
use crate::config::http2::RESET_WINDOW;
use crate::http::error::{on_error, Refusal};
use crate::http::{ParseError, Part};
use crate::telemetry::WorkerStats;

/// What `h2` may buffer per stream beyond what the window lets out: a
/// connection holds at most this times its concurrent streams.
pub(super) const SEND_BUFFER_BYTES: usize = 64 * 1024;
/// Bodies (and stream frames) up to this size are handed to `h2` without
/// waiting for credit: `h2` holds them until the window opens. Within the
/// send buffer, so the bound per stream stands.
const EAGER_BYTES: usize = 16 * 1024;
/// Largest read of a file range for one DATA run.
const FILE_CHUNK_BYTES: usize = 64 * 1024;

/// What the streams of one connection tell it.
#[derive(Default)]
pub(super) struct Shared {
    /// Client resets in the current window: (window start, count).
    resets: Cell<Option<(Instant, usize)>>,
    /// The connection should end: gracefully (`NO_ERROR`, after a panic)
    /// or at once (`ENHANCE_YOUR_CALM`, too many resets).
    pub(super) goaway: Cell<Option<Reason>>,
}

impl Shared {
    /// Count one client reset; past `max` in [`RESET_WINDOW`], ask for
    /// GOAWAY ENHANCE_YOUR_CALM.
    pub(super) fn reset_by_client(&self, stats: &WorkerStats, max: usize) {
        WorkerStats::add(&stats.h2_resets, 1);
        let now = Instant::now();
        let (start, n) = match self.resets.get() {
            Some((start, n)) if now.duration_since(start) < RESET_WINDOW => (start, n + 1),
            _ => (now, 1),
        };
        self.resets.set(Some((start, n)));
        if n > max {
            self.goaway.set(Some(Reason::ENHANCE_YOUR_CALM));
        }
    }

    fn end_gracefully(&self) {
        if self.goaway.get().is_none() {
            self.goaway.set(Some(Reason::NO_ERROR));
        }
    }
}

/// Why a stream ended before its response did.
#[derive(Debug)]
enum Gone {
    /// The client reset it (or the connection ended).
    Reset,
    /// We reset it (no credit for the send timeout, a body that failed).
    Cut,
}

/// Answer one stream.
pub(super) async fn answer<H: Service>(
    ctx: &Ctx<H>,
    shared: &Shared,
    req: http::Request<RecvStream>,
    mut respond: SendResponse<Bytes>,
    facts: Connection,
) {
    let (parts, recv) = req.into_parts();
    // Boxed, and only with a log: every stream's future stays small.
    let logged = ctx.log.as_ref().map(|log| {
        Box::new(Logged {
            log,
            facts,
            captured: Captured::h2(
                &parts,
                Instant::now(),
                &ctx.sites,
                facts.tls.and_then(|t| t.site),
            ),
            tally: Tally::default(),
        })
    });
    let tally = logged.as_deref().map(|l| &l.tally);
    let head_only = parts.method == http::Method::HEAD;
    let max_body = ctx.settings.max_body_bytes;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let refused = match authority_error(&parts) {
        Some(e) => Some(Refusal::Parse(e)),
        None => declared
            .filter(|&n| n > max_body)
            .map(|length| Refusal::Parse(ParseError::BodyTooLarge { length })),
    };
    if let Some(refusal) = refused {
        WorkerStats::add(&ctx.stats.requests, 1);
        drop(recv);
        let _ = send(
            ctx,
            &mut respond,
            from_static(on_error(&refusal)),
            head_only,
            None,
            tally,
        )
        .await;
        return;
    }
    if H::BORROWS_HEADS {
        let answer = dispatch::respond_to_head(ctx, &crate::app::head::borrow(&parts), &facts);
        if let Some(answer) = answer {
            // A body nobody reads is taken to its end first, so a stream
            // whose body or trailers break the rules is reset (by `h2`)
            // rather than answered.
            if !recv.is_end_stream() {
                match Box::pin(discard(ctx, recv)).await {
                    Ok(()) => {}
                    Err(Some(e)) => {
                        if let Some(refusal) = refusal_of(e) {
                            let resp = from_static(on_error(&refusal));
                            let _ = send(ctx, &mut respond, resp, head_only, None, tally).await;
                        }
                        return;
                    }
                    Err(None) => {
                        shared.reset_by_client(&ctx.stats, ctx.settings.http2.max_resets);
                        return;
                    }
                }
            }
            if answer.close {
                shared.end_gracefully();
            }
            let resp = heads::response(answer.response);
            let sent = send(ctx, &mut respond, resp, head_only, None, tally).await;
            if let Err(Gone::Reset) = sent {
                shared.reset_by_client(&ctx.stats, ctx.settings.http2.max_resets);
            }
            return;
        }
    }

    // Boxed: every stream's future is moved into the connection's set, so
    // what only a service's call needs is kept out of it.
    Box::pin(call(ctx, shared, parts, recv, respond, facts, tally)).await;
}

/// A stream's access-log line, written when the stream's answer ends
/// (dropped), however it ends.
struct Logged<'a> {
    log: &'a crate::access_log::Log,
    facts: Connection,
    captured: Captured,
    tally: Tally,
}

impl Drop for Logged<'_> {
    fn drop(&mut self) {
        let status = match self.tally.status.get() {
            0 => CLIENT_CLOSED,
            s => s,
        };
        self.captured
            .write(self.log, &self.facts, status, self.tally.bytes.get());
    }
}

/// What a stream's answer sent: its status (0 before the head) and the
/// body bytes handed to `h2`.
#[derive(Debug, Default)]
pub(super) struct Tally {
    status: Cell<u16>,
    bytes: Cell<u64>,
}

/// Count `n` body bytes sent, when a log is kept.
fn count(tally: Option<&Tally>, n: usize) {
    if let Some(t) = tally {
        t.bytes.set(t.bytes.get() + n as u64);
    }
}

/// Answer one stream through the service's `call`, its body fed as the
/// service pulls it.
async fn call<H: Service>(
    ctx: &Ctx<H>,
    shared: &Shared,
    parts: http::request::Parts,
    recv: RecvStream,
    mut respond: SendResponse<Bytes>,
    facts: Connection,
    tally: Option<&Tally>,
) {
    let head_only = parts.method == http::Method::HEAD;
    let failed: Cell<Option<BodyError>> = Cell::new(None);
    let (feeder, body) = if recv.is_end_stream() {
        (None, RequestBody::empty())
    } else {
        let (feed, body) = RequestBody::channel();
        (Some((feed, recv)), body)
    };
    let mut feeding = pin!(async {
        if let Some((feed, recv)) = feeder {
            if let Err(e) = pull(ctx, feed, recv).await {
                failed.set(Some(e));
            }
        }
    });
    let mut fed = false;

    let request = Request::new(parts, body, facts);
    let Some(call) = dispatch::start(ctx, request) else {
        // `start` has counted and logged the panic.
        shared.end_gracefully();
        let resp = on_error(&Refusal::HandlerPanicked);
        let _ = send(ctx, &mut respond, from_static(resp), head_only, None, tally).await;
        return;
    };
    let mut call = pin!(call);
    enum Called<B> {
        Answered(http::Response<B>),
        Panicked,
        Reset,
    }
    let called = poll_fn(|cx| {
        if !fed && feeding.as_mut().poll(cx).is_ready() {
            fed = true;
        }
        if let Poll::Ready(Ok(_)) = respond.poll_reset(cx) {
            return Poll::Ready(Called::Reset);
        }
        match poll_caught(call.as_mut(), cx) {
            Poll::Ready(Ok(resp)) => Poll::Ready(Called::Answered(resp)),
            Poll::Ready(Err(())) => Poll::Ready(Called::Panicked),
            Poll::Pending => Poll::Pending,
        }
    })
    .await;
    let resp = match called {
        Called::Reset => {
            shared.reset_by_client(&ctx.stats, ctx.settings.http2.max_resets);
            return;
        }
        Called::Panicked => {
            shared.end_gracefully();
            from_static(dispatch::panicked(ctx, b"(while polled)").response)
        }
        Called::Answered(resp) => match failed.get().and_then(refusal_of) {
            // The body broke the rules while the service ran: the rules'
            // answer, whatever the service said.
            Some(refusal) => from_static(on_error(&refusal)),
            None => resp.map(into_body),
        },
    };
    // The body may still be read while the response streams (an echo).
    let sending = send(ctx, &mut respond, resp, head_only, Some(&failed), tally);
    let mut sending = pin!(sending);
    let sent = poll_fn(|cx| {
        if !fed && feeding.as_mut().poll(cx).is_ready() {
            fed = true;
        }
        sending.as_mut().poll(cx)
    })
    .await;
    if let Err(Gone::Reset) = sent {
        shared.reset_by_client(&ctx.stats, ctx.settings.http2.max_resets);
    }
}

/// The answer a broken request body gets; `None` for a client that left.
fn refusal_of(e: BodyError) -> Option<Refusal> {
    match e {
        BodyError::TooLarge { limit } => Some(Refusal::Parse(ParseError::BodyTooLarge {
            length: limit.saturating_add(1),
        })),
        // HTTP/2 frames bodies itself; only HTTP/1.1 finds one malformed.
        BodyError::Malformed => Some(Refusal::Unrepresentable),
        BodyError::TimedOut => Some(Refusal::BodyTimedOut),
        BodyError::Closed => None,
    }
}

/// Feed a request body to its reader, one DATA chunk per want. Credit for a
/// chunk goes back when the reader takes it (it wants the next).
async fn pull<H>(ctx: &Ctx<H>, feed: Feed, mut recv: RecvStream) -> Result<(), BodyError> {
    let max = ctx.settings.max_body_bytes;
    let timeout = ctx.settings.body_timeout;
    let mut total: u64 = 0;
    let mut held = 0usize;
    loop {
        match feed.want().await {
            crate::app::body::Want::Gone => {
                // Dropping `recv` discards what still comes and releases
                // its credit (h2 does both).
                let _ = recv.flow_control().release_capacity(held);
                return Ok(());
            }
            crate::app::body::Want::More => {}
        }
        if held > 0 {
            let _ = recv
                .flow_control()
                .release_capacity(std::mem::take(&mut held));
        }
        let next = match monoio::time::timeout(timeout, recv.data()).await {
            Ok(next) => next,
            Err(_) => {
                feed.fail(BodyError::TimedOut);
                return Err(BodyError::TimedOut);
            }
        };
        match next {
            Some(Ok(chunk)) => {
                total += chunk.len() as u64;
                if total > max {
                    feed.fail(BodyError::TooLarge { limit: max });
                    return Err(BodyError::TooLarge { limit: max });
                }
                held = chunk.len();
                if !feed.push(chunk) {
                    let _ = recv.flow_control().release_capacity(held);
                    return Ok(());
                }
            }
            Some(Err(_)) => {
                feed.fail(BodyError::Closed);
                return Err(BodyError::Closed);
            }
            None => {
                let trailers = match monoio::time::timeout(timeout, recv.trailers()).await {
                    Ok(Ok(t)) => t.unwrap_or_default(),
                    Ok(Err(_)) => {
                        feed.fail(BodyError::Closed);
                        return Err(BodyError::Closed);
                    }
                    Err(_) => {
                        feed.fail(BodyError::TimedOut);
                        return Err(BodyError::TimedOut);
                    }
                };
                feed.finish(trailers);
                return Ok(());
            }
        }
    }
}

/// Read a body nobody wants to its end (trailers included), giving its
/// credit back as it comes. `Err(Some)` for a body the rules refuse,
/// `Err(None)` for a stream `h2` has reset.
async fn discard<H>(ctx: &Ctx<H>, mut recv: RecvStream) -> Result<(), Option<BodyError>> {
    let max = ctx.settings.max_body_bytes;
    let timeout = ctx.settings.body_timeout;
    let mut total: u64 = 0;
    loop {
        match monoio::time::timeout(timeout, recv.data()).await {
            Err(_) => return Err(Some(BodyError::TimedOut)),
            Ok(Some(Ok(chunk))) => {
                total += chunk.len() as u64;
                let _ = recv.flow_control().release_capacity(chunk.len());
                if total > max {
                    return Err(Some(BodyError::TooLarge { limit: max }));
                }
            }
            Ok(Some(Err(_))) => return Err(None),
            Ok(None) => break,
        }
    }
    match monoio::time::timeout(timeout, recv.trailers()).await {
        Err(_) => Err(Some(BodyError::TimedOut)),
        Ok(Err(_)) => Err(None),
        Ok(Ok(_)) => Ok(()),
    }
}

/// Send `resp` on the stream. `failed` is the request body's state while it
/// may still be read: a body that breaks the rules mid-response resets the
/// stream (its head is gone; the status cannot change).
async fn send<H>(
    ctx: &Ctx<H>,
    respond: &mut SendResponse<Bytes>,
    resp: http::Response<Body>,
    head_only: bool,
    failed: Option<&Cell<Option<BodyError>>>,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    let (mut parts, body) = resp.into_parts();
    parts.headers.retain_connection_safe();
    let status = parts.status;
    let no_content = status.is_informational()
        || status == http::StatusCode::NO_CONTENT
        || status == http::StatusCode::NOT_MODIFIED;
    let len = body.len();
    // The HTTP/1.1 rules (`exchange`): HEAD and 304 send no body, and a
    // length the service set itself describes the GET's (RFC 9110 §8.6) and
    // is kept; else their length is the body's, unless that is empty (which
    // says nothing of the GET's). 1xx and 204 have none.
    let bodiless = head_only || status == http::StatusCode::NOT_MODIFIED;
    let declared = parts.headers.contains_key(header::CONTENT_LENGTH);
    let informational = status.is_informational() || status == http::StatusCode::NO_CONTENT;
    if informational {
        parts.headers.remove(header::CONTENT_LENGTH);
    } else if !(bodiless && declared) {
        match len {
            Some(0) if bodiless => {
                parts.headers.remove(header::CONTENT_LENGTH);
            }
            Some(n) => {
                parts
                    .headers
                    .insert(header::CONTENT_LENGTH, HeaderValue::from(n));
            }
            None => {
                parts.headers.remove(header::CONTENT_LENGTH);
            }
        }
    }
    if !parts.headers.contains_key(header::SERVER) {
        parts
            .headers
            .insert(header::SERVER, HeaderValue::from_static("servery"));
    }
    if let Ok(date) = HeaderValue::from_bytes(ctx.date.borrow_mut().now()) {
        parts.headers.insert(header::DATE, date);
    }
    WorkerStats::add(
        &ctx.stats.responses[usize::from(status.as_u16() / 100).min(5)],
        1,
    );
    let bodiless = head_only || no_content || len == Some(0);
    if let Some(t) = tally {
        t.status.set(status.as_u16());
    }
    let head = http::Response::from_parts(parts, ());
    let mut out = respond
        .send_response(head, bodiless)
        .map_err(|_| Gone::Reset)?;
    if bodiless {
        return Ok(());
    }
    match body.kind {
        Kind::Empty => out.send_data(Bytes::new(), true).map_err(|_| Gone::Reset),
        Kind::Bytes(b) if b.len() <= EAGER_BYTES => {
            count(tally, b.len());
            out.send_data(b, true).map_err(|_| Gone::Reset)
        }
        // Boxed: a small answer's future (the one every stream carries)
        // stays small.
        kind => Box::pin(send_body(ctx, out, kind, failed, tally)).await,
    }
}

/// Send a body that may wait for credit or for its frames.
async fn send_body<H>(
    ctx: &Ctx<H>,
    mut out: SendStream<Bytes>,
    kind: Kind,
    failed: Option<&Cell<Option<BodyError>>>,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    let timeout = ctx.settings.send_timeout;
    let mut held = None;
    match kind {
        Kind::Empty => out.send_data(Bytes::new(), true).map_err(|_| Gone::Reset),
        Kind::Bytes(b) => put(&mut out, b, true, timeout, tally).await,
        Kind::Pieces(pieces) => send_pieces(&mut out, pieces, timeout, tally).await,
        Kind::Stream(mut stream) => loop {
            let frame = next_frames(&mut stream, &mut held).await;
            if let Some(e) = failed.and_then(Cell::get).and_then(refusal_of) {
                tracing::debug!(refusal = %e, "request body refused mid-response; stream reset");
                out.send_reset(Reason::CANCEL);
                break Err(Gone::Cut);
            }
            match frame {
                None => break out.send_data(Bytes::new(), true).map_err(|_| Gone::Reset),
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => put(&mut out, data, false, timeout, tally).await?,
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            break out.send_trailers(trailers).map_err(|_| Gone::Reset);
                        }
                    }
                },
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "response stream failed; stream reset");
                    out.send_reset(Reason::INTERNAL_ERROR);
                    break Err(Gone::Cut);
                }
            }
        },
    }
}

/// A streamed body, boxed.
type Stream = std::pin::Pin<Box<dyn http_body::Body<Data = Bytes, Error = crate::app::BoxError>>>;
/// One of its frames, as polled.
type Polled = Option<Result<http_body::Frame<Bytes>, crate::app::BoxError>>;

/// The next frame of a streamed body, data frames ready at once joined (up
/// to [`EAGER_BYTES`]) into one: a service writing many small chunks must
/// not cost the client a DATA frame each (h2 clients, the `h2` crate's among
/// them, close connections that send floods of tiny frames). A frame that
/// is not data, found while joining, waits in `held` for the next call.
async fn next_frames(stream: &mut Stream, held: &mut Option<Polled>) -> Polled {
    if let Some(frame) = held.take() {
        return frame;
    }
    let data = match poll_fn(|cx| stream.as_mut().poll_frame(cx)).await {
        Some(Ok(frame)) => match frame.into_data() {
            Ok(data) => data,
            Err(frame) => return Some(Ok(frame)),
        },
        other => return other,
    };
    if data.len() >= EAGER_BYTES {
        return Some(Ok(http_body::Frame::data(data)));
    }
    let mut joined: Option<bytes::BytesMut> = None;
    let mut first = Some(data);
    poll_fn(|cx| {
        loop {
            let len = joined.as_ref().map_or(0, |j| j.len()) + first.as_ref().map_or(0, Bytes::len);
            if len >= EAGER_BYTES || stream.is_end_stream() {
                break;
            }
            match stream.as_mut().poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(more) => {
                        let j = joined.get_or_insert_with(|| {
                            let mut j = bytes::BytesMut::with_capacity(EAGER_BYTES);
                            j.extend_from_slice(&first.take().unwrap_or_default());
                            j
                        });
                        j.extend_from_slice(&more);
                    }
                    Err(frame) => {
                        *held = Some(Some(Ok(frame)));
                        break;
                    }
                },
                Poll::Ready(other) => {
                    *held = Some(other);
                    break;
                }
                Poll::Pending => break,
            }
        }
        Poll::Ready(())
    })
    .await;
    let data = match joined {
        Some(j) => j.freeze(),
        None => first.unwrap_or_default(),
    };
    Some(Ok(http_body::Frame::data(data)))
}

/// Why the request's authority (`:authority`, else `host`) is refused: the
/// HTTP/1.1 Host grammar (`http::host`), no userinfo (RFC 9113 §8.3.1), one
/// `host` at most, and the two agreeing when both are sent.
fn authority_error(parts: &http::request::Parts) -> Option<ParseError> {
    use crate::http::host;
    let hosts: Vec<_> = parts.headers.get_all(header::HOST).iter().collect();
    if hosts.len() > 1 {
        return Some(ParseError::BadHost { count: hosts.len() });
    }
    let field = hosts.first().map(|v| v.as_bytes());
    let pseudo = parts.uri.authority().map(|a| a.as_str().as_bytes());
    let invalid = |in_target, error| ParseError::InvalidHost { in_target, error };
    if let Some(a) = pseudo {
        if let Err(e) = host::validate_uri(a) {
            return Some(invalid(true, e));
        }
    }
    if let Some(h) = field {
        if let Err(e) = host::validate(h) {
            return Some(invalid(false, e));
        }
        if pseudo.is_some_and(|a| !a.eq_ignore_ascii_case(h)) {
            return Some(ParseError::BadHost { count: 2 });
        }
    }
    None
}

/// Header-map helpers for HTTP/2 responses.
trait ConnectionSafe {
    /// Drop the fields RFC 9113 §8.2.2 forbids in HTTP/2.
    fn retain_connection_safe(&mut self);
}

impl ConnectionSafe for http::HeaderMap {
    fn retain_connection_safe(&mut self) {
        // RFC 9113 §8.2.2; TE only as "trailers", which a response has no
        // use for. `date` is replaced by the connection's, not removed.
        for name in [
            header::CONNECTION,
            header::TRANSFER_ENCODING,
            header::UPGRADE,
            header::TE,
        ] {
            self.remove(name);
        }
        for name in ["keep-alive", "proxy-connection"] {
            self.remove(name);
        }
    }
}

/// Wait for `want` bytes of credit on `out` (at least one), for at most
/// `timeout`.
async fn credit(
    out: &mut SendStream<Bytes>,
    want: usize,
    timeout: Duration,
) -> Result<usize, Gone> {
    out.reserve_capacity(want);
    loop {
        let got = monoio::time::timeout(timeout, poll_fn(|cx| out.poll_capacity(cx))).await;
        match got {
            Err(_) => {
                tracing::debug!("no HTTP/2 flow-control credit for the send timeout; stream reset");
                out.send_reset(Reason::CANCEL);
                return Err(Gone::Cut);
            }
            Ok(None) | Ok(Some(Err(_))) => return Err(Gone::Reset),
            Ok(Some(Ok(0))) => continue,
            Ok(Some(Ok(n))) => return Ok(n),
        }
    }
}

/// Send `data` as the window allows; `end` ends the stream with its last bytes.
async fn put(
    out: &mut SendStream<Bytes>,
    mut data: Bytes,
    end: bool,
    timeout: Duration,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    if data.is_empty() || data.len() <= EAGER_BYTES {
        // Small enough to hand to `h2` whole: it goes out as the window
        // allows, with the head in the same write, without a round of
        // credit first.
        if end || !data.is_empty() {
            let n = data.len();
            out.send_data(data, end).map_err(|_| Gone::Reset)?;
            count(tally, n);
        }
        return Ok(());
    }
    while !data.is_empty() {
        let n = credit(out, data.len(), timeout).await?;
        let chunk = data.split_to(n.min(data.len()));
        count(tally, chunk.len());
        out.send_data(chunk, end && data.is_empty())
            .map_err(|_| Gone::Reset)?;
    }
    Ok(())
}

/// Send the static files' pieces: in-memory parts as they are, file ranges
/// read one window's worth (at most [`FILE_CHUNK_BYTES`]) at a time.
async fn send_pieces(
    out: &mut SendStream<Bytes>,
    pieces: Vec<Part>,
    timeout: Duration,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    let n = pieces.len();
    for (i, piece) in pieces.into_iter().enumerate() {
        let last = i + 1 == n;
        match piece {
            Part::Bytes(b) => {
                if b.is_empty() && !last {
                    continue;
                }
                put(out, b, last, timeout, tally).await?;
            }
            Part::File(range) => {
                let (mut offset, mut left) = (range.offset, range.len);
                while left > 0 {
                    let want = (left as usize).min(FILE_CHUNK_BYTES);
                    let room = credit(out, want, timeout).await?.min(want);
                    let mut buf = vec![0u8; room];
                    let got = match range.file.read_at(&mut buf, offset) {
                        Ok(0) | Err(_) => {
                            tracing::warn!("file ended or failed before its range; stream reset");
                            out.send_reset(Reason::INTERNAL_ERROR);
                            return Err(Gone::Cut);
                        }
                        Ok(got) => got,
                    };
                    buf.truncate(got);
                    offset += got as u64;
                    left -= got as u64;
                    count(tally, got);
                    out.send_data(Bytes::from(buf), last && left == 0)
                        .map_err(|_| Gone::Reset)?;
                }
                if last && range.len == 0 {
                    let _ = out.send_data(Bytes::new(), true);
                }
            }
        }
    }
    if n == 0 {
        let _ = out.send_data(Bytes::new(), true);
    }
    Ok(())
}
