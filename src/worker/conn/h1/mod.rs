//! The HTTP/1.1 connection: its state, the request loop, the idle wait.
//!
//! One task per connection, on the worker's runtime. The loop crosses into
//! the kernel as rarely as possible and holds memory only while it works:
//! 1. Take every complete request in the read buffer (pipelining), answer
//!    each through `dispatch`, and queue the responses in the sender
//!    (`output`) until its budget is reached. A service that takes owned
//!    requests (every one but the static files) is called through
//!    `exchange`, one request at a time, after what is queued is written.
//! 2. Write the queue: one vectored write for the in-memory responses,
//!    sendfile for file ranges.
//! 3. Close (an error, `Connection: close`, HTTP/1.0's default, a drain),
//!    lingering (`linger`) when the client may still be sending; or go on
//!    taking buffered requests while the budget stopped us; or read more.
//! 4. Read. A connection in the middle of a request reads into its buffer.
//!    An idle keep-alive connection gives its read buffer back and, after a
//!    short grace (a busy client's next request comes within it: on
//!    io_uring a read with a pooled buffer stays in flight meanwhile, so the
//!    busy path costs one read per request), the rest of its storage too,
//!    then waits for readiness holding nothing. The decision and its
//!    measurements are in docs/decisions/0001-idle-reads.md.
//!
//! On the borrowed-head path (the static files) a request body, by
//! Content-Length or chunked, is skipped, never parsed as a request
//! (`http::body`, through `input::Input`), up to
//! `--max-body-bytes`; beyond it the request is refused (413). A request is
//! answered when its head has come, after the part of its body already
//! buffered has been framed: a body found malformed (400) or too large (413)
//! there is answered as the refusal; one found so only in a later read closes
//! the connection after the answer, since a second response would be read as
//! the next request's. Either way nothing after it is parsed as a request.
//! A service called through `exchange` reads its body itself (`intake`).
//!
//! The reads themselves (a timed read, the idle grace on each driver) are
//! `reads`'s: they take a stream and a buffer, not the connection.
//!
//! The connection's state ([`Conn`]) is private to this folder: its
//! children `exchange` (a service's call), `intake` (its request body),
//! `input` (the received bytes) and `wait` (its reads, the idle wait and
//! the close) are the only code besides this file that touches its fields; the rest of `worker::conn` sees [`serve`] and the
//! [`Handover`] of a connection that opened with HTTP/2's preface.

mod exchange;
mod input;
mod intake;
mod wait;

use std::cell::RefMut;
use std::rc::Rc;
use std::time::{Duration, Instant};

use monoio::io::Canceller;

use super::super::registry::Registration;
use super::dispatch;
use super::logged::Pending;
use super::output::Output;
use super::transport::Transport;
use super::Ctx;
use crate::app::{Connection, Service};
use crate::http::body::{Decoder, Framing};
use crate::http::date::DateCache;
use crate::http::error::{on_error, Refusal};
use crate::http::{self, Head, Method, ParseError, Persistence, Response, Version};
use crate::telemetry::Protocol;
use input::Input;

/// A connection that opened with HTTP/2's preface, handed back to the
/// connection layer's one protocol choice (`conn::serve`).
pub(super) struct Handover<S> {
    pub stream: S,
    /// The bytes read so far, preface first: HTTP/2's.
    pub prefix: bytes::Bytes,
    pub registration: Registration,
    pub facts: Connection,
}

/// Serve one accepted connection as HTTP/1.1, until it closes (`None`) or
/// opens with the HTTP/2 preface (the [`Handover`]). `registration` (made
/// by the accept loop, so the connection cap counts it at once) is dropped
/// before the stream, so the entry leaves the registry before the fd closes.
pub(super) async fn serve<H: Service, S: Transport>(
    stream: S,
    registration: Registration,
    ctx: Rc<Ctx<H>>,
    facts: Connection,
) -> Option<Handover<S>> {
    let _gauge = super::OpenGauge::new(&ctx.stats);
    let mut conn = Conn {
        ctx: &ctx,
        stream,
        input: Input::default(),
        output: Output::new(ctx.output.clone()),
        served_any: false,
        head_started: Instant::now(),
        grace: Canceller::new(),
        facts,
        watched_out: false,
        pending: Pending::default(),
    };
    // The busy loop is boxed: its state (writes, timers, lingering) is most
    // of a connection's future, and only the small idle wait below stays
    // allocated while a kept-alive connection waits for its next request.
    // One allocation per busy period, not per request.
    let busy = loop {
        match Box::pin(conn.run(&registration)).await {
            Busy::Idle { left } => {
                if !conn.wait_idle(&registration, left).await {
                    break Busy::Closed;
                }
            }
            busy => break busy,
        }
    };
    // What was answered and not yet logged (a write that failed, a client
    // that left mid-request) is logged now, with the bytes that left.
    conn.settle(true);
    if busy == Busy::H2c {
        // Prior knowledge (RFC 9113 §3.3): the bytes read so far, preface
        // first, are HTTP/2's. One copy of them, once per connection.
        let prefix = bytes::Bytes::copy_from_slice(conn.input.pending());
        conn.input.release(&ctx.pool);
        let Conn { stream, facts, .. } = conn;
        return Some(Handover {
            stream,
            prefix,
            registration,
            facts,
        });
    }
    drop(registration);
    conn.input.release(&ctx.pool);
    None
}

/// How a busy period of a connection ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Busy {
    /// The connection is finished (closed, or to be dropped).
    Closed,
    /// Idle past the grace, holding no buffer: park until readable, for at
    /// most `left` more (the keep-alive or header timeout).
    Idle { left: Duration },
    /// The connection opened with the HTTP/2 preface: hand it back to
    /// `conn::serve`, which gives it to `h2`.
    H2c,
}

/// What taking requests from the buffer ended on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Taken {
    /// The next request goes to the service's `call` (`exchange`).
    Call,
    /// One request was answered through `call`; more may be buffered.
    More,
    /// No complete request left: read more.
    NeedInput,
    /// The sender's budget is reached; complete requests may remain.
    Full,
    /// Close once the queue is written; `linger` when the client may still
    /// be sending (unread input, an unfinished body, a refused request).
    Close { linger: bool },
    /// The first bytes are the HTTP/2 connection preface (h2c).
    H2c,
}

/// How a read ended, when it did not bring bytes.
enum Stop {
    /// EOF, a reset, a drain's shutdown, or a timeout: close quietly.
    Quiet,
    /// Idle past the grace (plain TCP): leave the busy loop and park for
    /// at most `left`.
    Idle { left: Duration },
    /// Already closed (a drain's half-close, discarded to the end).
    Done,
}

/// One HTTP/1.1 connection.
struct Conn<'c, H, S> {
    ctx: &'c Ctx<H>,
    stream: S,
    input: Input,
    output: Output,
    /// Whether any request was answered (the wait is then keep-alive).
    served_any: bool,
    /// When the current request's first bytes arrived (header timeout, and
    /// the access log's duration).
    head_started: Instant,
    /// Cancels the grace read of an idle wait; replaced only when used, so
    /// the busy path allocates none.
    grace: Canceller,
    /// Where the connection came from, for the service's requests.
    facts: Connection,
    /// Pipelined bytes wait in the socket: readiness cannot tell that the
    /// client left until they are read (`exchange`'s watch is off).
    watched_out: bool,
    /// Requests waiting for their access-log line (empty without a log).
    pending: Pending,
}

impl<H: Service, S: Transport> Conn<'_, H, S> {
    /// Serve until the connection closes or idles past the grace.
    async fn run(&mut self, registration: &Registration) -> Busy {
        loop {
            // 1. Answer what is complete in the buffer: the borrowed-head
            // answers at once, a service's `call` after what is queued.
            let mut taken = self.take_requests();
            if taken == Taken::Call {
                if !self.flush().await {
                    return Busy::Closed;
                }
                // Inline, so a call allocates and moves nothing here: the
                // exchange keeps its own state small (its rare parts are
                // boxed inside, its request and future stored once), since
                // it widens the busy loop of every connection, static ones
                // included (tests/memory.rs measures that loop's cost).
                taken = self.exchange().await;
            }
            // 2. Write it.
            if !self.flush().await {
                return Busy::Closed;
            }
            // 3. Decide.
            match taken {
                Taken::Close { linger } => {
                    self.close(registration, linger).await;
                    return Busy::Closed;
                }
                Taken::H2c => return Busy::H2c,
                Taken::Full | Taken::More | Taken::Call => continue,
                Taken::NeedInput => {}
            }
            // Draining: a connection between requests is done; one that has
            // not been answered yet (taken from the queue by the drain's
            // sweep) gets its one answer, with `Connection: close`. It was
            // busy when the drain began (`Registry::close_idle` passed it
            // by), so it closes here as the drain closes idle ones: on plain
            // TCP a FIN, then what the client sent meanwhile is discarded
            // until it closes, so a request crossing the FIN is not reset.
            if !self.input.busy() && self.ctx.draining.get() && self.served_any {
                if S::ENCRYPTS {
                    self.close(registration, false).await;
                } else {
                    registration.set_idle(true);
                    let buf = self.ctx.pool.take();
                    self.discard_after_drain(buf).await;
                }
                return Busy::Closed;
            }
            // 4. Read more.
            match self.read(registration).await {
                Ok(()) => {}
                Err(Stop::Idle { left }) => return Busy::Idle { left },
                Err(Stop::Done) => return Busy::Closed,
                Err(Stop::Quiet) => {
                    self.close(registration, false).await;
                    return Busy::Closed;
                }
            }
        }
    }

    /// Write what is queued, if anything; `false` when the connection must
    /// close (the client is gone or too slow).
    async fn flush(&mut self) -> bool {
        let ok = self.output.is_empty()
            || self
                .output
                .flush(&mut self.stream, self.ctx.settings.send_timeout)
                .await
                .is_ok();
        self.settle(!ok);
        ok
    }

    /// Log the requests whose responses have left (all of them when
    /// `ending`).
    fn settle(&mut self, ending: bool) {
        if let Some(log) = &self.ctx.log {
            self.pending
                .settle(log, &self.facts, self.output.written(), ending);
        }
    }

    /// Queue the answer to `refusal`, after which the connection closes.
    fn refuse(&mut self, refusal: &Refusal) {
        let log = self.ctx.log.is_some();
        if log && self.pending.needs_open() {
            self.pending.open_unread(self.head_started);
        }
        let resp = on_error(refusal);
        let extra = self.ctx.alt_svc_line(&self.facts);
        let body_at = push(
            self.ctx,
            &mut self.output,
            &resp,
            Persistence::Close,
            extra,
            true,
        );
        if log {
            self.pending.answered(resp.status.code(), body_at);
            self.pending.queued(self.output.pushed());
        }
    }

    /// Take and answer every complete request buffered, until the input
    /// runs out, the sender is full, or the connection must close.
    fn take_requests(&mut self) -> Taken {
        let ctx = self.ctx;
        loop {
            if let Err(e) = self.input.skip_body() {
                // The request was answered when its head came (`framed`
                // found its buffered body sound); a second response would be
                // read as the next request's. Close after the answer.
                tracing::debug!(error = %e, "request body refused after its answer");
                return Taken::Close { linger: true };
            }
            if !self.input.body.is_done() || self.input.pending().is_empty() {
                return Taken::NeedInput;
            }
            if S::H2C && !self.served_any && ctx.settings.http2.h2c() {
                let pending = self.input.pending();
                let n = pending.len().min(super::h2::PREFACE.len());
                if pending[..n] == super::h2::PREFACE[..n] {
                    return if n == super::h2::PREFACE.len() {
                        Taken::H2c
                    } else {
                        Taken::NeedInput
                    };
                }
            }
            if self.output.full() || self.pending.full() {
                return Taken::Full;
            }
            if !H::BORROWS_HEADS {
                return Taken::Call;
            }
            let (refusal, consumed, persistence, body) = {
                let Some(buf) = self.input.buf.as_deref() else {
                    return Taken::NeedInput;
                };
                let pending = &buf[self.input.start..];
                match http::parse(pending, &ctx.settings.limits) {
                    Ok(None) => return Taken::NeedInput,
                    Err(e) if self.not_http1(&e, pending) => return Taken::Close { linger: false },
                    Err(e) => (
                        Some(Refusal::Parse(e)),
                        0,
                        Persistence::Close,
                        Decoder::default(),
                    ),
                    Ok(Some((head, consumed))) => {
                        match framed(&head, &pending[consumed..], ctx.settings.max_body_bytes) {
                            Err(e) => (
                                Some(Refusal::Parse(e)),
                                consumed,
                                Persistence::Close,
                                Decoder::default(),
                            ),
                            Ok((body, skipped)) => {
                                let Some(answer) = dispatch::respond_to_head(
                                    ctx,
                                    &head,
                                    &self.facts,
                                    Protocol::Http1,
                                ) else {
                                    return Taken::Call;
                                };
                                let persistence = queue_answer(
                                    ctx,
                                    Queue {
                                        output: &mut self.output,
                                        pending: &mut self.pending,
                                        facts: &self.facts,
                                        started: self.head_started,
                                    },
                                    &head,
                                    &answer,
                                );
                                (None, consumed + skipped, persistence, body)
                            }
                        }
                    }
                }
            };
            if let Some(refusal) = refusal {
                self.refuse(&refusal);
                return Taken::Close { linger: true };
            }
            self.served_any = true;
            self.input.start += consumed;
            self.input.body = body;
            if persistence == Persistence::Close {
                // What of the body was buffered is skipped; the rest, if any,
                // is lingered away.
                return Taken::Close {
                    linger: self.input.busy(),
                };
            }
        }
    }

    /// Whether a parse error says the connection is not HTTP/1 at all: its
    /// first line has neither a method HTTP defines nor an HTTP version,
    /// on a listener that also takes HTTP/2 by prior knowledge. That is a
    /// broken HTTP/2 preface (`INVALID CONNECTION PREFACE`) more likely than
    /// a request, and an HTTP/1.1 answer would be read as frames; it is
    /// closed unanswered, as RFC 9113 §3.4 has an invalid preface closed. A
    /// line with a known method (`GET / FOO/1.1`) is a bad request: 400.
    fn not_http1(&self, e: &ParseError, input: &[u8]) -> bool {
        /// RFC 9110 §9 and RFC 5789's methods.
        const METHODS: [&[u8]; 9] = [
            b"GET", b"HEAD", b"POST", b"PUT", b"DELETE", b"CONNECT", b"OPTIONS", b"TRACE", b"PATCH",
        ];
        let method = input.split(|&b| b == b' ').next().unwrap_or_default();
        S::H2C
            && !self.served_any
            && self.ctx.settings.http2.h2c()
            && matches!(e, ParseError::Malformed(httparse::Error::Version))
            && !METHODS.contains(&method)
    }
}

/// The body decoder of `head`, after discarding what of its body `rest`
/// (the bytes buffered after the head) holds, and how many bytes that was.
/// A head answered from the borrowed buffer takes no body, so its body is read and thrown away, at
/// most `max_body` bytes of it (`--max-body-bytes`): a body refused before
/// the request is answered (declared past the limit, or malformed or past
/// it within what is buffered) is answered as the refusal instead, 413 or
/// 400, then close.
fn framed(head: &Head<'_>, rest: &[u8], max_body: u64) -> Result<(Decoder, usize), ParseError> {
    let mut body = Framing::of(head, max_body)?.decoder(max_body);
    let skipped = body.skip(rest)?;
    Ok((body, skipped))
}

/// How the `Connection` field of a response reads, and whether the
/// connection stays open after it (RFC 9112 §9.3).
fn persistence<H>(ctx: &Ctx<H>, keep_alive: bool, version: Version) -> Persistence {
    if !keep_alive || ctx.draining.get() {
        Persistence::Close
    } else if version == Version::Http10 {
        Persistence::KeepAlive
    } else {
        Persistence::Default
    }
}

/// Where [`queue_answer`] puts a response: the sender, the requests
/// waiting for their log lines, and what the log says of the connection
/// and of when the request's head began.
struct Queue<'q> {
    output: &'q mut Output,
    pending: &'q mut Pending,
    facts: &'q Connection,
    started: Instant,
}

/// Queue the answer made from `head` (the borrowed-head path): its
/// persistence decided, its log record opened, answered and queued when
/// there is a log. Returns the persistence. Inlined: it is the static
/// files' per-request path, and as a call it cost ~40 instructions a
/// request (callgrind).
#[inline(always)]
fn queue_answer<H>(
    ctx: &Ctx<H>,
    q: Queue<'_>,
    head: &Head<'_>,
    answer: &dispatch::Answer,
) -> Persistence {
    let persistence = if answer.close {
        Persistence::Close
    } else {
        persistence(ctx, head.keep_alive, head.version)
    };
    let include_body = head.method != Method::Head;
    let log = ctx.log.is_some();
    if log {
        let sni = q.facts.tls.and_then(|t| t.site);
        let site = ctx.sites.request_name(head.host, sni);
        q.pending.open(head, q.started, site);
    }
    let extra = ctx.alt_svc_line(q.facts);
    let body_at = push(
        ctx,
        q.output,
        &answer.response,
        persistence,
        extra,
        include_body,
    );
    if log {
        q.pending.answered(answer.response.status.code(), body_at);
        q.pending.queued(q.output.pushed());
    }
    persistence
}

/// Queue a response and count it; returns where its body starts in the
/// output's byte count.
fn push<H>(
    ctx: &Ctx<H>,
    output: &mut Output,
    resp: &Response,
    persistence: Persistence,
    extra: &[u8],
    include_body: bool,
) -> u64 {
    ctx.stats.response(Protocol::Http1, resp.status.code());
    let mut date: RefMut<'_, DateCache> = ctx.date.borrow_mut();
    let mut heads = ctx.heads.borrow_mut();
    output.push(
        &mut heads,
        resp,
        date.now(),
        persistence,
        extra,
        include_body,
    )
}
