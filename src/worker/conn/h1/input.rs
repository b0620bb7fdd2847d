//! A connection's input: the bytes received and not yet taken, and the body
//! of the last request still being taken from them.
//!
//! Its own file so the request loop (`h1`) reads as the loop. The buffer
//! comes from the worker's pool and goes back when the connection idles; it
//! grows only for a head still arriving. A request body never makes it grow:
//! its bytes are taken (today: discarded) as they arrive, through
//! `http::body::Decoder`, so a body is never parsed as the next request.

use super::super::pool::{Pool, READ_BUF_BYTES};
use crate::http::body::Decoder;
use crate::http::chunked;

/// Received bytes not yet taken, and the body still to take.
#[derive(Debug, Default)]
pub(super) struct Input {
    /// `buf[start..]` is unread. `None` while the connection idles.
    pub(super) buf: Option<Vec<u8>>,
    pub(super) start: usize,
    /// The body of the last request, as far as it has been taken.
    pub(super) body: Decoder,
}

impl Input {
    /// Bytes received and not yet taken.
    pub(super) fn pending(&self) -> &[u8] {
        self.buf.as_deref().map_or(&[], |b| &b[self.start..])
    }

    /// Whether the client is mid-request: bytes buffered, or a body to take.
    pub(super) fn busy(&self) -> bool {
        !self.pending().is_empty() || !self.body.is_done()
    }

    /// Discard whatever body bytes are buffered. An error is a malformed or
    /// too large chunked body: the connection must close, since where the
    /// next request starts is unknown.
    pub(super) fn skip_body(&mut self) -> Result<(), chunked::Error> {
        let Some(buf) = self.buf.as_deref() else {
            return Ok(());
        };
        let n = self.body.skip(&buf[self.start..])?;
        self.start += n;
        Ok(())
    }

    /// Give the buffer back to the pool (the connection idles or ends).
    pub(super) fn release(&mut self, pool: &Pool) {
        if let Some(b) = self.buf.take() {
            pool.give(b);
        }
        self.start = 0;
    }

    /// The buffer, ready for a read after its unread bytes: taken from the
    /// pool if none is held, unread bytes moved to the front, grown (up to
    /// the head limit, which the parser enforces) when a partial head fills it.
    pub(super) fn prepare(&mut self, pool: &Pool, max_head: usize) -> Vec<u8> {
        let mut buf = self.buf.take().unwrap_or_else(|| pool.take());
        if self.start > 0 {
            buf.drain(..self.start);
            self.start = 0;
        }
        if buf.len() == buf.capacity() {
            let cap = (buf.capacity() * 2).min(max_head + READ_BUF_BYTES);
            buf.reserve_exact(cap.saturating_sub(buf.len()).max(READ_BUF_BYTES));
        }
        buf
    }
}
