//! A worker's registry of open connections, and a tiny local wait list.
//!
//! Drain and force-close must reach connections that are parked in a read or
//! a write owned by their own task. Rather than racing every read against a
//! drain future (a waker registration per request on the hot path), each
//! connection registers its fd and whether it is idle (between requests);
//! drain shuts down the read side of idle ones (their pending read completes
//! with EOF) and force-close shuts down both sides of all of them.
//!
//! The keep-alive timeout of a parked connection (idle past its grace,
//! waiting for readiness with no buffer) is kept here too, as nginx keeps
//! its timers in the event loop rather than in each connection: a parked
//! connection records the sweep tick its wait ends at (its keep-alive or
//! header timeout), and the worker's sweeper (`sweep`, every
//! [`SWEEP_INTERVAL`]) shuts down the read side of those past it. A per-connection timer would be most of
//! an idle connection's memory (monoio's `Sleep` is 640 bytes).
//!
//! Everything here is single-threaded (`Rc`/`Cell`): one registry per worker
//! thread.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use slab::Slab;

use crate::sys::socket::{Registered, Shutdown};

/// How often the sweeper checks parked connections: the resolution of the
/// keep-alive timeout for them (they are cut at most this much late).
pub(crate) const SWEEP_INTERVAL: Duration = Duration::from_millis(250);

/// How long a drain lets an idle plain connection it closed with a FIN
/// discard what the client still sends before the read side is cut too: a
/// client that saw the FIN closes within a round trip.
pub(crate) const DRAIN_LINGER: Duration = Duration::from_secs(1);

struct Entry {
    fd: Registered,
    /// TLS: a drain must let the task say close_notify before any FIN.
    tls: bool,
    state: Rc<State>,
}

/// What the worker knows of one connection, shared with its task.
#[derive(Default)]
struct State {
    idle: Cell<bool>,
    /// The sweep tick at which its wait ends; 0 while not parked.
    parked: Cell<u64>,
    /// A drain sent our FIN (plain TCP, idle): answer nothing more, discard
    /// what still comes, close when the client does.
    half_closed: Cell<bool>,
    /// An HTTP/2 connection: a drain tells its task (which sends GOAWAY)
    /// instead of shutting its socket.
    h2: Cell<bool>,
    /// A drain has begun (HTTP/2 only), and the task to wake for it.
    drain: Cell<bool>,
    drain_waker: RefCell<Option<Waker>>,
}

/// Open connections of one worker.
pub(crate) struct Registry {
    entries: RefCell<Slab<Entry>>,
    /// Woken when a connection closes (accept loop at the cap, drain end).
    closed: Waiters,
    /// The server's connection budget (`--max-connections`, a total): a
    /// unit is taken by the accept loop and given back when the
    /// connection's registration drops. `None` only in unit tests.
    pub(crate) budget: Option<std::sync::Arc<crate::sys::shm::SharedCounter>>,
    /// Sweeps done so far (the clock of parked connections).
    tick: Cell<u64>,
}

/// Held by a connection task; removes its entry on drop, before the stream
/// (declared earlier) closes the fd.
pub(crate) struct Registration {
    registry: Rc<Registry>,
    key: usize,
    state: Rc<State>,
}

impl Registration {
    /// Mark whether the connection waits for a new request with nothing buffered.
    pub(crate) fn set_idle(&self, idle: bool) {
        self.state.idle.set(idle);
    }

    /// Mark the connection parked (idle, no buffer, no timer of its own)
    /// for at most `wait` (its keep-alive or header timeout): the sweeper
    /// ends the wait once it is over. Whether it is idle is said apart
    /// ([`Registration::set_idle`]): one waiting for its first request is not.
    pub(crate) fn park(&self, wait: Duration) {
        let wait = if self.state.half_closed.get() {
            wait.min(DRAIN_LINGER)
        } else {
            wait
        };
        let ticks = wait.as_nanos().div_ceil(SWEEP_INTERVAL.as_nanos()) as u64;
        self.state
            .parked
            .set(self.registry.tick.get().saturating_add(ticks.max(1)));
    }

    /// Whether a drain closed our side (see [`Registry::close_idle`]).
    pub(crate) fn half_closed(&self) -> bool {
        self.state.half_closed.get()
    }

    /// Mark the connection HTTP/2: drains reach it through [`Registration::poll_drain`].
    pub(crate) fn set_h2(&self) {
        self.state.h2.set(true);
    }

    /// Ready once a drain has begun (for an HTTP/2 connection, which then
    /// sends GOAWAY and finishes its streams).
    pub(crate) fn poll_drain(&self, cx: &mut std::task::Context<'_>) -> Poll<()> {
        if self.state.drain.get() {
            return Poll::Ready(());
        }
        let mut slot = self.state.drain_waker.borrow_mut();
        if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *slot = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    /// The connection woke (bytes, EOF, or a shutdown by the sweeper).
    pub(crate) fn unpark(&self) {
        self.state.idle.set(false);
        self.state.parked.set(0);
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        self.registry.entries.borrow_mut().try_remove(self.key);
        if let Some(b) = &self.registry.budget {
            b.release();
        }
        self.registry.closed.wake_all();
    }
}

impl Registry {
    pub(crate) fn new(budget: Option<std::sync::Arc<crate::sys::shm::SharedCounter>>) -> Registry {
        Registry {
            entries: RefCell::new(Slab::new()),
            closed: Waiters::default(),
            budget,
            tick: Cell::new(0),
        }
    }

    pub(crate) fn register(self: &Rc<Self>, fd: Registered, tls: bool) -> Registration {
        // Not idle until answered once: a client that just connected is
        // about to send its first request, and a drain answers it (with
        // `Connection: close`) rather than closing it unanswered.
        let state = Rc::new(State::default());
        let key = self.entries.borrow_mut().insert(Entry {
            fd,
            tls,
            state: state.clone(),
        });
        Registration {
            registry: self.clone(),
            key,
            state,
        }
    }

    /// One sweep: advance the clock and end the wait (read side shut down,
    /// the pending readiness wait completes and the task closes) of every
    /// parked connection whose wait is over. Returns how many.
    pub(crate) fn sweep(&self) -> usize {
        let tick = self.tick.get() + 1;
        self.tick.set(tick);
        let mut cut = 0;
        for (_, e) in self.entries.borrow().iter() {
            let until = e.state.parked.get();
            if until != 0 && tick >= until {
                e.state.parked.set(0);
                let _ = e.fd.shutdown(Shutdown::Read);
                cut += 1;
            }
        }
        cut
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    /// Drain: close every idle connection gracefully, and tell every HTTP/2
    /// one (it sends GOAWAY, lets its streams finish, then closes). A plain one gets our
    /// FIN now and keeps reading, so a request that crossed it is read and
    /// discarded rather than left unread (which would make the close a
    /// reset); its wait ends when the client closes, or [`DRAIN_LINGER`]
    /// after parking, when the sweeper cuts its read side. A TLS one has its
    /// read side shut, so its task wakes and sends close_notify first.
    pub(crate) fn close_idle(&self) {
        let tick = self.tick.get();
        let linger = DRAIN_LINGER.as_nanos().div_ceil(SWEEP_INTERVAL.as_nanos()) as u64;
        for (_, e) in self.entries.borrow().iter() {
            if e.state.h2.get() {
                e.state.drain.set(true);
                if let Some(w) = e.state.drain_waker.borrow_mut().take() {
                    w.wake();
                }
                continue;
            }
            if !e.state.idle.get() {
                continue;
            }
            if e.tls {
                let _ = e.fd.shutdown(Shutdown::Read);
                continue;
            }
            if e.fd.shutdown(Shutdown::Write).is_err() {
                let _ = e.fd.shutdown(Shutdown::Read);
                continue;
            }
            e.state.half_closed.set(true);
            let until = e.state.parked.get();
            if until != 0 {
                e.state.parked.set(until.min(tick + linger.max(1)));
            }
        }
    }

    /// Force-close: cut every connection; returns how many were cut.
    pub(crate) fn cut_all(&self) -> usize {
        let entries = self.entries.borrow();
        for (_, e) in entries.iter() {
            let _ = e.fd.shutdown(Shutdown::Both);
        }
        entries.len()
    }

    /// Wait until fewer than `n` connections are open.
    pub(crate) async fn wait_below(&self, n: usize) {
        self.closed.until(|| self.len() < n).await
    }

    /// Wait until `cond` holds, re-checked whenever a connection closes or
    /// [`Registry::wake_closed`] is called.
    pub(crate) async fn wait_for(&self, cond: impl Fn() -> bool) {
        self.closed.until(cond).await
    }
}

/// Wakers waiting for a condition that a `wake_all` may have changed.
#[derive(Default)]
pub(crate) struct Waiters {
    wakers: RefCell<Vec<Waker>>,
}

impl Waiters {
    pub(crate) fn wake_all(&self) {
        let wakers = std::mem::take(&mut *self.wakers.borrow_mut());
        for w in wakers {
            w.wake();
        }
    }

    /// Resolve once `cond()` holds, re-checking after each `wake_all`.
    /// Waiters are few and long-lived (accept loops, the lifecycle task), so
    /// a waker is only added when it is not already registered.
    pub(crate) async fn until(&self, cond: impl Fn() -> bool) {
        poll_fn(|cx| {
            if cond() {
                return Poll::Ready(());
            }
            let mut wakers = self.wakers.borrow_mut();
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}

impl Registry {
    /// Wake whoever waits on the open-connection count (an accept loop ended).
    pub(crate) fn wake_closed(&self) {
        self.closed.wake_all();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_parked_connection_is_swept_after_the_timeout_and_not_before() {
        let registry = Rc::new(Registry::new(None));
        // Not a real socket: the shutdown fails quietly, the count is what
        // is tested.
        let parked = registry.register(Registered::detached(), false);
        let busy = registry.register(Registered::detached(), false);
        parked.park(SWEEP_INTERVAL * 3);
        busy.set_idle(false);
        assert_eq!(registry.sweep(), 0);
        assert_eq!(registry.sweep(), 0);
        assert_eq!(registry.sweep(), 1);
        // Swept once: it is no longer parked.
        assert_eq!(registry.sweep(), 0);
    }

    #[test]
    fn unparking_stops_the_clock() {
        let registry = Rc::new(Registry::new(None));
        let conn = registry.register(Registered::detached(), false);
        conn.park(SWEEP_INTERVAL * 2);
        registry.sweep();
        conn.unpark();
        assert_eq!(registry.sweep(), 0);
        conn.park(SWEEP_INTERVAL * 2);
        assert_eq!(registry.sweep(), 0);
        assert_eq!(registry.sweep(), 1);
    }
}
