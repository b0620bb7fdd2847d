//! A worker's QUIC endpoint: quinn-proto's `Endpoint`, its connections and
//! their timers, and the wakers of the tasks that use them.
//!
//! Owns the state the driver (`super::drive`) and the HTTP/3 connection
//! tasks (through `super::streams`) share on the worker's thread: one
//! `RefCell`, borrowed only between awaits. A task that changes a
//! connection (writes, reads that return credit, opens or closes a stream)
//! marks it touched and wakes the driver, which then takes the connection's
//! events (waking the tasks waiting on them), sends what it has to send and
//! sets its timer. Connections are never polled in a loop: only what was
//! touched, what received a datagram and what a timer is due for.
//!
//! Bounds: `--max-connections` connections per worker (past it a new one is
//! refused with CONNECTION_REFUSED); past `--h3-retry-threshold` handshakes
//! in progress a client whose address is not validated is sent a Retry
//! first (a stateless packet; quinn-proto keeps the 3x anti-amplification
//! limit until the address is validated either way); a handshake not done
//! within `--tls-handshake-timeout` is closed; the response bytes a
//! connection holds are bounded by a send window lent from the worker's
//! output budget (`super::window`); everything else a connection may hold
//! is quinn-proto's, bounded by the transport settings (`super::config`).

use std::cell::{Cell, RefCell};
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, SocketAddr};
use std::rc::Rc;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_proto::{
    Connection, ConnectionError, ConnectionHandle, DatagramEvent, EcnCodepoint, Endpoint, Event,
    StreamEvent, StreamId, Transmit, VarInt,
};

use super::window::Window;
use crate::telemetry::WorkerStats;
use crate::worker::budget::WorkerBudget;

/// Maps keyed by numbers we or quinn-proto chose (connection handles,
/// stream IDs), never by a client's bytes: hashed as they are, without
/// SipHash's cost (a lookup or two per stream event).
type Map<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<Plain>>;

/// The identity hash of an integer key.
#[derive(Default)]
pub(crate) struct Plain(u64);

impl Hasher for Plain {
    fn finish(&self) -> u64 {
        // Spread the low bits hashbrown groups by.
        self.0.wrapping_mul(0x9e37_79b9_7f4a_7c15)
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 << 8) | u64::from(b);
        }
    }

    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = n as u64;
    }
}

/// Timer entries per connection, live and stale, past which the heap is
/// rebuilt from the live ones: it holds at most this many per connection.
const TIMERS_PER_CONNECTION: usize = 4;

/// Make `timers` hold exactly the `live` (deadline, connection) entries.
fn compact(
    timers: &mut BinaryHeap<Reverse<(Instant, usize)>>,
    live: impl Iterator<Item = (Instant, usize)>,
) {
    let mut entries = std::mem::take(timers).into_vec();
    entries.clear();
    entries.extend(live.map(Reverse));
    *timers = BinaryHeap::from(entries);
}

/// HTTP/3's "no error" (RFC 9114 §8.1), the code of a graceful close.
pub(crate) const H3_NO_ERROR: u32 = 0x100;

/// What the driver and the connection tasks share.
pub(crate) struct Quic {
    inner: RefCell<Inner>,
    /// The driver, waiting for touched connections, datagrams or a timer.
    driver: Cell<Option<Waker>>,
    draining: Cell<bool>,
    pub(crate) limits: Limits,
    /// A newer generation reads this endpoint's socket now; its datagrams
    /// come through the inbox (`forward`).
    handed_over: Cell<bool>,
    stats: Arc<WorkerStats>,
    /// The worker's output budget, which lends connections their send
    /// windows.
    pub(crate) output: Rc<WorkerBudget>,
    /// The UDP port.
    port: u16,
}

/// What the endpoint enforces itself.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// `--max-connections`.
    pub(crate) max_connections: usize,
    /// `--tls-handshake-timeout`.
    pub(crate) handshake_timeout: Duration,
    /// `--h3-retry-threshold`.
    pub(crate) retry_threshold: usize,
    /// `--output-buffer-bytes`: the most send window a connection is lent
    /// (`super::window`).
    pub(crate) output_buffer_bytes: u64,
}

struct Inner {
    endpoint: Endpoint,
    conns: Map<ConnectionHandle, Slot>,
    /// Connections' deadlines, earliest first; an entry whose connection
    /// has another deadline now is stale and skipped.
    timers: BinaryHeap<Reverse<(Instant, usize)>>,
    /// Connections to process, each once (`Slot::touched`).
    touched: Vec<ConnectionHandle>,
    /// Connections whose handshake completed, for the driver to serve.
    connected: Vec<ConnectionHandle>,
    /// Connections still in their handshake.
    handshaking: usize,
}

/// One connection and who waits on it.
pub(crate) struct Slot {
    pub(crate) conn: Connection,
    /// The deadline in `timers` for it.
    timer: Option<Instant>,
    /// Until the handshake is done.
    handshake_deadline: Option<Instant>,
    touched: bool,
    pub(crate) wakers: Wakers,
    /// Why it ended, once it has.
    pub(crate) lost: Option<ConnectionError>,
    /// Its send window and the streams holding bytes in it.
    pub(crate) window: Window,
    /// Request streams whose answer was written and finished straight to
    /// quinn-proto (`super::answer`), until `h3`'s half of them is dropped:
    /// that half must not reset them.
    pub(crate) answered: Vec<StreamId>,
}

/// The tasks waiting on a connection.
#[derive(Default)]
pub(crate) struct Wakers {
    /// For a stream the client opens, by direction (`Dir as usize`).
    pub(crate) accept: [Option<Waker>; 2],
    /// For room to open a stream of ours, by direction.
    pub(crate) open: [Option<Waker>; 2],
    pub(crate) read: Map<StreamId, Waker>,
    pub(crate) write: Map<StreamId, Waker>,
    /// The connection's task, for a drain.
    pub(crate) drain: Option<Waker>,
}

impl Wakers {
    fn all(&mut self) {
        let read = self.read.drain().map(|(_, w)| w);
        let write = self.write.drain().map(|(_, w)| w);
        let rest = self
            .accept
            .iter_mut()
            .chain(self.open.iter_mut())
            .chain(std::iter::once(&mut self.drain))
            .filter_map(Option::take);
        for w in read.chain(write).chain(rest).collect::<Vec<_>>() {
            w.wake();
        }
    }
}

/// What became of a datagram: a response the endpoint made itself (a
/// version negotiation, a retry, a refusal, a stateless reset) to send.
pub(super) struct Response {
    pub(super) transmit: Transmit,
}

impl Quic {
    pub(super) fn new(
        endpoint: Endpoint,
        stats: Arc<WorkerStats>,
        output: Rc<WorkerBudget>,
        limits: Limits,
        port: u16,
    ) -> Quic {
        Quic {
            inner: RefCell::new(Inner {
                endpoint,
                conns: Map::default(),
                timers: BinaryHeap::new(),
                touched: Vec::new(),
                connected: Vec::new(),
                handshaking: 0,
            }),
            driver: Cell::new(None),
            draining: Cell::new(false),
            handed_over: Cell::new(false),
            stats,
            output,
            limits,
            port,
        }
    }

    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    /// Open connections (handshaking, serving or closing).
    pub(crate) fn open(&self) -> usize {
        self.inner.borrow().conns.len()
    }

    pub(crate) fn draining(&self) -> bool {
        self.draining.get()
    }

    pub(crate) fn handed_over(&self) -> bool {
        self.handed_over.get()
    }

    /// A newer generation has taken the socket: stop reading it.
    pub(crate) fn hand_over(&self) {
        self.handed_over.set(true);
        self.wake();
    }

    /// Wake the driver (datagrams were fed to the endpoint from elsewhere).
    pub(crate) fn wake(&self) {
        if let Some(w) = self.driver.take() {
            w.wake();
        }
    }

    /// Run `f` on connection `h`; `None` once it is gone.
    pub(crate) fn with<R>(&self, h: ConnectionHandle, f: impl FnOnce(&mut Slot) -> R) -> Option<R> {
        self.inner.borrow_mut().conns.get_mut(&h).map(f)
    }

    /// `h` has something to process or send: queue it and wake the driver.
    pub(crate) fn touch(&self, h: ConnectionHandle) {
        let mut inner = self.inner.borrow_mut();
        if let Some(slot) = inner.conns.get_mut(&h) {
            if !slot.touched {
                slot.touched = true;
                inner.touched.push(h);
            }
        }
        drop(inner);
        if let Some(w) = self.driver.take() {
            w.wake();
        }
    }

    /// The driver waits: wake it with `w`.
    pub(super) fn park_driver(&self, w: &Waker) {
        self.driver.set(Some(w.clone()));
    }

    pub(super) fn has_touched(&self) -> bool {
        !self.inner.borrow().touched.is_empty()
    }

    /// Feed one datagram to the endpoint.
    pub(super) fn datagram(
        &self,
        now: Instant,
        remote: SocketAddr,
        local_ip: Option<IpAddr>,
        ecn: Option<EcnCodepoint>,
        data: &[u8],
        buf: &mut Vec<u8>,
    ) -> Option<Response> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        // quinn-proto appends what it answers to `buf` and says its size:
        // it must start empty, or an answer would carry the last one's
        // bytes before its own.
        buf.clear();
        let event = inner
            .endpoint
            .handle(now, remote, local_ip, ecn, BytesMut::from(data), buf)?;
        match event {
            DatagramEvent::ConnectionEvent(h, event) => {
                if let Some(slot) = inner.conns.get_mut(&h) {
                    slot.conn.handle_event(event);
                    if !slot.touched {
                        slot.touched = true;
                        inner.touched.push(h);
                    }
                }
                None
            }
            DatagramEvent::Response(transmit) => Some(Response { transmit }),
            DatagramEvent::NewConnection(incoming) => {
                if self.draining.get() || inner.conns.len() >= self.limits.max_connections {
                    WorkerStats::add(&self.stats.h3_refused, 1);
                    let transmit = inner.endpoint.refuse(incoming, buf);
                    return Some(Response { transmit });
                }
                if inner.handshaking >= self.limits.retry_threshold
                    && !incoming.remote_address_validated()
                    && incoming.may_retry()
                {
                    WorkerStats::add(&self.stats.h3_retries, 1);
                    return match inner.endpoint.retry(incoming, buf) {
                        Ok(transmit) => Some(Response { transmit }),
                        Err(e) => {
                            inner.endpoint.ignore(e.into_incoming());
                            None
                        }
                    };
                }
                match inner.endpoint.accept(incoming, now, buf, None) {
                    Ok((h, conn)) => {
                        inner.handshaking += 1;
                        let deadline = now + self.limits.handshake_timeout;
                        inner.conns.insert(
                            h,
                            Slot {
                                conn,
                                timer: None,
                                handshake_deadline: Some(deadline),
                                touched: true,
                                wakers: Wakers::default(),
                                lost: None,
                                window: Window::default(),
                                answered: Vec::new(),
                            },
                        );
                        inner.timers.push(Reverse((deadline, h.0)));
                        inner.touched.push(h);
                        None
                    }
                    Err(e) => {
                        WorkerStats::add(&self.stats.h3_refused, 1);
                        e.response.map(|transmit| Response { transmit })
                    }
                }
            }
        }
    }

    /// Run the timers due by `now`.
    pub(super) fn fire_timers(&self, now: Instant) {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        while let Some(&Reverse((at, h))) = inner.timers.peek() {
            if at > now {
                break;
            }
            inner.timers.pop();
            let h = ConnectionHandle(h);
            let Some(slot) = inner.conns.get_mut(&h) else {
                continue;
            };
            let mut due = false;
            if slot.timer == Some(at) {
                slot.timer = None;
                slot.conn.handle_timeout(now);
                due = true;
            }
            if slot.handshake_deadline.is_some_and(|d| d <= now) {
                slot.handshake_deadline = None;
                inner.handshaking -= 1;
                if slot.conn.is_handshaking() {
                    WorkerStats::add(&self.stats.h3_handshake_timeouts, 1);
                    slot.conn.close(
                        now,
                        VarInt::from_u32(0),
                        bytes::Bytes::from_static(b"handshake timeout"),
                    );
                }
                due = true;
            }
            if due && !slot.touched {
                slot.touched = true;
                inner.touched.push(h);
            }
        }
    }

    /// The next touched connection, taken off the queue.
    pub(super) fn next_touched(&self) -> Option<ConnectionHandle> {
        let mut inner = self.inner.borrow_mut();
        let h = inner.touched.pop()?;
        if let Some(slot) = inner.conns.get_mut(&h) {
            slot.touched = false;
        }
        Some(h)
    }

    /// Take `h`'s events: the endpoint's (new IDs, retirements, its end)
    /// and the application's (wake who waits). `false` once it is gone.
    pub(super) fn process(&self, h: ConnectionHandle) -> bool {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(slot) = inner.conns.get_mut(&h) else {
            return false;
        };
        let mut drained = false;
        while let Some(event) = slot.conn.poll_endpoint_events() {
            drained |= event.is_drained();
            if let Some(back) = inner.endpoint.handle_event(h, event) {
                slot.conn.handle_event(back);
            }
        }
        let mut wake: Vec<Waker> = Vec::new();
        while let Some(event) = slot.conn.poll() {
            match event {
                Event::HandshakeDataReady | Event::DatagramReceived | Event::DatagramsUnblocked => {
                }
                Event::Connected => {
                    if slot.handshake_deadline.take().is_some() {
                        inner.handshaking -= 1;
                    }
                    inner.connected.push(h);
                }
                Event::ConnectionLost { reason } => {
                    slot.lost = Some(reason);
                    slot.wakers.all();
                }
                Event::Stream(StreamEvent::Opened { dir }) => {
                    wake.extend(slot.wakers.accept[dir as usize].take());
                }
                Event::Stream(StreamEvent::Available { dir }) => {
                    wake.extend(slot.wakers.open[dir as usize].take());
                }
                Event::Stream(StreamEvent::Readable { id }) => {
                    wake.extend(slot.wakers.read.remove(&id));
                }
                Event::Stream(StreamEvent::Writable { id }) => {
                    wake.extend(slot.wakers.write.remove(&id));
                }
                Event::Stream(StreamEvent::Finished { id }) => {
                    slot.window.released(id, &mut slot.conn, &self.output);
                    wake.extend(slot.wakers.write.remove(&id));
                }
                Event::Stream(StreamEvent::Stopped { id, .. }) => {
                    // Its writer sees the stop and resets it (RFC 9000
                    // §3.5), which frees what it held.
                    wake.extend(slot.wakers.write.remove(&id));
                }
            }
        }
        if drained {
            if let Some(mut slot) = inner.conns.remove(&h) {
                if slot.handshake_deadline.is_some() {
                    inner.handshaking -= 1;
                }
                slot.window.repay(&self.output);
                slot.wakers.all();
            }
            if self.draining.get() && inner.conns.is_empty() {
                if let Some(w) = self.driver.take() {
                    wake.push(w);
                }
            }
        }
        for w in wake {
            w.wake();
        }
        !drained
    }

    /// `h`'s next datagrams to send (a GSO batch of up to `segments`),
    /// written into `buf`.
    pub(super) fn poll_transmit(
        &self,
        h: ConnectionHandle,
        now: Instant,
        segments: usize,
        buf: &mut Vec<u8>,
    ) -> Option<Transmit> {
        let mut inner = self.inner.borrow_mut();
        let slot = inner.conns.get_mut(&h)?;
        buf.clear();
        slot.conn.poll_transmit(now, segments, buf)
    }

    /// Set `h`'s timer to what it now wants.
    pub(super) fn rearm(&self, h: ConnectionHandle) {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let Some(slot) = inner.conns.get_mut(&h) else {
            return;
        };
        let want = slot.conn.poll_timeout();
        if want != slot.timer {
            slot.timer = want;
            if let Some(at) = want {
                inner.timers.push(Reverse((at, h.0)));
            }
        }
        // A timer that moves leaves its old entry behind until that entry's
        // time comes (an idle timeout's, 30 s on): past a few entries per
        // connection, keep only the live ones.
        if inner.timers.len() > TIMERS_PER_CONNECTION * inner.conns.len() + 64 {
            let live = inner.conns.iter().flat_map(|(h, s)| {
                [s.timer, s.handshake_deadline]
                    .into_iter()
                    .flatten()
                    .map(move |at| (at, h.0))
            });
            compact(&mut inner.timers, live);
        }
    }

    /// The earliest deadline of any connection.
    pub(super) fn next_deadline(&self) -> Option<Instant> {
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        // Stale entries at the top are dropped here, so the driver does not
        // wake for them.
        while let Some(&Reverse((at, h))) = inner.timers.peek() {
            let live = inner
                .conns
                .get(&ConnectionHandle(h))
                .is_some_and(|s| s.timer == Some(at) || s.handshake_deadline == Some(at));
            if live {
                return Some(at);
            }
            inner.timers.pop();
        }
        None
    }

    /// Connections whose handshakes completed since the last call.
    pub(super) fn take_connected(&self) -> Vec<ConnectionHandle> {
        std::mem::take(&mut self.inner.borrow_mut().connected)
    }

    /// Stop taking connections; tell each connection's task (it sends
    /// GOAWAY and closes once its requests are answered).
    pub(crate) fn drain(&self) {
        if self.draining.replace(true) {
            return;
        }
        let mut inner = self.inner.borrow_mut();
        let mut wake: Vec<Waker> = inner
            .conns
            .values_mut()
            .filter_map(|s| s.wakers.drain.take())
            .collect();
        wake.extend(self.driver.take());
        drop(inner);
        for w in wake {
            w.wake();
        }
    }

    /// Close every connection now (the drain's deadline); how many were open.
    pub(crate) fn cut_all(&self) -> usize {
        let now = Instant::now();
        let mut inner = self.inner.borrow_mut();
        let inner = &mut *inner;
        let mut n = 0;
        for (&h, slot) in inner.conns.iter_mut() {
            if slot.lost.is_none() {
                n += 1;
                slot.conn.close(
                    now,
                    VarInt::from_u32(H3_NO_ERROR),
                    bytes::Bytes::from_static(b"server shutting down"),
                );
            }
            if !slot.touched {
                slot.touched = true;
                inner.touched.push(h);
            }
        }
        if let Some(w) = self.driver.take() {
            w.wake();
        }
        n
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_compacted_heap_holds_only_the_live_timers_in_order() {
        let now = Instant::now();
        let at = |ms| now + Duration::from_millis(ms);
        let mut timers = BinaryHeap::new();
        // Connection 1's timer moved 1,000 times; connection 2's twice.
        for ms in 0..1000 {
            timers.push(Reverse((at(ms), 1)));
        }
        timers.push(Reverse((at(5), 2)));
        timers.push(Reverse((at(7), 2)));
        compact(&mut timers, [(at(999), 1), (at(7), 2)].into_iter());
        assert_eq!(timers.len(), 2);
        assert_eq!(timers.pop(), Some(Reverse((at(7), 2))));
        assert_eq!(timers.pop(), Some(Reverse((at(999), 1))));
    }
}
