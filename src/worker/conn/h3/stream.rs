//! One HTTP/3 request stream: its request through the same dispatch as
//! HTTP/1.1 and HTTP/2, its body fed as the service pulls it, its response
//! finished by `fields` and sent in bounded pieces.
//!
//! Flow:
//! 1. A bad authority or a declared `content-length` past
//!    `--max-body-bytes` is answered from `on_error` before the service
//!    runs. The static files answer from the head
//!    (`dispatch::respond_to_head`; a body sent with such a request is read
//!    and dropped first, its credit returned); any other service is called
//!    with a `Request` whose body is fed by [`pull`].
//! 2. [`pull`] reads a DATA frame only when the service waits for one, so
//!    QUIC's flow-control credit goes back as the service reads. Past
//!    `--max-body-bytes` the answer becomes 413; silence past
//!    `--body-timeout` 408.
//! 3. The response's fields are finished (`fields::finish`, the one finish
//!    of a mapped head) and encoded as a HEADERS frame of ours (`frames`),
//!    written straight to quinn-proto with the body (`out`, not through
//!    `h3`'s send half); its body goes out in pieces of at most
//!    [`PIECE_BYTES`], the next read only once quinn-proto has taken the
//!    last, so a stream holds at most one piece beyond what QUIC's send
//!    window lets it queue; pieces are counted in the output budgets and
//!    bounded in time (`out`).
//! 4. When the answer ends, however it ends, its access-log line is
//!    written with the status and the body bytes sent.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::pin;
use std::time::Instant;

use bytes::{Buf, Bytes, BytesMut};
use h3::server::RequestStream;

use super::super::dispatch::{self, poll_caught, refusal_of};
use super::super::logged::Captured;
use super::super::{fields, heads, Ctx};
use super::frames;
use super::out::{Gone, Out, Tally, REQUEST_CANCELLED};
use super::Shared;
use crate::app::body::Feed;
use crate::app::response::{from_static, Kind};
use crate::app::{into_body, Body, BodyError, Connection, Request, RequestBody, Service};
use crate::http::error::{on_error, Refusal};
use crate::http::{ParseError, Part};
use crate::sys::iovec::read_at_into;
use crate::telemetry::Protocol;
use crate::worker::quic::Conn;

type Bidi = <Conn as h3::quic::OpenStreams<Bytes>>::BidiStream;
type Stream = RequestStream<Bidi, Bytes>;
type RecvHalf = RequestStream<<Bidi as h3::quic::BidiStream<Bytes>>::RecvStream, Bytes>;

/// Largest piece of a body handed to the stream at once: 64 KiB, a piece
/// per four of HTTP/2's frames, so an 8 MiB file is 128 grants, reads and
/// writes rather than 512 (8 MiB went 98 → 114 req/s with the larger GSO
/// batches beside it). The budgets bound what pieces hold.
const PIECE_BYTES: usize = 64 * 1024;

/// Room for a typical response head's HEADERS frame (it grows past it).
const HEAD_BYTES: usize = 256;

/// H3_INTERNAL_ERROR.
const INTERNAL_ERROR: u64 = 0x102;

/// A stream's access-log line, written when its answer ends.
struct Logged<'a> {
    log: &'a crate::access_log::Log,
    facts: Connection,
    captured: Captured,
    tally: Tally,
}

impl Drop for Logged<'_> {
    fn drop(&mut self) {
        let (status, bytes) = (self.tally.status.get(), self.tally.bytes.get());
        self.captured.finish(self.log, &self.facts, status, bytes);
    }
}

/// Answer one request on its stream.
pub(super) async fn answer<H: Service>(
    ctx: &Ctx<H>,
    shared: &Shared,
    req: http::Request<()>,
    stream: Stream,
    facts: Connection,
) {
    let (parts, ()) = req.into_parts();
    let logged = ctx.log.as_ref().map(|log| Logged {
        log,
        facts,
        captured: Captured::mapped(
            &parts,
            Instant::now(),
            &ctx.sites,
            facts.tls.and_then(|t| t.site),
            crate::access_log::Protocol::Http3,
        ),
        tally: Tally::default(),
    });
    let tally = logged.as_ref().map(|l| &l.tally);
    let head_only = parts.method == http::Method::HEAD;
    let max_body = ctx.settings.max_body_bytes;
    let refused = match fields::authority_error(&parts) {
        Some(e) => Some(Refusal::Parse(e)),
        None => crate::http::finish::declared_length(&parts.headers)
            .filter(|&n| n > max_body)
            .map(|length| Refusal::Parse(ParseError::BodyTooLarge { length })),
    };
    let mut stream = stream;
    if let Some(refusal) = refused {
        ctx.stats.request(Protocol::Http3);
        let resp = from_static(on_error(&refusal));
        if let Err(Gone::Reset) = send(ctx, shared, &mut stream, resp, head_only, tally).await {
            shared.reset_by_client(&ctx.stats);
        }
        return;
    }
    if H::BORROWS_HEADS {
        let answered = dispatch::respond_to_head(
            ctx,
            &crate::app::head::borrow(&parts),
            &facts,
            Protocol::Http3,
        );
        if let Some(answer) = answered {
            let resp = match discard(ctx, &mut stream).await {
                Ok(()) => heads::response(answer.response),
                Err(Some(e)) => match refusal_of(e) {
                    Some(r) => from_static(on_error(&r)),
                    None => return,
                },
                Err(None) => {
                    shared.reset_by_client(&ctx.stats);
                    return;
                }
            };
            if let Err(Gone::Reset) = send(ctx, shared, &mut stream, resp, head_only, tally).await {
                shared.reset_by_client(&ctx.stats);
            }
            return;
        }
    }
    // Boxed: a static answer's task does not carry an app call's state.
    if let Err(Gone::Reset) = Box::pin(call(ctx, shared, parts, stream, facts, tally)).await {
        shared.reset_by_client(&ctx.stats);
    }
}

/// Answer through the service's `call`, its body fed as it is pulled.
async fn call<H: Service>(
    ctx: &Ctx<H>,
    shared: &Shared,
    parts: http::request::Parts,
    stream: Stream,
    facts: Connection,
    tally: Option<&Tally>,
) -> Result<(), Gone> {
    let head_only = parts.method == http::Method::HEAD;
    let (mut send_half, recv_half) = stream.split();
    let failed: Cell<Option<BodyError>> = Cell::new(None);
    let (feed, body) = RequestBody::channel();
    let mut feeding = pin!(async {
        if let Err(e) = pull(ctx, feed, recv_half).await {
            failed.set(Some(e));
        }
    });
    let mut fed = false;
    let uri = parts.uri.clone();
    let request = Request::new(parts, body, facts);
    let Some(call) = dispatch::start(ctx, request, Protocol::Http3) else {
        let resp = from_static(on_error(&Refusal::HandlerPanicked));
        return send(ctx, shared, &mut send_half, resp, head_only, tally).await;
    };
    let mut call = pin!(call);
    let called = poll_fn(|cx| {
        if !fed && feeding.as_mut().poll(cx).is_ready() {
            fed = true;
        }
        poll_caught(call.as_mut(), cx)
    })
    .await;
    let resp = match called {
        Err(()) => {
            let target = dispatch::target_of(&uri);
            from_static(dispatch::panicked(ctx, target.as_bytes()).response)
        }
        Ok(resp) => match failed.get().and_then(refusal_of) {
            Some(refusal) => from_static(on_error(&refusal)),
            None => resp.map(into_body),
        },
    };
    // The body may still be read while the response goes out (an echo).
    let mut sending = pin!(send(ctx, shared, &mut send_half, resp, head_only, tally));
    poll_fn(|cx| {
        if !fed && feeding.as_mut().poll(cx).is_ready() {
            fed = true;
        }
        sending.as_mut().poll(cx)
    })
    .await
}

/// Feed a request body to its reader, one DATA frame per want.
async fn pull<H>(ctx: &Ctx<H>, feed: Feed, mut recv: RecvHalf) -> Result<(), BodyError> {
    let max = ctx.settings.max_body_bytes;
    let timeout = ctx.settings.body_timeout;
    let mut total: u64 = 0;
    loop {
        if let crate::app::body::Want::Gone = feed.want().await {
            recv.stop_sending(h3::error::Code::H3_NO_ERROR);
            return Ok(());
        }
        let next = match monoio::time::timeout(timeout, recv.recv_data()).await {
            Ok(next) => next,
            Err(_) => {
                feed.fail(BodyError::TimedOut);
                return Err(BodyError::TimedOut);
            }
        };
        match next {
            Ok(Some(mut data)) => {
                total += data.remaining() as u64;
                if total > max {
                    feed.fail(BodyError::TooLarge { limit: max });
                    return Err(BodyError::TooLarge { limit: max });
                }
                let chunk = data.copy_to_bytes(data.remaining());
                if !feed.push(chunk) {
                    return Ok(());
                }
            }
            Ok(None) => {
                let trailers = match monoio::time::timeout(timeout, recv.recv_trailers()).await {
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
            Err(_) => {
                feed.fail(BodyError::Closed);
                return Err(BodyError::Closed);
            }
        }
    }
}

/// Read a body nobody wants to its end, within the rules. `Err(Some)` for
/// one the rules refuse, `Err(None)` for a stream that failed.
async fn discard<H>(ctx: &Ctx<H>, stream: &mut Stream) -> Result<(), Option<BodyError>> {
    let max = ctx.settings.max_body_bytes;
    let timeout = ctx.settings.body_timeout;
    let mut total: u64 = 0;
    loop {
        match monoio::time::timeout(timeout, stream.recv_data()).await {
            Err(_) => return Err(Some(BodyError::TimedOut)),
            Ok(Ok(Some(data))) => {
                total += data.remaining() as u64;
                if total > max {
                    return Err(Some(BodyError::TooLarge { limit: max }));
                }
            }
            Ok(Ok(None)) => return Ok(()),
            Ok(Err(_)) => return Err(None),
        }
    }
}

/// Send `resp` on `stream` and end it.
async fn send<H, S>(
    ctx: &Ctx<H>,
    shared: &Shared,
    stream: &mut RequestStream<S, Bytes>,
    resp: http::Response<Body>,
    head_only: bool,
    tally: Option<&Tally>,
) -> Result<(), Gone>
where
    S: h3::quic::SendStream<Bytes>,
{
    let (mut parts, body) = resp.into_parts();
    let bodiless = fields::finish(
        ctx,
        &mut parts,
        head_only,
        body.len(),
        Protocol::Http3,
        None,
    );
    if let Some(t) = tally {
        t.status.set(parts.status.as_u16());
    }
    let Some(answer) = shared.watch.answer(stream.send_id().into_inner()) else {
        return Err(Gone::Ended);
    };
    let mut head = BytesMut::with_capacity(HEAD_BYTES);
    frames::head(&mut head, parts.status, &parts.headers);
    let mut out = Out::new(answer, &shared.budget, ctx.settings.send_timeout, tally);
    out.head(head);
    let mut trailers = None;
    if !bodiless {
        match body.kind {
            Kind::Empty => {}
            Kind::Bytes(b) => put(stream, b, &mut out).await?,
            Kind::Pieces(pieces) => Box::pin(send_pieces(stream, pieces, &mut out)).await?,
            Kind::Stream(s) => trailers = Box::pin(send_stream(stream, s, &mut out)).await?,
        }
    }
    out.finish(stream, trailers.as_ref()).await
}

/// Hand `data` over in pieces of at most [`PIECE_BYTES`], each within
/// the output budget.
async fn put<S: h3::quic::SendStream<Bytes>>(
    stream: &mut RequestStream<S, Bytes>,
    mut data: Bytes,
    out: &mut Out<'_>,
) -> Result<(), Gone> {
    while !data.is_empty() {
        let granted = out.grant(stream, data.len().min(PIECE_BYTES)).await?;
        let piece = data.split_to(data.len().min(granted));
        out.send(stream, piece, granted).await?;
    }
    Ok(())
}

/// The static files' pieces: in-memory parts as they are, file ranges read
/// a piece at a time.
async fn send_pieces<S: h3::quic::SendStream<Bytes>>(
    stream: &mut RequestStream<S, Bytes>,
    pieces: Vec<Part>,
    out: &mut Out<'_>,
) -> Result<(), Gone> {
    for piece in pieces {
        match piece {
            Part::Bytes(b) => put(stream, b, out).await?,
            Part::File(range) => {
                let (mut offset, mut left) = (range.offset, range.len);
                while left > 0 {
                    let granted = out.grant(stream, (left as usize).min(PIECE_BYTES)).await?;
                    let want = (left as usize).min(granted);
                    let mut buf = [Vec::with_capacity(want)];
                    match read_at_into(&range.file, offset, &mut buf) {
                        Ok(0) | Err(_) => {
                            tracing::warn!("file ended or failed before its range; stream reset");
                            stream.stop_stream(h3::error::Code::from(INTERNAL_ERROR));
                            return Err(Gone::Ended);
                        }
                        Ok(got) => {
                            offset += got as u64;
                            left -= got as u64;
                        }
                    }
                    let [buf] = buf;
                    out.send(stream, Bytes::from(buf), granted).await?;
                }
            }
        }
    }
    Ok(())
}

/// A body produced as it is sent: data in pieces; its trailers, if any.
async fn send_stream<S: h3::quic::SendStream<Bytes>>(
    stream: &mut RequestStream<S, Bytes>,
    mut body: std::pin::Pin<Box<dyn http_body::Body<Data = Bytes, Error = crate::app::BoxError>>>,
    out: &mut Out<'_>,
) -> Result<Option<http::HeaderMap>, Gone> {
    loop {
        match poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
            None => return Ok(None),
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => put(stream, data, out).await?,
                Err(frame) => {
                    if let Ok(trailers) = frame.into_trailers() {
                        return Ok(Some(trailers));
                    }
                }
            },
            Some(Err(e)) => {
                tracing::debug!(error = %e, "response stream failed; stream reset");
                stream.stop_stream(h3::error::Code::from(REQUEST_CANCELLED));
                return Err(Gone::Ended);
            }
        }
    }
}
