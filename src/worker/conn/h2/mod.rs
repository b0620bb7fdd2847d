//! HTTP/2 connections (RFC 9113), framed by our own protocol layer
//! (`http::h2`), answered through the same dispatch as HTTP/1.1.
//!
//! Owns an HTTP/2 connection's life: the settings it applies ([`Http2Conn`],
//! [`H2c`]: what `config` validated) and advertises, the task that reads,
//! answers and writes, GOAWAY on a drain, an idle connection's end, and the
//! connection-level defences that need a clock. Does not own framing, HPACK,
//! flow control or stream states (`http::h2::Conn`, without I/O), what a
//! request means (the dispatch and the service), nor the TLS handshake
//! (`transport`). Why our own layer: docs/decisions/0020.
//!
//! Flow:
//! 1. A connection arrives here from a TLS handshake that chose `h2` by
//!    ALPN, or from the HTTP/1.1 loop that saw the h2c preface first on a
//!    plain connection (`io::Prefixed` gives back the bytes it read).
//! 2. The client's preface and SETTINGS must come within `--header-timeout`.
//!    Our SETTINGS: `--h2-max-concurrent-streams` (REFUSED_STREAM past it),
//!    `--h2-max-header-list-bytes` (a larger header list is answered 431),
//!    `--h2-header-table-bytes` (the HPACK table we keep for the client),
//!    `--h2-initial-window-bytes` (the request-body window of each stream
//!    and of the connection).
//! 3. One task does a pass at a time: it polls every open stream's answer
//!    (`stream::answer`), reads what the socket has into `Conn::recv` (events
//!    go to `wire`, new requests become answers; a cached file's that needs
//!    no wait is sent as the request is taken, with no future), frames what
//!    the answers queued (`Wire::frame_queued`) and writes the pass's output
//!    in one gathered write (`io::Writer`). Streams never outlive their
//!    connection, and no stream is a task of its own; the connection is one
//!    (spawned by `conn::serve_h2`).
//! 4. The connection ends with GOAWAY: on a drain (graceful: the last stream
//!    id after a PING, its streams finished within the drain deadline),
//!    after a service panic (once the other streams finish), after
//!    `--keepalive-timeout` with no open stream, at once with
//!    ENHANCE_YOUR_CALM when the client resets more than `--h2-max-resets`
//!    streams in 10 s (rapid reset, CVE-2023-44487), and with the code of
//!    any protocol error `Conn` finds.
//! 5. A GOAWAY that cannot be written (a peer that stopped reading) ends the
//!    connection after `--send-timeout`, as do bytes held with no progress.

mod head;
mod io;
mod outbox;
mod send;
mod shared;
mod stream;
mod tls;
mod wire;

use std::future::{poll_fn, Future};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::BytesMut;
use futures_util::stream::{FuturesUnordered, Stream};
use monoio::io::poll_io::{AsyncRead, AsyncWrite, ReadBuf};
use monoio::time::{Instant, Sleep};

use super::super::registry::Registration;
use super::budget::ConnBudget;
use super::Ctx;
use crate::app::{Connection, Service};
use crate::choice::choice;
use crate::http::h2::{Conn, ErrorCode, Event as H2Event};
use crate::telemetry::WorkerStats;

pub(crate) use crate::http::h2::PREFACE;
pub(crate) use io::{Prefixed, Shed};
pub(crate) use tls::Tls;

/// Bytes one read takes from the socket (a TLS record's plaintext, or a
/// frame and a half).
const READ_BYTES: usize = 16 * 1024;
/// The first read of a parked connection, into the stack.
const PARKED_READ_BYTES: usize = 4 * 1024;
/// Reads one pass makes at most before it writes what they brought.
const READS_PER_PASS: usize = 16;
/// How long a connection with no stream open keeps its buffers before they
/// go back (as HTTP/1.1's idle grace): a closed-loop client's next request
/// comes within it, a browser's idle connection waits seconds.
const IDLE_GRACE: std::time::Duration = std::time::Duration::from_millis(10);

/// What woke the connection task.
enum Event {
    /// The worker is draining.
    Drain,
    /// A stream asked the connection to end (see `stream::Shared`).
    GoAway(ErrorCode),
    /// No stream open for the keep-alive timeout.
    Idle,
    /// Past the time a GOAWAY'd connection has to finish.
    Late,
    /// Bytes held unsent with no progress for the send timeout.
    Stalled,
    /// The preface and SETTINGS did not come within the header timeout.
    NoHandshake,
    /// Done: GOAWAY sent and every stream finished, the peer closed, or a
    /// protocol error (its GOAWAY written).
    Closed,
    /// The socket failed.
    Broken(std::io::Error),
}

choice! {
    /// HTTP/2 over cleartext on the plain listeners.
    pub enum H2c {
        /// A connection that opens with the HTTP/2 preface is HTTP/2; any
        /// other is HTTP/1.1. `Upgrade: h2c` (deprecated by RFC 9113 §3.1)
        /// is not offered: the request is answered over HTTP/1.1.
        PriorKnowledge = "prior-knowledge",
        /// Plain listeners speak HTTP/1.1 only.
        Off = "off",
    }
}

/// What each HTTP/2 connection applies: `serve` below and the streams read
/// these fields, and the h2c check of `h1` reads `h2c`. Each is a setting
/// marked `h2` in `config/raw.rs`'s table, which fills them by name: a new
/// `--h2-*` setting is its entry there, its field here with the code that
/// applies it, and its row in docs/http2.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Http2Conn {
    /// `--h2c`.
    pub h2c: H2c,
    /// `--h2-max-concurrent-streams`.
    pub max_concurrent_streams: usize,
    /// `--h2-max-header-list-bytes`.
    pub max_header_list_bytes: usize,
    /// `--h2-header-table-bytes`.
    pub header_table_bytes: usize,
    /// `--h2-max-resets`: client resets allowed per connection in
    /// `shared::RESET_WINDOW`.
    pub max_resets: usize,
    /// `--h2-initial-window-bytes`.
    pub initial_window_bytes: usize,
}

impl Http2Conn {
    /// Whether a plain connection opening with the HTTP/2 preface is HTTP/2.
    pub fn h2c(&self) -> bool {
        self.h2c == H2c::PriorKnowledge
    }
}

/// An empty set of `answer`'s futures, not made yet (its type named by
/// `answer` itself).
fn no_streams<'a, H, F>(
    _answer: impl FnOnce(
        &'a Ctx<H>,
        &'a shared::Shared,
        stream::Incoming<'_>,
        wire::SendResponse,
        Connection,
    ) -> Option<F>,
) -> Option<FuturesUnordered<F>>
where
    H: 'a,
{
    None
}

/// Set `timer` to fire at `deadline`, making it if there is none.
fn arm(timer: &mut Option<Pin<Box<Sleep>>>, deadline: Instant) {
    match timer {
        Some(t) => t.as_mut().reset(deadline),
        None => *timer = Some(Box::pin(monoio::time::sleep_until(deadline))),
    }
}

/// The socket side of a connection's task.
struct Link<T> {
    io: T,
    /// Bytes read and not yet taken by `Conn::recv` (freed while idle).
    rbuf: BytesMut,
    writer: io::Writer,
    /// The peer closed its side.
    eof: bool,
}

impl<T: AsyncRead + AsyncWrite + io::Shed + Unpin> Link<T> {
    /// Read what the socket has into `rbuf`; `Ok(0)` at its end. A parked
    /// connection (`rbuf` freed) waits with no buffer: it reads into the
    /// stack, and what came is copied into a new one.
    fn poll_read(&mut self, cx: &mut Context<'_>) -> Poll<std::io::Result<usize>> {
        if self.rbuf.capacity() == 0 {
            let mut stack = [std::mem::MaybeUninit::<u8>::uninit(); PARKED_READ_BYTES];
            let mut rb = ReadBuf::uninit(&mut stack);
            std::task::ready!(Pin::new(&mut self.io).poll_read(cx, &mut rb))?;
            let n = rb.filled().len();
            self.rbuf.extend_from_slice(rb.filled());
            return Poll::Ready(Ok(n));
        }
        self.rbuf.reserve(READ_BYTES);
        let before = self.rbuf.len();
        let io = &mut self.io;
        let r = crate::sys::rent::fill_spare(&mut self.rbuf, |rb: &mut ReadBuf<'_>| {
            Pin::new(io).poll_read(cx, rb)
        });
        std::task::ready!(r)?;
        Poll::Ready(Ok(self.rbuf.len() - before))
    }
}

/// Serve one HTTP/2 connection over `io` (the open-connection gauge is the
/// caller's).
pub(crate) async fn serve<H, T>(
    io: T,
    registration: &Registration,
    ctx: &Rc<Ctx<H>>,
    facts: Connection,
) where
    H: Service,
    T: AsyncRead + AsyncWrite + io::Shed + Unpin + 'static,
{
    registration.set_idle(false);
    registration.set_h2();
    WorkerStats::add(&ctx.stats.h2_connections, 1);
    let settings = &ctx.settings;
    let limits = settings.http2;
    let conn = Conn::new(crate::http::h2::Settings {
        max_concurrent_streams: u32::try_from(limits.max_concurrent_streams).unwrap_or(u32::MAX),
        max_header_list_bytes: limits.max_header_list_bytes,
        header_table_bytes: limits.header_table_bytes,
        initial_window: u32::try_from(limits.initial_window_bytes)
            .unwrap_or(crate::http::h2::frame::MAX_WINDOW),
    });
    let budget = ConnBudget::new(settings.output_buffer_bytes, ctx.output.clone());
    let outbox = Rc::new(outbox::Outbox::new(budget));
    let wire = Rc::new(wire::Wire::new(conn, outbox.clone()));
    // Boxed, as the rest of the connection's state is: the future the
    // connection's task carries stays small.
    let shared = Box::new(shared::Shared::new(
        outbox.clone(),
        ctx.alt_svc_value(&facts).cloned(),
    ));
    let mut link = Link {
        io,
        rbuf: BytesMut::new(),
        writer: io::Writer::default(),
        eof: false,
    };
    // Made with the first stream and dropped when the connection parks:
    // an empty set still holds a node as large as one stream's answer.
    let mut streams = no_streams(stream::answer::<H>);
    let mut handshaken = false;
    // One timer for a connection with no stream open: until its first
    // stream, the header timeout (the preface and SETTINGS within it too),
    // as an HTTP/1.1 connection has for its first request; then, each time
    // its last stream ends, [`IDLE_GRACE`] (what it holds goes back,
    // `shed`) and the rest of the keep-alive timeout.
    let mut idle: Option<Pin<Box<Sleep>>> =
        Some(Box::pin(monoio::time::sleep(settings.header_timeout)));
    let mut idle_since = Instant::now();
    let mut shed_due = false;
    // Past the grace: parked on its socket's readiness, holding no buffer
    // and no timer; the worker's sweeper keeps the keep-alive timeout (it
    // shuts the read side: the connection then says GOAWAY and closes).
    let mut parked = false;
    // Made when needed: after GOAWAY, and while bytes are held (a `Sleep`
    // is 640 bytes, which every idle connection would carry).
    let mut late: Option<Pin<Box<Sleep>>> = None;
    let mut stall: Option<Pin<Box<Sleep>>> = None;
    let mut going_away = false;
    let mut peer_goaway = false;
    let mut idle_reset = false;
    let mut busy = false;
    if ctx.draining.get() {
        wire.conn.borrow_mut().drain();
        going_away = true;
    }
    loop {
        let event = poll_fn(|cx| {
            if !going_away && registration.poll_drain(cx).is_ready() {
                return Poll::Ready(Event::Drain);
            }
            // Answer, take what was read, read more; again while reads
            // bring frames. New streams are answered before more is read,
            // so their resets are counted as they come (rapid reset).
            let mut reads = 0;
            let mut read_cut = false;
            loop {
                if let Some(set) = streams.as_mut() {
                    while let Poll::Ready(Some(())) = Pin::new(&mut *set).poll_next(cx) {}
                }
                if let Some(code) = shared.goaway.take() {
                    return Poll::Ready(Event::GoAway(code));
                }
                let result = wire.conn.borrow_mut().recv(&mut link.rbuf);
                let mut accepted = false;
                loop {
                    let next = wire.conn.borrow_mut().event();
                    let Some(event) = next else { break };
                    match wire.deliver(event) {
                        Some(H2Event::Request {
                            stream: id,
                            mut head,
                            ..
                        }) => {
                            WorkerStats::add(&ctx.stats.h2_streams, 1);
                            let respond = wire::SendResponse::new(id, wire.clone());
                            let recv = wire::RecvStream::new(id, wire.clone());
                            let incoming = stream::Incoming::Request(&mut head, recv);
                            let answer = stream::answer(ctx, &shared, incoming, respond, facts);
                            if let Some(answer) = answer {
                                streams
                                    .get_or_insert_with(FuturesUnordered::new)
                                    .push(answer);
                            }
                            wire.conn.borrow_mut().recycle(head.fields);
                            accepted = true;
                        }
                        Some(H2Event::TooLarge { stream: id, .. }) => {
                            WorkerStats::add(&ctx.stats.h2_streams, 1);
                            let respond = wire::SendResponse::new(id, wire.clone());
                            let recv = wire::RecvStream::new(id, wire.clone());
                            let incoming = stream::Incoming::TooLarge(recv);
                            let answer = stream::answer(ctx, &shared, incoming, respond, facts);
                            if let Some(answer) = answer {
                                streams
                                    .get_or_insert_with(FuturesUnordered::new)
                                    .push(answer);
                            }
                            accepted = true;
                        }
                        Some(H2Event::GoAway { .. }) => peer_goaway = true,
                        _ => {}
                    }
                }
                if wire.conn.borrow_mut().windows_grew() {
                    wire.wake_all();
                }
                if accepted {
                    idle_reset = true;
                    continue;
                }
                if result.is_err() || link.eof {
                    break;
                }
                if !wire.conn.borrow().wants_read() || reads == READS_PER_PASS {
                    read_cut = true;
                    break;
                }
                match link.poll_read(cx) {
                    Poll::Ready(Ok(0)) => link.eof = true,
                    Poll::Ready(Ok(_)) => reads += 1,
                    Poll::Ready(Err(e)) => return Poll::Ready(Event::Broken(e)),
                    Poll::Pending => break,
                }
            }
            if !handshaken {
                if wire.conn.borrow().ready() {
                    handshaken = true;
                } else if idle
                    .as_mut()
                    .is_some_and(|t| t.as_mut().poll(cx).is_ready())
                {
                    return Poll::Ready(Event::NoHandshake);
                }
            }
            if let Some(late) = late.as_mut() {
                if late.as_mut().poll(cx).is_ready() {
                    return Poll::Ready(Event::Late);
                }
            }
            // What this pass queued leaves now, in one gathered write.
            wire.frame_queued();
            let flushed = {
                let mut conn = wire.conn.borrow_mut();
                match link
                    .writer
                    .poll_write(&mut link.io, conn.output(), &outbox, cx)
                {
                    Poll::Ready(Ok(())) => true,
                    Poll::Ready(Err(e)) => return Poll::Ready(Event::Broken(e)),
                    Poll::Pending => false,
                }
            };
            let failed = wire.conn.borrow().failure().is_some();
            if link.eof && parked {
                // The sweeper's keep-alive timeout (or the client's close):
                // GOAWAY goes out with the close.
                wire.conn.borrow_mut().go_away(ErrorCode::NO_ERROR);
            }
            if (failed && flushed) || link.eof {
                return Poll::Ready(Event::Closed);
            }
            let busy_now = streams.as_ref().is_some_and(|s| !s.is_empty()) || wire.slots() > 0;
            let finished = wire.conn.borrow().goaway_final() || peer_goaway;
            if finished && !busy_now && flushed {
                return Poll::Ready(Event::Closed);
            }
            // Bytes held that have not moved for the send timeout: the
            // client stopped reading (`--send-timeout`, as HTTP/1.1).
            // The timer is moved only when it fires early: progress is
            // made far more often than it fires.
            if let Some(since) = outbox.holding_since() {
                let stall = stall
                    .get_or_insert_with(|| Box::pin(monoio::time::sleep(settings.send_timeout)));
                if stall.as_mut().poll(cx).is_ready() {
                    let deadline = Instant::from_std(since + settings.send_timeout);
                    if Instant::now() >= deadline {
                        return Poll::Ready(Event::Stalled);
                    }
                    stall.as_mut().reset(deadline);
                    let _ = stall.as_mut().poll(cx);
                }
            }
            // The keep-alive wait starts when the last open stream ends (or
            // anew with each stream taken), not when a long one began.
            if busy && !busy_now {
                idle_reset = true;
            }
            busy = busy_now;
            if idle_reset {
                idle_reset = false;
                if parked {
                    parked = false;
                    registration.unpark();
                }
                idle_since = Instant::now();
                shed_due = true;
                arm(
                    &mut idle,
                    idle_since + IDLE_GRACE.min(settings.keepalive_timeout),
                );
            }
            let timer_fired = idle
                .as_mut()
                .is_some_and(|t| t.as_mut().poll(cx).is_ready());
            if !busy_now && !going_away && handshaken && timer_fired {
                if !shed_due {
                    return Poll::Ready(Event::Idle);
                }
                // The grace passed with no stream: what the connection
                // holds goes back, and it parks for the rest of the
                // keep-alive wait.
                shed_due = false;
                if wire.conn.borrow().output_is_empty() && link.rbuf.is_empty() {
                    wire.shed();
                    link.io.shed();
                    link.rbuf = BytesMut::new();
                    stall = None;
                    idle = None;
                    streams = None;
                    parked = true;
                    registration.park(settings.keepalive_timeout.saturating_sub(IDLE_GRACE));
                } else {
                    arm(&mut idle, idle_since + settings.keepalive_timeout);
                    if idle
                        .as_mut()
                        .is_some_and(|t| t.as_mut().poll(cx).is_ready())
                    {
                        return Poll::Ready(Event::Idle);
                    }
                }
            }
            if read_cut && flushed {
                // Reading stopped short of the socket's end: another pass.
                cx.waker().wake_by_ref();
            }
            Poll::Pending
        })
        .await;
        let mut go_away = |code: ErrorCode, graceful: bool| {
            if graceful {
                wire.conn.borrow_mut().drain();
            } else {
                wire.conn.borrow_mut().go_away(code);
            }
            if !going_away {
                going_away = true;
                late = Some(Box::pin(monoio::time::sleep(settings.send_timeout)));
            }
        };
        match event {
            Event::Drain => go_away(ErrorCode::NO_ERROR, true),
            // No stream is open: no need for the PING round trip.
            Event::Idle => go_away(ErrorCode::NO_ERROR, false),
            Event::GoAway(code) => {
                if code == ErrorCode::ENHANCE_YOUR_CALM {
                    WorkerStats::add(&ctx.stats.h2_calmed, 1);
                    tracing::warn!(
                        target: crate::telemetry::peer::TARGET,
                        "HTTP/2 client reset more than --h2-max-resets streams; GOAWAY {code}"
                    );
                }
                go_away(code, code == ErrorCode::NO_ERROR)
            }
            Event::Broken(e) => {
                tracing::debug!(error = %e, "HTTP/2 connection broken");
                break;
            }
            Event::Late => {
                tracing::debug!("HTTP/2 connection did not finish after GOAWAY; closed");
                break;
            }
            Event::Stalled => {
                tracing::debug!("HTTP/2 client took no bytes for the send timeout; closed");
                break;
            }
            Event::NoHandshake => {
                tracing::debug!("HTTP/2 preface and SETTINGS did not come in time; closed");
                break;
            }
            Event::Closed => {
                if let Some(code) = wire.conn.borrow().failure() {
                    if code == ErrorCode::ENHANCE_YOUR_CALM {
                        WorkerStats::add(&ctx.stats.h2_calmed, 1);
                    }
                    // One line per connection a client made us end, within
                    // the peer-misbehaviour budget (`telemetry::peer`).
                    tracing::warn!(
                        target: crate::telemetry::peer::TARGET,
                        "HTTP/2 client broke the protocol; GOAWAY {code}, closed"
                    );
                }
                break;
            }
        }
    }
    // Whatever streams are left are cancelled with the connection; what was
    // written last (a GOAWAY) still leaves, within the send timeout, and
    // the socket is shut down (TLS: close_notify first).
    drop(streams);
    let flush = poll_fn(|cx| {
        let mut conn = wire.conn.borrow_mut();
        link.writer
            .poll_write(&mut link.io, conn.output(), &outbox, cx)
    });
    // Boxed: a timeout holds a timer, which would widen this future (and
    // the task it runs in) for the connection's whole life.
    let _ = Box::pin(monoio::time::timeout(settings.send_timeout, flush)).await;
    let shutdown = poll_fn(|cx| Pin::new(&mut link.io).poll_shutdown(cx));
    let _ = Box::pin(monoio::time::timeout(settings.send_timeout, shutdown)).await;
}
