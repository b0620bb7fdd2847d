//! A request stream's answer written straight to quinn-proto: HTTP/3 frames
//! the caller encoded (`worker::conn::h3::frames`), bodies as `Bytes` that
//! quinn-proto keeps without copying.
//!
//! Why not through `h3`'s send half: `h3` encodes every response's fields
//! anew with Huffman coding and builds them from a `HeaderMap`, and hands
//! DATA to the transport as a `Buf` it must copy. Profiled, those were the
//! largest costs of a small static response over HTTP/3 (docs/http3.md).
//! `h3` still reads the request and owns the stream's receiving half; the
//! sending half it holds is left unused, and its drop does not reset a
//! stream answered here ([`take_answered`]).
//!
//! Writes wait as `h3`'s would: for the send window (lent by the worker's
//! budget, `super::window`) and the client's flow control, woken by the
//! stream's write events.

use std::rc::Rc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use quinn_proto::{ConnectionHandle, StreamId, VarInt, WriteError};

use super::endpoint::{Quic, Slot};

/// Why an answer cannot go on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ended {
    /// The client stopped reading it (STOP_SENDING).
    Stopped,
    /// The stream or the connection is gone.
    Gone,
}

/// The sending side of one request stream, written here.
pub(crate) struct Answer {
    quic: Rc<Quic>,
    handle: ConnectionHandle,
    id: StreamId,
}

impl Answer {
    pub(crate) fn new(quic: Rc<Quic>, handle: ConnectionHandle, id: u64) -> Option<Answer> {
        let id = StreamId::from(VarInt::from_u64(id).ok()?);
        Some(Answer { quic, handle, id })
    }

    /// Hand `chunks` to quinn-proto in order, kept as they are (no copy);
    /// `Ready(Ok)` once all are taken. What was taken is consumed.
    pub(crate) fn poll_write(
        &mut self,
        cx: &mut Context<'_>,
        chunks: &mut [Bytes],
    ) -> Poll<Result<(), Ended>> {
        let (id, quic) = (self.id, &*self.quic);
        let mut wrote = false;
        let r = quic.with(self.handle, |s| {
            if s.lost.is_some() {
                return Poll::Ready(Err(Ended::Gone));
            }
            let written = write_all(s, quic, id, cx, &mut wrote, |send| {
                let first = chunks.iter().position(|c| c.has_remaining())?;
                Some(send.write_chunks(&mut chunks[first..]).map(|_| ()))
            });
            written.map_err(|e| match e {
                WriteError::Stopped(_) => Ended::Stopped,
                WriteError::Blocked | WriteError::ClosedStream => Ended::Gone,
            })
        });
        if wrote {
            self.quic.touch(self.handle);
        }
        r.unwrap_or(Poll::Ready(Err(Ended::Gone)))
    }

    /// End the stream (FIN) after what was written: `h3`'s half of it will
    /// leave it be.
    pub(crate) fn finish(&mut self) -> Result<(), Ended> {
        let id = self.id;
        let r = self.quic.with(self.handle, |s| {
            let r = match s.conn.send_stream(id).finish() {
                Ok(()) => Ok(()),
                Err(quinn_proto::FinishError::Stopped(_)) => Err(Ended::Stopped),
                Err(quinn_proto::FinishError::ClosedStream) => Err(Ended::Gone),
            };
            if r.is_ok() && !s.answered.contains(&id) {
                s.answered.push(id);
            }
            r
        });
        self.quic.touch(self.handle);
        r.unwrap_or(Err(Ended::Gone))
    }
}

/// Write to stream `id` of connection `s` until `step` has nothing left
/// (it returns `None`): each write is one call of `step` on the stream.
/// When the connection is blocked the send window may be lent more
/// (`super::window`) and the write tried again; otherwise the task waits
/// for the stream's next write event. `wrote` is set once anything was
/// taken. The one write loop of the answers here and of `h3`'s streams
/// (`super::streams`).
pub(super) fn write_all(
    s: &mut Slot,
    quic: &Quic,
    id: StreamId,
    cx: &Context<'_>,
    wrote: &mut bool,
    mut step: impl FnMut(&mut quinn_proto::SendStream<'_>) -> Option<Result<(), WriteError>>,
) -> Poll<Result<(), WriteError>> {
    // A loan just taken for this write, until the write goes on.
    let mut lent = 0;
    loop {
        match step(&mut s.conn.send_stream(id)) {
            None => return Poll::Ready(Ok(())),
            Some(Ok(())) => {
                lent = 0;
                if !*wrote {
                    s.window.wrote(id);
                    *wrote = true;
                }
            }
            Some(Err(WriteError::Blocked)) => {
                let limit = quic.limits.output_buffer_bytes;
                if s.window
                    .blocked(&mut s.conn, &quic.output, limit, &mut lent)
                {
                    continue;
                }
                s.wakers.write.insert(id, cx.waker().clone());
                return Poll::Pending;
            }
            Some(Err(e)) => return Poll::Ready(Err(e)),
        }
    }
}

/// Whether stream `id` was answered here (and forget it): called when
/// `h3`'s sending half of it is dropped.
pub(super) fn take_answered(s: &mut Slot, id: StreamId) -> bool {
    match s.answered.iter().position(|a| *a == id) {
        Some(i) => {
            s.answered.swap_remove(i);
            true
        }
        None => false,
    }
}
