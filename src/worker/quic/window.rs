//! Each QUIC connection's send window, lent from the worker's output
//! budget.
//!
//! quinn-proto keeps a connection's response bytes until the client
//! acknowledges them, up to the connection's send window. A window per
//! connection is no bound on a worker of 16,384 connections: a client that
//! grants flow-control credit and never acknowledges, or grants none, keeps
//! a full window on every connection it opens. So a connection starts with
//! [`BASE`] bytes of window; when a write finds the window full it doubles,
//! up to `--output-buffer-bytes`, with what it adds taken from the worker's
//! budget (`--worker-output-bytes`, shared with TCP connections' prepared
//! bytes) while that has room; once every response stream it wrote to is
//! acknowledged in full or reset, nothing of them is held and the window
//! goes back to [`BASE`], its loan returned. What a worker's QUIC
//! connections hold in quinn-proto is then at most its budget plus
//! [`BASE`] per connection.

use quinn_proto::{Connection, Dir, StreamId};

use crate::worker::budget::WorkerBudget;

/// The window every connection has without a loan: one budget slice
/// (`worker::budget::SLICE_BYTES`), the least a piece is granted.
pub(crate) const BASE: u64 = 16 * 1024;

/// The smallest loan worth taking: less would only add round trips.
const LEAST_LOAN: u64 = 4 * 1024;

/// A connection's send window and the response streams that may still hold
/// bytes in it.
#[derive(Debug, Default)]
pub(crate) struct Window {
    /// Bytes lent by the worker, above [`BASE`].
    lent: u64,
    /// Streams written to and not yet acknowledged in full or reset: at most
    /// the concurrent streams a client may open, and those it has ended
    /// while their bytes are still unacknowledged.
    held: Vec<StreamId>,
}

impl Window {
    /// Stream `id` was written to. Only request streams count: the control
    /// and QPACK streams live as long as the connection and hold a few
    /// bytes, within [`BASE`].
    pub(crate) fn wrote(&mut self, id: StreamId) {
        if id.dir() == Dir::Bi && !self.held.contains(&id) {
            self.held.push(id);
        }
    }

    /// A write found the window full: lend it more if the worker has room
    /// and the connection is under `limit`. What was lent (0 for nothing):
    /// if the write is still blocked (by the client's flow control, not by
    /// the window), the caller gives it back with [`Window::unlend`].
    fn grow(&mut self, conn: &mut Connection, worker: &WorkerBudget, limit: u64) -> u64 {
        let size = BASE + self.lent;
        let more = size
            .min(limit.saturating_sub(size))
            .min(worker.room() as u64);
        if more < LEAST_LOAN {
            return 0;
        }
        worker.take(more as usize);
        self.lent += more;
        conn.set_send_window(size + more);
        more
    }

    /// A write found the connection blocked. `lent` is what was lent for
    /// this write since it last went on: if that did not help (the
    /// client's flow control blocks it, not the window) it goes back and
    /// the write waits (`false`); otherwise a loan is tried, and `true`
    /// means write again.
    pub(crate) fn blocked(
        &mut self,
        conn: &mut Connection,
        worker: &WorkerBudget,
        limit: u64,
        lent: &mut u64,
    ) -> bool {
        if *lent > 0 {
            self.unlend(std::mem::take(lent), conn, worker);
            return false;
        }
        *lent = self.grow(conn, worker, limit);
        *lent > 0
    }

    /// Take back `more` just lent: it did not let the write on.
    fn unlend(&mut self, more: u64, conn: &mut Connection, worker: &WorkerBudget) {
        let more = more.min(self.lent);
        self.lent -= more;
        worker.give(more as usize);
        conn.set_send_window(BASE + self.lent);
    }

    /// Stream `id` holds nothing any more (acknowledged in full, reset, or
    /// the connection is gone): when no stream holds anything, the loan
    /// goes back.
    pub(crate) fn released(&mut self, id: StreamId, conn: &mut Connection, worker: &WorkerBudget) {
        if let Some(i) = self.held.iter().position(|s| *s == id) {
            self.held.swap_remove(i);
        }
        if self.held.is_empty() && self.lent > 0 {
            conn.set_send_window(BASE);
            self.repay(worker);
        }
    }

    /// Give the whole loan back: the connection is gone.
    pub(crate) fn repay(&mut self, worker: &WorkerBudget) {
        worker.give(self.lent as usize);
        self.lent = 0;
    }
}
