//! Output budgets: the response bytes a worker has prepared and not yet
//! written, bounded per connection and for the whole worker.
//!
//! Owns the two counters and their waits. Does not own what counts as
//! prepared (HTTP/2's `conn::h2::outbox` counts DATA handed to the framer
//! until its bytes reach the socket; HTTP/1.1's `conn::output` counts
//! queued in-memory pieces until their write completes; HTTP/3's
//! `conn::h3::out` counts a body's pieces until quinn-proto takes them,
//! and `quic::window` (under `worker`) the send windows QUIC connections are lent) nor when
//! a stalled connection is closed (each protocol's send timeout). It sits
//! beside `conn` and `quic`, both of which use it.
//!
//! Why two bounds: one HTTP/2 client that opens its windows and never reads
//! makes every stream prepare data that cannot leave. A bound per stream
//! (a stream's send buffer) still multiplies by the streams, and a bound per
//! connection still multiplies by the connections; only the worker's bound
//! holds whatever a client does, and the connection's keeps one client from
//! taking the worker's whole budget.
//!
//! Flow:
//! 1. A stream (or an HTTP/1.1 response) asks its connection's
//!    [`ConnBudget`] for up to `want` bytes with [`ConnBudget::poll_take`]
//!    before reading or building them. Requests are served in the order
//!    they came (a ticket queue), so streams share a connection fairly.
//! 2. A grant is at least one [`SLICE_BYTES`] (or all of a smaller
//!    `want`): no tiny frames. The connection must have that room under
//!    `--output-buffer-bytes`.
//! 3. The worker's [`WorkerBudget`] must be under `--worker-output-bytes`,
//!    unless the connection holds nothing yet: then one slice is granted
//!    anyway, so a new client is served while slow ones wait. A connection
//!    refused by the worker waits for its own bytes to leave: every byte it
//!    gives back wakes it to look again (`servery_output_waits_total`
//!    counts the waits). A connection whose bytes never leave is closed by
//!    its send timeout, and what it held goes back with it.
//! 4. Written bytes are given back ([`ConnBudget::give`]), waking the next
//!    waiter; a connection that ends gives back all it held.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::telemetry::WorkerStats;

/// The least a grant holds (unless less was asked): one HTTP/2 DATA frame at
/// the default SETTINGS_MAX_FRAME_SIZE (RFC 9113 §6.5.2).
pub(crate) const SLICE_BYTES: usize = 16 * 1024;

/// The output budget of one worker, shared by all its connections.
#[derive(Debug)]
pub(crate) struct WorkerBudget {
    limit: usize,
    held: Cell<usize>,
    stats: Arc<WorkerStats>,
}

impl WorkerBudget {
    pub(crate) fn new(limit: usize, stats: Arc<WorkerStats>) -> WorkerBudget {
        WorkerBudget {
            limit,
            held: Cell::new(0),
            stats,
        }
    }

    /// Whether the worker holds its limit or more.
    pub(crate) fn over(&self) -> bool {
        self.held.get() >= self.limit
    }

    /// Bytes left under the limit.
    pub(crate) fn room(&self) -> usize {
        self.limit.saturating_sub(self.held.get())
    }

    /// Bytes held now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.get()
    }

    /// Count `n` more bytes held (allowed or not: the callers decided).
    /// The gauge is added to, not stored: a draining worker and its
    /// replacement may share their slot's counters.
    pub(crate) fn take(&self, n: usize) {
        self.held.set(self.held.get() + n);
        WorkerStats::add(&self.stats.output_bytes, n as u64);
    }

    /// `n` held bytes are gone.
    pub(crate) fn give(&self, n: usize) {
        let n = n.min(self.held.get());
        self.held.set(self.held.get() - n);
        WorkerStats::sub(&self.stats.output_bytes, n as u64);
    }
}

/// The output budget of one connection.
#[derive(Debug)]
pub(crate) struct ConnBudget {
    limit: usize,
    held: Cell<usize>,
    worker: Rc<WorkerBudget>,
    /// Waiting requests in arrival order: (ticket, waker).
    queue: RefCell<VecDeque<(u64, Waker)>>,
    next_ticket: Cell<u64>,
    /// Whether this connection's head request is counted in
    /// `output_waits` for its current wait on the worker.
    counted: Cell<bool>,
}

/// A request's place in its connection's queue; dropping it leaves the
/// queue (a stream reset while it waited).
#[derive(Debug, Default)]
pub(crate) struct Ticket(Option<u64>);

impl ConnBudget {
    pub(crate) fn new(limit: usize, worker: Rc<WorkerBudget>) -> ConnBudget {
        ConnBudget {
            limit,
            held: Cell::new(0),
            worker,
            queue: RefCell::new(VecDeque::new()),
            next_ticket: Cell::new(0),
            counted: Cell::new(false),
        }
    }

    /// Bytes this connection holds.
    #[cfg(test)]
    pub(crate) fn held(&self) -> usize {
        self.held.get()
    }

    /// Take up to `want` bytes (at least one slice, or `want` if smaller),
    /// in turn. `ticket` keeps the caller's place between polls; pass it to
    /// [`ConnBudget::leave`] when giving up.
    pub(crate) fn poll_take(
        &self,
        cx: &Context<'_>,
        ticket: &mut Ticket,
        want: usize,
    ) -> Poll<usize> {
        if want == 0 {
            self.leave(ticket);
            return Poll::Ready(0);
        }
        let first = {
            let queue = self.queue.borrow();
            match (queue.front(), ticket.0) {
                (None, _) => true,
                (Some(&(t, _)), Some(mine)) => t == mine,
                (Some(_), None) => false,
            }
        };
        match self.grant(first, want) {
            Some(n) => {
                self.leave(ticket);
                Poll::Ready(n)
            }
            None => {
                self.enqueue(cx, ticket);
                Poll::Pending
            }
        }
    }

    /// Take what [`ConnBudget::poll_take`] would grant now to a request
    /// with no place in the queue, if anything: `None` when others wait
    /// or there is no room (the caller then waits its turn with
    /// `poll_take`). An answer made at once needs no waker for this.
    pub(crate) fn try_take(&self, want: usize) -> Option<usize> {
        if want == 0 {
            return Some(0);
        }
        let first = self.queue.borrow().is_empty();
        self.grant(first, want)
    }

    /// The grant for `want` if the request is `first` in line, taken.
    fn grant(&self, first: bool, want: usize) -> Option<usize> {
        let least = want.min(SLICE_BYTES);
        let held = self.held.get();
        let room = self.limit.saturating_sub(held);
        let grant = if !first || room < least {
            None
        } else if self.worker.over() {
            if held == 0 {
                // A connection holding nothing always gets one slice.
                Some(least)
            } else {
                // Woken by its own bytes leaving (`give`).
                if !self.counted.replace(true) {
                    WorkerStats::add(&self.worker.stats.output_waits, 1);
                }
                None
            }
        } else {
            // Within the worker's room too, but never below a slice.
            Some(want.min(room).min(self.worker.room().max(least)))
        };
        let n = grant?;
        self.counted.set(false);
        self.held.set(held + n);
        self.worker.take(n);
        Some(n)
    }

    /// Join the queue, or refresh the waker of the place held.
    fn enqueue(&self, cx: &Context<'_>, ticket: &mut Ticket) {
        let mut queue = self.queue.borrow_mut();
        match ticket.0 {
            Some(mine) => {
                if let Some(slot) = queue.iter_mut().find(|(t, _)| *t == mine) {
                    if !slot.1.will_wake(cx.waker()) {
                        slot.1 = cx.waker().clone();
                    }
                    return;
                }
                queue.push_back((mine, cx.waker().clone()));
            }
            None => {
                let t = self.next_ticket.get();
                self.next_ticket.set(t + 1);
                ticket.0 = Some(t);
                queue.push_back((t, cx.waker().clone()));
            }
        }
    }

    /// Leave the queue (served, or given up); the next in line is woken.
    pub(crate) fn leave(&self, ticket: &mut Ticket) {
        let Some(mine) = ticket.0.take() else {
            return;
        };
        let mut queue = self.queue.borrow_mut();
        let was_first = queue.front().is_some_and(|&(t, _)| t == mine);
        queue.retain(|&(t, _)| t != mine);
        if was_first {
            if let Some((_, w)) = queue.front() {
                w.wake_by_ref();
            }
        }
    }

    /// `n` held bytes are gone (written, or dropped with a reset stream).
    pub(crate) fn give(&self, n: usize) {
        let n = n.min(self.held.get());
        if n == 0 {
            return;
        }
        self.held.set(self.held.get() - n);
        self.worker.give(n);
        if let Some((_, w)) = self.queue.borrow().front() {
            w.wake_by_ref();
        }
    }
}

impl Drop for ConnBudget {
    fn drop(&mut self) {
        // What the connection still held leaves with it.
        self.worker.give(self.held.get());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::task::Waker;

    fn worker(limit: usize) -> Rc<WorkerBudget> {
        Rc::new(WorkerBudget::new(limit, Arc::new(WorkerStats::default())))
    }

    fn cx() -> Context<'static> {
        Context::from_waker(Waker::noop())
    }

    #[test]
    fn a_connection_holds_at_most_its_limit() {
        let conn = ConnBudget::new(64 * 1024, worker(1 << 20));
        let mut a = Ticket::default();
        assert_eq!(
            conn.poll_take(&cx(), &mut a, 48 * 1024),
            Poll::Ready(48 * 1024)
        );
        // 16 KiB left: granted up to it, not the 64 KiB asked.
        let mut b = Ticket::default();
        assert_eq!(
            conn.poll_take(&cx(), &mut b, 64 * 1024),
            Poll::Ready(16 * 1024)
        );
        let mut c = Ticket::default();
        assert!(conn.poll_take(&cx(), &mut c, 1).is_pending());
        conn.give(1000);
        // Less than a slice is free, but a 1-byte want fits.
        assert_eq!(conn.poll_take(&cx(), &mut c, 1), Poll::Ready(1));
        assert_eq!(conn.held(), 64 * 1024 - 999);
    }

    #[test]
    fn no_grant_is_smaller_than_a_slice() {
        let conn = ConnBudget::new(40 * 1024, worker(1 << 20));
        let mut a = Ticket::default();
        assert_eq!(
            conn.poll_take(&cx(), &mut a, 30 * 1024),
            Poll::Ready(30 * 1024)
        );
        let mut b = Ticket::default();
        // 10 KiB free, less than the slice a 64 KiB want needs.
        assert!(conn.poll_take(&cx(), &mut b, 64 * 1024).is_pending());
        conn.give(10 * 1024);
        assert_eq!(
            conn.poll_take(&cx(), &mut b, 64 * 1024),
            Poll::Ready(20 * 1024)
        );
    }

    #[test]
    fn waiters_are_served_in_the_order_they_came() {
        let conn = ConnBudget::new(32 * 1024, worker(1 << 20));
        let mut a = Ticket::default();
        assert_eq!(
            conn.poll_take(&cx(), &mut a, 32 * 1024),
            Poll::Ready(32 * 1024)
        );
        let (mut first, mut second) = (Ticket::default(), Ticket::default());
        assert!(conn.poll_take(&cx(), &mut first, 16 * 1024).is_pending());
        assert!(conn.poll_take(&cx(), &mut second, 16 * 1024).is_pending());
        conn.give(16 * 1024);
        // The second may not pass the first, even with room for it.
        assert!(conn.poll_take(&cx(), &mut second, 16 * 1024).is_pending());
        assert_eq!(
            conn.poll_take(&cx(), &mut first, 16 * 1024),
            Poll::Ready(16 * 1024)
        );
        conn.give(16 * 1024);
        assert_eq!(
            conn.poll_take(&cx(), &mut second, 16 * 1024),
            Poll::Ready(16 * 1024)
        );
    }

    #[test]
    fn a_waiter_that_leaves_lets_the_next_pass() {
        let conn = ConnBudget::new(32 * 1024, worker(1 << 20));
        let mut a = Ticket::default();
        assert!(conn.poll_take(&cx(), &mut a, 32 * 1024).is_ready());
        let (mut gone, mut next) = (Ticket::default(), Ticket::default());
        assert!(conn.poll_take(&cx(), &mut gone, 16 * 1024).is_pending());
        assert!(conn.poll_take(&cx(), &mut next, 16 * 1024).is_pending());
        conn.leave(&mut gone);
        conn.give(16 * 1024);
        assert_eq!(
            conn.poll_take(&cx(), &mut next, 16 * 1024),
            Poll::Ready(16 * 1024)
        );
    }

    #[test]
    fn past_the_worker_limit_only_connections_holding_nothing_get_a_slice() {
        let w = worker(64 * 1024);
        let busy = ConnBudget::new(256 * 1024, w.clone());
        let mut t = Ticket::default();
        assert_eq!(
            busy.poll_take(&cx(), &mut t, 64 * 1024),
            Poll::Ready(64 * 1024)
        );
        assert!(w.over());
        // The busy one waits for its own socket or the worker.
        let mut t2 = Ticket::default();
        assert!(busy.poll_take(&cx(), &mut t2, 64 * 1024).is_pending());
        assert_eq!(WorkerStats::get(&w.stats.output_waits), 1);
        // A new connection is served one slice, then waits too.
        let fresh = ConnBudget::new(256 * 1024, w.clone());
        let mut f = Ticket::default();
        assert_eq!(
            fresh.poll_take(&cx(), &mut f, 64 * 1024),
            Poll::Ready(SLICE_BYTES)
        );
        let mut f2 = Ticket::default();
        assert!(fresh.poll_take(&cx(), &mut f2, 64 * 1024).is_pending());
        assert_eq!(w.held(), 64 * 1024 + SLICE_BYTES);
        // Once the busy connection's bytes leave, the worker has room.
        busy.give(64 * 1024);
        assert!(!w.over());
        assert_eq!(
            busy.poll_take(&cx(), &mut t2, 64 * 1024),
            Poll::Ready(48 * 1024)
        );
    }

    #[test]
    fn a_connection_that_ends_gives_back_what_it_held() {
        let w = worker(1 << 20);
        let conn = ConnBudget::new(256 * 1024, w.clone());
        let mut t = Ticket::default();
        assert!(conn.poll_take(&cx(), &mut t, 100_000).is_ready());
        assert_eq!(w.held(), 100_000);
        assert_eq!(WorkerStats::get(&w.stats.output_bytes), 100_000);
        drop(conn);
        assert_eq!(w.held(), 0);
        assert_eq!(WorkerStats::get(&w.stats.output_bytes), 0);
    }
}
