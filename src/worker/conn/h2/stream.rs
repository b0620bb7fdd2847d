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
use std::task::Poll;
use std::time::Instant;

use futures_util::future::Either;

use super::super::dispatch::{self, poll_caught, refusal_of};
use super::super::logged::Captured;
use super::super::Ctx;
use super::head;
use super::send::{self, send, Gone, Tally};
use super::shared::Shared;
use super::wire::{RecvStream, SendResponse};
use crate::app::body::Feed;
use crate::app::response::from_static;
use crate::app::{into_body, BodyError, Connection, Request, RequestBody, Service};
use crate::http::error::{on_error, Refusal};
use crate::http::h2::RequestHead;
use crate::http::ParseError;
use crate::telemetry::Protocol;

/// A stream to answer.
pub(super) enum Incoming<'h> {
    /// A request's decoded fields (its list is the caller's to recycle once
    /// `answer` returns: only an app's call takes its bytes) and its body.
    Request(&'h mut RequestHead, RecvStream),
    /// A request whose header list passed `--h2-max-header-list-bytes`.
    TooLarge(RecvStream),
}

/// Answer one stream: the static files from the head at once ([`reply`]),
/// read from the decoded fields where they lie (no header map is built for
/// them), any other service through its `call` with the head in `http`'s
/// types (boxed: what only a service's call needs is kept out of the
/// connection's set of streams).
///
/// Not an `async fn`: the request's fields are read here and dropped, so a
/// stream that waits for its turn in the output budget holds only its
/// response (every never-reading client's streams wait so). A static
/// answer that can go at once goes here, with no future made, moved into
/// the connection's set of streams or polled (`reply_now`): `None`.
pub(super) fn answer<'a, H: Service>(
    ctx: &'a Ctx<H>,
    shared: &'a Shared,
    incoming: Incoming<'_>,
    respond: SendResponse,
    facts: Connection,
) -> Option<Either<impl Future<Output = ()> + 'a, Pin<Box<impl Future<Output = ()> + 'a>>>> {
    let refuse_with = |refusal: Refusal, recv: Option<RecvStream>, logged| Reply {
        response: on_error(&refusal),
        close: false,
        head_only: false,
        recv,
        logged,
        refused: true,
    };
    let (head, recv) = match incoming {
        Incoming::Request(head, recv) => (head, recv),
        Incoming::TooLarge(recv) => {
            // RFC 9113 §10.5.1: 431, the body discarded first.
            ctx.stats.request(Protocol::Http2);
            let limit = ctx.settings.http2.max_header_list_bytes;
            let refusal = Refusal::Parse(ParseError::HeadTooLarge { limit });
            let r = refuse_with(refusal, (!recv.is_end_stream()).then_some(recv), None);
            return Some(Either::Left(reply(ctx, shared, respond, r)));
        }
    };
    let Ok(view) = head::view(head) else {
        ctx.stats.request(Protocol::Http2);
        let r = refuse_with(Refusal::Unrepresentable, None, None);
        return Some(Either::Left(reply(ctx, shared, respond, r)));
    };
    // Boxed, and only with a log: every stream's future stays small.
    let logged = ctx.log.as_ref().map(|log| {
        Box::new(Logged {
            log,
            facts,
            captured: Captured::of_head(
                &view,
                Instant::now(),
                &ctx.sites,
                facts.tls.and_then(|t| t.site),
                crate::access_log::Protocol::Http2,
            ),
            tally: Tally::default(),
        })
    });
    let head_only = view.method == crate::http::Method::Head;
    let max_body = ctx.settings.max_body_bytes;
    let refused = match head::authority_error(head, &view) {
        Some(e) => Some(Refusal::Parse(e)),
        None => view
            .content_length
            .filter(|&n| n > max_body)
            .map(|length| Refusal::Parse(ParseError::BodyTooLarge { length })),
    };
    if let Some(refusal) = refused {
        ctx.stats.request(Protocol::Http2);
        drop(recv);
        let mut r = refuse_with(refusal, None, logged);
        r.head_only = head_only;
        return Some(Either::Left(reply(ctx, shared, respond, r)));
    }
    if H::BORROWS_HEADS {
        let answer = dispatch::respond_to_head(ctx, &view, &facts, Protocol::Http2);
        if let Some(answer) = answer {
            let recv = (!recv.is_end_stream()).then_some(recv);
            let r = Reply {
                response: answer.response,
                close: answer.close,
                head_only,
                recv,
                logged,
                refused: false,
            };
            return match reply_now(ctx, shared, respond, r) {
                Ok(()) => None,
                Err((respond, r)) => Some(Either::Left(reply(ctx, shared, respond, r))),
            };
        }
    }
    drop(view);
    let Ok(parts) = head::parts(head) else {
        ctx.stats.request(Protocol::Http2);
        let mut r = refuse_with(Refusal::Unrepresentable, None, logged);
        r.head_only = head_only;
        return Some(Either::Left(reply(ctx, shared, respond, r)));
    };
    Some(Either::Right(Box::pin(call(
        ctx, shared, parts, recv, respond, facts, logged,
    ))))
}

/// Send a response made from the request's head at once, when nothing in
/// it waits: no request body to discard, no close, its first grant free
/// in the output budget with no stream before it in line, and a body
/// that fits that grant (`send::send_static_now`). The rest comes back
/// for [`reply`]. Most requests for a cached file end here: no future is
/// built, moved or polled for them.
#[allow(clippy::result_large_err)]
fn reply_now<'a, H>(
    ctx: &Ctx<H>,
    shared: &Shared,
    mut respond: SendResponse,
    r: Reply<'a>,
) -> Result<(), (SendResponse, Reply<'a>)> {
    if r.recv.is_some() || r.close {
        return Err((respond, r));
    }
    let len = Some(r.response.body.len());
    let want = send::first_want(r.response.status.code(), r.head_only, len);
    let Some(banked) = shared.outbox.try_take(respond.stream_id(), want) else {
        return Err((respond, r));
    };
    let Reply {
        response,
        head_only,
        logged,
        refused,
        ..
    } = r;
    let tally = logged.as_deref().map(|l| &l.tally);
    let sent = send::send_static_now(
        ctx,
        shared,
        &mut respond,
        response,
        head_only,
        tally,
        banked,
    );
    match sent {
        Ok(Err(Gone::Reset)) if !refused => {
            shared.reset_by_client(&ctx.stats, ctx.settings.http2.max_resets);
        }
        Ok(_) => {}
        Err(response) => {
            // Not a response that goes at once: its grant goes back, and
            // it waits its turn as any other.
            shared.outbox.unused(respond.stream_id(), banked);
            let r = Reply {
                response,
                close: false,
                head_only,
                recv: None,
                logged,
                refused,
            };
            return Err((respond, r));
        }
    }
    Ok(())
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
/// rules is reset (by the connection) rather than answered; then the stream waits for
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
            let r = (response, head_only, tally, banked);
            send::send_static(ctx, shared, &mut respond, r.0, r.1, r.2, r.3).await
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
    // Boxed: only a refused body's stream pays for this state.
    let sent = send(
        ctx,
        shared.out(),
        respond,
        resp,
        head_only,
        None,
        tally,
        None,
    );
    let _ = Box::pin(sent).await;
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
    // RFC 9110 §10.1.1: a client that expects 100-continue waits for it
    // before its body; it goes once the service first asks for the body
    // (a service that answers without reading it sends none).
    let mut expects = feeder.is_some()
        && parts
            .headers
            .get(http::header::EXPECT)
            .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"100-continue"));
    let wanted = Cell::new(false);
    let mut feeding = pin!(async {
        if let Some((feed, recv)) = feeder {
            if let Err(e) = pull(ctx, feed, recv, &wanted).await {
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
        if expects && wanted.get() {
            expects = false;
            respond.send_interim(100);
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
/// chunk goes back when the reader takes it (it wants the next). `wanted`
/// is set at the first want.
async fn pull<H>(
    ctx: &Ctx<H>,
    feed: Feed,
    mut recv: RecvStream,
    wanted: &Cell<bool>,
) -> Result<(), BodyError> {
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
            crate::app::body::Want::More => wanted.set(true),
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
