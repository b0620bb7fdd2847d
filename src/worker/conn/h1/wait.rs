//! A connection's reads, its idle wait and its close: everything that
//! waits for the client rather than for the service. Split from `h1/mod.rs`
//! (the loop and the taking of requests), which calls into it at step 4 of
//! its flow and when it ends; it touches `Conn`'s fields as a child of the
//! folder that owns them.
//!
//! The idle wait is where memory goes back: the read buffer to the pool at
//! once, then after [`IDLE_GRACE`] the sender's storage, the log's pending
//! records and, on TLS, the stream's buffers and expanded keys, until the
//! connection waits on its socket's readiness holding nothing
//! (docs/decisions/0001-idle-reads.md, 0015-tls-transport.md).

use std::time::{Duration, Instant};

use monoio::buf::IoBufMut;

use super::super::super::registry::{Registration, DRAIN_LINGER};
use super::super::super::Driver;
use super::super::linger::{linger, Linger};
use super::super::reads::{read_grace_ready, read_grace_uring, read_timed, settle, Read};
use super::super::transport::Transport;
use super::{Conn, Stop};
use crate::app::Service;

/// How long an idle keep-alive connection on io_uring keeps a read (and its
/// buffer) in flight before giving the buffer back and waiting for
/// readiness. A closed-loop client's next request arrives within tens of
/// microseconds; a browser's idle connection waits seconds. 10 ms keeps the
/// busy path at one read per request and idle connections bufferless.
const IDLE_GRACE: Duration = Duration::from_millis(10);

/// Counts a TLS connection in `servery_tls_parked` while it is parked.
struct TlsParked<'a>(&'a crate::telemetry::WorkerStats);

impl<'a> TlsParked<'a> {
    fn new(stats: &'a crate::telemetry::WorkerStats) -> TlsParked<'a> {
        crate::telemetry::WorkerStats::add(&stats.tls_parked, 1);
        TlsParked(stats)
    }
}

impl Drop for TlsParked<'_> {
    fn drop(&mut self) {
        crate::telemetry::WorkerStats::sub(&self.0.tls_parked, 1);
    }
}

impl<H: Service, S: Transport> Conn<'_, H, S> {
    /// Read more bytes into the input. Idle connections hold no buffer
    /// while they wait (see the module doc).
    pub(super) async fn read(&mut self, registration: &Registration) -> Result<(), Stop> {
        let settings = self.ctx.settings;
        let pool = &self.ctx.pool;
        let idle = !self.input.busy();
        let wait = if idle && self.served_any {
            settings.keepalive_timeout
        } else {
            match settings
                .header_timeout
                .checked_sub(self.head_started.elapsed())
            {
                Some(left) if !left.is_zero() => left,
                _ => return Err(Stop::Quiet),
            }
        };
        let got = if idle {
            // Idle for the drain only once answered (see `Registry::register`).
            registration.set_idle(self.served_any);
            let got = self.read_idle(wait).await;
            registration.set_idle(false);
            self.head_started = Instant::now();
            match got {
                Some(Read::Data(buf)) if registration.half_closed() => {
                    self.discard_after_drain(buf).await;
                    return Err(Stop::Done);
                }
                Some(got) => got,
                None => {
                    return Err(Stop::Idle {
                        left: wait.saturating_sub(IDLE_GRACE),
                    })
                }
            }
        } else {
            let buf = self.input.prepare(pool, settings.limits.max_head_bytes);
            read_timed(&mut self.stream, buf, wait).await
        };
        match got {
            Read::Data(buf) => {
                self.input.buf = Some(buf);
                Ok(())
            }
            Read::Closed(buf) => {
                if let Some(b) = buf {
                    pool.give(b);
                }
                Err(Stop::Quiet)
            }
        }
    }

    /// The grace of an idle wait: for [`IDLE_GRACE`] (at most `wait`) the
    /// connection keeps its queue and iovec storage (and, on io_uring over
    /// plain TCP, a read in flight with a pooled buffer). `None` when the
    /// grace passed with nothing read: everything has gone back, and the
    /// caller waits for readiness outside the busy loop
    /// ([`Conn::wait_idle`]). Over TLS the grace's read takes ciphertext,
    /// which the stream is given before the request is read through it;
    /// while the stream holds plaintext or part of a record, readiness would
    /// not show it, so it reads through the stream for the whole wait.
    pub(super) async fn read_idle(&mut self, wait: Duration) -> Option<Read> {
        let pool = &self.ctx.pool;
        self.input.release(pool);
        let grace = IDLE_GRACE.min(wait);
        let Some(tcp) = self.stream.idle_socket() else {
            // TLS holding plaintext or part of a record: read through it.
            return Some(read_timed(&mut self.stream, pool.take(), wait).await);
        };
        let early = match self.ctx.driver {
            Driver::IoUring => read_grace_uring(tcp, pool, grace, &mut self.grace).await,
            Driver::Epoll => read_grace_ready(tcp, pool, grace).await,
        };
        match early {
            None => {
                self.output.release();
                self.pending.release();
                None
            }
            // Over TLS what came is ciphertext: the stream takes it, and the
            // request is read through the stream.
            Some(Read::Data(raw)) => match self.stream.arrived(raw) {
                Some(plain) => Some(Read::Data(plain)),
                None => Some(read_timed(&mut self.stream, pool.take(), wait).await),
            },
            closed => closed,
        }
    }

    /// The idle wait past the grace: parked until readable, holding no
    /// buffer and no timer (the worker's sweeper keeps the keep-alive
    /// timeout of parked connections: `registry::Registry::sweep`), then one
    /// read. `false` when the connection is done (the client closed, a drain
    /// or the sweeper shut it).
    pub(super) async fn wait_idle(&mut self, registration: &Registration, left: Duration) -> bool {
        let pool = &self.ctx.pool;
        self.stream.park();
        let Some(tcp) = self.stream.idle_socket() else {
            return false;
        };
        registration.set_idle(self.served_any);
        registration.park(left);
        let _parked = S::ENCRYPTS.then(|| TlsParked::new(&self.ctx.stats));
        let got = match tcp.readable(false).await {
            // Still parked: a spurious wake-up leaves this read waiting, and
            // the sweeper can still end it. Over TLS the read goes through
            // the stream, which reads on until a record is whole.
            Ok(()) => {
                let buf = pool.take();
                let cap = buf.capacity();
                let (res, slice) = self.stream.read_woken(buf.slice_mut(0..cap)).await;
                settle(res, slice.into_inner())
            }
            Err(_) => Read::Closed(None),
        };
        registration.unpark();
        self.head_started = Instant::now();
        match got {
            Read::Data(buf) if registration.half_closed() => {
                self.discard_after_drain(buf).await;
                false
            }
            Read::Data(buf) => {
                self.input.buf = Some(buf);
                true
            }
            Read::Closed(buf) => {
                if let Some(b) = buf {
                    pool.give(b);
                }
                // Plain TCP between requests: closing is dropping. TLS says
                // close_notify first (the sweeper shut only the read side).
                if S::ENCRYPTS {
                    self.close(registration, false).await;
                }
                false
            }
        }
    }

    /// A request crossed (or may cross) the FIN a drain sends this
    /// connection between requests: it is not answered (the client, which
    /// got no byte of a response, may retry it elsewhere: RFC 9112 §9.3.1)
    /// but read and discarded until the client closes, within
    /// [`DRAIN_LINGER`], so the close is not a reset. `buf` holds what was
    /// already read of it, if anything.
    pub(super) async fn discard_after_drain(&mut self, buf: Vec<u8>) {
        let settings = self.ctx.settings;
        let bounds = Linger {
            time: settings.lingering_time.min(DRAIN_LINGER),
            timeout: settings.lingering_timeout.min(DRAIN_LINGER),
            bytes: settings.lingering_bytes,
        };
        let (buf, end) = Box::pin(linger(&mut self.stream, buf, bounds)).await;
        tracing::trace!(?end, "drained connection discarded a crossing request");
        self.ctx.pool.give(buf);
    }

    /// End the connection: lingering when the client may still be sending,
    /// else with close_notify on TLS and a plain close on TCP.
    pub(super) async fn close(&mut self, registration: &Registration, lingering: bool) {
        let settings = self.ctx.settings;
        registration.set_idle(true);
        if lingering {
            let buf = self
                .input
                .buf
                .take()
                .unwrap_or_else(|| self.ctx.pool.take());
            self.input.start = 0;
            let bounds = Linger {
                time: settings.lingering_time,
                timeout: settings.lingering_timeout,
                bytes: settings.lingering_bytes,
            };
            // Boxed, like every rare long wait: it would widen the future of
            // every connection, idle ones included.
            let (buf, end) = Box::pin(linger(&mut self.stream, buf, bounds)).await;
            tracing::trace!(?end, "lingering close ended");
            self.ctx.pool.give(buf);
        } else if S::ENCRYPTS {
            let _ = Box::pin(monoio::time::timeout(
                settings.send_timeout,
                self.stream.shutdown(),
            ))
            .await;
        }
    }
}
