//! What one HTTP/2 connection's streams have handed over and not yet
//! written: every DATA byte is counted from before it is read or handed over
//! until it reaches the socket, against the connection's and the worker's
//! output budgets (`worker::budget`).
//!
//! Owns the per-stream counts, the frame scan that sees DATA leave, and the
//! time of the connection's last progress. Does not own flow control
//! (`http::h2::Conn`) nor when a stalled connection closes (`h2::serve`).
//!
//! Why a scan: handed bytes wait in the stream's slot for the peer's window,
//! then in the connection's output as DATA frames (RFC 9113 §4.1) until the
//! socket takes them, so [`FrameScan`] reads the 9-byte frame headers of
//! what the socket took and credits each DATA payload to its stream. Bytes
//! of a stream reset before they were framed are given back at once
//! ([`Outbox::dropped`]); framed ones stay counted until written.
//!
//! Flow:
//! 1. A stream takes a grant ([`Outbox::poll_take`]) before it reads a file
//!    chunk or hands bytes over; what it does not use it gives back
//!    ([`Outbox::unused`]).
//! 2. The connection's writer calls [`Outbox::written`] with each DATA
//!    payload the socket took: the stream's count and the budgets go down.
//! 3. When the connection ends, what it held goes back with its budget.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::task::{Context, Poll};
use std::time::Instant;

use super::super::budget::{ConnBudget, Ticket};
use crate::http::h2::conn::IdHasher;

/// One stream's bytes: granted, handed or not, and not yet written.
struct Entry {
    unsent: usize,
    /// Of `unsent`, the bytes handed over (the rest is granted and not
    /// handed yet: a file chunk being read, credit being waited for).
    handed: usize,
}

/// Streams by id.
type ById<T> = HashMap<u32, T, BuildHasherDefault<IdHasher>>;

/// A connection's unsent DATA, by stream.
pub(super) struct Outbox {
    budget: ConnBudget,
    /// Only streams with bytes unsent have an entry (streams with an answer
    /// running, or bytes of one still queued or framed).
    streams: RefCell<ById<Entry>>,
    /// Bytes handed over and not yet written, all streams together.
    handed: Cell<usize>,
    /// When bytes last reached the socket, or when the connection began to
    /// hold handed bytes.
    progress: Cell<Instant>,
}

impl Outbox {
    pub(super) fn new(budget: ConnBudget) -> Outbox {
        Outbox {
            budget,
            streams: RefCell::new(ById::default()),
            handed: Cell::new(0),
            progress: Cell::new(Instant::now()),
        }
    }

    /// Take up to `want` bytes for stream `id` (see `ConnBudget::poll_take`).
    pub(super) fn poll_take(
        &self,
        cx: &Context<'_>,
        ticket: &mut Ticket,
        id: u32,
        want: usize,
    ) -> Poll<usize> {
        let n = std::task::ready!(self.budget.poll_take(cx, ticket, want));
        self.granted(id, n);
        Poll::Ready(n)
    }

    /// What `poll_take` would grant stream `id` at once with no place in
    /// line (see `ConnBudget::try_take`), or `None`.
    pub(super) fn try_take(&self, id: u32, want: usize) -> Option<usize> {
        let n = self.budget.try_take(want)?;
        self.granted(id, n);
        Some(n)
    }

    fn granted(&self, id: u32, n: usize) {
        if n > 0 {
            let mut streams = self.streams.borrow_mut();
            let e = streams.entry(id).or_insert(Entry {
                unsent: 0,
                handed: 0,
            });
            e.unsent += n;
        }
    }

    /// `n` granted bytes of stream `id` were handed over.
    pub(super) fn handed(&self, id: u32, n: usize) {
        if let Some(e) = self.streams.borrow_mut().get_mut(&id) {
            let n = n.min(e.unsent - e.handed);
            e.handed += n;
            if self.handed.get() == 0 && n > 0 {
                // The stall clock starts with the first byte handed.
                self.progress.set(Instant::now());
            }
            self.handed.set(self.handed.get() + n);
        }
    }

    /// Leave the queue without a grant (the stream gave up).
    pub(super) fn leave(&self, ticket: &mut Ticket) {
        self.budget.leave(ticket);
    }

    /// `n` granted bytes of stream `id` were not used.
    pub(super) fn unused(&self, id: u32, n: usize) {
        self.credit(id, n, false);
    }

    /// The socket took `n` DATA payload bytes of stream `id` (the writer
    /// has said so with [`Outbox::moved`]: the time of progress is set).
    pub(super) fn written(&self, id: u32, n: usize) {
        self.credit(id, n, true);
    }

    /// The socket took bytes (any frame): the connection made progress.
    pub(super) fn moved(&self) {
        self.progress.set(Instant::now());
    }

    /// `n` bytes of stream `id` are gone: written (from what was handed), or
    /// not used (from what was not).
    fn credit(&self, id: u32, n: usize, written: bool) {
        let mut streams = self.streams.borrow_mut();
        let Some(e) = streams.get_mut(&id) else {
            // A stream already forgotten (reset) still had a frame in the
            // writer's buffer.
            return;
        };
        let n = if written {
            let n = n.min(e.handed);
            e.handed -= n;
            self.handed.set(self.handed.get() - n);
            n
        } else {
            n.min(e.unsent - e.handed)
        };
        e.unsent -= n;
        self.budget.give(n);
        if e.unsent == 0 {
            streams.remove(&id);
        }
    }

    /// `n` handed bytes of stream `id` will never be written (the stream
    /// was reset before they were framed).
    pub(super) fn dropped(&self, id: u32, n: usize) {
        let mut streams = self.streams.borrow_mut();
        let Some(e) = streams.get_mut(&id) else {
            return;
        };
        let n = n.min(e.handed);
        e.handed -= n;
        e.unsent -= n;
        self.handed.set(self.handed.get() - n);
        self.budget.give(n);
        if e.unsent == 0 {
            streams.remove(&id);
        }
    }

    /// When the connection has held bytes handed over without progress
    /// since: `None` while it holds none. (Bytes granted and not handed wait
    /// for the peer's window, which each stream's credit wait bounds.)
    pub(super) fn holding_since(&self) -> Option<Instant> {
        (self.handed.get() > 0).then(|| self.progress.get())
    }

    /// Free the table of an idle connection.
    pub(super) fn shed(&self) {
        self.streams.borrow_mut().shrink_to_fit();
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(super) fn held(&self) -> usize {
        self.budget.held()
    }
}

/// Where the writer is in the frames written (RFC 9113 §4.1: a 24-bit
/// length, a type, flags, a 31-bit stream id, then the payload).
#[derive(Debug, Default)]
pub(super) struct FrameScan {
    head: [u8; 9],
    /// Bytes of `head` read; 9 while in a payload.
    have: usize,
    /// Payload bytes left of the current frame.
    left: usize,
    /// The stream of the current frame when it is DATA.
    data: Option<u32>,
}

/// Frame type DATA (RFC 9113 §6.1).
const DATA: u8 = 0x0;

impl FrameScan {
    /// Read `bytes` (the next ones written); `paid(stream, n)` for each run
    /// of DATA payload.
    pub(super) fn scan(&mut self, mut bytes: &[u8], mut paid: impl FnMut(u32, usize)) {
        while !bytes.is_empty() {
            if self.have < 9 {
                let n = (9 - self.have).min(bytes.len());
                self.head[self.have..self.have + n].copy_from_slice(&bytes[..n]);
                self.have += n;
                bytes = &bytes[n..];
                if self.have == 9 {
                    let h = &self.head;
                    self.left =
                        usize::from(h[0]) << 16 | usize::from(h[1]) << 8 | usize::from(h[2]);
                    let id = u32::from_be_bytes([h[5], h[6], h[7], h[8]]) & 0x7fff_ffff;
                    self.data = (h[3] == DATA).then_some(id);
                    if self.left == 0 {
                        self.have = 0;
                    }
                }
                continue;
            }
            let n = self.left.min(bytes.len());
            if let Some(id) = self.data {
                paid(id, n);
            }
            self.left -= n;
            bytes = &bytes[n..];
            if self.left == 0 {
                self.have = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::super::budget::WorkerBudget;
    use super::*;
    use std::rc::Rc;
    use std::sync::Arc;
    use std::task::Waker;

    fn frame(kind: u8, id: u32, payload: &[u8]) -> Vec<u8> {
        let len = payload.len();
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, 0];
        f.extend_from_slice(&id.to_be_bytes());
        f.extend_from_slice(payload);
        f
    }

    #[test]
    fn the_scan_credits_data_payloads_to_their_streams_however_the_bytes_are_cut() {
        let mut wire = frame(0x1, 1, &[0; 30]); // HEADERS
        wire.extend(frame(DATA, 1, &[7; 100]));
        wire.extend(frame(0x4, 0, &[])); // SETTINGS, empty
        wire.extend(frame(DATA, 3, &[7; 5]));
        wire.extend(frame(DATA, 1, &[])); // END_STREAM, no payload
        for cut in [1, 2, 5, 9, 10, 64, wire.len()] {
            let mut scan = FrameScan::default();
            let mut paid = HashMap::new();
            for piece in wire.chunks(cut) {
                scan.scan(piece, |id, n| *paid.entry(id).or_insert(0) += n);
            }
            assert_eq!(paid.get(&1), Some(&100), "cut {cut}");
            assert_eq!(paid.get(&3), Some(&5), "cut {cut}");
            assert_eq!(paid.len(), 2, "cut {cut}");
        }
    }

    #[test]
    fn written_unused_and_dropped_bytes_go_back() {
        let worker = Rc::new(WorkerBudget::new(1 << 20, Arc::new(Default::default())));
        let outbox = Outbox::new(ConnBudget::new(256 * 1024, worker.clone()));
        let cx = Context::from_waker(Waker::noop());
        let mut t = Ticket::default();
        assert_eq!(
            outbox.poll_take(&cx, &mut t, 1, 64 * 1024),
            Poll::Ready(64 * 1024)
        );
        assert_eq!(
            outbox.poll_take(&cx, &mut t, 3, 64 * 1024),
            Poll::Ready(64 * 1024)
        );
        // Granted, not handed: waiting for the peer's window is no stall.
        assert!(outbox.holding_since().is_none());
        outbox.handed(1, 60 * 1024);
        outbox.handed(3, 64 * 1024);
        assert!(outbox.holding_since().is_some());
        outbox.unused(1, 4 * 1024);
        outbox.written(1, 60 * 1024);
        assert_eq!(outbox.held(), 64 * 1024);
        assert!(outbox.holding_since().is_some());
        // A frame of a stream nobody counts any more changes nothing.
        outbox.written(9, 1000);
        outbox.dropped(3, 64 * 1024);
        assert_eq!(outbox.held(), 0);
        assert_eq!(worker.held(), 0);
        assert!(outbox.holding_since().is_none());
        assert!(outbox.streams.borrow().is_empty());
    }
}
