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
//! 3. The response goes out through `send`: its head, then its body within
//!    the peer's window and the connection's output budget.
//! 4. A client that resets the stream drops the service's future; the reset
//!    is counted against `--h2-max-resets`.
//! 5. When the answer ends, however it ends, its access-log line is written
//!    (`Logged`'s drop) with the status and the body bytes it sent.

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures_util::future::Either;

use super::super::dispatch::{self, poll_caught, refusal_of};
use super::super::logged::Captured;
use super::super::Ctx;
use super::super::{fields, heads};
use super::outbox::Outbox;
use super::send::{self, send, Gone, Tally};
use super::wire::{RecvStream, SendResponse};
use crate::app::body::Feed;
use crate::app::response::from_static;
use crate::app::{into_body, BodyError, Connection, Request, RequestBody, Service};
use crate::http::error::{on_error, Refusal};
use crate::http::h2::ErrorCode;
use crate::http::ParseError;
use crate::telemetry::{Protocol, WorkerStats};

/// The window `--h2-max-resets` counts over.
pub(crate) const RESET_WINDOW: Duration = Duration::from_secs(10);

/// What the streams of one connection tell it, and share.
pub(super) struct Shared {
    /// The DATA the streams have handed over and the socket has not taken.
    pub(super) outbox: Rc<Outbox>,
    /// Client resets in the current window: (window start, count).
    resets: Cell<Option<(Instant, usize)>>,
    /// The connection should end: gracefully (`NO_ERROR`, after a panic)
    /// or at once (`ENHANCE_YOUR_CALM`, too many resets).
    pub(super) goaway: Cell<Option<ErrorCode>>,
    /// The connection's `Alt-Svc` (a TLS connection where HTTP/3 is on).
    pub(super) alt_svc: Option<http::HeaderValue>,
}

impl Shared {
    pub(super) fn new(outbox: Rc<Outbox>, alt_svc: Option<http::HeaderValue>) -> Shared {
        Shared {
            outbox,
            alt_svc,
            resets: Cell::new(None),
            goaway: Cell::new(None),
        }
    }

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
            self.goaway.set(Some(ErrorCode::ENHANCE_YOUR_CALM));
        }
    }

    /// Where a stream's response goes: the outbox, with the `Alt-Svc`.
    fn out(&self) -> (&Outbox, Option<&http::HeaderValue>) {
        (&self.outbox, self.alt_svc.as_ref())
    }

    fn end_gracefully(&self) {
        if self.goaway.get().is_none() {
            self.goaway.set(Some(ErrorCode::NO_ERROR));
        }
    }
}

/// A stream to answer.
pub(super) enum Incoming {
    Request(http::Request<RecvStream>),
    /// A request whose header list passed `--h2-max-header-list-bytes`.
    TooLarge(RecvStream),
}

/// Answer one stream: the static files from the head at once ([`reply`]),
/// any other service through its `call` (boxed: what only a service's call
/// needs is kept out of the connection's set of streams).
///
/// Not an `async fn`: the request's fields are read here and dropped, so a
/// stream that waits for its turn in the output budget holds only its
/// response (every never-reading client's streams wait so).
pub(super) fn answer<'a, H: Service>(
    ctx: &'a Ctx<H>,
    shared: &'a Shared,
    incoming: Incoming,
    respond: SendResponse,
    facts: Connection,
) -> Either<impl Future<Output = ()> + 'a, Pin<Box<impl Future<Output = ()> + 'a>>> {
    let req = match incoming {
        Incoming::Request(req) => req,
        Incoming::TooLarge(recv) => {
            // RFC 9113 §10.5.1: 431, the body discarded first.
            ctx.stats.request(Protocol::Http2);
            let limit = ctx.settings.http2.max_header_list_bytes;
            let refusal = Refusal::Parse(ParseError::HeadTooLarge { limit });
            let r = Reply {
                response: on_error(&refusal),
                close: false,
                head_only: false,
                recv: (!recv.is_end_stream()).then_some(recv),
                logged: None,
                refused: true,
            };
            return Either::Left(reply(ctx, shared, respond, r));
        }
    };
    let (parts, recv) = req.into_parts();
    // Boxed, and only with a log: every stream's future stays small.
    let logged = ctx.log.as_ref().map(|log| {
        Box::new(Logged {
            log,
            facts,
            captured: Captured::mapped(
                &parts,
                Instant::now(),
                &ctx.sites,
                facts.tls.and_then(|t| t.site),
                crate::access_log::Protocol::Http2,
            ),
            tally: Tally::default(),
        })
    });
    let head_only = parts.method == http::Method::HEAD;
    let max_body = ctx.settings.max_body_bytes;
    let declared = crate::http::finish::declared_length(&parts.headers);
    let refused = match fields::authority_error(&parts) {
        Some(e) => Some(Refusal::Parse(e)),
        None => declared
            .filter(|&n| n > max_body)
            .map(|length| Refusal::Parse(ParseError::BodyTooLarge { length })),
    };
    let reply_with = |response, close, recv, refused, logged| Reply {
        response,
        close,
        head_only,
        recv,
        logged,
        refused,
    };
    if let Some(refusal) = refused {
        ctx.stats.request(Protocol::Http2);
        drop(recv);
        let r = reply_with(on_error(&refusal), false, None, true, logged);
        return Either::Left(reply(ctx, shared, respond, r));
    }
    if H::BORROWS_HEADS {
        let answer = dispatch::respond_to_head(
            ctx,
            &crate::app::head::borrow(&parts),
            &facts,
            Protocol::Http2,
        );
        if let Some(answer) = answer {
            let recv = (!recv.is_end_stream()).then_some(recv);
            let r = reply_with(answer.response, answer.close, recv, false, logged);
            return Either::Left(reply(ctx, shared, respond, r));
        }
    }
    Either::Right(Box::pin(call(
        ctx, shared, parts, recv, respond, facts, logged,
    )))
}

/// A response made from the request's head, and what sending it needs.
struct Reply<'a> {
    response: crate::http::Response,
    /// The connection ends gracefully after it (`Answer::close`).
    close: bool,
    head_only: bool,
    /// A request body nobody reads, to discard first.
    recv: Option<RecvStream>,
    logged: Option<Box<Logged<'a>>>,
    /// A refusal of the request itself: a reset of it is not the client's
    /// to count.
    refused: bool,
}

/// Send a response made from the request's head: the body nobody reads is
/// taken to its end first, so a stream whose body or trailers break the
/// rules is reset (by `h2`) rather than answered; then the stream waits for
/// its turn in the output budget before its head is made.
async fn reply<H>(ctx: &Ctx<H>, shared: &Shared, mut respond: SendResponse, r: Reply<'_>) {
    let Reply {
        response,
        close,
        head_only,
        recv,
        logged,
        refused,
    } = r;
    let tally = logged.as_deref().map(|l| &l.tally);
    let outbox = &*shared.outbox;
    if let Some(recv) = recv {
        match Box::pin(discard(ctx, recv)).await {
            Ok(()) => {}
            Err(Some(e)) => {
                if let Some(refusal) = refusal_of(e) {
                    refuse(ctx, shared, &mut respond, &refusal, head_only, tally).await;
                }
                return;
            }
            Err(None) => {
                shared.reset_by_client(&ctx.stats, ctx.settings.http2.max_resets);
                return;
            }
        }
    }
    if close {
        shared.end_gracefully();
    }
    let len = Some(response.body.len());
    let want = send::first_want(response.status.code(), head_only, len);
    let sent = match send::turn(outbox, &mut respond, want).await {
        Ok(banked) => {
            let resp = heads::response(response);
            send(
                ctx,
                shared.out(),
                &mut respond,
                resp,
                head_only,
                None,
                tally,
                Some(banked),
            )
            .await
        }
        Err(gone) => Err(gone),
    };
    if let (Err(Gone::Reset), false) = (sent, refused) {
        shared.reset_by_client(&ctx.stats, ctx.settings.http2.max_resets);
    }
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
        let (status, bytes) = (self.tally.status.get(), self.tally.bytes.get());
        self.captured.finish(self.log, &self.facts, status, bytes);
    }
}

/// Answer with `refusal`'s error response (the one place errors become
/// statuses, `on_error`); a stream gone meanwhile is no further concern.
async fn refuse<H>(
    ctx: &Ctx<H>,
    shared: &Shared,
    respond: &mut SendResponse,
    refusal: &Refusal,
    head_only: bool,
    tally: Option<&Tally>,
) {
    let resp = from_static(on_error(refusal));
    let _ = send(
        ctx,
        shared.out(),
        respond,
        resp,
        head_only,
        None,
        tally,
        None,
    )
    .await;
}

/// Answer one stream through the service's `call`, its body fed as the
/// service pulls it.
async fn call<H: Service>(
    ctx: &Ctx<H>,
    shared: &Shared,
    parts: http::request::Parts,
    recv: RecvStream,
    mut respond: SendResponse,
    facts: Connection,
    logged: Option<Box<Logged<'_>>>,
) {
    let tally = logged.as_deref().map(|l| &l.tally);
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

    // For the log of a panic while it runs, as over HTTP/1.1 (a `Uri`
    // clone shares its bytes).
    let uri = parts.uri.clone();
    let request = Request::new(parts, body, facts);
    let Some(call) = dispatch::start(ctx, request, Protocol::Http2) else {
        // `start` has counted and logged the panic.
        shared.end_gracefully();
        let refusal = Refusal::HandlerPanicked;
        refuse(ctx, shared, &mut respond, &refusal, head_only, tally).await;
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
        if respond.poll_reset(cx).is_ready() {
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
            let target = dispatch::target_of(&uri);
            from_static(dispatch::panicked(ctx, target.as_bytes()).response)
        }
        Called::Answered(resp) => match failed.get().and_then(refusal_of) {
            // The body broke the rules while the service ran: the rules'
            // answer, whatever the service said.
            Some(refusal) => from_static(on_error(&refusal)),
            None => resp.map(into_body),
        },
    };
    // The body may still be read while the response streams (an echo).
    let sending = send(
        ctx,
        shared.out(),
        &mut respond,
        resp,
        head_only,
        Some(&failed),
        tally,
        None,
    );
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
                // its credit.
                recv.release_capacity(held);
                return Ok(());
            }
            crate::app::body::Want::More => {}
        }
        if held > 0 {
            recv.release_capacity(std::mem::take(&mut held));
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
                    recv.release_capacity(held);
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
/// `Err(None)` for a stream that was reset.
async fn discard<H>(ctx: &Ctx<H>, mut recv: RecvStream) -> Result<(), Option<BodyError>> {
    let max = ctx.settings.max_body_bytes;
    let timeout = ctx.settings.body_timeout;
    let mut total: u64 = 0;
    loop {
        match monoio::time::timeout(timeout, recv.data()).await {
            Err(_) => return Err(Some(BodyError::TimedOut)),
            Ok(Some(Ok(chunk))) => {
                total += chunk.len() as u64;
                recv.release_capacity(chunk.len());
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
