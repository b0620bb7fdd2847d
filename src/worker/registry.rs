//! A worker's registry of open connections, and a tiny local wait list.
//!
//! Drain and force-close must reach connections that are parked in a read or
//! a write owned by their own task. Rather than racing every read against a
//! drain future (a waker registration per request on the hot path), each
//! connection registers its fd and whether it is idle (between requests);
//! drain shuts down the read side of idle ones (their pending read completes
//! with EOF) and force-close shuts down both sides of all of them. Everything
//! here is single-threaded (`Rc`/`Cell`): one registry per worker thread.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Poll, Waker};

use slab::Slab;

use crate::sys::socket::{shutdown_registered, Shutdown};

struct Entry {
    fd: RawFd,
    idle: Rc<Cell<bool>>,
}

/// Open connections of one worker.
pub(crate) struct Registry {
    entries: RefCell<Slab<Entry>>,
    /// Woken when a connection closes (accept loop at the cap, drain end).
    closed: Waiters,
    /// The global connection budget, when `--max-connections-total` is set:
    /// a unit is taken by the accept loop and given back when the
    /// connection's registration drops.
    pub(crate) budget: Option<std::sync::Arc<crate::sys::shm::SharedCounter>>,
}

/// Held by a connection task; removes its entry on drop, before the stream
/// (declared earlier) closes the fd.
pub(crate) struct Registration {
    registry: Rc<Registry>,
    key: usize,
    idle: Rc<Cell<bool>>,
}

impl Registration {
    /// Mark whether the connection waits for a new request with nothing buffered.
    pub(crate) fn set_idle(&self, idle: bool) {
        self.idle.set(idle);
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
        }
    }

    pub(crate) fn register(self: &Rc<Self>, fd: RawFd) -> Registration {
        let idle = Rc::new(Cell::new(true));
        let key = self.entries.borrow_mut().insert(Entry {
            fd,
            idle: idle.clone(),
        });
        Registration {
            registry: self.clone(),
            key,
            idle,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.entries.borrow().len()
    }

    /// Drain: end the pending read of every idle connection (EOF).
    pub(crate) fn close_idle(&self) {
        for (_, e) in self.entries.borrow().iter() {
            if e.idle.get() {
                let _ = shutdown_registered(e.fd, Shutdown::Read);
            }
        }
    }

    /// Force-close: cut every connection; returns how many were cut.
    pub(crate) fn cut_all(&self) -> usize {
        let entries = self.entries.borrow();
        for (_, e) in entries.iter() {
            let _ = shutdown_registered(e.fd, Shutdown::Both);
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
