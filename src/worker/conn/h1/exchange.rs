//! One request through a service's `call`: the request built from the read
//! buffer, its body fed as the service pulls it, the response framed and
//! written, streamed frame by frame when it must be.
//!
//! Flow (`Conn::exchange`):
//! 1. Freeze the read buffer into `Bytes` and parse the head from it, so the
//!    owned head (`app::head::to_parts`) points into it and copies nothing.
//!    Framing errors are answered as in `h1` (400, 413 before the service
//!    runs, then close).
//! 2. Call the service and poll its future, serving each of its body wants
//!    in between (`intake`). A call that does not answer at once races the
//!    connection's readiness too, once the body is in: a client that closed
//!    (a peek reads EOF) drops the future. Its answer is written once it comes (the
//!    earlier pipelined responses were written before the call).
//! 3. Frame the response: no body for HEAD, 1xx, 204 and 304;
//!    `Content-Length` when its size is known; chunked otherwise on HTTP/1.1;
//!    close-delimited on HTTP/1.0. A body whose one frame is ready at once
//!    leaves with the head in one write; one that panics on that first poll
//!    is answered 500 and closes, as a panic in `call` is. A stream is
//!    written one frame at a time, each before the next is polled; a client
//!    that goes away ends the response and drops the service's future and
//!    body.
//! 4. A body that failed (malformed, too large, timed out) replaces the
//!    service's answer with the refusal, if the head has not left yet, and
//!    closes the connection. What of the body the service left unread is
//!    discarded within `intake`'s bound, or the connection closes.
//! 5. Thaw: the bytes after the request go back to the input (the buffer
//!    itself, unless the service kept a piece of it).
//!
//! The exchange runs inside every connection's busy loop, so its own state
//! is kept small: what only some requests need (reading a body, streaming
//! a response, discarding an unread rest) is boxed where it is awaited,
//! and a request that needs none of it allocates none of it.

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::task::Poll;

use bytes::Bytes;
use http_body::Body as _;

use super::super::dispatch::{self, CatchUnwind};
use super::super::transport::Transport;
use super::intake::{Failure, Intake};
use super::{persistence, Conn, Taken};
use crate::app::body::Want;
use crate::app::response::Kind;
use crate::app::{head, into_body, Body, BoxError, Request, RequestBody, Service};
use crate::http::body::Framing;
use crate::http::error::Refusal;
use crate::http::finish::{declared_length, length, Length};
use crate::http::response::{
    chunk_size_line, last_chunk_with_trailers, write_service_head, Delimit, CHUNK_END, LAST_CHUNK,
};
use crate::http::{self, Persistence, Version};
use crate::telemetry::{Protocol, WorkerStats};

/// Facts of the request head kept past the parse.
struct Facts {
    keep_alive: bool,
    version: Version,
    head_method: bool,
}

/// How a response's body leaves.
enum Send {
    /// Nothing after the head.
    Nothing,
    /// Queued with the head (in memory, or file ranges).
    Queued,
    /// Frames to poll and write one by one, delimited as said.
    Stream(
        Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError>>>,
        Delimit,
    ),
}

impl<S: Service, T: Transport> Conn<'_, S, T> {
    /// Take the next buffered request through the service's `call`.
    pub(super) async fn exchange(&mut self) -> Taken {
        let taken = self.call_service().await;
        // Whatever the way out, the response (if any) is all queued now.
        if self.ctx.log.is_some() {
            self.pending.queued(self.output.pushed());
        }
        taken
    }

    async fn call_service(&mut self) -> Taken {
        let ctx = self.ctx;
        let settings = ctx.settings;
        // 1. The request (a plain function: its locals stay out of this
        // future, which every call moves into its box).
        let (mut intake, facts, request) = match self.receive() {
            Ok(received) => received,
            Err(taken) => return taken,
        };
        // 2. The call, with the body fed as it is wanted. The service's
        // future is pinned where it is built, so it is stored once.
        let timeouts = (settings.body_timeout, settings.send_timeout);
        // For the log of a panic while it runs (a `Uri` clone shares its bytes).
        let uri = request.uri().clone();
        let mut call = pin!(dispatch::start(ctx, request, Protocol::Http1));
        let answered = match call.as_mut().as_pin_mut() {
            None => Err(()),
            // Most services answer at once: no race is armed for them.
            Some(mut fut) => {
                loop {
                    // The call first, each time round: most answer at once,
                    // or as soon as their body is in, and arm nothing.
                    let polled =
                        poll_fn(|cx| Poll::Ready(dispatch::poll_caught(fut.as_mut(), cx))).await;
                    if let Poll::Ready(r) = polled {
                        break r;
                    }
                    // A client that leaves while the service is still at
                    // work is watched for once its body is in (plain TCP:
                    // readiness, then a peek that leaves pipelined bytes
                    // queued), so its future is dropped, not run on.
                    let watch = intake.is_done() && !intake.has_rest() && !self.watched_out;
                    // Boxed when armed (a zero-sized pending future, which
                    // allocates nothing, when not), to keep its I/O state
                    // out of every exchange's.
                    let gone: Pin<Box<dyn Future<Output = bool> + '_>> = if watch {
                        Box::pin(client_gone(&mut self.stream))
                    } else {
                        Box::pin(std::future::pending())
                    };
                    let next = monoio::select! {
                        r = CatchUnwind(fut.as_mut()) => Event::Answered(r),
                        w = intake.want() => Event::Want(w),
                        gone = gone => Event::Client { gone },
                    };
                    match next {
                        Event::Answered(r) => break r,
                        Event::Want(Want::More) => {
                            Box::pin(intake.feed(&mut self.stream, &ctx.pool, timeouts)).await
                        }
                        Event::Want(Want::Gone) => intake.gone(),
                        Event::Client { gone: false } => self.watched_out = true,
                        Event::Client { gone: true } => {
                            tracing::debug!("client left while its service was at work");
                            self.watched_out = false;
                            self.thaw_intake(intake);
                            return Taken::Close { linger: false };
                        }
                    }
                }
                .inspect_err(|()| {
                    dispatch::panicked(ctx, dispatch::target_of(&uri).as_bytes());
                })
            }
        };
        self.watched_out = false;

        // 3-4. The answer, or the refusal that replaces it.
        let (response, panicked) = match answered {
            Ok(r) => (Some(r), false),
            Err(()) => (None, true),
        };
        let close_body = intake.failure.is_some()
            || intake.owes_continue()
            || (!intake.is_done() && intake.too_much_left());
        let close = panicked || close_body;
        let mut persist = if close {
            Persistence::Close
        } else {
            persistence(ctx, facts.keep_alive, facts.version)
        };
        let refusal = intake.failure.as_ref().map(Failure::refusal);
        let linger = match (refusal, response) {
            // The client is gone: nobody to answer.
            (Some(None), _) => {
                self.thaw_intake(intake);
                return Taken::Close { linger: false };
            }
            (Some(Some(refusal)), _) => {
                self.refuse(&refusal);
                true
            }
            (None, None) => {
                self.refuse(&Refusal::HandlerPanicked);
                !intake.is_done()
            }
            (None, Some(response)) => {
                let (parts, body) = response.into_parts();
                let body = into_body(body);
                let send = self.queue_head(&parts, body, &facts, &mut persist);
                if let Send::Stream(body, delimit) = send {
                    if !Box::pin(self.stream_body(body, delimit, &mut intake)).await {
                        self.thaw_intake(intake);
                        return Taken::Close { linger: false };
                    }
                }
                if persist == Persistence::Close {
                    !intake.is_done()
                } else if intake.is_done() {
                    // The common case: the busy loop writes the answer.
                    false
                } else {
                    // The answer leaves before the rest of the body is read
                    // and dropped (the client may wait for it to stop).
                    let ok = Box::pin(async {
                        self.flush().await
                            && intake.discard(&mut self.stream, &ctx.pool, timeouts).await
                    })
                    .await;
                    if !ok {
                        persist = Persistence::Close;
                    }
                    false
                }
            }
        };
        // 5. The bytes after the request go back to the input.
        self.thaw_intake(intake);
        if persist == Persistence::Close {
            Taken::Close { linger }
        } else {
            Taken::More
        }
    }

    /// The next request in the buffer, frozen and parsed, with its body's
    /// intake; `Err` with what the connection does instead (read more, or
    /// close after the refusal queued here).
    fn receive(&mut self) -> Result<(Intake, Facts, Request), Taken> {
        let ctx = self.ctx;
        let settings = ctx.settings;
        let Some(buf) = self.input.buf.take() else {
            return Err(Taken::NeedInput);
        };
        let start = self.input.start;
        let frozen = Bytes::from(buf);
        // 1. The head, from the frozen bytes.
        let parsed = match http::parse(&frozen[start..], &settings.limits) {
            Ok(None) => {
                self.thaw(frozen, start);
                return Err(Taken::NeedInput);
            }
            Err(e) if self.not_http1(&e, &frozen[start..]) => {
                self.thaw(frozen, start);
                return Err(Taken::Close { linger: false });
            }
            Err(e) => Err((Refusal::Parse(e), start)),
            Ok(Some((head, consumed))) => {
                let body_at = start + consumed;
                match Framing::of(&head, settings.max_body_bytes) {
                    Err(e) => Err((Refusal::Parse(e), body_at)),
                    Ok(framing) => match head::to_parts_lazy(&head, &frozen) {
                        Err(e) => {
                            tracing::debug!(error = %e, "request refused");
                            Err((Refusal::Unrepresentable, body_at))
                        }
                        Ok(parts) => {
                            let expect = head.version == Version::Http11
                                && head
                                    .header("expect")
                                    .is_some_and(|v| v.eq_ignore_ascii_case(b"100-continue"));
                            let facts = Facts {
                                keep_alive: head.keep_alive,
                                version: head.version,
                                head_method: head.method == http::Method::Head,
                            };
                            let fields = head::Fields::of(&head, &frozen);
                            if ctx.log.is_some() {
                                let sni = self.facts.tls.and_then(|t| t.site);
                                let site = ctx.sites.request_name(head.host, sni);
                                self.pending.open(&head, self.head_started, site);
                            }
                            Ok((parts, fields, framing, expect, facts, body_at))
                        }
                    },
                }
            }
        };
        let (parts, fields, framing, expect, facts, body_at) = match parsed {
            Ok(p) => p,
            Err((refusal, at)) => {
                self.thaw(frozen, at);
                self.refuse(&refusal);
                return Err(Taken::Close { linger: true });
            }
        };
        self.served_any = true;

        let (feed, body) = match framing {
            Framing::Empty => (None, RequestBody::empty()),
            _ => {
                let (feed, body) = RequestBody::channel();
                (Some(feed), body)
            }
        };
        let intake = Intake::new(
            framing.decoder(settings.max_body_bytes),
            frozen,
            body_at,
            feed,
            expect,
            settings.max_body_bytes,
        );
        let request = Request::received(parts, fields, body, self.facts);
        Ok((intake, facts, request))
    }

    /// Queue the head of a service's response (and its body, when it is in
    /// memory or a file); say what is left to send.
    fn queue_head(
        &mut self,
        parts: &::http::response::Parts,
        body: Body,
        facts: &Facts,
        persist: &mut Persistence,
    ) -> Send {
        let ctx = self.ctx;
        let status = parts.status;
        let bodiless = facts.head_method
            || status.is_informational()
            || status == ::http::StatusCode::NO_CONTENT
            || status == ::http::StatusCode::NOT_MODIFIED;
        // A stream whose one frame is ready now leaves with its head.
        let body = match body.kind {
            Kind::Stream(s) if !bodiless => match first_frame(s) {
                First::Whole(bytes) => Body::from(bytes),
                First::Stream(s) => Body {
                    kind: Kind::Stream(s),
                },
                First::Panicked => {
                    // Nothing has left yet: answered as a panic in `call` is.
                    WorkerStats::add(&ctx.stats.handler_panics, 1);
                    tracing::error!(
                        "response body panicked before its head: answered 500 and closed the connection"
                    );
                    *persist = Persistence::Close;
                    self.refuse(&Refusal::HandlerPanicked);
                    return Send::Nothing;
                }
            },
            _ => body,
        };
        // The length every protocol tells (`http::finish`), as HTTP/1.1 says it.
        let declared = bodiless.then(|| declared_length(&parts.headers)).flatten();
        let delimit = match length(status.as_u16(), facts.head_method, declared, body.len()) {
            Length::None => Delimit::Neither,
            Length::Known(n) => Delimit::Length(n),
            Length::Unknown if facts.version == Version::Http11 => Delimit::Chunked,
            Length::Unknown => {
                // HTTP/1.0 has no chunked coding: the close ends the body.
                *persist = Persistence::Close;
                Delimit::Neither
            }
        };
        ctx.stats.response(Protocol::Http1, status.as_u16());
        {
            let mut date = ctx.date.borrow_mut();
            let mut heads = ctx.heads.borrow_mut();
            let date = date.now();
            let persist = *persist;
            // A service that says its own Alt-Svc is not given ours too.
            let extra = if parts.headers.contains_key(::http::header::ALT_SVC) {
                &[][..]
            } else {
                ctx.alt_svc_line(&self.facts)
            };
            self.output.push_head(&mut heads, |out| {
                write_service_head(out, status, &parts.headers, delimit, date, persist, extra)
            });
        }
        if ctx.log.is_some() {
            self.pending.answered(status.as_u16(), self.output.pushed());
        }
        if bodiless {
            return Send::Nothing;
        }
        match body.kind {
            Kind::Empty => Send::Nothing,
            Kind::Bytes(b) => {
                self.output.push_mem(b);
                Send::Queued
            }
            Kind::Pieces(p) => {
                self.output.push_parts(&p);
                Send::Queued
            }
            Kind::Stream(s) => Send::Stream(s, delimit),
        }
    }

    /// Write a streamed body frame by frame, serving the request body's
    /// wants meanwhile. `false` when the connection must close at once: the
    /// client went away, the body failed, or it broke its declared length.
    async fn stream_body(
        &mut self,
        mut body: Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError>>>,
        delimit: Delimit,
        intake: &mut Intake,
    ) -> bool {
        let ctx = self.ctx;
        let settings = ctx.settings;
        let timeouts = (settings.body_timeout, settings.send_timeout);
        let mut sent: u64 = 0;
        loop {
            // The head, or the last frame, leaves before the next is polled.
            if !self.flush().await {
                return false;
            }
            let next = {
                let frame = CatchUnwind(poll_fn(|cx| body.as_mut().poll_frame(cx)));
                monoio::select! {
                    f = frame => Ok(f),
                    w = intake.want() => Err(w),
                }
            };
            let frame = match next {
                Err(Want::More) => {
                    Box::pin(intake.feed(&mut self.stream, &ctx.pool, timeouts)).await;
                    continue;
                }
                Err(Want::Gone) => {
                    intake.gone();
                    continue;
                }
                Ok(Err(())) => {
                    WorkerStats::add(&ctx.stats.handler_panics, 1);
                    tracing::error!("response body panicked: connection closed");
                    return false;
                }
                Ok(Ok(f)) => f,
            };
            match frame {
                None => {
                    return match delimit {
                        Delimit::Chunked => {
                            self.output.push_mem(Bytes::from_static(LAST_CHUNK));
                            self.flush().await
                        }
                        Delimit::Length(n) => sent == n,
                        Delimit::Neither => true,
                    };
                }
                Some(Err(e)) => {
                    tracing::debug!(error = %e, "response body failed: connection closed");
                    return false;
                }
                Some(Ok(frame)) => match frame.into_data() {
                    Ok(data) => {
                        if data.is_empty() {
                            continue;
                        }
                        sent += data.len() as u64;
                        match delimit {
                            Delimit::Chunked => {
                                self.output.push_mem(chunk_size_line(data.len()));
                                self.output.push_mem(data);
                                self.output.push_mem(Bytes::from_static(CHUNK_END));
                            }
                            Delimit::Length(n) if sent > n => {
                                tracing::debug!("response body longer than its length: closed");
                                return false;
                            }
                            Delimit::Length(_) | Delimit::Neither => self.output.push_mem(data),
                        }
                    }
                    Err(frame) => {
                        // Trailers end the body; only chunked carries them.
                        if let (Ok(trailers), Delimit::Chunked) = (frame.into_trailers(), delimit) {
                            self.output.push_mem(last_chunk_with_trailers(&trailers));
                            return self.flush().await;
                        }
                    }
                },
            }
        }
    }

    /// Put received bytes from `at` back as the input.
    fn thaw(&mut self, bytes: Bytes, at: usize) {
        let pool = &self.ctx.pool;
        let rest = bytes.len() - at;
        match bytes.try_into_mut() {
            Ok(unique) => {
                self.input.buf = Some(Vec::from(unique));
                self.input.start = at;
            }
            Err(shared) => {
                // A service kept a piece of it: copy the rest (the next
                // pipelined requests, if any) into a fresh buffer.
                pool.forget();
                let mut buf = pool.take();
                buf.extend_from_slice(&shared[at..]);
                self.input.buf = Some(buf);
                self.input.start = 0;
            }
        }
        debug_assert_eq!(self.input.pending().len(), rest);
    }

    fn thaw_intake(&mut self, intake: Intake) {
        let (buf, off) = intake.into_rest();
        self.thaw(buf, off);
    }
}

/// What woke a pending call.
enum Event<R> {
    /// The service answered.
    Answered(R),
    /// The service wants its body, or dropped it.
    Want(Want),
    /// The connection became readable: the client left, or sent more.
    Client { gone: bool },
}

/// Whether the client has gone (EOF or reset), once the connection is
/// readable; pending forever while the stream holds received bytes above
/// the socket (TLS plaintext or part of a record: readiness would not show
/// them). `false`: bytes came (a pipelined request, a TLS record), so
/// readiness says nothing more until they are read.
async fn client_gone<T: Transport>(stream: &mut T) -> bool {
    let Some(tcp) = stream.idle_socket() else {
        return std::future::pending().await;
    };
    match tcp.readable(false).await {
        Ok(()) => crate::sys::socket::peer_closed(crate::sys::socket::stream_fd(tcp)),
        Err(_) => true,
    }
}

/// What polling a stream once, before its head is written, found.
enum First {
    /// Its one frame, and it has ended: the body, whole, sent with the head.
    Whole(Bytes),
    /// Not that: send it as a stream (a frame already taken is put back
    /// in front).
    Stream(Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError>>>),
    /// It panicked (dropped, never polled again).
    Panicked,
}

/// Poll `body` once with a waker that does nothing (a pending body is
/// polled again, with the connection's, once its head is out).
fn first_frame(mut body: Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError>>>) -> First {
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        body.as_mut().poll_frame(&mut cx)
    }));
    match polled {
        Ok(Poll::Ready(Some(Ok(frame)))) => {
            if frame.is_data() && body.is_end_stream() {
                if let Ok(data) = frame.into_data() {
                    return First::Whole(data);
                }
                return First::Stream(body);
            }
            First::Stream(Box::pin(Prepend {
                first: Some(Ok(frame)),
                rest: body,
            }))
        }
        Ok(Poll::Ready(None)) => First::Whole(Bytes::new()),
        Ok(Poll::Ready(Some(Err(e)))) => First::Stream(Box::pin(Prepend {
            first: Some(Err(e)),
            rest: body,
        })),
        Ok(Poll::Pending) => First::Stream(body),
        Err(_) => First::Panicked,
    }
}

/// A stream with its first frame already taken, put back in front.
struct Prepend {
    first: Option<Result<http_body::Frame<Bytes>, BoxError>>,
    rest: Pin<Box<dyn http_body::Body<Data = Bytes, Error = BoxError>>>,
}

impl http_body::Body for Prepend {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> Poll<Option<Result<http_body::Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match this.first.take() {
            Some(first) => Poll::Ready(Some(first)),
            None => this.rest.as_mut().poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        self.first.is_none() && self.rest.is_end_stream()
    }
}
