//! The `h3` crate's view of a QUIC connection (its `h3::quic` traits) on
//! our endpoint: each call borrows the connection in the worker's
//! [`Quic`], does what quinn-proto allows now, and otherwise leaves a waker
//! for the event that allows more (`endpoint::Wakers`). What it changes it
//! marks touched, so the driver sends it.
//!
//! Credit: a request body is read from quinn-proto only when `h3` is asked
//! for data (the service reads), so its flow-control credit goes back as
//! the service takes it, never ahead. A response's bytes are handed to
//! quinn-proto as its send window allows, a window that grows on loan from
//! the worker's output budget when a write finds it full (`super::window`);
//! one frame at most waits here per stream (`Stream::pending`).

use std::cell::Cell;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes};
use h3::quic::{self, ConnectionErrorIncoming, StreamErrorIncoming, WriteBuf};
use quinn_proto::{
    ConnectionError, ConnectionHandle, Dir, ReadError, ReadableError, StreamId, VarInt, WriteError,
};

use super::endpoint::{Quic, Slot};

/// A connection, as `h3` holds it.
pub(crate) struct Conn {
    quic: Rc<Quic>,
    handle: ConnectionHandle,
}

impl Conn {
    pub(crate) fn new(quic: Rc<Quic>, handle: ConnectionHandle) -> Conn {
        Conn { quic, handle }
    }

    /// The peer's address.
    pub(crate) fn remote(&self) -> Option<std::net::SocketAddr> {
        self.quic.with(self.handle, |s| s.conn.remote_address())
    }

    /// Our port the client sent to.
    pub(crate) fn local_port(&self) -> Option<u16> {
        Some(self.quic.port())
    }

    /// The name the client sent (SNI) in its handshake.
    pub(crate) fn server_name(&self) -> Option<String> {
        self.quic
            .with(self.handle, |s| {
                s.conn
                    .crypto_session()
                    .handshake_data()
                    .and_then(|d| {
                        d.downcast::<quinn_proto::crypto::rustls::HandshakeData>()
                            .ok()
                    })
                    .and_then(|d| d.server_name)
            })
            .flatten()
    }

    /// A handle on the connection beside `h3`'s: the drain, the close.
    pub(crate) fn watch(&self) -> Watch {
        Watch {
            quic: self.quic.clone(),
            handle: self.handle,
            waiter: Cell::new(None),
        }
    }

    fn opener(&self) -> Opener {
        Opener {
            quic: self.quic.clone(),
            handle: self.handle,
        }
    }
}

/// What the connection's task keeps beside `h3`'s connection: whether the
/// worker drains, a waker for its requests' ends, and the close.
pub(crate) struct Watch {
    quic: Rc<Quic>,
    handle: ConnectionHandle,
    waiter: Cell<Option<std::task::Waker>>,
}

impl Watch {
    /// `Ready` once the worker drains; a waker is left otherwise.
    pub(crate) fn poll_drain(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.quic.draining() {
            return Poll::Ready(());
        }
        self.quic.with(self.handle, |s| {
            s.wakers.drain = Some(cx.waker().clone());
        });
        Poll::Pending
    }

    /// Wait for [`Watch::wake`].
    pub(crate) fn park(&self, cx: &mut Context<'_>) {
        self.waiter.set(Some(cx.waker().clone()));
    }

    /// Wake the task parked on it.
    pub(crate) fn wake(&self) {
        if let Some(w) = self.waiter.take() {
            w.wake();
        }
    }

    /// The sending side of request stream `id`, to write its answer
    /// straight to quinn-proto (`super::answer`).
    pub(crate) fn answer(&self, id: u64) -> Option<super::answer::Answer> {
        super::answer::Answer::new(self.quic.clone(), self.handle, id)
    }

    /// Close the connection with HTTP/3's `code`.
    pub(crate) fn close(&self, code: u64) {
        close(&self.quic, self.handle, code, b"");
    }
}

fn close(quic: &Quic, handle: ConnectionHandle, code: u64, reason: &[u8]) {
    let code = VarInt::from_u64(code).unwrap_or(VarInt::from_u32(super::endpoint::H3_NO_ERROR));
    quic.with(handle, |s| {
        s.conn
            .close(Instant::now(), code, Bytes::copy_from_slice(reason))
    });
    quic.touch(handle);
}

fn connection_error(e: &ConnectionError) -> ConnectionErrorIncoming {
    match e {
        ConnectionError::ApplicationClosed(c) => ConnectionErrorIncoming::ApplicationClose {
            error_code: c.error_code.into_inner(),
        },
        ConnectionError::TimedOut => ConnectionErrorIncoming::Timeout,
        other => ConnectionErrorIncoming::Undefined(std::sync::Arc::new(other.clone())),
    }
}

fn lost(slot: &Slot) -> Option<ConnectionErrorIncoming> {
    slot.lost.as_ref().map(connection_error)
}

fn gone() -> ConnectionErrorIncoming {
    ConnectionErrorIncoming::InternalError("the connection is gone".into())
}

fn stream_lost(e: ConnectionErrorIncoming) -> StreamErrorIncoming {
    StreamErrorIncoming::ConnectionErrorIncoming {
        connection_error: e,
    }
}

impl Conn {
    fn poll_accept(
        &self,
        cx: &mut Context<'_>,
        dir: Dir,
    ) -> Poll<Result<Stream, ConnectionErrorIncoming>> {
        let got = self.quic.with(self.handle, |s| {
            if let Some(e) = lost(s) {
                return Poll::Ready(Err(e));
            }
            match s.conn.streams().accept(dir) {
                Some(id) => Poll::Ready(Ok(id)),
                None => {
                    s.wakers.accept[dir as usize] = Some(cx.waker().clone());
                    Poll::Pending
                }
            }
        });
        match got {
            None => Poll::Ready(Err(gone())),
            Some(Poll::Ready(Ok(id))) => {
                // Accepting raises the client's stream limit: send it.
                self.quic.touch(self.handle);
                Poll::Ready(Ok(Stream::new(self.quic.clone(), self.handle, id)))
            }
            Some(Poll::Ready(Err(e))) => Poll::Ready(Err(e)),
            Some(Poll::Pending) => Poll::Pending,
        }
    }
}

impl quic::Connection<Bytes> for Conn {
    type RecvStream = Stream;
    type OpenStreams = Opener;

    fn poll_accept_recv(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Stream, ConnectionErrorIncoming>> {
        self.poll_accept(cx, Dir::Uni)
    }

    fn poll_accept_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Stream, ConnectionErrorIncoming>> {
        self.poll_accept(cx, Dir::Bi)
    }

    fn opener(&self) -> Opener {
        Conn::opener(self)
    }
}

impl quic::OpenStreams<Bytes> for Conn {
    type BidiStream = Stream;
    type SendStream = Stream;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Stream, StreamErrorIncoming>> {
        open(&self.quic, self.handle, cx, Dir::Bi)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Stream, StreamErrorIncoming>> {
        open(&self.quic, self.handle, cx, Dir::Uni)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        close(&self.quic, self.handle, code.value(), reason);
    }
}

/// What `h3` opens its own streams with (the control and QPACK streams).
pub(crate) struct Opener {
    quic: Rc<Quic>,
    handle: ConnectionHandle,
}

impl quic::OpenStreams<Bytes> for Opener {
    type BidiStream = Stream;
    type SendStream = Stream;

    fn poll_open_bidi(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Stream, StreamErrorIncoming>> {
        open(&self.quic, self.handle, cx, Dir::Bi)
    }

    fn poll_open_send(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Stream, StreamErrorIncoming>> {
        open(&self.quic, self.handle, cx, Dir::Uni)
    }

    fn close(&mut self, code: h3::error::Code, reason: &[u8]) {
        close(&self.quic, self.handle, code.value(), reason);
    }
}

impl Clone for Opener {
    fn clone(&self) -> Opener {
        Opener {
            quic: self.quic.clone(),
            handle: self.handle,
        }
    }
}

fn open(
    quic: &Rc<Quic>,
    handle: ConnectionHandle,
    cx: &mut Context<'_>,
    dir: Dir,
) -> Poll<Result<Stream, StreamErrorIncoming>> {
    let got = quic.with(handle, |s| {
        if let Some(e) = lost(s) {
            return Poll::Ready(Err(stream_lost(e)));
        }
        match s.conn.streams().open(dir) {
            Some(id) => Poll::Ready(Ok(id)),
            None => {
                s.wakers.open[dir as usize] = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    });
    match got {
        None => Poll::Ready(Err(stream_lost(gone()))),
        Some(Poll::Ready(Ok(id))) => Poll::Ready(Ok(Stream::new(quic.clone(), handle, id))),
        Some(Poll::Ready(Err(e))) => Poll::Ready(Err(e)),
        Some(Poll::Pending) => Poll::Pending,
    }
}

/// One stream, either half or both.
pub(crate) struct Stream {
    quic: Rc<Quic>,
    handle: ConnectionHandle,
    id: StreamId,
    /// The frame `h3` handed over that quinn-proto has not taken all of.
    pending: Option<WriteBuf<Bytes>>,
    /// Which halves this is (both, until `split`): what its drop forgets.
    reads: bool,
    writes: bool,
    /// Its sending side was finished or reset: its drop leaves it be.
    sent: bool,
    /// Its receiving side was read to its end or stopped.
    received: bool,
}

impl Stream {
    fn new(quic: Rc<Quic>, handle: ConnectionHandle, id: StreamId) -> Stream {
        Stream {
            quic,
            handle,
            id,
            pending: None,
            reads: true,
            writes: true,
            sent: false,
            received: false,
        }
    }

    fn h3_id(&self) -> quic::StreamId {
        quic::StreamId::try_from(u64::from(self.id)).expect("a QUIC stream ID is within 2^62")
    }

    /// Hand what is pending to quinn-proto: `Ready(Ok)` once all of it is.
    fn flush(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        let Some(pending) = self.pending.as_mut() else {
            return Poll::Ready(Ok(()));
        };
        let id = self.id;
        let mut wrote = false;
        let quic = &*self.quic;
        let r = quic.with(self.handle, |s| {
            if let Some(e) = lost(s) {
                return Poll::Ready(Err(stream_lost(e)));
            }
            let written = super::answer::write_all(s, quic, id, cx, &mut wrote, |send| {
                if !pending.has_remaining() {
                    return None;
                }
                Some(send.write(pending.chunk()).map(|n| pending.advance(n)))
            });
            written.map_err(|e| match e {
                WriteError::Stopped(code) => StreamErrorIncoming::StreamTerminated {
                    error_code: code.into_inner(),
                },
                _ => StreamErrorIncoming::Unknown(Box::new(quinn_proto::ClosedStream::default())),
            })
        });
        if wrote {
            self.quic.touch(self.handle);
        }
        match r {
            None => Poll::Ready(Err(stream_lost(gone()))),
            Some(Poll::Ready(Ok(()))) => {
                self.pending = None;
                Poll::Ready(Ok(()))
            }
            Some(other) => other,
        }
    }
}

/// What a stream dropped half-way is ended with: H3_REQUEST_CANCELLED.
const CANCELLED: u32 = 0x10c;

impl Drop for Stream {
    /// A half dropped before its end is ended here (reset, or stopped), so
    /// quinn-proto frees the stream and the client gets its stream credit
    /// back: a request abandoned by a timeout or an error holds nothing.
    fn drop(&mut self) {
        let id = self.id;
        let bidi = id.dir() == Dir::Bi;
        let ours = id.initiator() == quinn_proto::Side::Server;
        let reset = self.writes && (bidi || ours) && !self.sent;
        let stop = self.reads && (bidi || !ours) && !self.received;
        let (reads, writes) = (self.reads, self.writes);
        self.quic.with(self.handle, |s| {
            if reads {
                s.wakers.read.remove(&id);
            }
            if writes {
                s.wakers.write.remove(&id);
            }
            // An answer written straight to quinn-proto ended it already.
            let answered = writes && super::answer::take_answered(s, id);
            if reset && !answered {
                let _ = s.conn.send_stream(id).reset(VarInt::from_u32(CANCELLED));
                s.window.released(id, &mut s.conn, &self.quic.output);
            }
            if stop {
                let _ = s.conn.recv_stream(id).stop(VarInt::from_u32(CANCELLED));
            }
        });
        if reset || stop {
            self.quic.touch(self.handle);
        }
    }
}

impl quic::SendStream<Bytes> for Stream {
    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        self.flush(cx)
    }

    fn send_data<T: Into<WriteBuf<Bytes>>>(&mut self, data: T) -> Result<(), StreamErrorIncoming> {
        if self.pending.is_some() {
            return Err(StreamErrorIncoming::Unknown(
                "send_data before the last frame was taken".into(),
            ));
        }
        self.pending = Some(data.into());
        // Hand over what fits now; the rest goes at the next `poll_ready`.
        let waker = futures_util::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        match self.flush(&mut cx) {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        }
    }

    fn poll_finish(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), StreamErrorIncoming>> {
        match self.flush(cx) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        let id = self.id;
        let r = self
            .quic
            .with(self.handle, |s| s.conn.send_stream(id).finish());
        self.quic.touch(self.handle);
        self.sent = true;
        match r {
            None => Poll::Ready(Err(stream_lost(gone()))),
            Some(Ok(())) => Poll::Ready(Ok(())),
            Some(Err(quinn_proto::FinishError::Stopped(code))) => {
                Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                    error_code: code.into_inner(),
                }))
            }
            Some(Err(e)) => Poll::Ready(Err(StreamErrorIncoming::Unknown(Box::new(e)))),
        }
    }

    fn reset(&mut self, reset_code: u64) {
        let id = self.id;
        let code = VarInt::from_u64(reset_code).unwrap_or(VarInt::from_u32(0));
        self.pending = None;
        self.sent = true;
        let quic = &*self.quic;
        quic.with(self.handle, |s| {
            let _ = s.conn.send_stream(id).reset(code);
            s.window.released(id, &mut s.conn, &quic.output);
        });
        self.quic.touch(self.handle);
    }

    fn send_id(&self) -> quic::StreamId {
        self.h3_id()
    }
}

impl quic::RecvStream for Stream {
    type Buf = Bytes;

    fn poll_data(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Option<Bytes>, StreamErrorIncoming>> {
        let id = self.id;
        let mut credit = false;
        let r = self.quic.with(self.handle, |s| {
            if let Some(e) = lost(s) {
                return Poll::Ready(Err(stream_lost(e)));
            }
            let mut recv = s.conn.recv_stream(id);
            let mut chunks = match recv.read(true) {
                Ok(chunks) => chunks,
                Err(ReadableError::ClosedStream) => return Poll::Ready(Ok(None)),
                Err(e) => return Poll::Ready(Err(StreamErrorIncoming::Unknown(Box::new(e)))),
            };
            let got = chunks.next(usize::MAX);
            credit = chunks.finalize().should_transmit();
            match got {
                Ok(Some(chunk)) => Poll::Ready(Ok(Some(chunk.bytes))),
                Ok(None) => Poll::Ready(Ok(None)),
                Err(ReadError::Blocked) => {
                    s.wakers.read.insert(id, cx.waker().clone());
                    Poll::Pending
                }
                Err(ReadError::Reset(code)) => {
                    Poll::Ready(Err(StreamErrorIncoming::StreamTerminated {
                        error_code: code.into_inner(),
                    }))
                }
            }
        });
        if credit {
            self.quic.touch(self.handle);
        }
        if let Some(Poll::Ready(Ok(None) | Err(_))) = &r {
            self.received = true;
        }
        r.unwrap_or(Poll::Ready(Err(stream_lost(gone()))))
    }

    fn stop_sending(&mut self, error_code: u64) {
        let id = self.id;
        let code = VarInt::from_u64(error_code).unwrap_or(VarInt::from_u32(0));
        self.received = true;
        self.quic.with(self.handle, |s| {
            let _ = s.conn.recv_stream(id).stop(code);
        });
        self.quic.touch(self.handle);
    }

    fn recv_id(&self) -> quic::StreamId {
        self.h3_id()
    }
}

impl quic::BidiStream<Bytes> for Stream {
    type SendStream = Stream;
    type RecvStream = Stream;

    fn split(mut self) -> (Stream, Stream) {
        let mut recv = Stream::new(self.quic.clone(), self.handle, self.id);
        recv.writes = false;
        self.reads = false;
        (self, recv)
    }
}
