//! HTTP/3 connections (RFC 9114): the `h3` crate over the worker's QUIC
//! endpoint (`worker::quic`), each request answered through the same
//! dispatch, response finish and request record as HTTP/1.1 and HTTP/2.
//!
//! Flow:
//! 1. The QUIC driver hands over a connection whose handshake completed;
//!    [`serve`] runs `h3`'s server side on it (SETTINGS, the control and
//!    QPACK streams) and accepts request streams, each answered by a task
//!    of its own (`stream`): `h3` reads the request, and the answer is
//!    written by us (`frames`, `out`).
//! 2. At a drain the connection sends GOAWAY (`h3`'s `shutdown`: no
//!    request after those it accepted), answers the requests it had
//!    accepted and then closes with H3_NO_ERROR; a request the client sent
//!    meanwhile was not processed, and the client sends it again elsewhere
//!    (RFC 9114 §5.2).
//! 3. The connection ends when the client closes it, at the idle timeout
//!    (QUIC's), or at the drain deadline (the worker cuts what is left).
//!
//! A client that resets (or stops reading) more than `--h3-max-resets`
//! requests in [`RESET_WINDOW`] has its connection closed with
//! H3_EXCESSIVE_LOAD: QUIC returns stream credit as streams end, so stream
//! limits alone do not bound how fast requests can be opened and cancelled.
//!
//! A request stream whose HEADERS frame has not arrived within
//! `--header-timeout` is dropped (its stream stopped and reset).
//!
//! Limits are QUIC's (`--h3-max-streams`, the receive windows; see
//! `worker::quic::config`) and HTTP/3's: a request's field section is at
//! most `--max-head-bytes` decoded (SETTINGS_MAX_FIELD_SECTION_SIZE), and
//! QPACK's dynamic table is not offered (`h3` sets its capacity to 0), so
//! no client can make a connection hold a table.

mod frames;
mod out;
mod stream;

use std::cell::Cell;
use std::future::{poll_fn, Future};
use std::rc::Rc;
use std::task::Poll;
use std::time::{Duration, Instant};

use super::Ctx;
use crate::app::{Alpn, Connection, Service, Tls};
use crate::telemetry::WorkerStats;
use crate::worker::quic::{Conn, Watch, H3_NO_ERROR};

/// The window `--h3-max-resets` counts over.
pub(crate) const RESET_WINDOW: Duration = Duration::from_secs(10);
/// H3_EXCESSIVE_LOAD (RFC 9114 §8.1).
const H3_EXCESSIVE_LOAD: u64 = 0x107;

/// What a connection's request tasks share with it.
pub(super) struct Shared {
    watch: Watch,
    /// The connection's output budget (`out`).
    budget: super::budget::ConnBudget,
    /// Client resets in the current window: (its start, how many).
    resets: Cell<Option<(Instant, usize)>>,
    max_resets: usize,
}

impl Shared {
    /// A request was reset or abandoned by the client: count it; past the
    /// limit, close the connection.
    pub(super) fn reset_by_client(&self, stats: &WorkerStats) {
        WorkerStats::add(&stats.h3_resets, 1);
        let now = Instant::now();
        let (start, n) = match self.resets.get() {
            Some((start, n)) if now.duration_since(start) < RESET_WINDOW => (start, n + 1),
            _ => (now, 1),
        };
        self.resets.set(Some((start, n)));
        if n == self.max_resets + 1 {
            tracing::debug!(resets = n, "HTTP/3 client resets past the limit; closing");
            self.watch.close(H3_EXCESSIVE_LOAD);
        }
    }
}

/// Read one request's head and answer it. The head usually arrives with
/// the stream: the header timeout's timer is made only when it has not
/// (a monoio `Sleep` is 640 bytes, and a timer to set and clear), and the
/// answer's future is boxed, so what is spawned per request stays small.
async fn request<H: Service>(
    ctx: Rc<Ctx<H>>,
    watch: Rc<Shared>,
    resolver: h3::server::RequestResolver<Conn, bytes::Bytes>,
    facts: Connection,
) {
    let limit = ctx.settings.header_timeout;
    // Boxed and dropped once resolved: a task's size is its largest state,
    // and this one's is held by every open request.
    let resolved = timed(limit, Box::pin(resolver.resolve_request())).await;
    match resolved {
        Some(Ok((req, stream))) => Box::pin(stream::answer(&ctx, &watch, req, stream, facts)).await,
        Some(Err(e)) => tracing::debug!(error = %e, "HTTP/3 request refused"),
        // A stream whose HEADERS do not arrive within the header timeout
        // holds nothing longer (its drop resets it).
        None => tracing::debug!("HTTP/3 request head not received in time; dropped"),
    }
    watch.watch.wake();
}

/// `f`'s output, or `None` if it is not done within `limit`; a timer only
/// for what had to wait (most heads and writes do not).
async fn timed<F: Future>(limit: Duration, f: F) -> Option<F::Output> {
    let mut f = std::pin::pin!(f);
    let mut late: Option<std::pin::Pin<Box<monoio::time::Sleep>>> = None;
    poll_fn(|cx| {
        if let Poll::Ready(r) = f.as_mut().poll(cx) {
            return Poll::Ready(Some(r));
        }
        let sleep = late.get_or_insert_with(|| Box::pin(monoio::time::sleep(limit)));
        sleep.as_mut().poll(cx).map(|()| None)
    })
    .await
}

/// Serve one HTTP/3 connection until it ends.
pub(crate) async fn serve<H: Service>(ctx: Rc<Ctx<H>>, conn: Conn) {
    let id = ctx.connections.get();
    ctx.connections.set(id + 1);
    let site = conn
        .server_name()
        .and_then(|name| ctx.sites.route(name.as_bytes()));
    let facts = Connection {
        peer: conn.remote(),
        worker: ctx.index,
        id,
        tls: Some(Tls {
            alpn: Some(Alpn::H3),
            version: Some("TLSv1.3"),
            resumed: false,
            site,
        }),
        local_port: conn.local_port(),
    };
    let watch = Rc::new(Shared {
        watch: conn.watch(),
        budget: super::budget::ConnBudget::new(
            ctx.settings.output_buffer_bytes,
            ctx.output.clone(),
        ),
        resets: Cell::new(None),
        max_resets: ctx.settings.http3.max_resets,
    });
    let limits = &ctx.settings.limits;
    let built = h3::server::builder()
        .max_field_section_size(limits.max_head_bytes as u64)
        .send_grease(true)
        .build::<_, bytes::Bytes>(conn)
        .await;
    let mut h3 = match built {
        Ok(h3) => h3,
        Err(e) => {
            tracing::debug!(error = %e, "HTTP/3 connection failed to start");
            return;
        }
    };
    let mut draining = false;
    loop {
        enum Next<R> {
            Request(R),
            Drain,
            Drained,
        }
        let next = {
            let accept = h3.accept();
            let mut accept = std::pin::pin!(accept);
            poll_fn(|cx| {
                if draining {
                    // Every accepted request answered: close.
                    if Rc::strong_count(&watch) == 1 {
                        return Poll::Ready(Next::Drained);
                    }
                    watch.watch.park(cx);
                } else if watch.watch.poll_drain(cx).is_ready() {
                    return Poll::Ready(Next::Drain);
                }
                accept.as_mut().poll(cx).map(Next::Request)
            })
            .await
        };
        match next {
            Next::Drained => break,
            Next::Drain => {
                draining = true;
                // GOAWAY: no request after those accepted (RFC 9114 §5.2).
                if let Err(e) = h3.shutdown(0).await {
                    tracing::debug!(error = %e, "HTTP/3 GOAWAY failed");
                    break;
                }
            }
            Next::Request(Ok(Some(resolver))) => {
                crate::telemetry::WorkerStats::add(&ctx.stats.h3_streams, 1);
                let ctx = ctx.clone();
                let watch = watch.clone();
                monoio::spawn(request(ctx, watch, resolver, facts));
            }
            Next::Request(Ok(None)) => break,
            Next::Request(Err(e)) => {
                tracing::debug!(error = %e, "HTTP/3 connection ended");
                break;
            }
        }
    }
    // Requests still being answered hold `watch`; the connection closes
    // once the last one is done (or the client or the drain deadline ends
    // it first).
    poll_fn(|cx| {
        if Rc::strong_count(&watch) == 1 {
            Poll::Ready(())
        } else {
            watch.watch.park(cx);
            Poll::Pending
        }
    })
    .await;
    drop(h3);
    watch.watch.close(H3_NO_ERROR as u64);
}
