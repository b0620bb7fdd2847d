//! HTTP/2 connections (RFC 9113), framed by the `h2` crate, answered through
//! the same dispatch as HTTP/1.1.
//!
//! Owns an HTTP/2 connection's life: the settings it applies ([`Http2Conn`],
//! [`H2c`]: what `config` validated) and advertises, the task that drives
//! `h2` and its streams, GOAWAY on a drain, an idle connection's
//! end, and the connection-level defences. Does not own framing, HPACK or
//! flow-control bookkeeping (the `h2` crate), what a request means (the
//! dispatch and the service), nor the TLS handshake (`transport`).
//! Why `h2` and how it runs on a monoio worker: docs/decisions/0007.
//!
//! Flow:
//! 1. A connection arrives here from a TLS handshake that chose `h2` by
//!    ALPN, or from the HTTP/1.1 loop that saw the h2c preface first on a
//!    plain connection (`io::Prefixed` gives `h2` those bytes back).
//! 2. The handshake (the client's preface and SETTINGS) must finish within
//!    `--header-timeout`. Our SETTINGS: `--h2-max-concurrent-streams`
//!    (REFUSED_STREAM past it), `--h2-max-header-list-bytes` (a larger
//!    header block, in however many CONTINUATION frames, is refused),
//!    `--h2-header-table-bytes` (the HPACK table we keep for the client),
//!    `--h2-initial-window-bytes` (the request-body window of each stream
//!    and of the connection).
//! 3. One task polls `h2` and every open stream (`stream::answer`) together:
//!    streams never outlive their connection, and no stream is a task of
//!    its own.
//! 4. The connection ends with GOAWAY: on a drain (the last stream id, its
//!    streams finished within the drain deadline), after a service panic
//!    (once the other streams finish), after `--keepalive-timeout` with no
//!    open stream, and at once with ENHANCE_YOUR_CALM when the client resets
//!    more than `--h2-max-resets` streams in 10 s (rapid reset,
//!    CVE-2023-44487). `h2` itself refuses streams reset before they were
//!    accepted past [`PENDING_ACCEPT_RESETS`], and answers floods of
//!    SETTINGS and PING with one pending acknowledgement each.
//! 5. A GOAWAY that cannot be written (a peer that stopped reading) ends the
//!    connection after `--send-timeout`.

mod io;
mod outbox;
mod send;
mod stream;
mod tls;

use std::future::{poll_fn, Future};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::task::Poll;

use bytes::Bytes;
use futures_util::stream::{FuturesUnordered, Stream};
use h2::Reason;
use monoio::io::poll_io::{AsyncRead, AsyncWrite};

use super::super::registry::Registration;
use super::budget::ConnBudget;
use super::Ctx;
use crate::app::{Connection, Service};
use crate::choice::choice;
use crate::telemetry::WorkerStats;

pub(crate) use io::Prefixed;
pub(crate) use tls::Tls;

/// The connection preface every HTTP/2 client sends first (RFC 9113 §3.4).
pub(crate) const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Streams the client may reset before we accept them (h2's bound; hyper's
/// default): past it the connection is closed with ENHANCE_YOUR_CALM.
const PENDING_ACCEPT_RESETS: usize = 20;
/// Streams we may reset for the client's errors before the connection is
/// closed (h2's default, CVE-2024-27316-style floods of bad frames).
const LOCAL_ERROR_RESETS: usize = 1024;

/// h2's bound on buffered small DATA frames (each costs 256 less its size):
/// room for about a thousand 10-byte frames the service has not taken yet
/// (~150 KB of frame bookkeeping), up from h2's 25,600, whose hundred an
/// uploader writing small chunks reaches at once; a flood past it is
/// closed with ENHANCE_YOUR_CALM.
const SMALL_FRAME_BUDGET: usize = 256 * 1024;

/// What woke the connection task.
enum Event {
    /// The worker is draining.
    Drain,
    /// A stream asked the connection to end (see `stream::Shared`).
    GoAway(Reason),
    /// No stream open for the keep-alive timeout.
    Idle,
    /// Past the time a GOAWAY'd connection has to finish.
    Late,
    /// Bytes held unsent with no progress for the send timeout.
    Stalled,
    /// `h2` is done: closed cleanly or by an error.
    Closed(Option<h2::Error>),
    /// The socket failed under our writes.
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
    /// `stream::RESET_WINDOW`.
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

/// Serve one HTTP/2 connection over `io` (the open-connection gauge is the
/// caller's).
pub(crate) async fn serve<H, T>(
    io: T,
    registration: &Registration,
    ctx: &Rc<Ctx<H>>,
    facts: Connection,
) where
    H: Service,
    T: AsyncRead + AsyncWrite + Unpin + 'static,
{
    registration.set_idle(false);
    registration.set_h2();
    WorkerStats::add(&ctx.stats.h2_connections, 1);
    let settings = &ctx.settings;
    let limits = settings.http2;
    let mut builder = h2::server::Builder::new();
    builder
        .max_concurrent_streams(limits.max_concurrent_streams as u32)
        .max_header_list_size(limits.max_header_list_bytes as u32)
        .header_table_size(limits.header_table_bytes as u32)
        // One window per stream and the same for the connection: what a
        // client sends ahead of the services is at most this, all its
        // streams together (credit returns as each service reads).
        .initial_window_size(limits.initial_window_bytes as u32)
        .initial_connection_window_size(limits.initial_window_bytes as u32)
        .max_send_buffer_size(send::SEND_BUFFER_BYTES)
        .max_pending_accept_reset_streams(PENDING_ACCEPT_RESETS)
        .max_local_error_reset_streams(Some(LOCAL_ERROR_RESETS))
        .data_frame_budget(SMALL_FRAME_BUDGET);
    let budget = ConnBudget::new(settings.output_buffer_bytes, ctx.output.clone());
    let outbox = Rc::new(outbox::Outbox::new(budget));
    let (io, flusher) = io::deferred(io, outbox.clone());
    let handshake = builder.handshake::<io::Deferred<T>, Bytes>(io);
    let handshake = async {
        let mut handshake = pin!(handshake);
        poll_fn(|cx| {
            let done = handshake.as_mut().poll(cx).map_err(|e| e.to_string());
            if let Poll::Ready(Err(e)) = flusher.poll_flush(cx) {
                return Poll::Ready(Err(e.to_string()));
            }
            done
        })
        .await
    };
    let mut conn = match monoio::time::timeout(settings.header_timeout, handshake).await {
        Ok(Ok(conn)) => conn,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, "HTTP/2 handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!("HTTP/2 handshake timed out");
            return;
        }
    };

    let shared = stream::Shared::new(outbox.clone(), ctx.alt_svc_value(&facts).cloned());
    let mut streams = FuturesUnordered::new();
    // Until its first stream a connection has the header timeout, as an
    // HTTP/1.1 one has for its first request; then the keep-alive timeout.
    let mut idle = pin!(monoio::time::sleep(settings.header_timeout));
    let mut late = pin!(monoio::time::sleep(settings.send_timeout));
    let mut stall = pin!(monoio::time::sleep(settings.send_timeout));
    let mut going_away = false;
    let mut idle_reset = false;
    let mut busy = false;
    if ctx.draining.get() {
        conn.graceful_shutdown();
        going_away = true;
    }
    loop {
        let event = poll_fn(|cx| {
            if !going_away && registration.poll_drain(cx).is_ready() {
                return Poll::Ready(Event::Drain);
            }
            if let Some(reason) = shared.goaway.take() {
                return Poll::Ready(Event::GoAway(reason));
            }
            // Take every stream the read brought, answer them, then let
            // `h2` write what they queued: one write for the batch.
            loop {
                while let Poll::Ready(Some(())) = Pin::new(&mut streams).poll_next(cx) {}
                let mut accepted = false;
                loop {
                    match conn.poll_accept(cx) {
                        Poll::Ready(Some(Ok((req, respond)))) => {
                            WorkerStats::add(&ctx.stats.h2_streams, 1);
                            streams.push(stream::answer(ctx, &shared, req, respond, facts));
                            accepted = true;
                        }
                        Poll::Ready(Some(Err(e))) => return Poll::Ready(Event::Closed(Some(e))),
                        Poll::Ready(None) => return Poll::Ready(Event::Closed(None)),
                        Poll::Pending => break,
                    }
                }
                if !accepted {
                    break;
                }
                idle_reset = true;
            }
            if going_away && late.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Late);
            }
            // What this pass wrote leaves now, in one write.
            if let Poll::Ready(Err(e)) = flusher.poll_flush(cx) {
                return Poll::Ready(Event::Broken(e));
            }
            // Streams reset after their answers ended give back their bytes.
            outbox.poll_parked(cx);
            // Bytes held that have not moved for the send timeout: the
            // client stopped reading (`--send-timeout`, as HTTP/1.1).
            // The timer is moved only when it fires early: progress is
            // made far more often than it fires.
            if let Some(since) = outbox.holding_since() {
                if stall.as_mut().poll(cx).is_ready() {
                    let deadline = monoio::time::Instant::from_std(since + settings.send_timeout);
                    if monoio::time::Instant::now() >= deadline {
                        return Poll::Ready(Event::Stalled);
                    }
                    stall.as_mut().reset(deadline);
                    let _ = stall.as_mut().poll(cx);
                }
            }
            // The keep-alive wait starts when the last open stream ends (or
            // anew with each stream taken), not when a long one began.
            let busy_now = !streams.is_empty();
            if busy && !busy_now {
                idle_reset = true;
            }
            busy = busy_now;
            if idle_reset {
                idle_reset = false;
                let deadline = monoio::time::Instant::now() + settings.keepalive_timeout;
                idle.as_mut().reset(deadline);
            }
            if streams.is_empty() && !going_away && idle.as_mut().poll(cx).is_ready() {
                return Poll::Ready(Event::Idle);
            }
            Poll::Pending
        })
        .await;
        // Graceful: GOAWAY(2^31-1), a PING round trip, then GOAWAY with the
        // last stream taken (RFC 9113 §6.8); else GOAWAY with it at once.
        let mut go_away = |conn: &mut h2::server::Connection<io::Deferred<T>, Bytes>,
                           reason: Reason,
                           graceful: bool| {
            if graceful {
                conn.graceful_shutdown();
            } else {
                conn.abrupt_shutdown(reason);
            }
            if !going_away {
                going_away = true;
                let deadline = monoio::time::Instant::now() + settings.send_timeout;
                late.as_mut().reset(deadline);
            }
        };
        match event {
            Event::Drain => go_away(&mut conn, Reason::NO_ERROR, true),
            // No stream is open: no need for the PING round trip.
            Event::Idle => go_away(&mut conn, Reason::NO_ERROR, false),
            Event::GoAway(reason) => {
                if reason == Reason::ENHANCE_YOUR_CALM {
                    WorkerStats::add(&ctx.stats.h2_calmed, 1);
                    tracing::debug!("too many HTTP/2 stream resets; GOAWAY ENHANCE_YOUR_CALM");
                }
                go_away(&mut conn, reason, reason == Reason::NO_ERROR)
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
            Event::Closed(e) => {
                if let Some(e) = e {
                    if e.reason() == Some(Reason::ENHANCE_YOUR_CALM) {
                        WorkerStats::add(&ctx.stats.h2_calmed, 1);
                    }
                    tracing::debug!(error = %e, "HTTP/2 connection ended");
                }
                break;
            }
        }
    }
    // Whatever streams are left are cancelled with the connection; what
    // `h2` wrote last (its GOAWAY) still leaves, within the send timeout.
    drop(streams);
    let _ =
        monoio::time::timeout(settings.send_timeout, poll_fn(|cx| flusher.poll_flush(cx))).await;
    let _ = monoio::time::timeout(settings.send_timeout, poll_fn(|cx| conn.poll_closed(cx))).await;
}
