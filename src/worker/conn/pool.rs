//! The worker's pool of read buffers.
//!
//! A connection holds a read buffer only while bytes of a request are in it
//! or a read is in flight on a busy connection; an idle keep-alive
//! connection gives its buffer back (see `h1`'s idle wait). Buffers are all
//! one size, so any connection can take any of them. One that grew past
//! that size for a large head is freed rather than returned, so a buffer
//! grown for one request does not stay grown. The free list is bounded: a
//! burst of connections that took many buffers at once does not leave them
//! all parked here.

use std::cell::{Cell, RefCell};

/// Size of every pooled read buffer. A typical request head (~500 bytes)
/// fits many times over, so pipelined bursts are read in one go; heads up to
/// `--max-head-bytes` grow a private copy.
pub(crate) const READ_BUF_BYTES: usize = 8 * 1024;

/// Most free buffers kept per worker (2 MiB): enough for the connections a
/// worker reads at once in a busy batch; beyond it buffers go back to the
/// allocator.
pub(crate) const MAX_FREE_BUFFERS: usize = 256;

/// Read buffers of one worker (single-threaded).
#[derive(Debug, Default)]
pub(crate) struct Pool {
    free: RefCell<Vec<Vec<u8>>>,
    /// Buffers handed out and not yet given back (a gauge for tests and
    /// metrics; a buffer dropped while grown is counted back too).
    out: Cell<usize>,
}

impl Pool {
    /// An empty buffer of [`READ_BUF_BYTES`] capacity.
    pub(crate) fn take(&self) -> Vec<u8> {
        self.out.set(self.out.get() + 1);
        self.free
            .borrow_mut()
            .pop()
            .unwrap_or_else(|| Vec::with_capacity(READ_BUF_BYTES))
    }

    /// Give a buffer back. A grown one, or one beyond the free-list bound,
    /// is freed.
    pub(crate) fn give(&self, mut buf: Vec<u8>) {
        self.out.set(self.out.get().saturating_sub(1));
        if buf.capacity() != READ_BUF_BYTES {
            return;
        }
        let mut free = self.free.borrow_mut();
        if free.len() < MAX_FREE_BUFFERS {
            buf.clear();
            free.push(buf);
        }
    }

    /// A buffer taken from the pool will not come back (a service keeps
    /// bytes of it): count it back.
    pub(crate) fn forget(&self) {
        self.out.set(self.out.get().saturating_sub(1));
    }

    /// Buffers currently held by connections.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.out.get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_returned_buffer_is_reused_empty() {
        let pool = Pool::default();
        let mut b = pool.take();
        b.extend_from_slice(b"GET /");
        let ptr = b.as_ptr();
        pool.give(b);
        let again = pool.take();
        assert!(again.is_empty());
        assert_eq!(again.as_ptr(), ptr);
        assert_eq!(pool.in_use(), 1);
    }

    #[test]
    fn a_grown_buffer_is_not_kept() {
        let pool = Pool::default();
        let mut b = pool.take();
        b.reserve(READ_BUF_BYTES * 2);
        pool.give(b);
        assert_eq!(pool.free.borrow().len(), 0);
        assert_eq!(pool.in_use(), 0);
    }

    #[test]
    fn the_free_list_is_bounded() {
        let pool = Pool::default();
        let held: Vec<_> = (0..MAX_FREE_BUFFERS + 10).map(|_| pool.take()).collect();
        for b in held {
            pool.give(b);
        }
        assert_eq!(pool.free.borrow().len(), MAX_FREE_BUFFERS);
    }
}
